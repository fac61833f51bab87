from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterkit import Cluster, postgres_base_url
from sqlalchemy import Engine
from tests.dbkit import create_schema, drop_schema

from facegate.database import create_engine_from_url


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A private schema on the test PostgreSQL and the processes a test starts on it."""
    base = postgres_base_url()
    schema, url = create_schema(base, "c")
    running = Cluster(url=url, tmp_path=tmp_path)
    try:
        yield running
    finally:
        running.stop_all()
        drop_schema(base, schema)


@pytest.fixture
def cluster_engine(cluster: Cluster) -> Iterator[Engine]:
    engine = create_engine_from_url(cluster.url)
    yield engine
    engine.dispose()
