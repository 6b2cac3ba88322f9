"""The savers compared, each opened the way its own documentation shows a user.

* lg_sqla: ``SQLAlchemySaver.from_conn_string(url)`` / ``AsyncSQLAlchemySaver`` with the
  README's URLs (psycopg 3; PyMySQL and asyncmy with ``charset=utf8mb4``; aiosqlite),
  default pool, then ``setup()``.
* the official savers' ``from_conn_string`` + ``setup()``: ``SqliteSaver`` /
  ``AsyncSqliteSaver`` (langgraph-checkpoint-sqlite), ``PostgresSaver`` /
  ``AsyncPostgresSaver`` (langgraph-checkpoint-postgres: one connection with
  ``autocommit=True, prepare_threshold=0, row_factory=dict_row``, its own choice), and
  the community ``PyMySQLSaver`` / ``AIOMySQLSaver`` (langgraph-checkpoint-mysql) on
  MariaDB, there being no official MySQL saver.

``AIOMySQLSaver`` needs one fix, applied here only (see ``patch_aiomysql_bytes``).

On SQLite both savers commit durably by default (``PRAGMA synchronous=FULL``, SQLite's
default: an fsync of the WAL at every commit). Setup "sqlite-normal" runs both at
``synchronous=NORMAL`` (safe from application crashes, the last commits can be lost to
a power cut), so that their write figures measure code, not the disk.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .databases import Database, base

OFFICIAL = {
    ("sqlite", False): "SqliteSaver",
    ("sqlite", True): "AsyncSqliteSaver",
    ("postgres", False): "PostgresSaver",
    ("postgres", True): "AsyncPostgresSaver",
    ("mysql", False): "PyMySQLSaver",
    ("mysql", True): "AIOMySQLSaver",
}


@dataclass(frozen=True)
class Contender:
    """``name`` is the class users know; ``ours`` tells lg_sqla from the official saver."""

    name: str
    ours: bool
    is_async: bool
    open: Callable[[Database], Any]  # -> a context manager (async for async savers)


def patch_aiomysql_bytes() -> None:
    """Let aiomysql 0.3.2 send ``bytes`` again (aio-libs/aiomysql#1080).

    PyMySQL 1.2.3 replaced ``pymysql.converters.escape_bytes_prefixed`` with a
    placeholder string, which aiomysql's ``Connection.escape`` still calls for every
    ``bytes`` parameter, so every checkpoint write fails with "'str' object is not
    callable". PyMySQL's ``escape_bytes`` renders the same ``_binary X'..'`` literal the
    old function did. Benchmark only: lg_sqla itself uses asyncmy.
    """
    import aiomysql.connection  # type: ignore[import-untyped]
    import pymysql.converters

    if not callable(getattr(aiomysql.connection, "escape_bytes_prefixed", None)):
        aiomysql.connection.escape_bytes_prefixed = pymysql.converters.escape_bytes


# --- sync ----------------------------------------------------------------------------


def _sqlite_normal(engine: Any) -> None:
    """Run this engine's new connections at synchronous=NORMAL (after lg_sqla's FULL)."""
    from sqlalchemy import event

    def pragma(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    event.listen(engine, "connect", pragma)
    engine.dispose()  # connections opened so far had FULL


@contextlib.contextmanager
def _lg_sqla_sync(db: Database, sqlite_normal: bool = False) -> Iterator[Any]:
    from lg_sqla import SQLAlchemySaver

    with SQLAlchemySaver.from_conn_string(db.sync_url) as saver:
        if sqlite_normal:
            _sqlite_normal(saver.engine)
        saver.setup()
        yield saver


@contextlib.contextmanager
def _official_sync(db: Database, sqlite_normal: bool = False) -> Iterator[Any]:
    saver_cls: Any
    if db.dialect == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver as saver_cls
    elif db.dialect == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver as saver_cls
    else:
        from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver as saver_cls
    with saver_cls.from_conn_string(db.native) as saver:
        saver.setup()
        if sqlite_normal:
            saver.conn.execute("PRAGMA synchronous=NORMAL")
        yield saver


# --- async ---------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _lg_sqla_async(db: Database, sqlite_normal: bool = False) -> AsyncIterator[Any]:
    from lg_sqla import AsyncSQLAlchemySaver

    async with AsyncSQLAlchemySaver.from_conn_string(db.async_url) as saver:
        if sqlite_normal:
            _sqlite_normal(saver.engine.sync_engine)
            if saver._threaded is not None:  # whole calls run on this pysqlite engine
                _sqlite_normal(saver._threaded)
        await saver.setup()
        yield saver


@contextlib.asynccontextmanager
async def _official_async(db: Database, sqlite_normal: bool = False) -> AsyncIterator[Any]:
    saver_cls: Any
    if db.dialect == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as saver_cls
    elif db.dialect == "postgres":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as saver_cls
    else:
        from langgraph.checkpoint.mysql.aio import AIOMySQLSaver as saver_cls

        patch_aiomysql_bytes()
    async with saver_cls.from_conn_string(db.native) as saver:
        await saver.setup()
        if sqlite_normal:
            await saver.conn.execute("PRAGMA synchronous=NORMAL")
        yield saver


def contenders(setup: str, is_async: bool) -> tuple[Contender, Contender]:
    """(lg_sqla, the official saver) for one setup (see databases.SETUPS) and mode."""
    name = "AsyncSQLAlchemySaver" if is_async else "SQLAlchemySaver"
    ours = Contender(
        name,
        True,
        is_async,
        functools.partial(
            _lg_sqla_async if is_async else _lg_sqla_sync, sqlite_normal=setup == "sqlite-normal"
        ),
    )
    official = Contender(
        OFFICIAL[(base(setup), is_async)],
        False,
        is_async,
        functools.partial(
            _official_async if is_async else _official_sync,
            sqlite_normal=setup == "sqlite-normal",
        ),
    )
    return ours, official
