"""A worker's memory budget as set: FACEGATE_WORKER_MEMORY_BYTES or ``facegate worker
--memory``, else derived from the memory this machine (or its container) gives it."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from facegate.cli.worker import MemorySize, worker
from facegate.machine import DEFAULT_BUDGET_SHARE, default_memory_budget, machine_memory_bytes
from facegate.settings import Settings

GIB = 2**30


def meminfo(tmp_path: Path, kib: int) -> Path:
    path = tmp_path / "meminfo"
    path.write_text(f"MemTotal:       {kib} kB\nMemFree:        1 kB\n")
    return path


def test_the_machine_memory_is_the_lower_of_meminfo_and_the_container_limit(
    tmp_path: Path,
) -> None:
    info = meminfo(tmp_path, 16 * 2**20)  # 16 GiB
    v2, v1 = tmp_path / "memory.max", tmp_path / "limit_in_bytes"
    assert machine_memory_bytes(info, (v2, v1)) == 16 * GIB  # no cgroup files
    v2.write_text("max\n")
    assert machine_memory_bytes(info, (v2, v1)) == 16 * GIB  # no limit
    v1.write_text(f"{4 * GIB}\n")
    assert machine_memory_bytes(info, (v2, v1)) == 4 * GIB
    v2.write_text(f"{2 * GIB}\n")
    assert machine_memory_bytes(info, (v2, v1)) == 2 * GIB
    assert default_memory_budget(4 * GIB) == int(4 * GIB * DEFAULT_BUDGET_SHARE)


def test_the_budget_setting_and_its_defaults() -> None:
    machine = default_memory_budget()
    assert 0 < machine <= machine_memory_bytes()
    plain = Settings(_env_file=None)  # type: ignore[call-arg]
    assert plain.worker_memory_budget() == machine
    assert plain.worker_memory_budget(uses_device=True) == machine
    gpu = Settings(_env_file=None, inference_gpu_mem_limit=40 * GIB)  # type: ignore[call-arg]
    assert gpu.worker_memory_budget() == machine  # a CPU worker: RAM
    assert gpu.worker_memory_budget(uses_device=True) == 40 * GIB  # a CUDA worker: VRAM
    explicit = Settings(_env_file=None, worker_memory_bytes=GIB, inference_gpu_mem_limit=8)  # type: ignore[call-arg]
    assert explicit.worker_memory_budget(uses_device=True) == GIB


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1000", 1000),
        ("6GiB", 6 * GIB),
        ("512M", 512 * 2**20),
        ("1.5g", int(1.5 * GIB)),
        ("2KB", 2048),
    ],
)
def test_memory_sizes_on_the_command_line(text: str, size: int) -> None:
    assert MemorySize().convert(text, None, None) == size


@pytest.mark.parametrize("text", ["lots", "0", "-1G", ""])
def test_a_bad_memory_size_is_a_usage_error(text: str) -> None:
    with pytest.raises(click.BadParameter):
        MemorySize().convert(text, None, None)
    result = CliRunner().invoke(worker, ["--memory", text])
    assert result.exit_code == 2
    assert "--memory" in result.output


def test_the_flag_is_documented() -> None:
    result = CliRunner().invoke(worker, ["--help"])
    assert "--memory" in result.output
    assert "FACEGATE_WORKER_MEMORY_BYTES" in result.output
