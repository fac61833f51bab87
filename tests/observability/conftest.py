from __future__ import annotations

from obsfactories import database

__all__ = ["database"]
