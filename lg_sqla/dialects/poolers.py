"""A connection pooler in front of PostgreSQL (PgBouncer, and the like): no statement
of one client left on a server session for another client's turn.

Behind a pooler in transaction mode (PgBouncer < 1.21, the one Debian 12 ships) each
transaction may run on another client's server session, and so may each exchange
that ends with a Sync outside a transaction. What a driver leaves on a session
between two exchanges is then missing on the next one, or taken by another client
(``prepared statement "_pg3_0" does not exist`` or ``already exists``), or, worst,
another client's statement of the same name runs with this client's parameters
(silently, where the parameter counts match). By driver:

* psycopg 3 prepares a statement on the server and runs it by name
  (``prepare_threshold``; the engines lg_sqla creates prepare at the first execution,
  ``engines.PSYCOPG_PREPARE_THRESHOLD``). Behind a pooler: ``prepare_threshold =
  None``, every statement parsed, bound and run in one exchange.
* asyncpg names its statements (``__asyncpg_stmt_N__``, numbered per process: two
  processes use the same names) and caches them, and SQLAlchemy's adapter caches them
  too. Behind a pooler: unnamed statements only, which asyncpg then parses again in
  the exchange that binds and runs them (what it does with ``statement_cache_size=0``);
  the named ones both cached are forgotten (``internals.asyncpg_unnamed_statements``).
* pg8000 runs each statement with parameters as the unnamed one, parsed, described
  and bound in three exchanges. In a transaction (pinned to one server session) that
  is safe; in autocommit, which lg_sqla uses for a call of one statement on
  PostgreSQL, each exchange may go to another session: through PgBouncer's
  transaction mode the calls hung, or bound to another client's unnamed statement.
  Behind a pooler: an engine's connections never switch to AUTOCOMMIT (the execution
  option is dropped: each statement runs in a transaction).
* psycopg2 binds parameters on the client and sends plain queries: nothing is left
  on a session, nothing to do.

So it must be known before the first statement, not after the first error. A pooler
answers the client's connection with a backend key of its own (its cancel requests go
to the pooler), so the process id the driver was told (psycopg's
``info.backend_pid``, asyncpg's ``get_server_pid()``, pg8000's BackendKeyData) is not
the server session's ``pg_backend_pid()``. A plain TCP proxy or a port mapping passes
the server's key through: they are not told apart from a direct connection, and lose
nothing. On each new connection of the engines lg_sqla creates
(``engines.configure_engine``), one query compares the two, itself leaving nothing on
the session; behind a pooler the connection (pg8000: the engine) is switched as above
and the engine logs one warning. Session mode is safe with prepared statements but
cannot be told from transaction mode at connect: it is treated the same (a little
slower).

An engine passed in by the caller gets the same query once, on the first connection
lg_sqla's first call makes (:func:`check_first_connection`, one per pool, not per
call); behind a pooler, every connection it checks out from then on is switched
(:func:`stop_preparing`, one warning). And should a pooler's prepared-statement error
still come (:func:`is_pooler_prepare_error`: connections a pooler added later, an
engine used before lg_sqla's first call), the engine is switched the same way, the
failed connection dropped, and the call run again: the failed statement ran nothing,
and its transaction was rolled back. Where a driver cannot be switched (an asyncpg
whose internals changed), the connection is refused with an error naming the setting
that makes it safe.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.util import await_only

from lg_sqla import internals
from lg_sqla.dialects.postgresql import _sqlstate
from lg_sqla.errors import UnsupportedDriverError

logger = logging.getLogger("lg_sqla")

# The SQLSTATEs of a statement a pooler lost: invalid_sql_statement_name (the prepared
# statement is gone: another server session; asyncpg's and pg8000's unnamed one too),
# duplicate_prepared_statement (the name is taken there by another client's),
# protocol_violation (a Bind whose parameter count is not the prepared statement's).
_PREPARE_SQLSTATES = frozenset({"26000", "42P05", "08P01"})

_WARNING = (
    "lg_sqla: %s is reached through a connection pooler (PgBouncer or alike: %s); %s, "
    "which a pooler in transaction mode would hand to other clients' sessions "
    "(docs/scaling.md)."
)

# By pool (an engine's execution_options() copies share it): the engines switched
# (warned about), and those whose connections are checked, each at its connect or
# once at lg_sqla's first call.
_SWITCHED: weakref.WeakSet[Any] = weakref.WeakSet()
_CHECKED: weakref.WeakSet[Any] = weakref.WeakSet()
_CHECKING = threading.Lock()
_BACKEND_PID = "SELECT pg_backend_pid()"


@dataclass(frozen=True)
class _Driver:
    """What a pooler needs of one driver, given SQLAlchemy's DBAPI connection."""

    told_pid: Callable[[Any], int | None]  # the backend pid it was told at connect
    session_pid: Callable[[Any], int | None]  # pg_backend_pid(), nothing left behind
    at_risk: Callable[[Any], bool]  # whether the connection is still unsafe there
    switch: Callable[[Any], None]  # makes the connection safe there
    switched: str  # for the warning: what the switch does (and how to silence it)
    whole_engine: bool = False  # the switch is the engine's (pg8000: no AUTOCOMMIT)


def _driver_connection(dbapi_connection: Any) -> Any:
    # SQLAlchemy's asyncio adapter holds the driver's connection behind its public
    # ``driver_connection``; a sync psycopg or pg8000 connection is its own.
    return getattr(dbapi_connection, "driver_connection", dbapi_connection)


def _plain_query_pid(dbapi_connection: Any) -> int | None:
    """``pg_backend_pid()`` without parameters (psycopg unprepared, pg8000's simple
    query protocol), in a transaction the driver opens for it, rolled back."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(_BACKEND_PID)
        row = cursor.fetchone()
    finally:
        cursor.close()
    dbapi_connection.rollback()
    return None if row is None else int(row[0])


def _psycopg_session_pid(dbapi_connection: Any) -> int | None:
    # The query itself is not prepared (through a pooler, its name could be taken).
    driver_connection = _driver_connection(dbapi_connection)
    threshold = driver_connection.prepare_threshold
    driver_connection.prepare_threshold = None
    try:
        return _plain_query_pid(dbapi_connection)
    finally:
        driver_connection.prepare_threshold = threshold


def _psycopg_prepares(dbapi_connection: Any) -> bool:
    return _driver_connection(dbapi_connection).prepare_threshold is not None


def _psycopg_switch(dbapi_connection: Any) -> None:
    _driver_connection(dbapi_connection).prepare_threshold = None


async def _asyncpg_pid_in_transaction(connection: Any) -> int | None:
    # The unnamed statement, in a transaction: the server session is this client's
    # from its BEGIN (a simple query) to its end, and no name is left on it.
    statement = await connection.prepare(_BACKEND_PID, name="")
    pid = await statement.fetchval()
    return None if pid is None else int(pid)


async def _asyncpg_pid(connection: Any) -> int | None:
    if connection.is_in_transaction():
        return await _asyncpg_pid_in_transaction(connection)
    async with connection.transaction():
        return await _asyncpg_pid_in_transaction(connection)


def _asyncpg_session_pid(dbapi_connection: Any) -> int | None:
    # (In SQLAlchemy's greenlet: a connect event, or an owner's call, of an async engine.)
    return await_only(_asyncpg_pid(dbapi_connection.driver_connection))


def _asyncpg_told_pid(dbapi_connection: Any) -> int | None:
    pid = dbapi_connection.driver_connection.get_server_pid()
    return None if pid is None else int(pid)


def _asyncpg_switch(dbapi_connection: Any) -> None:
    if not internals.asyncpg_unnamed_statements(dbapi_connection):
        raise UnsupportedDriverError(
            "lg_sqla cannot make this asyncpg connection leave named statements alone, "
            "and it reaches PostgreSQL through a connection pooler (PgBouncer or alike), "
            "where they would reach other clients' sessions: create the engine with "
            "connect_args={'statement_cache_size': 0} (docs/scaling.md)"
        )


def _pg8000_session_pid(dbapi_connection: Any) -> int | None:
    return _plain_query_pid(dbapi_connection)


def _always(_dbapi_connection: Any) -> bool:
    return True


def _nothing(_dbapi_connection: Any) -> None:
    pass


_PSYCOPG = _Driver(
    told_pid=lambda c: int(_driver_connection(c).info.backend_pid),
    session_pid=_psycopg_session_pid,
    at_risk=_psycopg_prepares,
    switch=_psycopg_switch,
    switched=(
        "its psycopg connections do not prepare statements (prepare_threshold=None; "
        "set connect_args={'prepare_threshold': None} yourself to silence this)"
    ),
)
_DRIVERS = {
    "psycopg": _PSYCOPG,
    "psycopg_async": _PSYCOPG,
    "asyncpg": _Driver(
        told_pid=_asyncpg_told_pid,
        session_pid=_asyncpg_session_pid,
        at_risk=internals.asyncpg_caches_statements,
        switch=_asyncpg_switch,
        switched=(
            "its asyncpg connections run unnamed statements only, no named one cached "
            "(set connect_args={'statement_cache_size': 0} yourself to silence this)"
        ),
    ),
    "pg8000": _Driver(
        told_pid=internals.pg8000_backend_pid,
        session_pid=_pg8000_session_pid,
        at_risk=_always,
        switch=_nothing,
        switched=(
            "its pg8000 connections never switch to AUTOCOMMIT (pg8000 parses, describes "
            "and binds a statement in separate exchanges, each of which a pooler may "
            "send to another server session outside a transaction)"
        ),
        whole_engine=True,
    ),
}


def _behind_a_pooler(driver: _Driver, dbapi_connection: Any) -> bool:
    """One query on a new connection: whether its backend key is the server session's.
    (A driver that keeps no key it was told: not known, so not switched here; a
    pooler's error still switches the engine.)"""
    told = driver.told_pid(dbapi_connection)
    if told is None:
        return False
    session = driver.session_pid(dbapi_connection)
    return session is not None and session != told


def _drop_autocommit(_connection: Connection, options: dict[str, Any]) -> None:
    # (SQLAlchemy lets this event change the options before its dialect applies them.)
    if options.get("isolation_level") == "AUTOCOMMIT":
        del options["isolation_level"]


def _switch_engine(engine: Engine, driver: _Driver, reason: str) -> bool:
    """Mark ``engine`` switched (once: False if it was already), warn, and switch what
    is the engine's rather than its connections' (pg8000's AUTOCOMMIT)."""
    if engine.pool in _SWITCHED:
        return False
    _SWITCHED.add(engine.pool)
    url = engine.url.render_as_string(hide_password=True)
    logger.warning(_WARNING, url, reason, driver.switched)
    if driver.whole_engine:
        event.listen(engine, "set_connection_execution_options", _drop_autocommit)
    return True


def detect_poolers(engine: Engine) -> None:
    """Check each new connection of ``engine`` (an engine lg_sqla created) for a pooler
    in front, and switch it through one (see the module). Nothing on drivers that
    leave nothing on a session (psycopg2) or that are not PostgreSQL's."""
    driver = _DRIVERS.get(engine.dialect.driver)
    if driver is None:
        return
    pool = engine.pool
    _CHECKED.add(pool)

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        if pool in _SWITCHED:  # (the same URL: the same pooler, no query more)
            if driver.at_risk(dbapi_connection):
                driver.switch(dbapi_connection)
            return
        if not driver.at_risk(dbapi_connection):  # (the caller's setting: safe)
            return
        if _behind_a_pooler(driver, dbapi_connection):
            driver.switch(dbapi_connection)
            _switch_engine(engine, driver, "its backend key is not the session's")

    # First of the connect listeners: before SQLAlchemy's first-connect initialize,
    # whose queries would otherwise be prepared (and asyncpg's codecs' introspection).
    event.listen(engine, "connect", on_connect, insert=True)


def needs_check(engine: Engine) -> bool:
    """Whether ``engine``'s connections are yet to be checked for a pooler."""
    return engine.dialect.driver in _DRIVERS and engine.pool not in _CHECKED


def check_first_connection(engine: Engine, dbapi_connection: Any) -> None:
    """On an owner's first connection of ``engine``: unless its connections are
    checked already (or are safe), whether a pooler is in front; then the engine is
    switched from now on."""
    driver = _DRIVERS.get(engine.dialect.driver)
    if driver is None or engine.pool in _CHECKED:
        return
    if engine.dialect.is_async:
        # No lock: the check waits on the event loop, whose other tasks (the owners'
        # other first calls) would block its thread on the lock. Each of them checks
        # its own connection instead (the same query: nothing runs unchecked).
        _check_first_connection(engine, driver, dbapi_connection)
        return
    # Under a lock, and marked checked once done: the owners' other first calls wait
    # here rather than run a statement before the engine is switched.
    with _CHECKING:
        _check_first_connection(engine, driver, dbapi_connection)


def _check_first_connection(engine: Engine, driver: _Driver, dbapi_connection: Any) -> None:
    if engine.pool in _SWITCHED:
        if driver.at_risk(dbapi_connection):
            driver.switch(dbapi_connection)
        return
    if engine.pool in _CHECKED or not driver.at_risk(dbapi_connection):
        return  # (not at risk: the caller's setting, safe)
    if _behind_a_pooler(driver, dbapi_connection):
        driver.switch(dbapi_connection)
        stop_preparing(engine, "its backend key is not the session's")
    _CHECKED.add(engine.pool)


def is_pooler_prepare_error(engine: Engine, error: BaseException) -> bool:
    """Whether ``error`` (a driver error) is a pooler's answer to a statement left on
    a server session (also on an engine switched already: a call that checked its
    connection out before the switch)."""
    if engine.dialect.driver not in _DRIVERS:
        return False
    if _sqlstate(error) not in _PREPARE_SQLSTATES:
        return False
    return "prepared statement" in str(error)


def stop_preparing(engine: Engine, reason: str = "its prepared statements went missing") -> None:
    """Every connection ``engine`` checks out from now on is switched (see the
    module); one warning. (A checkout listener: the engine then keeps no connection
    between calls, ``runtime.kept``, so every call passes through it.)"""
    driver = _DRIVERS.get(engine.dialect.driver)
    if driver is None or not _switch_engine(engine, driver, reason):
        return

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        if driver.at_risk(dbapi_connection):
            driver.switch(dbapi_connection)

    def on_checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if driver.at_risk(dbapi_connection):
            driver.switch(dbapi_connection)

    # At connect (before SQLAlchemy's first-connect initialize), and at every checkout
    # (the connections already open).
    event.listen(engine, "connect", on_connect, insert=True)
    event.listen(engine, "checkout", on_checkout)
