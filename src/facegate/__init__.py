"""facegate: a multi-tenant face-swap service built on a FaceFusion-class engine."""

from facegate.observability import multiproc as _multiproc

__version__ = "0.1.0"

# Before any facegate module declares a Prometheus metric (see the module's docstring).
_multiproc.prepare()
