"""Backends under test: a SQLite file, PostgreSQL and MySQL/MariaDB, sync and async.

Each dialect gets one freshly created database per session, migrated with
`setup()`; tests isolate themselves with unique thread ids. Engines are
checked for leaked connections at teardown.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

# The test modules live in one folder per concern (checkpoint/, store/, runtime/, ...)
# and some import each other by module name (`from test_cli import run_cli`), as the
# shared helpers of this folder are imported (`from backends import Backend`): every
# concern folder is on the path. Basenames are therefore unique across the folders.
sys.path.extend(
    str(room)
    for room in sorted(Path(__file__).resolve().parent.iterdir())
    if room.is_dir() and any(room.glob("test_*.py")) and str(room) not in sys.path
)

import pytest
import sqlalchemy as sa
from backends import (
    BACKENDS,
    MYSQL_DEFAULT_CHARSET,
    PORTABLE,
    Backend,
    EngineFactory,
    fresh_async_saver,
    fresh_saver,
    new_database,
)
from modes import MODES
from sqlalchemy.ext.asyncio import AsyncEngine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver


@pytest.fixture(scope="session", params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    """A migrated database per backend, shared by the session's tests."""
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
    yield from new_database(request, backend.variant or backend.name, tmp_path)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """The test body runs twice: on the sync API, and on the async one (modes.py)."""
    return str(request.param)


@pytest.fixture
async def make_engine(request: pytest.FixtureRequest) -> AsyncIterator[EngineFactory]:
    """Engines on the test's backend (or one named), each checked for leaked
    connections and disposed at teardown (backends.EngineFactory)."""

    def default() -> Backend:
        if "backend" not in request.fixturenames:
            raise LookupError("make_engine() without a Backend needs the backend fixture")
        backend: Backend = request.getfixturevalue("backend")
        return backend

    factory = EngineFactory(default)
    try:
        yield factory
    finally:
        await factory.close()


@pytest.fixture
def engine(make_engine: EngineFactory, backend: Backend) -> sa.Engine:
    """A sync engine of its own on the backend's database, checked for leaks."""
    return make_engine(backend)


@pytest.fixture
def async_engine(make_engine: EngineFactory, backend: Backend) -> AsyncEngine:
    """An async engine of its own on the backend's database, checked for leaks."""
    return make_engine.aio(backend)


@pytest.fixture
def sync_saver(backend: Backend) -> Iterator[SQLAlchemySaver]:
    with fresh_saver(backend) as saver:
        yield saver


@pytest.fixture
async def async_saver(backend: Backend) -> AsyncIterator[AsyncSQLAlchemySaver]:
    async with fresh_async_saver(backend) as saver:
        yield saver


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its dialect, so `-m postgres` (or sqlite, mysql) selects one.

    The default-charset MariaDB database only runs the tests marked `any_charset`;
    the portable DuckDB database only the sync tests marked `any_dialect`.
    """
    kept, dropped = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "backend" not in callspec.params:
            kept.append(item)
            continue
        name = callspec.params["backend"]
        if name == PORTABLE:
            # Sync saver only (no async driver): tests of the async saver use the
            # async_saver fixture, are parametrized mode="async" or named *_async.
            is_async = (
                callspec.params.get("mode") == "async"
                or "async" in item.name
                or "async_saver" in getattr(item, "fixturenames", ())
            )
            if item.get_closest_marker("any_dialect") is None or is_async:
                dropped.append(item)
                continue
        if name == MYSQL_DEFAULT_CHARSET:
            if item.get_closest_marker("any_charset") is None:
                dropped.append(item)
                continue
            name = "mysql"
        item.add_marker(getattr(pytest.mark, name))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
