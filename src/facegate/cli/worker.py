"""``facegate worker``: a worker process of the cluster shape (no API)."""

from __future__ import annotations

import click
import onnxruntime

from facegate.cli.common import private_files
from facegate.queue.postgres import ServedTenants
from facegate.settings import get_settings
from facegate.worker.process import WorkerOptions, run_worker


def _device_available() -> bool:
    # A worker on a machine with CUDA holds a device per job: the tenants' device_limit
    # then applies to it. Without onnxruntime's CUDA provider it runs on the CPU.
    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


@click.command()
@click.option(
    "--tenants",
    envvar="FACEGATE_WORKER_TENANTS",
    default=None,
    help="Serve only these tenants, comma-separated (physical isolation). Default: every "
    "tenant whose isolation is logical.",
)
@click.option(
    "--concurrency",
    envvar="FACEGATE_WORKER_CONCURRENCY",
    type=click.IntRange(1, 256),
    default=None,
    help="Jobs run at once by this process (default FACEGATE_WORKERS, else 2).",
)
@click.option(
    "--grace",
    "grace_seconds",
    envvar="FACEGATE_WORKER_GRACE_SECONDS",
    type=click.FloatRange(0, 3600),
    default=30.0,
    show_default=True,
    help="On SIGTERM, seconds the jobs in hand get to finish before they are handed back.",
)
@click.option(
    "--heartbeat",
    "heartbeat_seconds",
    envvar="FACEGATE_WORKER_HEARTBEAT_SECONDS",
    type=click.FloatRange(0.1, 600),
    default=5.0,
    show_default=True,
    help="Seconds between heartbeats in the workers table.",
)
@click.option(
    "--device/--no-device",
    "uses_device",
    envvar="FACEGATE_WORKER_DEVICE",
    default=None,
    help="Whether jobs here hold an accelerator (counts against device_limit). "
    "Default: when onnxruntime offers CUDA.",
)
@click.option(
    "--runner",
    envvar="FACEGATE_WORKER_RUNNER",
    default=None,
    help="module:factory of a JobRunner (called with the TenantStore); default the engine.",
)
@click.option(
    "--port",
    envvar="FACEGATE_PORT",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve /healthz, /readyz and /metrics here (FACEGATE_PORT); none when unset.",
)
def worker(
    tenants: str | None,
    concurrency: int | None,
    grace_seconds: float,
    heartbeat_seconds: float,
    uses_device: bool | None,
    runner: str | None,
    port: int | None,
) -> None:
    """Claim and run jobs from the shared database until SIGTERM (then drain)."""
    private_files()
    settings = get_settings()
    options = WorkerOptions(
        served=ServedTenants.parse(tenants or settings.worker_tenants, logical_only=True),
        concurrency=concurrency or settings.workers or 2,
        grace_seconds=grace_seconds,
        heartbeat_seconds=heartbeat_seconds,
        uses_device=_device_available() if uses_device is None else uses_device,
        runner=runner,
        probe_port=port,
    )
    try:
        run_worker(settings, options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
