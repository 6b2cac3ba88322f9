"""Databases under test: a SQLite file, PostgreSQL and MySQL/MariaDB, each with
a sync and an async driver URL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from citus import create_citus_database, drop_citus_database
from modes import Either, saver_on
from servers import create_database, drop_database, sqlalchemy_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.engines import configure_engine

DIALECTS = ("sqlite", "postgres", "mysql")
# A MariaDB database left at the server's default charset (latin1, as `CREATE
# DATABASE app` makes on a server with MariaDB's defaults), reached by URLs
# without `?charset=`: users do not read our docs before creating a database.
# Only modules marked `any_charset` run on it (see conftest.py), to keep CI short.
MYSQL_DEFAULT_CHARSET = "mysql-latin1"
# A dialect lg_sqla has no special code for (DuckDB, embedded, through
# duckdb-engine): it proves the portable path (GenericOps) and the generic
# Alembic implementation. Only modules marked `any_dialect` run on it, and only
# through the sync saver: DuckDB has no async SQLAlchemy driver.
PORTABLE = "duckdb"
BACKENDS = (*DIALECTS, MYSQL_DEFAULT_CHARSET, PORTABLE)
# PostgreSQL with Citus: lg_sqla's tables distributed over a coordinator and two workers.
# Not in BACKENDS: tests/integration/clusters/test_citus.py runs the suites it names on it.
CITUS = "citus"

EngineT = TypeVar("EngineT", bound=sa.Engine | AsyncEngine)


@dataclass(frozen=True)
class Backend:
    """A migrated database reachable with a sync and an async driver."""

    name: str  # the dialect: sqlite, postgres, mysql or duckdb
    sync_url: str
    async_url: str
    variant: str = ""  # the BACKENDS entry it was made for, when not `name`

    def engine(self, **kwargs: object) -> sa.Engine:
        return configure_engine(sa.create_engine(self.sync_url, **kwargs))

    def async_engine(self, **kwargs: object) -> AsyncEngine:
        assert self.async_url, f"{self.name} has no async driver"
        return configure_engine(create_async_engine(self.async_url, **kwargs))


def new_database(request: pytest.FixtureRequest, backend: str, tmp: Path) -> Iterator[Backend]:
    """A fresh, empty database (not migrated) for one of ``BACKENDS``."""
    if backend == "sqlite":
        path = tmp / f"lg_sqla_{uuid.uuid4().hex[:8]}.sqlite"
        yield Backend("sqlite", f"sqlite:///{path}", f"sqlite+aiosqlite:///{path}")
        return
    if backend == PORTABLE:
        path = tmp / f"lg_sqla_{uuid.uuid4().hex[:8]}.duckdb"
        yield Backend("duckdb", f"duckdb:///{path}", "")
        return
    name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
    if backend == CITUS:
        # A database on every node of the Citus cluster (tests/citus.py), empty: tables
        # are set up and distributed by the test (lg_sqla.distributing).
        cluster = request.getfixturevalue("citus")
        create_citus_database(cluster, name)
        yield Backend(
            "postgres",
            sqlalchemy_url(cluster.coordinator, "psycopg", name),
            sqlalchemy_url(cluster.coordinator, "psycopg", name),
            variant=CITUS,
        )
        drop_citus_database(cluster, name)
        return
    if backend == "postgres":
        admin = request.getfixturevalue("postgres_admin_url")
        create_database(admin, name)
        yield Backend(
            "postgres",
            sqlalchemy_url(admin, "psycopg", name),
            sqlalchemy_url(admin, "psycopg", name),
        )
    elif backend == MYSQL_DEFAULT_CHARSET:
        admin = request.getfixturevalue("mysql_admin_url")
        create_database(admin, name, mysql_charset="latin1")
        yield Backend(
            "mysql",
            sqlalchemy_url(admin, "pymysql", name),
            sqlalchemy_url(admin, "asyncmy", name),
            variant=backend,
        )
    else:
        admin = request.getfixturevalue("mysql_admin_url")
        create_database(admin, name)
        yield Backend(
            "mysql",
            sqlalchemy_url(admin, "pymysql", name) + "?charset=utf8mb4",
            sqlalchemy_url(admin, "asyncmy", name) + "?charset=utf8mb4",
        )
    drop_database(admin, name)


def assert_no_leaked_connections(engine: sa.Engine | AsyncEngine) -> None:
    """No connection of the engine's pool is still checked out (a pool without the
    count, as NullPool or StaticPool, has nothing to check)."""
    if isinstance(engine, AsyncEngine):
        engine = engine.sync_engine
    pool = engine.pool
    checked_out = getattr(pool, "checkedout", lambda: 0)()
    assert checked_out == 0, f"{checked_out} connection(s) still checked out: {pool.status()}"


class EngineFactory:
    """The engines one test makes (conftest.py: the ``make_engine`` fixture and the
    ``engine`` / ``async_engine`` fixtures built on it). At teardown each must have
    no connection still checked out, and each is disposed, failing or not.

    ``make_engine()`` is the test's backend's sync engine, ``make_engine(other)`` one
    of another ``Backend``, ``make_engine.aio(...)`` the async ones and
    ``make_engine.for_mode(mode, ...)`` either; keyword arguments go to
    ``create_engine``. ``make_engine.track(engine)`` adds an engine the test built
    some other way (a driver's URL, as users build them) to the check.
    """

    def __init__(self, default: Callable[[], Backend]) -> None:
        self._default = default
        self.engines: list[sa.Engine | AsyncEngine] = []

    def track(self, engine: EngineT) -> EngineT:
        self.engines.append(engine)
        return engine

    def __call__(self, backend: Backend | None = None, /, **kwargs: Any) -> sa.Engine:
        return self.track((backend or self._default()).engine(**kwargs))

    def aio(self, backend: Backend | None = None, /, **kwargs: Any) -> AsyncEngine:
        return self.track((backend or self._default()).async_engine(**kwargs))

    def for_mode(
        self, mode: str, backend: Backend | None = None, /, **kwargs: Any
    ) -> sa.Engine | AsyncEngine:
        return self.aio(backend, **kwargs) if mode == "async" else self(backend, **kwargs)

    async def close(self) -> None:
        """Check every engine, dispose of all of them, then report the leaks."""
        leaks: list[str] = []
        for engine in self.engines:
            try:
                assert_no_leaked_connections(engine)
            except AssertionError as leak:
                leaks.append(f"{engine.url!r}: {leak}")
        for engine in self.engines:
            if isinstance(engine, AsyncEngine):
                await engine.dispose()
            else:
                engine.dispose()
        self.engines.clear()
        assert not leaks, "leaked connections:\n" + "\n".join(leaks)


@contextmanager
def checked_engine(backend: Backend, **kwargs: Any) -> Iterator[sa.Engine]:
    """A sync engine of its own for a helper or a fixture (tests take ``make_engine``):
    no connection left checked out at the end, then disposed."""
    engine = backend.engine(**kwargs)
    try:
        yield engine
        assert_no_leaked_connections(engine)
    finally:
        engine.dispose()


@asynccontextmanager
async def saver_in_mode(
    backend: Backend, mode: str, **kwargs: Any
) -> AsyncIterator[Either[SQLAlchemySaver | AsyncSQLAlchemySaver]]:
    """fresh_saver or fresh_async_saver by mode (saver arguments in ``kwargs``), driven
    in that mode (modes.py)."""
    engine = backend.async_engine() if mode == "async" else backend.engine()
    try:
        yield saver_on(engine, **kwargs)
        assert_no_leaked_connections(engine)
    finally:
        if isinstance(engine, AsyncEngine):
            await engine.dispose()
        else:
            engine.dispose()


@contextmanager
def fresh_saver(backend: Backend) -> Iterator[SQLAlchemySaver]:
    """A saver on a brand-new engine: it shares nothing with other savers but the database."""
    engine = backend.engine()
    try:
        yield SQLAlchemySaver(engine)
        assert_no_leaked_connections(engine)
    finally:
        engine.dispose()


@asynccontextmanager
async def fresh_async_saver(backend: Backend) -> AsyncIterator[AsyncSQLAlchemySaver]:
    engine = backend.async_engine()
    try:
        yield AsyncSQLAlchemySaver(engine)
        assert_no_leaked_connections(engine)
    finally:
        await engine.dispose()
