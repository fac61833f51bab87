"""``facegate worker``: a worker process of the cluster shape (no API)."""

from __future__ import annotations

from typing import ClassVar

import click
import onnxruntime

from facegate.cli.common import private_files
from facegate.errors import InvalidSettings
from facegate.queue.postgres import ServedTenants
from facegate.settings import Settings, get_settings
from facegate.worker.process import WorkerOptions, run_worker


class MemorySize(click.ParamType[int, object]):
    """Bytes, or a number with a binary unit: ``6GiB``, ``512M``, ``1.5G`` (K, M, G, T)."""

    name = "bytes"
    _UNITS: ClassVar[dict[str, int]] = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("B").removesuffix("I")
        unit = text[-1:] if text[-1:] in self._UNITS else ""
        try:
            number = float(text[: len(text) - len(unit)])
        except ValueError:
            self.fail(f"{value!r} is not a size (bytes, or e.g. 6GiB, 512M)", param, ctx)
        size = int(number * self._UNITS[unit])
        if size < 1:
            self.fail(f"{value!r}: a memory budget must be at least 1 byte", param, ctx)
        return size


def _runs_on_device(settings: Settings) -> bool:
    # A worker whose models run on CUDA holds a device per job: the tenants' device_limit
    # then applies to it. FACEGATE_INFERENCE_DEVICE=auto runs them on CUDA where
    # onnxruntime offers it; cpu never does.
    if settings.inference_device == "auto":
        return "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    return settings.inference_device == "cuda"


@click.command()
@click.option(
    "--tenants",
    default=None,
    help="Serve only these tenants, comma-separated (physical isolation; "
    "FACEGATE_WORKER_TENANTS). Default: every tenant whose isolation is logical.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=None,
    help="Jobs run at once by this process (FACEGATE_WORKER_CONCURRENCY; default "
    "FACEGATE_WORKERS, else 2).",
)
@click.option(
    "--grace",
    "grace_seconds",
    type=click.FloatRange(0, 3600),
    default=None,
    help="On SIGTERM, seconds the jobs in hand get to finish before they are handed back "
    "(FACEGATE_WORKER_GRACE_SECONDS, default 30).",
)
@click.option(
    "--heartbeat",
    "heartbeat_seconds",
    type=click.FloatRange(0.1, 600),
    default=None,
    help="Seconds between heartbeats in the workers table (FACEGATE_WORKER_HEARTBEAT_SECONDS, "
    "default 5).",
)
@click.option(
    "--device/--no-device",
    "uses_device",
    default=None,
    help="Whether jobs here hold an accelerator (counts against device_limit; "
    "FACEGATE_WORKER_DEVICE). Default: when the models run on CUDA (FACEGATE_INFERENCE_DEVICE "
    "cuda, or auto where onnxruntime offers CUDA).",
)
@click.option(
    "--memory",
    "memory_bytes",
    type=MemorySize(),
    default=None,
    help="Memory budget: the estimated peaks of the jobs held at once stay within it, and the "
    "API refuses a job over every live worker's budget (FACEGATE_WORKER_MEMORY_BYTES; bytes, "
    "or e.g. 6GiB). Default: 3/4 of the machine's memory (its container's limit where lower); "
    "on a CUDA worker FACEGATE_INFERENCE_GPU_MEM_LIMIT when set.",
)
@click.option(
    "--runner",
    default=None,
    help="module:factory of a JobRunner (called with the TenantStore; FACEGATE_WORKER_RUNNER); "
    "default the engine.",
)
@click.option(
    "--lane",
    type=click.Choice(["any", "short"]),
    default="any",
    show_default=True,
    help="any: every job, at nice FACEGATE_WORKER_NICE (default 19); short: only jobs "
    "estimated at most FACEGATE_SHORT_LANE_SECONDS (default 5), at nice "
    "FACEGATE_SHORT_LANE_NICE (default 0): the short-job lane (docs/scheduling.md).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve /healthz, /readyz and /metrics here (FACEGATE_PORT); none when unset.",
)
def worker(
    tenants: str | None,
    concurrency: int | None,
    grace_seconds: float | None,
    heartbeat_seconds: float | None,
    uses_device: bool | None,
    memory_bytes: int | None,
    runner: str | None,
    lane: str,
    port: int | None,
) -> None:
    """Claim and run jobs from the shared database until SIGTERM (then drain)."""
    private_files()
    settings = get_settings(
        worker_tenants=tenants,
        worker_concurrency=concurrency,
        worker_grace_seconds=grace_seconds,
        worker_heartbeat_seconds=heartbeat_seconds,
        worker_device=uses_device,
        worker_runner=runner,
        worker_memory_bytes=memory_bytes,
    )
    device = settings.worker_device
    uses_device = _runs_on_device(settings) if device is None else device
    options = WorkerOptions(
        served=ServedTenants.parse(settings.worker_tenants, logical_only=True),
        concurrency=settings.worker_concurrency or settings.workers or 2,
        grace_seconds=settings.worker_grace_seconds,
        heartbeat_seconds=settings.worker_heartbeat_seconds,
        uses_device=uses_device,
        memory_bytes=settings.worker_memory_budget(uses_device),
        runner=settings.worker_runner,
        max_seconds=settings.short_lane_seconds if lane == "short" else None,
        nice=settings.short_lane_nice if lane == "short" else settings.worker_nice,
        # Probes only where a port was given (flag or FACEGATE_PORT), not on the default.
        probe_port=port
        if port is not None or "port" not in settings.model_fields_set
        else settings.port,
    )
    try:
        run_worker(settings, options)
    except InvalidSettings:
        raise  # one line naming the variable (the CLI's BadSetting), not a usage error
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
