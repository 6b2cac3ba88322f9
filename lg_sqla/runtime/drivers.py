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
atomicity on both paths: tests/integration/runtime/test_drivers.py and test_direct_path.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import re
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import Pool
from sqlalchemy.util.concurrency import await_only, in_greenlet

from lg_sqla import internals
from lg_sqla.dialects import NO_BACKSLASH_ESCAPES, mysql_string_literal
from lg_sqla.plans import one_row

# Undoes what an autocommit switch did, when the plan is over.
Restore = Callable[[], None]


def _isolation_level_autocommit(dialect: Dialect, dbapi_connection: Any) -> Restore:
    """Autocommit through SQLAlchemy's own dialect API (what Core's
    ``isolation_level="AUTOCOMMIT"`` does), restored to the pool's level after."""
    dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")
    return partial(dialect.reset_isolation_level, dbapi_connection)


@functools.cache
def _psycopg_binary() -> Any:
    from psycopg import pq  # only imported once a psycopg connection exists

    return pq.Format.BINARY


# A pyformat placeholder, an escaped percent sign, or a stray one.
_PYFORMAT_TOKEN = re.compile(r"%\(([^)]+)\)s|%%|%")


def _psycopg_numbered(sql: str) -> tuple[str, tuple[str, ...]] | None:
    """SQLAlchemy's pyformat SQL with PostgreSQL's own ``$1, $2`` placeholders, and the
    parameter names in their order; None if the text holds anything else.

    psycopg parses a query's ``%(name)s`` placeholders with a regular expression at
    every execute, caching the result only for queries up to 4 kB and 50 parameters:
    ``get_tuple``'s one statement is longer and paid 400 µs of client CPU per call
    for it. A raw cursor sends ``$n`` text as it is; the conversion happens here,
    once per statement.
    """
    names: dict[str, int] = {}
    stray = False

    def numbered(match: re.Match[str]) -> str:
        nonlocal stray
        name = match.group(1)
        if name is None:
            stray = stray or match.group(0) == "%"
            return "%"
        number = names.setdefault(name, len(names) + 1)
        return f"${number}"

    text = _PYFORMAT_TOKEN.sub(numbered, sql)
    return None if stray else (text, tuple(names))


@functools.cache
def _psycopg_raw_factories() -> Mapping[type, type]:
    import psycopg

    return {psycopg.Cursor: psycopg.RawCursor, psycopg.AsyncCursor: psycopg.AsyncRawCursor}


def _psycopg_cursor(dbapi_connection: Any) -> tuple[Any, bool]:
    # A raw cursor where the connection makes psycopg's default ones; a user's
    # cursor_factory (ClientCursor's client-side binding, for PgBouncer) is kept, with
    # the pyformat SQL and psycopg's text results. SQLAlchemy's async adapter keeps
    # psycopg's connection in `_connection` (and the cursor in `_cursor`), and makes
    # its cursor from that connection's factory.
    driver_connection = internals.driver_connection(dbapi_connection)
    factory = getattr(driver_connection, "cursor_factory", None)
    raw = _psycopg_raw_factories().get(factory)  # type: ignore[arg-type]
    if raw is None:
        return dbapi_connection.cursor(), False
    driver_connection.cursor_factory = raw
    try:
        cursor = dbapi_connection.cursor()
    finally:
        driver_connection.cursor_factory = factory
    # Results in binary: bytea arrives as raw bytes, not hex text for psycopg to
    # decode (15% of a get_tuple's client time on a chat thread), jsonb and integers
    # likewise. (Client-side binding cursors refuse it.)
    (internals.adapted_cursor(cursor) or cursor).format = _psycopg_binary()
    return cursor, True


def _plain_cursor(dbapi_connection: Any) -> tuple[Any, bool]:
    return dbapi_connection.cursor(), False


def _nothing_to_restore() -> None:
    pass


@functools.cache
def _psycopg_idle() -> Any:
    from psycopg import pq

    return pq.TransactionStatus.IDLE


def _psycopg_autocommit(dialect: Dialect, dbapi_connection: Any) -> Restore:
    # psycopg's autocommit flag alone, set and restored: SQLAlchemy's isolation level
    # API also sets and resets `isolation_level`, two more driver calls per plan.
    connection = internals.driver_connection(dbapi_connection)  # (async adapter)
    if connection.autocommit:
        return _nothing_to_restore
    # The flag is client-side only: psycopg's setter checks idle and no pipeline under
    # the connection's lock, through its generator machinery (callgrind: 20k
    # instructions per set and reset; on the async driver two more switches to the
    # event loop per call). A checked-out connection is this plan's alone.
    undo = internals.psycopg_autocommit_flag(connection, _psycopg_idle())
    if undo is not None:
        return undo
    dbapi_connection.autocommit = True
    return partial(setattr, dbapi_connection, "autocommit", False)


def _psycopg_own_autocommit(dialect: Dialect, dbapi_connection: Any) -> Restore:
    """``_psycopg_autocommit`` on sync psycopg, whose DBAPI connection is psycopg's own
    (no adapter to look behind): the client-side flag first, which also tells a
    connection already in autocommit (no property read, one frame less per call)."""
    undo = internals.psycopg_autocommit_flag(dbapi_connection, _psycopg_idle())
    if undo is not None:
        return undo
    if dbapi_connection.autocommit:
        return _nothing_to_restore
    dbapi_connection.autocommit = True
    return partial(setattr, dbapi_connection, "autocommit", False)


def _keeps_no_results(cursor: Any) -> bool:
    return False


# Blobs up to this size are bound as a bytearray on sqlite3 (``_sqlite_blob``).
_SQLITE_COPIED_BLOB_MAX = 65536


def _sqlite_blob(value: Any) -> Any:
    """A ``LargeBinary`` parameter for sqlite3: a small ``bytes`` as a ``bytearray``,
    anything else as SQLAlchemy binds it (a ``memoryview``; None as NULL). sqlite3
    binds both as the same BLOB, but asks its adapter protocol about every parameter
    other than an int, float, str or bytearray, which costs about 3k instructions a
    value (Python 3.11: a formatted AttributeError per lookup); the copy costs less."""
    if type(value) is bytes and len(value) <= _SQLITE_COPIED_BLOB_MAX:
        return bytearray(value)
    return None if value is None else memoryview(value)


def _pysqlite_autocommit(dialect: Dialect, dbapi_connection: Any) -> Restore:
    """sqlite3's own autocommit switch (``isolation_level = None``), restored to the
    level it had: no BEGIN before the write, no COMMIT after it. sqlite3 prepares
    both anew each time (its implicit ``BEGIN`` and ``commit()``): ~8k instructions
    of a store put's 51k of SQL; SQLAlchemy's isolation API would cost more Python
    than it saves. Setting None commits an open transaction: the direct path's
    connections have none (checked in or kept only after a commit)."""
    level = dbapi_connection.isolation_level
    if level is None:
        return _nothing_to_restore
    dbapi_connection.isolation_level = None
    return partial(setattr, dbapi_connection, "isolation_level", level)


# --- MySQL: sessions left in autocommit between plans ------------------------------
#
# A plan of one statement needs no transaction: in autocommit it is one round trip,
# where a transaction is two (the statement and its COMMIT; PyMySQLSaver and
# PyMySQLStore run in autocommit too). Switching the session per plan (``SET
# autocommit``, and back) would cost two, so a session switched on stays on: the
# next one-statement plan on it sends its statement alone, and a plan of several
# statements sends ``BEGIN`` first (``_mysql_begin``), which holds until its COMMIT.
# A session lg_sqla left in autocommit is switched back before anything else checks
# it out of the pool (SQLAlchemy Core, an application sharing the engine, lg_sqla's
# own Core path), which expect an implicit transaction (``guard_sessions``).

# The driver connections lg_sqla switched to autocommit (and has not switched back).
_LEFT_IN_AUTOCOMMIT: weakref.WeakSet[Any] = weakref.WeakSet()
# The dialects of the engines whose pools switch them back at checkout.
_GUARDED_DIALECTS: weakref.WeakSet[Dialect] = weakref.WeakSet()
# Set while the direct path checks a connection out (``direct.checkout``): it decides
# per plan. (A context variable: each asyncio task's greenlet sees its own.)
DIRECT_CHECKOUT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "lg_sqla_direct_checkout", default=False
)


def _mysql_autocommit(dialect: Dialect, dbapi_connection: Any) -> Restore:
    """A one-statement plan's session in autocommit, left so (see above); where the
    engine's pool does not switch it back at checkout (``guard_sessions`` not run), set
    and restored per plan, as SQLAlchemy's isolation level API does."""
    driver_connection = internals.driver_connection(dbapi_connection)
    if driver_connection.get_autocommit():  # (the usual case: no I/O)
        return _nothing_to_restore
    if dialect not in _GUARDED_DIALECTS:
        return _isolation_level_autocommit(dialect, dbapi_connection)
    dbapi_connection.autocommit(True)
    _LEFT_IN_AUTOCOMMIT.add(driver_connection)
    return _nothing_to_restore


def mysql_literals(params: Mapping[str, Any], escape: Callable[[Any], str]) -> dict[str, str]:
    """The SQL literal of each parameter, as PyMySQL's ``escape`` writes it (the same
    text: the server receives the same statement), cheaper for the common types: a str
    by ``mysql_string_literal`` (PyMySQL's ``str.translate`` over a list costs ~200
    instructions a character: callgrind, 108k of a 513k MariaDB put, its checkpoint
    document, metadata, keys and timestamps), ``None`` and ``int`` as it writes them,
    anything else by ``escape`` (the driver's own). Only for a session whose backslash
    escapes (``NO_BACKSLASH_ESCAPES``), which the caller checked."""
    literals = {}
    for name, value in params.items():
        kind = type(value)
        if kind is str:
            literals[name] = mysql_string_literal(value)
        elif value is None:
            literals[name] = "NULL"
        elif kind is int:
            literals[name] = str(value)
        else:
            literals[name] = escape(value)
    return literals


@functools.cache
def _pymysql_cursors() -> tuple[type, type]:
    """PyMySQL's own cursor class, and its subclass whose ``execute`` writes the
    parameters' literals itself (``mysql_literals``) and whose ``executemany`` splits
    each INSERT's SQL once (``internals.pymysql_executemany``) instead of per call."""
    from pymysql.cursors import Cursor
    from pymysql.err import ProgrammingError

    class SplitOnceCursor(Cursor):  # type: ignore[misc]
        def execute(self, query: Any, args: Any = None) -> Any:
            connection = self.connection
            if type(args) is dict and not connection.server_status & NO_BACKSLASH_ESCAPES:
                # (the SQL with its literals in place: PyMySQL sends a query without
                # parameters as it is, so the %-formatting, ``%%`` included, is done here)
                try:
                    query = query % mysql_literals(args, connection.escape)
                except TypeError as error:  # (what PyMySQL raises for it)
                    raise ProgrammingError(str(error)) from None
                return super().execute(query)
            return super().execute(query, args)

        def executemany(self, query: str, args: Any) -> Any:
            connection = self.connection
            if type(args) is list and args and not connection.server_status & NO_BACKSLASH_ESCAPES:
                rows = _pymysql_multi_row(query, args, connection, self.max_stmt_length)
                if rows is not None:
                    return super().execute(rows)
            return internals.pymysql_executemany(self, query, args, super().executemany)

    return Cursor, SplitOnceCursor


def _pymysql_multi_row(query: str, rows: Any, connection: Any, limit: int) -> bytes | None:
    """The multi-row ``INSERT`` PyMySQL's ``executemany`` would send for ``rows`` (dicts)
    of ``query`` (an ``INSERT ... VALUES``), its literals by ``mysql_literals``; None
    where PyMySQL would cut it into several statements (past ``limit`` bytes: its
    ``max_stmt_length``), or the query or rows are of another form: PyMySQL's own then."""
    parts = internals.pymysql_insert_parts(query)
    if parts is None:
        return None
    prefix, values, postfix = parts
    escape = connection.escape
    rendered = []
    for row in rows:
        if type(row) is not dict:
            return None
        try:
            rendered.append(values % mysql_literals(row, escape))
        except TypeError:  # (PyMySQL's own raises its error for it)
            return None
    sql = (prefix + ",".join(rendered) + postfix).encode(connection.encoding)
    return sql if len(sql) < limit else None


def _pymysql_cursor(dbapi_connection: Any) -> tuple[Any, bool]:
    """A plan's cursor on PyMySQL: the split-once cursor where the connection makes
    PyMySQL's plain ones (a user's ``cursorclass`` is kept)."""
    plain, split_once = _pymysql_cursors()
    if getattr(dbapi_connection, "cursorclass", None) is plain:
        return dbapi_connection.cursor(split_once), False
    return dbapi_connection.cursor(), False


def _mysql_begin(dbapi_connection: Any) -> None:
    """Before a plan of several statements (and after its COMMIT steps): ``BEGIN`` on a
    session in autocommit; without autocommit, the first statement begins one. Sent
    as the drivers' ``commit()`` sends COMMIT (their ``begin()``), not through a
    cursor, which builds a result object for it (callgrind, MariaDB: a sync ``put``
    1,015k -> 1,002k instructions, async 1,295k -> 1,283k)."""
    # (The driver's get_autocommit: SQLAlchemy's asyncmy adapter has none before 2.1.)
    driver_connection = internals.driver_connection(dbapi_connection)
    if not driver_connection.get_autocommit():
        return
    if driver_connection is dbapi_connection:  # PyMySQL
        dbapi_connection.begin()
    else:  # asyncmy behind SQLAlchemy's adapter (in its greenlet, as the adapter awaits)
        await_only(driver_connection.begin())


# PyMySQL and asyncmy send an executemany of ``INSERT ... VALUES`` as one multi-row
# INSERT, cut into several where its SQL would pass this many characters (their
# cursors' ``max_stmt_length`` default).
_MYSQL_STATEMENT_MAX = 1024000
# Characters a value takes in that SQL at most, beyond twice its own length (escapes
# or hex digits; quotes, ``_binary``, the comma).
_MYSQL_VALUE_OVERHEAD = 32


def _mysql_one_statement(params: Any) -> bool:
    """Whether a step's parameters reach the server as one statement: one row, or rows
    whose multi-row INSERT is surely not cut (see above)."""
    if params is None or isinstance(params, Mapping) or len(params) <= 1:
        return True
    length = 0
    for row in params:
        for value in row.values():
            length += _MYSQL_VALUE_OVERHEAD
            if isinstance(value, (str, bytes)):
                length += 2 * len(value)
        if length > _MYSQL_STATEMENT_MAX // 2:  # (the SQL text itself: the other half)
            return False
    return True


def _out_of_autocommit(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """Pool ``checkout`` listener: a session lg_sqla left in autocommit is switched back
    for any checkout but the direct path's. A dead one is replaced (SQLAlchemy's pool
    takes a ``DisconnectionError`` here as "try another connection")."""
    if DIRECT_CHECKOUT.get():
        return
    driver_connection = internals.driver_connection(dbapi_connection)
    if driver_connection not in _LEFT_IN_AUTOCOMMIT:
        return
    _LEFT_IN_AUTOCOMMIT.discard(driver_connection)
    try:
        dbapi_connection.autocommit(False)
    except Exception as error:
        raise DisconnectionError(f"could not end autocommit: {error}") from error


def guard_sessions(engine: Engine) -> None:
    """On a MySQL-family engine of the direct path's drivers, let one-statement plans
    leave their sessions in autocommit: the pool switches them back at any other
    checkout. Once per engine's pool."""
    driver = direct_driver(engine.dialect)
    if driver is None or driver.begin is None:
        return
    pool = engine.pool
    # Asked of the pool's own listeners, not ``event.contains``: SQLAlchemy's registry
    # knows a listener by its target's id(), which a pool recreated by
    # ``engine.dispose()`` keeps from the old pool; a new pool at the address the old
    # one freed then looked guarded, got no guard, and its sessions stayed in
    # autocommit for everyone (an application's rolled-back DELETE was committed).
    if _out_of_autocommit not in pool.dispatch.checkout:
        event.listen(pool, "checkout", _out_of_autocommit)
    _GUARDED_DIALECTS.add(engine.dialect)


def session_guards_only(listeners: Iterable[Any]) -> bool:
    """Whether a pool's checkout ``listeners`` are ``guard_sessions``' alone (or none)."""
    return all(listener is _out_of_autocommit for listener in listeners)


@dataclass(frozen=True)
class DirectDriver:
    """What the direct path does differently on one driver."""

    # Puts the DBAPI connection in autocommit for a one-statement plan
    # (``DialectOps.autocommit_single_statements``); returns what undoes it.
    autocommit: Callable[[Dialect, Any], Restore] = _isolation_level_autocommit
    # The driver's native form of a compiled statement's SQL and the order of its
    # parameters (None: it has none, or not for this SQL).
    native_form: Callable[[str], tuple[str, tuple[str, ...]] | None] | None = None
    # Opens (and sets up) the cursor of a plan; True: it takes statements in their
    # native form.
    open_cursor: Callable[[Any], tuple[Any, bool]] = _plain_cursor
    # True: ``open_cursor`` is ``_plain_cursor`` (the DBAPI's own cursor, as it is),
    # which the direct path then calls itself.
    plain_cursors: bool = True
    # The cursor of a plan that only wrote is kept with its connection for the next
    # plan on it (``runtime.direct``). psycopg builds a cursor's adapters map and
    # its parameter dumpers anew per cursor: opening one, executing a small
    # put_writes' statement and closing it took 134k client instructions, the
    # execute on a kept cursor 89k (callgrind; the whole call was 362k).
    keeps_cursors: bool = False
    # Drops a read's rows from its cursor, so that cursor may be kept too; False: it
    # cannot, and the cursor is closed.
    drop_results: Callable[[Any], bool] = _keeps_no_results
    # Sessions stay in autocommit between plans (MySQL, see ``_mysql_autocommit``):
    # one-statement plans run without a transaction whatever the dialect's
    # ``autocommit_single_statements``, and this begins the transaction of the others
    # (``begin(dbapi_connection)``, before their first statement and after each
    # COMMIT step). None: the connection's transactions begin implicitly.
    begin: Callable[[Any], None] | None = None
    # Whether a one-statement plan's parameters (a row, or rows for executemany) are
    # sent as one statement by the driver, so autocommit keeps it atomic; False: the
    # plan runs in a transaction. By default one row only (``plans.one_row``).
    one_statement: Callable[[Any], bool] = one_row
    # A plan of one write statement (``Step.whole_plan``, not fetching; one statement
    # as ``one_statement`` judges) runs in autocommit, whatever the dialect's
    # ``autocommit_single_statements`` (which also takes reads there, and the lean
    # path away): sqlite3, whose transaction control statements cost more than its
    # write (``_pysqlite_autocommit``).
    autocommits_lone_writes: bool = False
    # Binds a ``LargeBinary`` parameter in place of SQLAlchemy's bind processor
    # (``runtime.direct.compile_direct``); None: SQLAlchemy's.
    blob: Callable[[Any], Any] | None = None


_PLAIN = DirectDriver()
_SQLITE = DirectDriver(blob=_sqlite_blob)
# (sync sqlite3 only: aiosqlite's adapter switches in its thread, for a greenlet switch)
_PYSQLITE = replace(
    _SQLITE,
    autocommit=_pysqlite_autocommit,
    autocommits_lone_writes=True,
)
# Drops a read's rows so its cursor may be kept (``keeps_cursors``); False, and the
# cursor is closed as before, where it cannot (``internals``).
_PSYCOPG = DirectDriver(
    autocommit=_psycopg_autocommit,
    native_form=_psycopg_numbered,
    open_cursor=_psycopg_cursor,
    plain_cursors=False,
    keeps_cursors=True,
    drop_results=internals.psycopg_drop_results,
)
# Sync psycopg (``direct_driver``): its connections and cursors are psycopg's own.
_PSYCOPG_OWN = replace(
    _PSYCOPG,
    autocommit=_psycopg_own_autocommit,
    drop_results=internals.psycopg_drop_own_results,
)

_MYSQL = DirectDriver(
    autocommit=_mysql_autocommit, begin=_mysql_begin, one_statement=_mysql_one_statement
)
_PYMYSQL = replace(_MYSQL, open_cursor=_pymysql_cursor, plain_cursors=False)

DIRECT_DRIVERS: Mapping[tuple[str, str], DirectDriver] = {
    ("sqlite", "pysqlite"): _PYSQLITE,
    # (SQLAlchemy's asyncio adapter gives aiosqlite, psycopg and asyncmy a DBAPI face.)
    ("sqlite", "aiosqlite"): _SQLITE,
    ("postgresql", "psycopg"): _PSYCOPG,  # (sync psycopg: _PSYCOPG_OWN, see direct_driver)
    ("postgresql", "psycopg_async"): _PSYCOPG,
    ("mysql", "pymysql"): _PYMYSQL,
    ("mysql", "asyncmy"): _MYSQL,
    ("mariadb", "pymysql"): _PYMYSQL,
    ("mariadb", "asyncmy"): _MYSQL,
}


def direct_driver(dialect: Dialect) -> DirectDriver | None:
    """The direct path's settings for ``dialect``'s driver; None: not on the allowlist."""
    driver = DIRECT_DRIVERS.get((dialect.name, dialect.driver))
    if driver is _PSYCOPG and not dialect.is_async:
        # SQLAlchemy's async psycopg dialect names its driver "psycopg" too: only the
        # sync one's connections and cursors are psycopg's own, no adapter's.
        return _PSYCOPG_OWN
    return driver


# --- connections a failed call leaves unusable -------------------------------------
# SQLAlchemy's ``Dialect.is_disconnect`` judges the *error* a call raised; these judge
# the *connection* after it, without I/O. Each covers a state the error's text does
# not reveal, in which every later statement on that connection fails before it
# reaches the server, so the pool would hand out a connection that never recovers:


def _psycopg_unusable(dbapi_connection: Any) -> bool:
    # libpq left in pipeline mode: psycopg's executemany runs in a pipeline, and when
    # the server ends the session while it is sending, libpq cannot leave pipeline
    # mode ("cannot exit pipeline mode while busy"); psycopg drops the pipeline but
    # libpq stays in it without seeing the closed socket (status OK, so psycopg's
    # ``broken`` is False), and each later BEGIN or ROLLBACK fails on the client
    # ("PQsendQuery not allowed in pipeline mode"). Also: a status other than OK, or
    # a command still in progress after the call ended.
    connection = internals.driver_connection(dbapi_connection)  # (async adapter)
    pgconn = getattr(connection, "pgconn", None)
    if pgconn is None:
        return False
    return bool(
        pgconn.status != 0  # ConnStatus.OK
        or pgconn.pipeline_status != 0  # PipelineStatus.OFF (no call ends inside one)
        or pgconn.transaction_status in (1, 4)  # TransactionStatus.ACTIVE, UNKNOWN
    )


def _asyncmy_unusable(dbapi_connection: Any) -> bool:
    # asyncmy closes its socket when a read is cancelled ("Cancelled during
    # execution") and from then on raises InterfaceError(0, ...) on every call, an
    # error SQLAlchemy's asyncmy dialect does not count as a disconnect.
    connection = internals.driver_connection(dbapi_connection)
    return getattr(connection, "connected", True) is False


def _asyncpg_unusable(dbapi_connection: Any) -> bool:
    connection = internals.driver_connection(dbapi_connection)
    is_closed = getattr(connection, "is_closed", None)
    return bool(is_closed()) if callable(is_closed) else False


# By SQLAlchemy's ``dialect.driver``.
_UNUSABLE: Mapping[str, Callable[[Any], bool]] = {
    "psycopg": _psycopg_unusable,
    "psycopg_async": _psycopg_unusable,
    "asyncmy": _asyncmy_unusable,
    "asyncpg": _asyncpg_unusable,
}


def left_unusable(dialect: Dialect, dbapi_connection: Any) -> bool:
    """Whether a call that failed left ``dbapi_connection`` unable to run another
    statement (see above); False for drivers with no such state known, and when the
    driver's objects lack what is read (nothing is assumed of them)."""
    check = _UNUSABLE.get(dialect.driver)
    if check is None or dbapi_connection is None:
        return False
    try:
        return check(dbapi_connection)
    except Exception:  # a driver release that changed these attributes
        return False


# --- aiosqlite: a connection closed mid-statement keeps its transaction -------------
#
# A cancelled task leaves aiosqlite's statement running in the connection's thread,
# and the sqlite3 cursor it runs on reachable from the CancelledError's traceback.
# SQLAlchemy then invalidates the connection, and its terminate() closes it: the
# close waits for the statement, but sqlite3 closes with sqlite3_close_v2, which
# leaves a connection with an unfinalized statement open as a "zombie" until that
# statement is finalized (when the garbage collector frees the cursor). A zombie
# that had begun writing keeps its transaction and SQLite's write lock: every later
# writer of the file met SQLITE_BUSY for the whole busy_timeout (30 s), and failed
# with "database is locked" when no collection came within it. Ending the
# transaction first leaves the zombie with no lock.

_GUARDED: weakref.WeakSet[Pool] = weakref.WeakSet()


def guard_invalidation(engine: Engine) -> None:
    """On an aiosqlite engine, make every invalidation of a pooled connection roll
    its transaction back before SQLAlchemy closes it; once per pool."""
    dialect = engine.dialect
    if (dialect.name, dialect.driver) != ("sqlite", "aiosqlite") or engine.pool in _GUARDED:
        return
    _GUARDED.add(engine.pool)
    event.listen(engine.pool, "invalidate", _roll_back_before_close)


def _roll_back_before_close(dbapi_connection: Any, _record: Any, _error: Any) -> None:
    """The ROLLBACK queues behind the statement still running in aiosqlite's thread,
    and the close behind it. Awaited shielded (as terminate() awaits its close): a
    second cancellation ends the wait, not the ROLLBACK. Outside a greenlet (the
    garbage collector's clean-up) nothing can be awaited, and nothing ran there."""
    if not in_greenlet():
        return
    driver_connection = getattr(dbapi_connection, "driver_connection", None)
    if driver_connection is None:
        return
    with contextlib.suppress(Exception):  # (already closed: nothing is held)
        await_only(asyncio.shield(driver_connection.rollback()))
