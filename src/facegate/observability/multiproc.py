"""The folder of prometheus_client's multiprocess mode, made before any metric exists.

With ``PROMETHEUS_MULTIPROC_DIR`` set, prometheus_client backs every metric value with a
file in that folder and opens it when the metric (or a label set) is created, some at import
time. Containers get the variable from the image and the manifests (``/tmp/metrics``) while
``/tmp`` is a fresh, empty volume: nothing would create the folder, and the first import of a
module that declares a metric would fail with ``FileNotFoundError``. :func:`prepare` runs when
the ``facegate`` package is imported, before any of its modules declares a metric.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

VARIABLES = ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir")


def prepare(environ: Mapping[str, str] | None = None) -> Path | None:
    """Create the multiprocess folder named by the environment (owner-only, parents too).
    Returns it, or None when multiprocess mode is off. A path that exists and is not a
    folder, or that cannot be made, raises ``OSError`` naming the variable."""
    env = os.environ if environ is None else environ
    name = next((variable for variable in VARIABLES if env.get(variable)), None)
    if name is None:
        return None
    folder = Path(env[name])
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise OSError(f"{name}={folder}: cannot create the metrics folder: {error}") from error
    return folder
