"""The drivers the direct path runs on, each with what it needs of them.

The direct path (``runtime.direct``) sends SQLAlchemy's compiled SQL to the DBAPI
cursor itself, so it takes over a little of what SQLAlchemy's dialects know about
their driver: the parameter style (read from the compiled statement), how a
connection is put in autocommit, and any cursor setting that makes results cheaper
to decode. That is only safe on drivers it was written and tested for. This is the
allowlist, keyed by SQLAlchemy's ``(dialect.name, dialect.driver)``: any other
driver (psycopg2, asyncpg, pg8000, mysqlclient, MariaDB Connector/Python, a
third-party dialect...) runs every plan through SQLAlchemy Core, which knows it.

Adding a driver here means running the whole suite on it (conformance, graphs,
atomicity on both paths: tests/integration/test_drivers.py and test_direct_path.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.engine import Dialect

# Undoes what an autocommit switch did, when the plan is over.
Restore = Callable[[], None]


def _no_cursor_settings(cursor: Any) -> None:
    pass


def _isolation_level_autocommit(dialect: Dialect, dbapi_connection: Any) -> Restore:
    """Autocommit through SQLAlchemy's own dialect API (what Core's
    ``isolation_level="AUTOCOMMIT"`` does), restored to the pool's level after."""
    dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")
    return partial(dialect.reset_isolation_level, dbapi_connection)


@functools.cache
def _psycopg_binary() -> Any:
    from psycopg import pq  # only imported once a psycopg connection exists

    return pq.Format.BINARY


def _psycopg_binary_results(cursor: Any) -> None:
    # Results in binary: bytea arrives as raw bytes, not hex text for psycopg to
    # decode (15% of a get_tuple's client time on a chat thread), jsonb and integers
    # likewise. SQLAlchemy's async adapter keeps psycopg's own cursor in `_cursor`.
    driver_cursor = getattr(cursor, "_cursor", cursor)
    driver_cursor.format = _psycopg_binary()


def _nothing_to_restore() -> None:
    pass


def _psycopg_autocommit(dialect: Dialect, dbapi_connection: Any) -> Restore:
    # psycopg's autocommit flag alone, set and restored: SQLAlchemy's isolation level
    # API also sets and resets `isolation_level`, two more driver calls per plan
    # (with the async driver, each one a greenlet switch to the event loop).
    if dbapi_connection.autocommit:
        return _nothing_to_restore
    dbapi_connection.autocommit = True
    return partial(setattr, dbapi_connection, "autocommit", False)


@dataclass(frozen=True)
class DirectDriver:
    """What the direct path does differently on one driver."""

    # Applied to each cursor the direct path opens, before its first statement.
    configure_cursor: Callable[[Any], None] = _no_cursor_settings
    # Puts the DBAPI connection in autocommit for a one-statement plan
    # (``DialectOps.autocommit_single_statements``); returns what undoes it.
    autocommit: Callable[[Dialect, Any], Restore] = _isolation_level_autocommit


_PLAIN = DirectDriver()
_PSYCOPG = DirectDriver(configure_cursor=_psycopg_binary_results, autocommit=_psycopg_autocommit)

DIRECT_DRIVERS: Mapping[tuple[str, str], DirectDriver] = {
    ("sqlite", "pysqlite"): _PLAIN,
    # (SQLAlchemy's asyncio adapter gives aiosqlite, psycopg and asyncmy a DBAPI face.)
    ("sqlite", "aiosqlite"): _PLAIN,
    ("postgresql", "psycopg"): _PSYCOPG,
    ("postgresql", "psycopg_async"): _PSYCOPG,
    ("mysql", "pymysql"): _PLAIN,
    ("mysql", "asyncmy"): _PLAIN,
    ("mariadb", "pymysql"): _PLAIN,
    ("mariadb", "asyncmy"): _PLAIN,
}


def direct_driver(dialect: Dialect) -> DirectDriver | None:
    """The direct path's settings for ``dialect``'s driver; None: not on the allowlist."""
    return DIRECT_DRIVERS.get((dialect.name, dialect.driver))
