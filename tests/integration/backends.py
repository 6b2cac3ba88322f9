"""Databases under test: a SQLite file, PostgreSQL and MySQL/MariaDB, each with
a sync and an async driver URL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
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


@dataclass(frozen=True)
class Backend:
    """A migrated database reachable with a sync and an async driver."""

    name: str  # the dialect: sqlite, postgres, mysql or duckdb
    sync_url: str
    async_url: str
    variant: str = ""  # the BACKENDS entry it was made for, when not `name`

    def engine(self, **kwargs: object) -> sa.Engine:
        return configure_engine(sa.create_engine(self.sync_url, **kwargs))  # type: ignore[arg-type]

    def async_engine(self, **kwargs: object) -> AsyncEngine:
        assert self.async_url, f"{self.name} has no async driver"
        return configure_engine(create_async_engine(self.async_url, **kwargs))  # type: ignore[arg-type]


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


def assert_no_leaked_connections(engine: sa.Engine) -> None:
    pool = engine.pool
    checked_out = getattr(pool, "checkedout", lambda: 0)()
    assert checked_out == 0, f"{checked_out} connection(s) still checked out: {pool.status()}"


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
        assert_no_leaked_connections(engine.sync_engine)
    finally:
        await engine.dispose()
