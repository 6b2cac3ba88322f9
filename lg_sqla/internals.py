"""The one cupboard of foreign internals: every private name of SQLAlchemy, its
asyncio adapters, a driver or LangGraph that lg_sqla reads or writes is here.

Each is behind a named accessor with a safe default: where a release lacks the
internal, or has changed it, the accessor answers what keeps calls correct (run
through Core, keep no connection, skip an optimisation), never an error. The
probe (:func:`missing_internals`, asked once per process) lists every one of them,
checks those it can check without a connection, and logs what it found missing;
:func:`direct_path_blocked` turns the direct path off when one it needs is missing.
``tests/unit/test_internals.py`` fails when any other module of lg_sqla touches a
foreign private name, and checks each accessor's default.

Where a public form exists, it is used instead (``compiler.process`` for
``_compiler_dispatch``, an adapted connection's ``driver_connection`` for
``_connection``). This module imports nothing of lg_sqla.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import sqlalchemy
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import Pool, PoolProxiedConnection

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Internal:
    """One foreign private name, what it serves, and what happens without it."""

    owner: str  # who defines it, e.g. "sqlalchemy Engine"
    name: str
    serves: str
    without: str
    direct_path: bool = False  # the direct path needs it: missing, every call runs on Core


# Every foreign private name lg_sqla touches (the test keeps this list complete).
INTERNALS: tuple[Internal, ...] = (
    Internal("sqlalchemy Engine", "_has_events", "see ConnectionEvents listeners", "Core", True),
    Internal("sqlalchemy Connection", "_has_events", "see listeners on Connection", "Core", True),
    Internal(
        "sqlalchemy Engine",
        "_execution_options",
        "an engine's options at every call, without get_execution_options()'s frame",
        "get_execution_options()",
    ),
    Internal(
        "sqlalchemy Connection",
        "_handle_dbapi_exception",
        "wrap a direct-path DBAPI error, invalidate a dead connection",
        "Core",
        True,
    ),
    Internal(
        "sqlalchemy Connection",
        "_handle_dbapi_exception_noconnection",
        "wrap a checkout's or a session setting's DBAPI error",
        "DBAPIError.instance (public)",
        True,
    ),
    Internal(
        "sqlalchemy Compiled", "_bind_processors", "bind processors of a statement", "Core", True
    ),
    Internal(
        "sqlalchemy PoolProxiedConnection",
        "_close_special",
        "check in without the reset ROLLBACK after a commit",
        "close() (one ROLLBACK more)",
    ),
    Internal("sqlalchemy Pool", "_pre_ping", "whether a kept connection is safe", "keep none"),
    Internal("sqlalchemy Pool", "_recycle", "whether a kept connection is safe", "keep none"),
    Internal(
        "sqlalchemy PoolProxiedConnection",
        "_connection_record",
        "whether a kept connection is outdated",
        "not outdated (a dead one fails once, retried)",
    ),
    Internal(
        "sqlalchemy Pool",
        "_invalidate_time",
        "whether a kept connection is outdated",
        "not outdated (a dead one fails once, retried)",
    ),
    Internal(
        "CPython",
        "_md5",
        "the key hash: CPython's own MD5 (the same digest), ~2.6k instructions a new key "
        "fewer than OpenSSL's through hashlib",
        "hashlib.md5",
    ),
    Internal(
        "sqlalchemy event.attr",
        "_EmptyListener",
        "a kept connection's check of the pool's listeners, fewer reads per call",
        "every listener attribute read at every call (as before)",
    ),
    Internal(
        "sqlalchemy FromClause",
        "_from_objects",
        "tell the FROM linter about an ordered join's edge",
        "the clause itself",
    ),
    Internal(
        "sqlalchemy asyncio adapter cursor",
        "_cursor",
        "psycopg's cursor behind the adapter (binary results)",
        "text results",
    ),
    Internal("psycopg Connection", "_autocommit", "set autocommit client-side", "the setter"),
    Internal("psycopg Connection", "_pipeline", "set autocommit client-side", "the setter"),
    Internal("psycopg Cursor", "_reset", "keep a read's cursor", "close it"),
    Internal(
        "asyncpg Connection",
        "_stmt_cache_enabled",
        "asyncpg behind a pooler: unnamed statements, parsed with each execution",
        "refused behind a pooler (UnsupportedDriverError naming connect_args)",
    ),
    Internal(
        "asyncpg Connection",
        "_stmt_cache",
        "asyncpg behind a pooler: its named statements forgotten",
        "refused behind a pooler (UnsupportedDriverError naming connect_args)",
    ),
    Internal(
        "sqlalchemy asyncpg adapter",
        "_prepared_statement_cache",
        "asyncpg behind a pooler: its named statements forgotten",
        "refused behind a pooler (UnsupportedDriverError naming connect_args)",
    ),
    Internal(
        "sqlalchemy asyncpg adapter",
        "_prepared_statement_name_func",
        "asyncpg behind a pooler: statements left unnamed",
        "refused behind a pooler (UnsupportedDriverError naming connect_args)",
    ),
    Internal(
        "pg8000 Connection",
        "_backend_key_data",
        "tell a pooler in front of PostgreSQL from the server (its backend pid)",
        "no check at connect (pg8000 keeps AUTOCOMMIT behind a pooler: unsafe there)",
    ),
    Internal(
        "PyMySQL Cursor",
        "_do_execute_many",
        "an executemany's multi-row INSERT without matching its SQL per call",
        "executemany (a regular expression per call)",
    ),
    Internal(
        "langgraph.store.base",
        "_validate_namespace_labels",
        "BaseStore.get's own checks in SQLAlchemyStore.get",
        "BaseStore.get",
    ),
    Internal(
        "langgraph.store.base",
        "_ensure_refresh",
        "BaseStore.get's own checks in SQLAlchemyStore.get",
        "BaseStore.get",
    ),
    Internal(
        "langgraph.store.base",
        "_validate_namespace",
        "BaseStore.put's own checks in SQLAlchemyStore.put",
        "BaseStore.put",
    ),
    Internal(
        "langgraph.store.base",
        "_ensure_ttl",
        "BaseStore.put's own checks in SQLAlchemyStore.put",
        "BaseStore.put",
    ),
    Internal(
        "langgraph.checkpoint.serde.types",
        "_DeltaSnapshot",
        "a DeltaChannel snapshot's value given unwrapped to a state migration function",
        "the snapshot given as stored",
    ),
)


# --- the probe ------------------------------------------------------------------------


@functools.cache
def missing_internals() -> tuple[str, ...]:
    """The internals of :data:`INTERNALS` this process lacks or finds changed, as
    ``"owner.name"``; asked once, logged once. Instance attributes that exist only on
    a live connection (psycopg's) are checked at each use instead."""
    missing = tuple(f"{i.owner}.{i.name}" for i in INTERNALS if not _present(i))
    if missing:
        logger.warning(
            "lg_sqla: SQLAlchemy %s lacks %s; the optimisations they serve are off "
            "(calls stay correct, somewhat slower)",
            sqlalchemy.__version__,
            ", ".join(missing),
        )
    return missing


@functools.cache
def direct_path_blocked() -> str | None:
    """The first missing internal the direct path needs, or None: with one missing,
    every plan runs through SQLAlchemy Core."""
    missing = set(missing_internals())
    for internal in INTERNALS:
        if internal.direct_path and f"{internal.owner}.{internal.name}" in missing:
            return f"{internal.owner}.{internal.name}"
    return None


def _present(internal: Internal) -> bool:
    checks: dict[str, Callable[[], bool]] = {
        "_has_events": lambda: (
            isinstance(getattr(Engine, "_has_events", None), bool)
            and isinstance(getattr(Connection, "_has_events", False), bool)
        ),
        "_handle_dbapi_exception": lambda: callable(
            getattr(Connection, "_handle_dbapi_exception", None)
        ),
        "_handle_dbapi_exception_noconnection": lambda: callable(
            getattr(Connection, "_handle_dbapi_exception_noconnection", None)
        ),
        "_bind_processors": _compiled_shape_present,
        "_validate_namespace_labels": lambda: langgraph_get_checks() is not None,
        "_ensure_refresh": lambda: langgraph_get_checks() is not None,
        "_validate_namespace": lambda: langgraph_put_checks() is not None,
        "_ensure_ttl": lambda: langgraph_put_checks() is not None,
        "_DeltaSnapshot": lambda: langgraph_delta_snapshot() is not None,
        "_md5": _builtin_md5_present,
        "_execution_options": lambda: isinstance(
            getattr(Engine, "_execution_options", None), Mapping
        ),
        "_EmptyListener": lambda: isinstance(
            getattr(_sa_event_attr(), "_EmptyListener", None), type
        ),
    }
    check = checks.get(internal.name)
    return check() if check is not None else True


def _builtin_md5_present() -> bool:
    """``shared.key_hash``'s MD5 (it imports ``_md5`` itself: the bottom layer imports
    nothing of lg_sqla); without it, ``hashlib.md5``."""
    try:
        module = importlib.import_module("_md5")  # (no typeshed stub)
    except ImportError:
        return False
    return callable(getattr(module, "md5", None))


def _compiled_shape_present() -> bool:
    """A statement with a bind processor (SQLite stores DateTime as text), compiled as
    the direct path compiles: what it reads must be there, shaped as expected."""
    from sqlalchemy.dialects import sqlite

    probe = sqlalchemy.select(
        sqlalchemy.bindparam("when", type_=sqlalchemy.DateTime()), sqlalchemy.literal(1)
    )
    compiled: Any = probe.compile(dialect=sqlite.dialect())
    for name in ("literal_execute_params", "post_compile_params", "escaped_bind_names"):
        if not hasattr(compiled, name):
            return False
    processors = bind_processors(compiled)
    if processors is None or not callable(processors.get("when")):
        return False
    binds = getattr(compiled, "binds", None)
    if not isinstance(binds, Mapping) or not all(
        hasattr(bind, "required") and hasattr(bind, "effective_value") for bind in binds.values()
    ):
        return False
    return not compiled.positional or isinstance(getattr(compiled, "positiontup", None), list)


# --- SQLAlchemy: events, errors, compiled statements -----------------------------------


def has_events(engine: Engine) -> bool:
    """Whether a ConnectionEvents listener is registered on ``engine`` or on
    ``Connection`` (SQLAlchemy's own flags; 2.0 sets the class's only once a listener
    is there). Unknown: True (such a listener must see every statement: Core)."""
    try:
        return bool(engine._has_events or getattr(Connection, "_has_events", False))
    except AttributeError:
        return True


def engine_reasons(engine: Engine) -> tuple[Any, ...]:
    """What may change a call's path between two calls on ``engine``
    (``runtime.routing.changing_reasons``): the engine, its execution options (a new
    mapping whenever they change), whether a ConnectionEvents listener is there (as
    :func:`has_events`; unknown: True), and whether it logs at INFO. One frame: the
    hot calls ask at every call. (Plain reads, no ``getattr`` with a default, as in
    :func:`kept_still_current`.)"""
    try:
        # (both bools: the probe checks it; ``_execution_options`` is what the public
        # ``get_execution_options()`` returns, read without its frame)
        # (``Connection._has_events``: a class attribute of SQLAlchemy 2.0.4x on, read
        # with a default: 2.0.30 has none, and a plain read sent every call to Core)
        listened = engine._has_events or getattr(Connection, "_has_events", False)
        options = engine._execution_options
    except AttributeError:
        listened, options = True, engine.get_execution_options()
    return (
        engine,
        options,
        listened,
        engine.logger.isEnabledFor(logging.INFO),
    )


def raise_checkout_error(error: Exception, engine: Engine) -> None:
    """Raise a DBAPI error met with no ``Connection`` (a checkout, a session setting)
    as ``engine.connect()`` raises it: wrapped in SQLAlchemy's DBAPIError class."""
    handle = getattr(Connection, "_handle_dbapi_exception_noconnection", None)
    if callable(handle):
        handle(error, engine.dialect, engine)
    _raise_public_wrap(error, engine.dialect)


def raise_as_connection(
    connection: Connection, error: Exception, statement: str | None, parameters: Any, cursor: Any
) -> None:
    """Raise ``error`` as ``connection`` raises a DBAPI error: wrapped, and the
    connection invalidated if the error says it is dead."""
    handle = getattr(connection, "_handle_dbapi_exception", None)
    if callable(handle):
        handle(error, statement, parameters, cursor, None)
    dialect = connection.dialect
    dead = dialect.is_disconnect(cast(Any, error), None, cursor)
    if dead and not connection.invalidated:
        connection.invalidate(error)
    _raise_public_wrap(error, dialect, statement, parameters, dead)


def _raise_public_wrap(
    error: Exception,
    dialect: Dialect,
    statement: str | None = None,
    parameters: Any = None,
    dead: bool | None = None,
) -> None:
    if dead is None:
        dead = dialect.is_disconnect(cast(Any, error), None, None)
    wrapped = DBAPIError.instance(
        statement,
        parameters,
        error,
        dialect.loaded_dbapi.Error,
        connection_invalidated=dead,
        dialect=dialect,
    )
    raise wrapped from error


def bind_processors(compiled: Any) -> Mapping[str, Callable[[Any], Any]] | None:
    """A compiled statement's bind processors (what SQLAlchemy's execution context
    applies: JSON serializers, TypeDecorators), or None where they cannot be read
    (the statement then runs through Core)."""
    processors = getattr(compiled, "_bind_processors", None)
    return processors if isinstance(processors, Mapping) else None


def from_objects(clause: Any) -> list[Any]:
    """The FROM elements a clause stands for (for SQLAlchemy's FROM linter); the
    clause itself where they cannot be read."""
    found = getattr(clause, "_from_objects", None)
    return list(found) if found is not None else [clause]


# --- SQLAlchemy: the pool ---------------------------------------------------------------


def check_in_after_commit(pooled: PoolProxiedConnection) -> None:
    """Give a connection whose transaction was committed back to its pool, which then
    skips its reset-on-return ROLLBACK (as after ``Connection.close()``); where a
    release lacks this, a plain close (and that ROLLBACK)."""
    close_special = getattr(pooled, "_close_special", None)
    if callable(close_special):
        close_special(transaction_reset=True)
    else:
        pooled.close()


def pool_checks_connections(pool: Pool) -> bool:
    """Whether ``pool`` pings or recycles its connections at checkout (a kept
    connection would skip that). Unknown: True (keep none)."""
    return bool(getattr(pool, "_pre_ping", True)) or getattr(pool, "_recycle", 0) != -1


def opened_before_invalidation(pooled: PoolProxiedConnection, pool: Pool) -> bool:
    """Whether the pool would replace ``pooled`` at its next checkout: it was opened
    before the pool last saw a dead connection. Unknown: False (a dead kept
    connection then fails its next call, which is retried on a new one)."""
    record = getattr(pooled, "_connection_record", None)
    started = getattr(record, "starttime", None)
    invalidated = getattr(pool, "_invalidate_time", 0)
    return isinstance(started, float) and isinstance(invalidated, float) and invalidated > started


def quiet_pool(pool: Pool, pooled: PoolProxiedConnection) -> tuple[Any, ...] | None:
    """What :func:`kept_still_current` compares ``pool`` and its kept ``pooled`` with,
    taken where the connection is kept (``runtime.kept``): the pool's ``checkout``,
    ``checkin`` and ``reset`` listeners (SQLAlchemy's empty listeners, which only read
    their class's: adding one to the pool itself replaces it in the pool's dispatch),
    the class-level collections they read (added to in place, never replaced) and the
    connection's record (a fairy's for as long as it is checked out). None where
    anything is other (a listener collection of the pool's own, an unknown
    SQLAlchemy): the fast check then reads each of them at every call."""
    empty = getattr(_sa_event_attr(), "_EmptyListener", None)
    try:
        dispatch = pool.dispatch
        listeners = (dispatch.checkout, dispatch.checkin, dispatch.reset)
        record = pooled._connection_record
        if empty is None or record is None or any(type(one) is not empty for one in listeners):
            return None
        return (*listeners, *(one.parent_listeners for one in listeners), record)
    except AttributeError:
        return None


@functools.cache
def _sa_event_attr() -> Any:
    from sqlalchemy.event import attr

    return attr


def kept_still_current(
    pooled: PoolProxiedConnection, pool: Pool, quiet: tuple[Any, ...] | None = None
) -> bool:
    """Whether a connection kept out of ``pool`` (``runtime.kept``) may serve the next
    call as it is: still open, not opened before the pool last saw a dead connection
    (:func:`opened_before_invalidation`), and no checkout, check-in or reset listener
    on the pool (such a listener must see every call's). The kept connection's fast
    check, in one frame; anything unknown: False (the caller's full check decides).
    ``quiet``: :func:`quiet_pool` of the kept connection, where it was kept. Plain
    attribute reads, no ``getattr`` with a default: each builtin call costs more than
    the read (this runs on every kept call); the dispatch's and the connection's own
    cost ~500 instructions each (their classes' ``__getattr__`` takes Python's fast
    attribute read away): with ``quiet``, four of them are read, not eleven."""
    try:
        if pooled.dbapi_connection is None:
            return False
        if quiet is not None:
            checkout, checkin, reset, on_out, on_in, on_reset, record = quiet
            dispatch = pool.dispatch
            return not (
                dispatch.checkout is not checkout
                or dispatch.checkin is not checkin
                or dispatch.reset is not reset
                or on_out
                or on_in
                or on_reset
                or pool._invalidate_time > record.starttime
            )
        dispatch = pool.dispatch
        checkout, checkin, reset = dispatch.checkout, dispatch.checkin, dispatch.reset
        if (
            checkout.parent_listeners
            or checkin.parent_listeners
            or reset.parent_listeners
            or checkout.listeners  # (``()`` on a pool no listener was added to)
            or checkin.listeners
            or reset.listeners
        ):
            return False
        # (opened_before_invalidation, inlined: a float, or 0 before any invalidation)
        return not pool._invalidate_time > pooled._connection_record.starttime
    except (AttributeError, TypeError):
        return False


# --- drivers behind SQLAlchemy's asyncio adapters ---------------------------------------


def driver_connection(dbapi_connection: Any) -> Any:
    """The driver's own connection: behind an asyncio adapter its public
    ``driver_connection``, else the DBAPI connection itself."""
    return getattr(dbapi_connection, "driver_connection", dbapi_connection)


def adapted_cursor(cursor: Any) -> Any | None:
    """The driver's cursor behind an asyncio adapter's cursor, or None when ``cursor``
    is the driver's own (or the adapter's is unknown)."""
    return getattr(cursor, "_cursor", None)


def psycopg_autocommit_flag(connection: Any, idle: Any) -> Callable[[], None] | None:
    """Set psycopg's autocommit flag client-side, as its setter does once it has
    checked that the connection is idle and outside a pipeline (which it does through
    its generator machinery: 20k instructions per set and reset). Returns the undo,
    or None when the flag cannot be set so (a psycopg without these attributes, a
    connection not idle): the caller then uses the setter."""
    if (
        getattr(connection, "_autocommit", None) is False
        and getattr(connection, "_pipeline", True) is None
        and connection.pgconn.transaction_status == idle
    ):
        connection._autocommit = True
        return partial(setattr, connection, "_autocommit", False)
    return None


def psycopg_drop_results(cursor: Any) -> bool:
    """Let go of a read's rows so its cursor may be kept: what psycopg's next execute
    does first (``_reset``). False (the cursor is then closed) on an asyncio adapter's
    cursor, which may buffer rows of its own, or a psycopg without it."""
    if adapted_cursor(cursor) is not None:
        return False
    reset = getattr(cursor, "_reset", None)
    if not callable(reset):
        return False
    reset()
    return True


def psycopg_drop_own_results(cursor: Any) -> bool:
    """:func:`psycopg_drop_results` of a cursor that is psycopg's own (sync psycopg's:
    no adapter's), without asking for an adapter's cursor behind it."""
    reset = getattr(cursor, "_reset", None)
    if not callable(reset):
        return False
    reset()
    return True


# --- drivers behind a connection pooler (dialects.poolers) ----------------------------


def pg8000_backend_pid(connection: Any) -> int | None:
    """The backend process id pg8000 was told at connect (BackendKeyData: the pid, then
    the secret key, 4 bytes each, big-endian), or None where pg8000 keeps it otherwise."""
    data = getattr(connection, "_backend_key_data", None)
    if not isinstance(data, bytes | bytearray) or len(data) < 4:
        return None
    return int.from_bytes(data[:4], "big")


def asyncpg_caches_statements(adapted_connection: Any) -> bool:
    """Whether an asyncpg connection (behind SQLAlchemy's adapter) names and caches its
    statements (asyncpg's ``statement_cache_size`` above 0); True where unknown."""
    enabled = getattr(driver_connection(adapted_connection), "_stmt_cache_enabled", True)
    return enabled is not False


def _no_statement_name() -> None:
    return None  # (asyncpg then names a statement only where its cache is on)


def asyncpg_unnamed_statements(adapted_connection: Any) -> bool:
    """Make an asyncpg connection run unnamed statements only, parsed again with each
    execution in the one message sequence that binds and runs it (what asyncpg does
    with ``statement_cache_size=0``, and SQLAlchemy's adapter with its default
    statement names): the named statements both cached are forgotten. False, and
    nothing changed, where asyncpg or the adapter keeps these otherwise."""
    connection = driver_connection(adapted_connection)
    cache: Any = getattr(connection, "_stmt_cache", None)
    if (
        not isinstance(getattr(connection, "_stmt_cache_enabled", None), bool)
        or not callable(getattr(cache, "clear", None))
        or not callable(getattr(cache, "set_max_size", None))
        or not hasattr(adapted_connection, "_prepared_statement_cache")
        or not hasattr(adapted_connection, "_prepared_statement_name_func")
    ):
        return False
    connection._stmt_cache_enabled = False
    cache.set_max_size(0)
    cache.clear()
    # The adapter's cache may keep its (unnamed, never marked prepared) statements:
    # asyncpg parses those again at each execution. Its named ones go.
    adapted_cache = adapted_connection._prepared_statement_cache
    if adapted_cache is not None:
        adapted_cache.clear()
    adapted_connection._prepared_statement_name_func = _no_statement_name
    return True


@functools.lru_cache(maxsize=2048)  # (the direct path's statements: built once, bounded)
def pymysql_insert_parts(sql: str) -> tuple[str, str, str] | None:
    """PyMySQL's ``executemany`` split of ``INSERT ... VALUES (...) [ON DUPLICATE ...]``
    into its prefix, one row's values and its postfix, as that method makes it per
    call with a regular expression (about 160k instructions for put_writes' upsert on
    MariaDB); None: not such an INSERT, or a PyMySQL without that expression."""
    from pymysql import cursors

    pattern = getattr(cursors, "RE_INSERT_VALUES", None)
    match = pattern.match(sql) if pattern is not None else None
    if match is None:
        return None
    return match.group(1) % (), match.group(2).rstrip(), (match.group(3) or "") % ()


def pymysql_executemany(
    cursor: Any, sql: str, rows: Any, executemany: Callable[[str, Any], Any]
) -> Any:
    """``executemany(sql, rows)`` (PyMySQL's, of ``cursor``), its SQL split once
    (:func:`pymysql_insert_parts`) rather than per call; PyMySQL's own where it lacks
    what this reads."""
    parts = pymysql_insert_parts(sql) if rows else None
    execute_many = getattr(cursor, "_do_execute_many", None)
    if parts is None or not callable(execute_many):
        return executemany(sql, rows)
    prefix, values, postfix = parts
    encoding = cursor.connection.encoding
    return execute_many(prefix, values, postfix, rows, cursor.max_stmt_length, encoding)


# --- LangGraph ------------------------------------------------------------------------


def langgraph_get_checks() -> tuple[Callable[[tuple[str, ...]], None], Callable[..., bool]] | None:
    """``BaseStore.get``'s own checks (namespace labels, the refresh_ttl default), or
    None where LangGraph lacks them (SQLAlchemyStore.get is then BaseStore's)."""
    return _store_checks("_validate_namespace_labels", "_ensure_refresh")


def langgraph_put_checks() -> tuple[Callable[[tuple[str, ...]], None], Callable[..., Any]] | None:
    """``BaseStore.put``'s own checks (the namespace, the ttl default), or None where
    LangGraph lacks them (SQLAlchemyStore.put is then BaseStore's)."""
    return _store_checks("_validate_namespace", "_ensure_ttl")


@functools.cache
def _store_checks(validate_name: str, ensure_name: str) -> tuple[Any, Any] | None:
    """Two private functions of ``langgraph.store.base``, or None if either is gone."""
    try:
        from langgraph.store import base
    except ImportError:  # pragma: no cover
        return None
    validate = getattr(base, validate_name, None)
    ensure = getattr(base, ensure_name, None)
    if callable(validate) and callable(ensure):
        return validate, ensure
    return None


@functools.cache
def langgraph_delta_snapshot() -> type[tuple[Any, ...]] | None:
    """LangGraph's DeltaChannel snapshot (a one-field NamedTuple, ``value``), or None
    where LangGraph has none (state migrations then see stored values as they are)."""
    try:
        from langgraph.checkpoint.serde import types
    except ImportError:  # pragma: no cover
        return None
    snapshot = getattr(types, "_DeltaSnapshot", None)
    if isinstance(snapshot, type) and issubclass(snapshot, tuple):
        return snapshot
    return None
