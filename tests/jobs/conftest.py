from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from jobfactories import create_database, drop_database
from sqlalchemy import Engine


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    engine = create_database(request.param, tmp_path)
    yield engine
    drop_database(engine)
