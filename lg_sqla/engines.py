"""Engine set-up for engines lg_sqla creates itself (``from_conn_string``).

Engines passed in by the caller are used as they are: their owner decides.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, Literal, TypeVar, cast

from sqlalchemy import event, pool
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.exc import NoSuchModuleError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import await_only

from lg_sqla.dialects import (
    MYSQL_CONNECTION_CHARSET,
    NO_BACKSLASH_ESCAPES,
    mysql_string_literal,
    ops_for,
)
from lg_sqla.dialects.poolers import detect_poolers
from lg_sqla.errors import InvalidInputError, MissingDriverError

SQLITE_BUSY_TIMEOUT_MS = 30_000
SqliteSynchronous = Literal["EXTRA", "FULL", "NORMAL", "OFF"]

E = TypeVar("E", Engine, AsyncEngine)


def _sqlite_pragmas(
    synchronous: SqliteSynchronous,
    sleep: Callable[[float], None],
    dbapi_connection: Any,
    _record: Any,
) -> None:
    cursor = dbapi_connection.cursor()
    try:
        # busy_timeout first: a connection that meets a lock held by another one
        # (a writer, another connection switching the file to WAL) waits for it instead
        # of failing at once with "database is locked"; it covers the statements below.
        # (The driver's connect() already waits 5 s by default, its `timeout`, which a
        # caller's connect_args may set to 0.)
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # WAL: readers never block the writer.
        _switch_to_wal(cursor, sleep)
        # FULL (SQLite's default, and the official SqliteSaver's): a commit is on disk
        # when put() returns, power loss included. NORMAL skips that fsync in WAL
        # mode (faster writes; the last commits can be lost in a power cut, never
        # in an application crash): an explicit choice, never our default.
        cursor.execute(f"PRAGMA synchronous={synchronous}")
    finally:
        cursor.close()


# The pause between two attempts of the switch to WAL grows to this (jittered).
_WAL_SWITCH_MAX_PAUSE_S = 0.05


def _switch_to_wal(cursor: Any, sleep: Callable[[float], None]) -> None:
    """``PRAGMA journal_mode=WAL``, tried again while SQLite answers SQLITE_BUSY.

    The busy timeout does not cover the switch of a file still in rollback-journal
    mode (a new file). SQLite makes the switch in two steps: a read transaction to
    look at the file header (a shared lock), then a write transaction in it to set
    WAL there (the reserved lock, then the exclusive one to commit). SQLite calls
    the busy handler only for a connection that has no transaction open yet
    (``sqlite3BtreeBeginTrans``); one that already holds a shared lock and finds the
    reserved lock taken gets SQLITE_BUSY at once, because waiting could deadlock:
    the holder of the reserved lock (another connection making the same switch)
    waits for every shared lock to go before it can commit. sqlite3_busy_handler's
    documentation: "If SQLite determines that invoking the busy handler could
    result in a deadlock, it will go ahead and return SQLITE_BUSY to the
    application instead of invoking the busy handler." Several threads or processes
    opening one new file together met this in 4 to 8% of their starts
    (tests/integration/runtime/test_sqlite_first_connections.py). The failed statement has
    released its locks, so running it again is safe, and it soon succeeds: once one
    connection has switched the file (WAL is persistent), the pragma finds it in WAL
    mode and takes no write lock. Bounded by the busy timeout.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except Exception as error:
            if not _is_sqlite_busy(error) or time.monotonic() + pause > deadline:
                raise
        sleep(random.uniform(pause / 2, pause))
        pause = min(pause * 2, _WAL_SWITCH_MAX_PAUSE_S)


_SQLITE_BUSY = 5  # the primary result code (the extended ones keep it in the low byte)


def _is_sqlite_busy(error: Exception) -> bool:
    code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+
    if isinstance(code, int):
        return code & 0xFF == _SQLITE_BUSY
    return "database is locked" in str(error)


def _greenlet_sleep(seconds: float) -> None:
    """A pause in a connect hook of an async engine: it runs in SQLAlchemy's greenlet
    on the event loop's thread, where ``time.sleep`` would stop every other task."""
    await_only(asyncio.sleep(seconds))


def _asyncmy_literal(connection: Any, literal: Callable[[Any], str], value: Any) -> str:
    """asyncmy's ``Connection.literal`` for str and bytes, with C-speed escaping.

    asyncmy (0.2) escapes in Cython loops: a 23 KB blob took 1.1 ms (47 µs/KB, every
    non-ASCII byte goes through a surrogate and a failed table lookup), a 46 KB
    ASCII string 0.19 ms; a put of the benchmark's chat workload spent more client
    CPU escaping than anything else. Here: bytes as a hex literal (what PyMySQL
    sends, 17 µs for 23 KB) and str by ``mysql_string_literal`` (the same text as
    asyncmy's escape table, without a lookup per character). Everything else, and
    servers in NO_BACKSLASH_ESCAPES mode, keep asyncmy's code.
    """
    if type(value) is bytes:
        return f"_binary X'{value.hex()}'"
    if type(value) is str and not connection.server_status & NO_BACKSLASH_ESCAPES:
        return mysql_string_literal(value)
    return literal(value)


def _fast_asyncmy_escaping(dbapi_connection: Any, _record: Any) -> None:
    driver_connection = dbapi_connection.driver_connection  # SQLAlchemy's asyncio adapter
    driver_connection.literal = partial(
        _asyncmy_literal, driver_connection, driver_connection.literal
    )


# The driver lg_sqla uses when a URL names none (`postgresql://`, `mysql://`): the
# ones its extras install, not SQLAlchemy's defaults (psycopg2, mysqlclient).
# mysqlclient (C) against PyMySQL (pure Python) under lg_sqla's sync saver, measured
# on MariaDB (chat workload replayed, 10 interleaved repeats): 9-20% less client CPU
# per call, 4-7% less wall time, and a graph turn no faster; it needs a C build, so
# `mysql://` stays on PyMySQL (a `mysql+mysqldb://` URL is used as it is).
_DEFAULT_DRIVERS = {
    # backend: (sync driver, async driver)
    "postgresql": ("psycopg", "psycopg"),
    "mysql": ("pymysql", "asyncmy"),
    "mariadb": ("pymysql", "asyncmy"),
    "sqlite": ("pysqlite", "aiosqlite"),
}
# The extra that installs each driver's module (ModuleNotFoundError.name).
_EXTRAS = {
    "psycopg": "postgres",
    "pymysql": "mysql",
    "asyncmy": "async",
    "aiosqlite": "async",
}


def saver_url(url: str, *, is_async: bool) -> str:
    """The URL ``from_conn_string`` opens: a URL without a driver gets lg_sqla's.

    ``postgres://`` (what Heroku-style platforms and LangGraph's ``PostgresSaver``
    take) and ``postgresql://`` open with psycopg 3, ``mysql://`` / ``mariadb://``
    with PyMySQL (asyncmy for the async saver), ``sqlite://`` with aiosqlite for
    the async saver. A URL naming its driver is kept as it is.
    """
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    parsed = make_url(url)
    drivers = _DEFAULT_DRIVERS.get(parsed.get_backend_name())
    if "+" in parsed.drivername or drivers is None:
        return url
    if parsed.get_backend_name() == "sqlite" and not is_async:
        return url
    driver = drivers[1] if is_async else drivers[0]
    return parsed.set(drivername=f"{parsed.drivername}+{driver}").render_as_string(
        hide_password=False
    )


@contextmanager
def driver_hint(url: str) -> Iterator[None]:
    """Turn a missing driver module into an error naming the extra that installs it."""
    try:
        yield
    except ModuleNotFoundError as error:
        extra = _EXTRAS.get((error.name or "").split(".")[0])
        install = f'pip install "lg_sqla[{extra}]"' if extra else f"install {error.name!r}"
        raise MissingDriverError(
            f"the database driver for {make_url(url).drivername!r} is not installed "
            f"(no module {error.name!r}): {install}"
        ) from error
    except NoSuchModuleError as error:
        raise MissingDriverError(
            f"SQLAlchemy has no dialect for {make_url(url).drivername!r}: {error}"
        ) from error


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
    * PostgreSQL with psycopg: statements are prepared on their first execution
      on a connection (``PSYCOPG_PREPARE_THRESHOLD``).
    * A SQLite file: the pool hands out the connection returned last. SQLite drops
      a connection's page cache whenever another connection wrote, so reads and
      writes that follow each other on one connection find their pages cached
      (writers, serialized by the writer lock, hand theirs to the next one).
      Callers that overlap still get connections of their own. (Where the engine's
      pool is a queue: not aiosqlite's NullPool of SQLAlchemy 2.0.30.)
    """
    options = {"pool_reset_on_return": None, **options}
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() in _PSYCOPG:
        options["connect_args"] = _psycopg_connect_args(options.get("connect_args", {}))
    if (
        parsed.get_backend_name() in _CHARSET_DRIVERS
        and parsed.get_driver_name() in _CHARSET_DRIVERS[parsed.get_backend_name()]
    ):
        # Text as it is stored (utf8mb4): a ?charset= of the URL (latin1, utf8) would
        # turn other characters into "?" (dialects.mysql.check_session_charset).
        # Over the URL's query, under connect_args the caller passes.
        charset = {"charset": MYSQL_CONNECTION_CHARSET}
        options["connect_args"] = {**charset, **options.get("connect_args", {})}
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        options = {"poolclass": pool.StaticPool, **options}
        connect_args = {"check_same_thread": False, **options.get("connect_args", {})}
        options["connect_args"] = connect_args
    elif parsed.get_backend_name() == "sqlite" and "pool" not in options:
        dialect = cast("type[DefaultDialect]", parsed.get_dialect())
        poolclass = options.get("poolclass") or dialect.get_pool_class(parsed)
        # Only a queue pool takes the option: SQLAlchemy 2.0.30 opens aiosqlite files
        # with a NullPool (a new connection per checkout), 2.1 with a queue pool.
        if isinstance(poolclass, type) and issubclass(poolclass, pool.QueuePool):
            options = {"pool_use_lifo": True, **options}
    return options


_PSYCOPG = ("psycopg", "psycopg_async")
# The MySQL drivers whose connect() takes charset= (MariaDB Connector/Python has none:
# it is always utf8mb4).
_MYSQL_CHARSET_DRIVERS = frozenset({"pymysql", "mysqldb", "asyncmy", "aiomysql"})
_CHARSET_DRIVERS = {"mysql": _MYSQL_CHARSET_DRIVERS, "mariadb": _MYSQL_CHARSET_DRIVERS}
# psycopg prepares a statement on its first execution on a connection (one extra
# round trip, once) instead of its 6th. lg_sqla's pool spreads the calls over its
# connections (LangGraph writes from background threads while the next step
# reads), so with psycopg's default many calls were parsed anew. In the graph
# benchmark (same run, medians of 3): get_state on a long thread 3.05 -> 1.85 ms,
# its full history 143 -> 98 ms (the official saver, on one connection: 1.80 and
# 85). psycopg keeps at most 100 prepared statements per connection (the least
# recently used are deallocated).
PSYCOPG_PREPARE_THRESHOLD = 0
# (PostgreSQL still plans the first five executions of a prepared statement with
# the values, then keeps a generic plan where it is not worse. Forcing generic
# plans from the first execution, plan_cache_mode=force_generic_plan, made
# get_tuple faster but a whole thread's history twice as slow: measured, rejected.)


def _psycopg_connect_args(connect_args: dict[str, Any]) -> dict[str, Any]:
    """psycopg connection arguments of the engines lg_sqla creates (the caller's win)."""
    return {"prepare_threshold": PSYCOPG_PREPARE_THRESHOLD, **connect_args}


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


def configure_engine(engine: E, *, sqlite_synchronous: SqliteSynchronous = "FULL") -> E:
    """Apply lg_sqla's per-dialect connection settings to an engine it owns.

    On SQLite, every new connection gets a 30 s ``busy_timeout``,
    ``journal_mode=WAL`` (the switch of a new file tried again while another
    connection holds its lock, see ``_switch_to_wal``) and ``synchronous=FULL``
    (durable commits). Pass
    ``sqlite_synchronous="NORMAL"`` to trade the durability of the last commits
    on power loss for faster writes. asyncmy connections escape str and bytes
    parameters at C speed (``_asyncmy_literal``). A psycopg, asyncpg or pg8000
    connection that reaches PostgreSQL through a pooler (PgBouncer) leaves no
    statement on a server session (``dialects.poolers``; one query per new
    connection until one finds a pooler, none where the caller's settings are safe
    there, e.g. ``prepare_threshold=None``).
    """
    if sqlite_synchronous not in ("EXTRA", "FULL", "NORMAL", "OFF"):
        raise ValueError(
            "sqlite_synchronous must be one of EXTRA, FULL, NORMAL, OFF; "
            f"got {sqlite_synchronous!r}"
        )
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    if sync_engine.dialect.name == "sqlite":
        sleep = _greenlet_sleep if sync_engine.dialect.is_async else time.sleep
        event.listen(sync_engine, "connect", partial(_sqlite_pragmas, sqlite_synchronous, sleep))
    if sync_engine.dialect.driver == "asyncmy":
        event.listen(sync_engine, "connect", _fast_asyncmy_escaping)
    # PgBouncer in front: nothing left on a server session (psycopg, asyncpg, pg8000).
    detect_poolers(sync_engine)
    return engine


def in_schema(engine: E, schema: str | None) -> E:
    """``engine`` with lg_sqla's tables (and version table) in ``schema``.

    Our models have no schema; SQLAlchemy's ``schema_translate_map`` renders them
    as ``schema.checkpoints`` on every statement of the returned engine, which
    shares the original's pool. A PostgreSQL schema; a database on MySQL/MariaDB.
    """
    if schema is None:
        return engine
    if not isinstance(schema, str) or not schema or len(schema) > 63:
        raise InvalidInputError(f"schema must be a name of 1 to 63 characters, got {schema!r}")
    if not ops_for(engine.dialect).supports_schemas:
        raise InvalidInputError(
            f"schema= needs PostgreSQL or MySQL/MariaDB; {engine.dialect.name} has no schemas "
            "lg_sqla can use (use another database file instead)"
        )
    return engine.execution_options(schema_translate_map={None: schema})
