"""The specification's environment names, mapped onto ``FACEGATE_*`` settings.

The article deploys each tenant with ``TENANT_ID``, ``MODEL_PATH``, ``OUTPUT_DIR`` and
``MODEL_TAG``. Operators who copy its manifests get the behaviour they expect: the settings
layer calls :func:`apply_spec_env` on the environment before reading ``FACEGATE_*``.

| specification | facegate                  | meaning                                          |
|---------------|---------------------------|--------------------------------------------------|
| TENANT_ID     | FACEGATE_WORKER_TENANTS   | the worker claims only this tenant's jobs        |
| MODEL_PATH    | FACEGATE_MODELS_DIR       | the model store directory                        |
| OUTPUT_DIR    | FACEGATE_STORAGE_URL      | ``file://<OUTPUT_DIR>``: the local storage root  |
| MODEL_TAG     | FACEGATE_MODEL_TAG        | the default model tag (a policy pin still wins)  |

An explicit ``FACEGATE_*`` value is never overridden silently: equal values are fine, a
different value is a configuration error (a worker serving the wrong tenant is worse than
one that refuses to start).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import PurePosixPath

# The tenant id rule of facegate.tenancy.schemas (a DNS label), repeated here so this
# module stays importable without the service packages.
_TENANT_ID = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_MODEL_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class SpecEnvError(ValueError):
    """A specification variable is malformed or contradicts its ``FACEGATE_*`` twin."""


def _tenant(value: str) -> str:
    if not _TENANT_ID.match(value):
        raise SpecEnvError(f"TENANT_ID {value!r} is not a tenant id (a DNS label)")
    return value


def _directory(name: str) -> Callable[[str], str]:
    def convert(value: str) -> str:
        if not value.startswith("/"):
            raise SpecEnvError(f"{name} must be an absolute path, got {value!r}")
        return str(PurePosixPath(value))

    return convert


def _output_dir(value: str) -> str:
    return "file://" + _directory("OUTPUT_DIR")(value)


def _model_tag(value: str) -> str:
    if not _MODEL_TAG.match(value):
        raise SpecEnvError(f"MODEL_TAG {value!r} is not a model tag")
    return value


# specification name -> (facegate name, conversion)
SPEC_ENV: dict[str, tuple[str, Callable[[str], str]]] = {
    "TENANT_ID": ("FACEGATE_WORKER_TENANTS", _tenant),
    "MODEL_PATH": ("FACEGATE_MODELS_DIR", _directory("MODEL_PATH")),
    "OUTPUT_DIR": ("FACEGATE_STORAGE_URL", _output_dir),
    "MODEL_TAG": ("FACEGATE_MODEL_TAG", _model_tag),
}


def _same(name: str, left: str, right: str) -> bool:
    if name == "FACEGATE_MODELS_DIR":
        return PurePosixPath(left) == PurePosixPath(right)
    if name == "FACEGATE_STORAGE_URL" and left.startswith("file://"):
        return PurePosixPath(left[7:]) == PurePosixPath(right[7:])
    return left == right


def apply_spec_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return a copy of ``environ`` (default ``os.environ``) with the specification's names
    translated to ``FACEGATE_*``. Empty values count as unset. Raises :class:`SpecEnvError`
    on a malformed value or on a conflict with an explicit ``FACEGATE_*`` value."""
    result = dict(os.environ if environ is None else environ)
    for spec_name, (our_name, convert) in SPEC_ENV.items():
        raw = result.get(spec_name, "").strip()
        if not raw:
            continue
        value = convert(raw)
        current = result.get(our_name, "").strip()
        if current and not _same(our_name, current, value):
            raise SpecEnvError(
                f"{spec_name}={raw!r} contradicts {our_name}={current!r}; set only one"
            )
        result[our_name] = current or value
    return result
