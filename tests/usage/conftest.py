from __future__ import annotations

import sys
from pathlib import Path

# The database fixture (SQLite, and PostgreSQL when asked) is shared with tests/observability.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "observability"))
from obsfactories import database

__all__ = ["database"]
