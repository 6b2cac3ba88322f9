"""Engine set-up for engines lg_sqla creates itself (``from_conn_string``).

Engines passed in by the caller are used as they are: their owner decides.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Engine
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


def configure_engine(engine: E) -> E:
    """Apply lg_sqla's per-dialect connection settings to an engine it owns."""
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    if sync_engine.dialect.name == "sqlite":
        event.listen(sync_engine, "connect", _sqlite_pragmas)
    return engine
