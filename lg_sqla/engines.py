"""Engine set-up for engines lg_sqla creates itself (``from_conn_string``).

Engines passed in by the caller are used as they are: their owner decides.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import event, pool
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine

SQLITE_BUSY_TIMEOUT_MS = 30_000

E = TypeVar("E", Engine, AsyncEngine)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        # WAL: readers never block the writer; busy_timeout: a second writer
        # waits for the lock instead of failing at once with "database is locked".
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def engine_options(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """Defaults for engines we create (each can be overridden by the caller's options).

    * No rollback when a connection goes back to the pool: every call of the
      savers ends its own transaction (commit, or SQLAlchemy's ``Connection``
      rolls it back when it closes on an error), so the pool's default
      rollback-on-return only repeats it: one more round trip per call on
      PyMySQL/asyncmy, one more thread hop on aiosqlite. Isolation levels
      set for a call are still restored on return.
    * An in-memory SQLite database is one shared connection (LangGraph calls
      the saver from several threads, and each new connection to ``sqlite://``
      would open a different, empty database).
    """
    options = {"pool_reset_on_return": None, **options}
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        options = {"poolclass": pool.StaticPool, **options}
        connect_args = {"check_same_thread": False, **options.get("connect_args", {})}
        options["connect_args"] = connect_args
    return options


def threaded_sqlite_url(url: str) -> str | None:
    """The ``sqlite+pysqlite`` URL of the same file as an ``sqlite+aiosqlite`` URL, else None.

    aiosqlite runs each DBAPI call (cursor, execute, fetchall, close, commit) as
    a hop to its own thread and back: five hops for a ``get_tuple``. The async
    saver instead runs a whole call on a sync pysqlite connection in one worker
    thread (see ``AsyncSQLAlchemySaver.from_conn_string``). In-memory databases
    keep aiosqlite: another connection would open another, empty database.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.get_driver_name() != "aiosqlite":
        return None
    if parsed.database in (None, "", ":memory:") or parsed.query.get("mode") == "memory":
        return None
    return parsed.set(drivername="sqlite+pysqlite").render_as_string(hide_password=False)


def configure_engine(engine: E) -> E:
    """Apply lg_sqla's per-dialect connection settings to an engine it owns."""
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    if sync_engine.dialect.name == "sqlite":
        event.listen(sync_engine, "connect", _sqlite_pragmas)
    return engine
