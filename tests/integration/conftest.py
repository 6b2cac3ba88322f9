"""Backends under test: a SQLite file, PostgreSQL and MySQL/MariaDB, sync and async.

Each dialect gets one freshly created database per session, migrated with
`setup()`; tests isolate themselves with unique thread ids. Engines are
checked for leaked connections at teardown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from backends import DIALECTS, Backend, assert_no_leaked_connections, new_database

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver


@pytest.fixture(scope="session", params=DIALECTS)
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    """A migrated database per dialect, shared by the session's tests."""
    for db in new_database(request, request.param, tmp_path_factory.mktemp("sqlite")):
        engine = db.engine()
        try:
            SQLAlchemySaver(engine).setup()
        finally:
            engine.dispose()
        yield db


@pytest.fixture
def fresh_database(
    request: pytest.FixtureRequest, backend: Backend, tmp_path: Path
) -> Iterator[Backend]:
    """An empty, unmigrated database of the current dialect (for migration tests)."""
    yield from new_database(request, backend.name, tmp_path)


@pytest.fixture
def sync_saver(backend: Backend) -> Iterator[SQLAlchemySaver]:
    engine = backend.engine()
    try:
        yield SQLAlchemySaver(engine)
        assert_no_leaked_connections(engine)
    finally:
        engine.dispose()


@pytest.fixture
async def async_saver(backend: Backend) -> AsyncIterator[AsyncSQLAlchemySaver]:
    engine = backend.async_engine()
    try:
        yield AsyncSQLAlchemySaver(engine)
        assert_no_leaked_connections(engine.sync_engine)
    finally:
        await engine.dispose()
