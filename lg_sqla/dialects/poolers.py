"""A connection pooler in front of PostgreSQL (PgBouncer, and the like): no prepared
statements through it.

psycopg 3 prepares a statement on the server and runs it by name
(``prepare_threshold``; the engines lg_sqla creates prepare at the first execution,
``engines.PSYCOPG_PREPARE_THRESHOLD``). A prepared statement lives in one server
session. Behind a pooler in transaction mode (PgBouncer < 1.21, the one Debian 12
ships) each transaction may run on another client's server session: psycopg then
meets ``prepared statement "_pg3_0" does not exist`` or ``already exists``, or,
worst, binds its parameters to *another client's* ``_pg3_N`` of the same name (with
as many parameters, it runs that client's statement, silently).

So it must be known before the first prepared statement, not after the first error.
A pooler answers the client's connection with a backend key of its own (its cancel
requests go to the pooler), so the process id psycopg was given
(``info.backend_pid``) is not the server session's ``pg_backend_pid()``. A plain TCP
proxy or a port mapping passes the server's key through: they are not told apart
from a direct connection, and lose nothing. On each new connection of the engines
lg_sqla creates (``engines.configure_engine``: psycopg, unless the caller chose
``prepare_threshold=None``), one query compares the two; behind a pooler that connection
never prepares (``prepare_threshold = None``) and the engine logs one warning.
Session mode is safe with prepared statements but cannot be told from transaction
mode at connect: it is treated the same (unprepared statements, a little slower).

An engine passed in by the caller gets the same query once, on the first connection
lg_sqla's first call makes (:func:`check_first_connection`, one per pool, not per
call); behind a pooler, every connection it checks out from then on prepares
nothing (:func:`stop_preparing`, one warning). And should a pooler's
prepared-statement error still come (:func:`is_pooler_prepare_error`: connections a
pooler added later, an engine used before lg_sqla's first call), the engine is
switched the same way, the failed connection dropped, and the call run again: the
failed statement ran nothing, and its transaction was rolled back.
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

logger = logging.getLogger("lg_sqla")

# psycopg's error classes, by SQLSTATE: invalid_sql_statement_name (its prepared
# statement is gone: another server session), duplicate_prepared_statement (the
# name is taken there by another client's), protocol_violation (a Bind whose
# parameter count is not the prepared statement's).
_PREPARE_SQLSTATES = frozenset({"26000", "42P05", "08P01"})

_WARNING = (
    "lg_sqla: %s is reached through a connection pooler (PgBouncer or alike: %s); "
    "its psycopg connections do not prepare statements (prepare_threshold=None), which "
    "a pooler in transaction mode would hand to other clients' sessions. Set "
    "connect_args={'prepare_threshold': None} yourself to silence this (docs/scaling.md)."
)

# By pool (an engine's execution_options() copies share it): the engines switched
# (warned about), and those whose connections are checked, each at its connect or
# once at lg_sqla's first call.
_SWITCHED: weakref.WeakSet[Any] = weakref.WeakSet()
_CHECKED: weakref.WeakSet[Any] = weakref.WeakSet()
_PSYCOPG_DRIVERS = ("psycopg", "psycopg_async")
_CHECKING = threading.Lock()


def _driver_connection(dbapi_connection: Any) -> Any:
    # SQLAlchemy's asyncio adapter holds psycopg's AsyncConnection behind its public
    # ``driver_connection``; a sync psycopg connection is its own.
    return getattr(dbapi_connection, "driver_connection", dbapi_connection)


def _behind_a_pooler(dbapi_connection: Any) -> bool:
    """One query on a new connection: whether its backend key is the server session's.
    The query itself is not prepared (through a pooler, its name could be taken)."""
    driver_connection = _driver_connection(dbapi_connection)
    told = driver_connection.info.backend_pid
    threshold = driver_connection.prepare_threshold
    driver_connection.prepare_threshold = None
    try:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SELECT pg_backend_pid()")
            row = cursor.fetchone()
        finally:
            cursor.close()
        dbapi_connection.rollback()  # (psycopg opened a transaction for it: ended)
    finally:
        driver_connection.prepare_threshold = threshold
    return row is not None and row[0] != told


def detect_poolers(engine: Engine) -> None:
    """Check each new connection of ``engine`` (a psycopg engine lg_sqla created) for
    a pooler in front, and prepare nothing through one (see the module)."""
    pool = engine.pool
    _CHECKED.add(pool)
    url = engine.url.render_as_string(hide_password=True)

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        driver_connection = _driver_connection(dbapi_connection)
        if driver_connection.prepare_threshold is None:  # (the caller's choice: safe)
            return
        if _behind_a_pooler(dbapi_connection):
            driver_connection.prepare_threshold = None
            if pool not in _SWITCHED:
                _SWITCHED.add(pool)
                logger.warning(_WARNING, url, "its backend key is not the session's")

    # First of the connect listeners: before SQLAlchemy's first-connect initialize,
    # whose queries would otherwise be prepared.
    event.listen(engine, "connect", on_connect, insert=True)


def needs_check(engine: Engine) -> bool:
    """Whether ``engine``'s connections are yet to be checked for a pooler."""
    return engine.dialect.driver in _PSYCOPG_DRIVERS and engine.pool not in _CHECKED


def check_first_connection(engine: Engine, dbapi_connection: Any) -> None:
    """On an owner's first connection of ``engine``: unless its connections are
    checked already (or prepare nothing), whether a pooler is in front; then the
    engine prepares nothing from now on."""
    if engine.dialect.driver not in _PSYCOPG_DRIVERS or engine.pool in _CHECKED:
        return
    driver_connection = _driver_connection(dbapi_connection)
    # Under a lock, and marked checked once done: the owners' other first calls wait
    # here rather than run a statement before the engine is switched.
    with _CHECKING:
        if engine.pool in _SWITCHED:
            driver_connection.prepare_threshold = None
            return
        if engine.pool in _CHECKED or driver_connection.prepare_threshold is None:
            return  # (None: the caller's choice, safe)
        if _behind_a_pooler(dbapi_connection):
            driver_connection.prepare_threshold = None
            stop_preparing(engine, "its backend key is not the session's")
        _CHECKED.add(engine.pool)


def is_pooler_prepare_error(engine: Engine, error: BaseException) -> bool:
    """Whether ``error`` (a driver error) is a pooler's answer to a psycopg prepared
    statement (also on an engine switched already: a call that checked its connection
    out before the switch)."""
    if engine.dialect.driver not in _PSYCOPG_DRIVERS:
        return False
    sqlstate = getattr(getattr(error, "diag", None), "sqlstate", None)
    if sqlstate not in _PREPARE_SQLSTATES:
        return False
    return "prepared statement" in str(error)


def stop_preparing(engine: Engine, reason: str = "its prepared statements went missing") -> None:
    """Every connection ``engine`` checks out from now on prepares nothing; one
    warning. (A checkout listener: the engine then keeps no connection between calls,
    ``runtime.kept``, so every call passes through it.)"""
    if engine.pool in _SWITCHED:
        return
    _SWITCHED.add(engine.pool)
    logger.warning(_WARNING, engine.url.render_as_string(hide_password=True), reason)

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        _driver_connection(dbapi_connection).prepare_threshold = None

    def on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        _driver_connection(dbapi_connection).prepare_threshold = None

    # At connect (before SQLAlchemy's first-connect initialize), and at every checkout
    # (the connections already open).
    event.listen(engine, "connect", on_connect, insert=True)
    event.listen(engine, "checkout", on_checkout)
