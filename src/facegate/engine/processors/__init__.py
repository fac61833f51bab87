"""Processors: plug-ins with one lifecycle (see base.py). `registry.py` maps names to classes."""
