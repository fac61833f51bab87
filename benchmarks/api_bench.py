"""Jobs API speed, in-process (httpx ASGITransport, no network), one run:

1. authenticated ``GET /v1/jobs/{id}`` throughput against a bare FastAPI endpoint that
   returns a dict (the baseline, same transport, same process) — target ratio >= 0.8
   (issue 28);
2. submitting a ~100 KB JPEG job (``POST /v1/jobs``: auth, policy checks, safe decode,
   storing the input, inserting the job; no worker, so the swap itself is not counted) —
   target p50 <= 5 ms (issue 28) — beside the same upload to a bare FastAPI endpoint that
   only reads it (the baseline: the HTTP layer's own share), the two interleaved; then the
   submission's CPU by thread: the event loop (with the in-process client) and the request's
   worker thread (the path a response waits on, which the wall time follows on an idle
   machine) apart from any other thread.

The machine this runs on is usually shared, so the two GETs are measured in alternating
chunks of 20 requests (drift hits both alike), and besides wall-clock figures the process
CPU time per request is printed (less sensitive to other processes). ``--breakdown`` also
measures the app with the gateway (rate limits, bans) and/or observability (metrics, access
log) switched off, to show what each layer costs. (``benchmarks/observability_bench.py``
measures metrics+logging with the log actually rendered.) ``--layers`` prints the process CPU
each ASGI layer of the app spends on a GET and on a POST, outside the layers it wraps (the
router's share is routing, dependencies and the route).

``--stages`` prints, instead, where a submission's milliseconds go: the submit route's
stages timed inside the app (step 1's read transaction and, within it, the policy and
options and the precheck; step 2's decode and store; step 3's write transaction), the rest
(HTTP, middleware, multipart parsing, authentication, the answer, the in-process client)
beside the same upload to a bare endpoint, and the CPU of the middleware, the router and
the client.

    .venv/bin/python benchmarks/api_bench.py [--requests 2000] [--submits 100] [--breakdown]
        [--layers] [--stages]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import json
import logging
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
from fastapi import FastAPI, File, Form, UploadFile
from PIL import Image

from benchkit import FACES, bench_settings, like_a_facegate_process
from facegate.api.app import create_app
from facegate.database import session_scope
from facegate.jobs.service import JobService
from facegate.tenancy.schemas import KeyCreate, PolicySpec, TenantSpec
from facegate.tenancy.service import TenancyService

TARGET_RATIO = 0.8
TARGET_SUBMIT_P50_MS = 5.0
CHUNK = 20
VARIANTS: dict[str, dict[str, Any]] = {
    "as configured": {},
    "gateway off": {"rate_limit_enabled": False},
    "observability off": {"metrics_enabled": False, "access_log": False},
    "both off": {"rate_limit_enabled": False, "metrics_enabled": False, "access_log": False},
}


def bare_app() -> FastAPI:
    app = FastAPI()

    @app.get("/items/{item_id}")
    def read_item(item_id: str) -> dict[str, str]:
        return {"id": item_id, "status": "queued"}

    @app.post("/uploads", status_code=202)
    def upload(
        target: Annotated[UploadFile, File()], options: Annotated[str, Form()]
    ) -> dict[str, int]:
        return {"bytes": len(target.file.read()), "options": len(options)}

    return app


def image_of_about(size: int) -> bytes:
    """A JPEG of a real face photo close to ``size`` bytes."""
    source = Image.open(FACES / "woman_astronaut_frontal.jpg").convert("RGB")
    best = b""
    for width in range(300, 1200, 20):
        out = io.BytesIO()
        source.resize((width, width)).save(out, "JPEG", quality=90)
        best = out.getvalue()
        if len(best) >= size:
            break
    return best


class LayerClock:
    """Process CPU spent inside one ASGI layer (and what it wraps), summed over calls."""

    def __init__(self, name: str, app: Any, spent: dict[str, float]) -> None:
        self.name, self.app, self.spent = name, app, spent
        spent[name] = 0.0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        started = time.process_time()
        try:
            await self.app(scope, receive, send)
        finally:
            self.spent[self.name] += time.process_time() - started


def clock_layers(app: FastAPI) -> dict[str, float]:
    """Put a :class:`LayerClock` around each layer of the app's built middleware stack, down
    to the router; their inclusive CPU seconds, outermost first (names in order)."""
    spent: dict[str, float] = {}
    layer = app.middleware_stack
    assert layer is not None, "send a request first: the stack is built on the first one"
    app.middleware_stack = LayerClock(type(layer).__name__, layer, spent)
    while hasattr(layer, "app") and not hasattr(layer, "routes"):
        inner = layer.app
        layer.app = LayerClock(type(inner).__name__, inner, spent)
        layer = inner
    return spent


def print_layers(what: str, spent: dict[str, float], requests: int, total_cpu: float) -> None:
    names = list(spent)
    print(f"  {what}: {total_cpu / requests * 1e6:.0f} µs CPU/request, client included; by layer:")
    client = (total_cpu - spent[names[0]]) / requests * 1e6
    print(f"    {'client (httpx, ASGI transport)':34s} {client:6.0f} µs")
    for outer, inner in zip(names, [*names[1:], None], strict=True):
        own = spent[outer] - (spent[inner] if inner else 0.0)
        print(f"    {outer:34s} {own / requests * 1e6:6.0f} µs")


@asynccontextmanager
async def bench_client(
    overrides: dict[str, Any],
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient, dict[str, str]]]:
    """The app (its settings with ``overrides``) started in a temporary folder, an
    in-process client of it and a tenant key's headers."""
    with tempfile.TemporaryDirectory(prefix="facegate-bench-") as tmp:
        app = create_app(bench_settings(Path(tmp), **overrides), services=[])
        async with app.router.lifespan_context(app):
            headers = create_key(app)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                yield app, client, headers


async def layer_costs(requests: int, submits: int, target: bytes) -> None:
    """CPU per layer of the authenticated GET and of the POST (the app as configured)."""
    async with bench_client({}) as (app, client, headers):
        files = {"target": ("t.jpg", target, "image/jpeg")}
        options = {"options": json.dumps({"processors": ["face_debugger"]})}

        async def submit() -> str:
            response = await client.post("/v1/jobs", headers=headers, files=files, data=options)
            assert response.status_code == 202, response.text
            return str(response.json()["id"])

        url = f"/v1/jobs/{await submit()}"
        for _ in range(5 * CHUNK):  # warm-up
            (await client.get(url, headers=headers)).raise_for_status()
        for what, count in (("GET", requests), ("POST", submits)):
            spent = clock_layers(app)
            cpu = time.process_time()
            for _ in range(count):
                if what == "GET":
                    (await client.get(url, headers=headers)).raise_for_status()
                else:
                    await submit()
            print_layers(what, spent, count, time.process_time() - cpu)
            app.middleware_stack = app.build_middleware_stack()


@dataclass
class Tally:
    """Requests, wall seconds and process CPU seconds of one side of a comparison."""

    requests: int = 0
    wall: float = 0.0
    cpu: float = 0.0

    @property
    def per_second(self) -> float:
        return self.requests / self.wall

    @property
    def cpu_ms(self) -> float:
        return self.cpu / self.requests * 1000


@dataclass
class Samples:
    """Wall and process CPU milliseconds of each timed call (warm-up calls not kept)."""

    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)

    @contextmanager
    def timed(self, warm_up: bool) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        if not warm_up:
            self.walls.append((time.perf_counter() - wall) * 1000)
            self.cpus.append((time.process_time() - cpu) * 1000)

    @property
    def cpu_p50(self) -> float:
        return statistics.median(self.cpus)


async def chunk(client: httpx.AsyncClient, url: str, headers: dict[str, str], tally: Tally) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(CHUNK):
        (await client.get(url, headers=headers)).raise_for_status()
    tally.wall += time.perf_counter() - wall
    tally.cpu += time.process_time() - cpu
    tally.requests += CHUNK


async def compare_gets(
    app_client: httpx.AsyncClient, url: str, headers: dict[str, str], requests: int
) -> tuple[Tally, Tally]:
    """(authenticated, bare), measured in alternating chunks after a warm-up."""
    bare_transport = httpx.ASGITransport(app=bare_app())
    async with httpx.AsyncClient(transport=bare_transport, base_url="http://bare") as bare:
        warm = Tally(), Tally()
        for _ in range(5):
            await chunk(app_client, url, headers, warm[0])
            await chunk(bare, "/items/x", {}, warm[1])
        authed, baseline = Tally(), Tally()
        for _ in range(max(1, requests // CHUNK)):
            await chunk(app_client, url, headers, authed)
            await chunk(bare, "/items/x", {}, baseline)
    return authed, baseline


def thread_cpu() -> dict[str, float]:
    """CPU seconds so far of this process's live threads, by role: the event loop (the main
    thread, with the in-process client), the request threads (AnyIO's workers: sync routes)
    and any other."""
    roles = {"MainThread": "event loop", "AnyIO worker thread": "request threads"}
    spent: dict[str, float] = defaultdict(float)
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        role = roles.get(thread.name, "other")
        try:
            spent[role] += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:  # the thread ended meanwhile
            continue
    return dict(spent)


def create_key(app: FastAPI) -> dict[str, str]:
    with session_scope(app.state.facegate.session_factory) as session:
        service = TenancyService(session)
        policy = PolicySpec(
            allowed_processors=["face_debugger"],
            max_queued_jobs=100_000,
            requests_per_minute=1_000_000,
        )
        service.create_tenant(TenantSpec(id="bench", policy=policy))
        token = service.create_key("bench", KeyCreate(scopes=["jobs:write", "jobs:read"]))
    return {"Authorization": f"Bearer {token.token}"}


async def run_variant(
    name: str, overrides: dict[str, Any], requests: int, submits: int, target: bytes
) -> None:
    async with bench_client(overrides) as (_app, client, headers):
        files = {"target": ("t.jpg", target, "image/jpeg")}
        options = {"options": json.dumps({"processors": ["face_debugger"]})}
        bare_transport = httpx.ASGITransport(app=bare_app())
        bare_client = httpx.AsyncClient(transport=bare_transport, base_url="http://bare")
        submitted, uploaded = Samples(), Samples()
        for number in range(submits + 5):
            warm = number < 5  # the first few warm up imports and caches
            with submitted.timed(warm):
                response = await client.post("/v1/jobs", headers=headers, files=files, data=options)
            assert response.status_code == 202, response.text
            with uploaded.timed(warm):
                answer = await bare_client.post("/uploads", files=files, data=options)
            assert answer.status_code == 202, answer.text
        await bare_client.aclose()
        before = thread_cpu()
        for _ in range(submits):
            response = await client.post("/v1/jobs", headers=headers, files=files, data=options)
            assert response.status_code == 202, response.text
        by_thread = {
            role: (seconds - before.get(role, 0.0)) / submits * 1000
            for role, seconds in thread_cpu().items()
        }
        url = f"/v1/jobs/{response.json()['id']}"
        authed, bare = await compare_gets(client, url, headers, requests)
    ratio = bare.wall / authed.wall
    cpu_ratio = bare.cpu / authed.cpu
    p50 = statistics.median(submitted.walls)
    p95 = statistics.quantiles(submitted.walls, n=20)[18]
    print(f"[{name}]")
    print(
        f"  GET /v1/jobs/{{id}} (API key, SQLite): {authed.per_second:7.0f} req/s, "
        f"{authed.cpu_ms:5.2f} ms CPU/request"
    )
    print(
        f"  bare FastAPI endpoint (baseline):     {bare.per_second:7.0f} req/s, "
        f"{bare.cpu_ms:5.2f} ms CPU/request"
    )
    verdict = "OK" if ratio >= TARGET_RATIO else "MISSED"
    print(f"  ratio: {ratio:.2f} wall, {cpu_ratio:.2f} CPU  (target >= {TARGET_RATIO})  {verdict}")
    print(
        f"  POST /v1/jobs, {len(target) / 1024:.0f} KB JPEG target, {len(submitted.walls)} "
        f"submissions: p50 {p50:.1f} ms, p95 {p95:.1f} ms, CPU p50 {submitted.cpu_p50:.1f} ms  "
        f"(target p50 <= {TARGET_SUBMIT_P50_MS} ms)  "
        f"{'OK' if p50 <= TARGET_SUBMIT_P50_MS else 'MISSED'}"
    )
    print(
        f"  the same upload to a bare FastAPI endpoint (baseline): "
        f"p50 {statistics.median(uploaded.walls):.1f} ms, CPU p50 {uploaded.cpu_p50:.1f} ms"
    )
    path = by_thread.get("event loop", 0.0) + by_thread.get("request threads", 0.0)
    print(
        f"  POST CPU by thread, ms per submission: {path:.2f} on the request's path "
        + "("
        + ", ".join(f"{role} {ms:.2f}" for role, ms in sorted(by_thread.items()) if ms >= 0.005)
        + ")"
    )


class StageClock:
    """Wall milliseconds of each stage of the submit route, per submission: the route's own
    calls (``facegate.jobs.endpoints``' names) wrapped with timers while it runs."""

    def __init__(self) -> None:
        self.spent: dict[str, list[float]] = defaultdict(list)
        self._now: dict[str, float] = {}

    def add(self, stage: str, seconds: float) -> None:
        self._now[stage] = self._now.get(stage, 0.0) + seconds * 1000

    def end_request(self, total_ms: float) -> None:
        for stage, ms in self._now.items():
            self.spent[stage].append(ms)
        self.spent["total (client's wall)"].append(total_ms)
        self._now = {}

    def timed(self, stage: str, function: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.add(stage, time.perf_counter() - started)

        return call

    def scopes(self, original: Any) -> Any:
        """``session_scope`` timed as a whole: step 1's read transaction or step 3's write
        transaction (BEGIN to COMMIT, what runs inside included)."""

        @contextmanager
        def scope(factory: Any, *, read_only: bool = False) -> Iterator[Any]:
            started = time.perf_counter()
            try:
                with original(factory, read_only=read_only) as session:
                    yield session
            finally:
                name = "step 1: read transaction" if read_only else "step 3: write transaction"
                self.add(name, time.perf_counter() - started)

        return scope


STAGES = (
    # (name, what it times) in the order a submission runs them
    ("step 1: read transaction", "BEGIN .. COMMIT, all of step 1"),
    ("  policy, options, workers", "request_inputs: the policy (stamp), options, budgets"),
    ("  precheck", "JobService.precheck: idempotency, rules, queue cap and quota"),
    ("step 2: decode", "prepare_job: the target's full decode, cost estimate"),
    ("step 2: store", "store_inputs: the input object written"),
    ("step 3: write transaction", "BEGIN IMMEDIATE .. COMMIT: room again, the INSERTs"),
)


async def stage_costs(submits: int, target: bytes) -> None:
    """Where a submission's milliseconds go: the route's stages timed inside the app, the
    rest (HTTP, middleware, multipart parsing, authentication, the answer, the client) as
    the difference, beside the same upload to a bare endpoint and the CPU of the layers."""
    from facegate.jobs import endpoints

    clock = StageClock()
    # The names the route calls, looked up in its module's namespace when it runs.
    originals = {
        name: getattr(endpoints, name)
        for name in ("request_inputs", "prepare_job", "store_inputs", "session_scope")
    }
    patched = {
        "request_inputs": clock.timed("  policy, options, workers", originals["request_inputs"]),
        "prepare_job": clock.timed("step 2: decode", originals["prepare_job"]),
        "store_inputs": clock.timed("step 2: store", originals["store_inputs"]),
        "session_scope": clock.scopes(originals["session_scope"]),
    }
    precheck = JobService.precheck
    async with bench_client({}) as (app, client, headers):
        files = {"target": ("t.jpg", target, "image/jpeg")}
        options = {"options": json.dumps({"processors": ["face_debugger"]})}
        bare_transport = httpx.ASGITransport(app=bare_app())
        bare_client = httpx.AsyncClient(transport=bare_transport, base_url="http://bare")
        bare = Samples()
        try:
            for name, wrapped in patched.items():
                setattr(endpoints, name, wrapped)
            JobService.precheck = clock.timed("  precheck", precheck)  # type: ignore[method-assign]
            for number in range(submits + 5):
                started = time.perf_counter()
                response = await client.post("/v1/jobs", headers=headers, files=files, data=options)
                assert response.status_code == 202, response.text
                total = (time.perf_counter() - started) * 1000
                if number >= 5:
                    clock.end_request(total)
                else:
                    clock._now = {}
                with bare.timed(number < 5):
                    answer = await bare_client.post("/uploads", files=files, data=options)
                assert answer.status_code == 202, answer.text
        finally:
            for name, original in originals.items():
                setattr(endpoints, name, original)
            JobService.precheck = precheck  # type: ignore[method-assign]
            await bare_client.aclose()
        spent = clock_layers(app)
        cpu = time.process_time()
        for _ in range(submits):
            response = await client.post("/v1/jobs", headers=headers, files=files, data=options)
            assert response.status_code == 202, response.text
        total_cpu = time.process_time() - cpu
        app.middleware_stack = app.build_middleware_stack()
    median = {stage: statistics.median(values) for stage, values in clock.spent.items()}
    total = median.pop("total (client's wall)")
    print(f"  POST /v1/jobs, {len(target) / 1024:.0f} KB JPEG, {submits} submissions: medians")
    print(f"    {'total, as the client waits':34s} {total:6.2f} ms")
    for stage, what in STAGES:
        print(f"    {stage:34s} {median.get(stage, 0.0):6.2f} ms  {what}")
    steps = sum(ms for stage, ms in median.items() if stage.startswith("step"))
    print(
        f"    {'the rest':34s} {total - steps:6.2f} ms  HTTP, middleware, multipart, "
        "authentication, the answer, the client"
    )
    print(
        f"    {'  the same upload, bare endpoint':34s} {statistics.median(bare.walls):6.2f} ms"
        "  HTTP + multipart + client, nothing else"
    )
    names = list(spent)
    router = names[-1]
    layers = ", ".join(
        f"{outer} {(spent[outer] - spent[inner]) / submits * 1e6:.0f} µs"
        for outer, inner in itertools.pairwise(names)
    )
    middleware = (spent[names[0]] - spent[router]) / submits * 1000
    client_cpu = (total_cpu - spent[names[0]]) / submits * 1000
    print(f"    CPU: middleware {middleware:.2f} ms ({layers})")
    print(
        f"    CPU: router and route {spent[router] / submits * 1000:.2f} ms, "
        f"client {client_cpu:.2f} ms"
    )


async def main(requests: int, submits: int, breakdown: bool, layers: bool, stages: bool) -> None:
    logging.disable(logging.INFO)
    target = image_of_about(100 * 1024)
    if stages:
        print("[where a submission's milliseconds go]")
        await stage_costs(submits, target)
        return
    names = list(VARIANTS) if breakdown else ["as configured"]
    for name in names:
        await run_variant(name, VARIANTS[name], requests, submits, target)
    if layers:
        print("[CPU by layer]")
        await layer_costs(requests, submits, target)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--submits", type=int, default=100)
    parser.add_argument("--breakdown", action="store_true", help="also with layers switched off")
    parser.add_argument("--layers", action="store_true", help="also the CPU each layer spends")
    parser.add_argument(
        "--stages", action="store_true", help="only: where a submission's milliseconds go"
    )
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="keep glibc's allocator defaults (facegate processes tune them)",
    )
    args = parser.parse_args()
    print(like_a_facegate_process(args.default_allocator))
    asyncio.run(main(args.requests, args.submits, args.breakdown, args.layers, args.stages))
