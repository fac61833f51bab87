# The two commands of the README. Both do the whole set-up first (scripts/setup is idempotent).
.PHONY: setup serve demo test lint bench cluster image

setup:
	@scripts/setup

serve: setup
	.venv/bin/facegate serve --demo

# The cluster shape locally: API + two workers on the local PostgreSQL (and Redis).
cluster: setup
	scripts/cluster

demo: setup
	@mkdir -p out
	.venv/bin/facegate swap ../shared/data/faces/woman_a_selfie_frontal_01.jpg ../shared/data/faces/man_frontal_beard_closeup.jpg -o out/demo_swap.jpg
	@echo "wrote out/demo_swap.jpg"

test: setup
	scripts/test

lint: setup
	.venv/bin/ruff format --check src tests benchmarks
	.venv/bin/ruff check src tests benchmarks
	.venv/bin/mypy

bench: setup
	.venv/bin/python benchmarks/engine_bench.py

# The container images built on this machine: facegate (deploy/docker/Dockerfile; `make
# image VARIANT=cuda` for the cuda variant; TAG=... names it, PYTHON_IMAGE=... uses a
# registry's base) and the TURN server of live streams (deploy/docker/turn.Dockerfile).
VARIANT ?= cpu
image:
	VARIANT=$(VARIANT) scripts/image
	scripts/image turn
