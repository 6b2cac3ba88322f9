"""A plan of several statements on a session in autocommit is one transaction all the same.

A session in autocommit commits each statement alone: an engine made with
``isolation_level="AUTOCOMMIT"`` (or ``engine.execution_options(...)`` of it), or a
driver connected so (pysqlite's ``isolation_level=None``, psycopg's or PyMySQL's
``autocommit=True``). A plan of several statements that failed midway there would
leave its first ones stored. So before such a plan's first statement, both paths of
the runtime ask ``DialectOps.out_of_autocommit``: it tells autocommit apart without
I/O (SQLAlchemy's ``Dialect.detect_autocommit_setting``: a flag read) and, only when
it is on, makes the plan one transaction and says how to give the session back as
the user configured it. One-statement plans never ask (atomic by themselves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy.engine import Dialect


@dataclass(frozen=True)
class AutocommitHold:
    """How a plan runs as one transaction on a session in autocommit."""

    # After each COMMIT step of the plan: begins the next statements' transaction.
    # None: the session stays out of autocommit until ``restore``.
    again: Callable[[], None] | None = None
    # Once the plan's transaction has ended (committed or rolled back): the session
    # back in autocommit. None: it never left it.
    restore: Callable[[], None] | None = None


def in_autocommit(dialect: Dialect, dbapi_connection: Any) -> bool:
    """Whether the session commits each statement alone (no I/O)."""
    detect = getattr(dialect, "detect_autocommit_setting", None)
    if detect is None:  # (SQLAlchemy before 2.0.43: the drivers' own flags)
        return _driver_autocommit(dialect, dbapi_connection)
    try:
        return bool(detect(dbapi_connection))
    except NotImplementedError:  # (a third-party dialect that cannot tell)
        return False


def _driver_autocommit(dialect: Dialect, dbapi_connection: Any) -> bool:
    """What ``detect_autocommit_setting`` reads, where SQLAlchemy does not have it:
    sqlite3's (and aiosqlite's adapter's) ``isolation_level`` None, PyMySQL's and
    mysqlclient's ``get_autocommit()``, the others' ``autocommit`` attribute."""
    if dialect.name == "sqlite":
        return getattr(dbapi_connection, "isolation_level", "") is None
    get_autocommit = getattr(dbapi_connection, "get_autocommit", None)
    if get_autocommit is None:  # (an async adapter: asyncmy's own connection's, sync)
        driver_connection = getattr(dbapi_connection, "driver_connection", None)
        get_autocommit = getattr(driver_connection, "get_autocommit", None)
    if callable(get_autocommit):
        return bool(get_autocommit())
    return getattr(dbapi_connection, "autocommit", False) is True


def switch_out_of_autocommit(dialect: Dialect, dbapi_connection: Any) -> AutocommitHold | None:
    """The portable way: the session switched to the database's default isolation level
    (``Dialect.set_isolation_level``, what Core's ``isolation_level=`` option does), its
    statements then in one implicit transaction, and switched back to AUTOCOMMIT once
    the plan is over. None where the session is not in autocommit."""
    if not in_autocommit(dialect, dbapi_connection):
        return None
    level = dialect.default_isolation_level  # (read at the first connection)
    if level is None or level == "AUTOCOMMIT":  # (a dialect that could not tell)
        return None
    dialect.set_isolation_level(dbapi_connection, level)
    return AutocommitHold(
        restore=partial(dialect.set_isolation_level, dbapi_connection, "AUTOCOMMIT")
    )


def begin_in_autocommit(dialect: Dialect, dbapi_connection: Any) -> AutocommitHold | None:
    """MySQL's way: ``BEGIN``, which holds until the plan's COMMIT (or ROLLBACK), and again
    after each COMMIT step; the session stays in autocommit throughout, so nothing is
    switched back (switching costs two ``SET`` round trips where BEGIN is one, and the
    drivers' ``commit()`` and ``rollback()`` always send theirs). None where the session
    is not in autocommit."""
    if not in_autocommit(dialect, dbapi_connection):
        return None
    begin = partial(_send_begin, dbapi_connection)
    begin()
    return AutocommitHold(again=begin)


def _send_begin(dbapi_connection: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("BEGIN")
    finally:
        cursor.close()
