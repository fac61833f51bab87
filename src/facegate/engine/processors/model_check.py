"""Shared ``check_models`` for processors whose models are optional installs: the processor is
available when its models are installed, shared or by at least one tenant (each job then
resolves them for its own tenant)."""

from __future__ import annotations

from collections.abc import Sequence

from facegate.engine.errors import ModelUnavailable
from facegate.engine.modelstore.hub import ModelHub
from facegate.engine.modelstore.store import TENANTS_DIR


def installed_anywhere(hub: ModelHub, name: str) -> bool:
    if hub.store.tags(name):
        return True
    tenants = hub.store.root / TENANTS_DIR
    if not tenants.is_dir():
        return False
    return any(hub.store.tags(name, t.name) for t in tenants.iterdir() if t.is_dir())


def require_models(processor: str, hub: ModelHub, choices: Sequence[Sequence[str]]) -> None:
    """ModelUnavailable naming the missing files unless one choice (a set of model names that
    work together) is fully installed somewhere."""
    for names in choices:
        if all(installed_anywhere(hub, name) for name in names):
            return
    wanted = " or ".join(" + ".join(f"{n}.onnx" for n in names) for names in choices)
    raise ModelUnavailable(
        f"{processor} needs {wanted} in the model store ({hub.store.root}); none is installed"
    )
