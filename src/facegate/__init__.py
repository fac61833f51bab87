"""facegate: a multi-tenant face-swap service built on a FaceFusion-class engine."""

__version__ = "0.1.0"
