"""Backends under test: a SQLite file, PostgreSQL and MySQL/MariaDB, sync and async.

Each dialect gets one freshly created database per session, migrated with
`setup()`; tests isolate themselves with unique thread ids. Engines are
checked for leaked connections at teardown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from backends import DIALECTS, Backend, fresh_async_saver, fresh_saver, new_database

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
    with fresh_saver(backend) as saver:
        yield saver


@pytest.fixture
async def async_saver(backend: Backend) -> AsyncIterator[AsyncSQLAlchemySaver]:
    async with fresh_async_saver(backend) as saver:
        yield saver


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its dialect, so `-m postgres` (or sqlite, mysql) selects one."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "backend" in callspec.params:
            item.add_marker(getattr(pytest.mark, callspec.params["backend"]))
