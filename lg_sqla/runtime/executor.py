"""The executors: how any owner's plan runs, sync or async, with retries and locks.

Every saver, store and node cache owns one :class:`Runtime`, and runs every plan
through :meth:`Runtime.run` (sync engine) or :meth:`Runtime.arun` (async engine).
One call of either is:

1. **retries** (``runtime.retry``): given a plan factory, the whole attempt runs
   again from scratch when the database rolled it back (deadlock, serialization
   failure, SQLITE_BUSY, a dead pooled connection), never after a COMMIT;
2. **an attempt**: the plan's first step is built (it validates and serializes
   before any connection is held), then the writer lock is taken if the plan
   writes and the database has one (``runtime.locks``), then the path is chosen
   (``runtime.routing.choose_path``) and the plan runs in one transaction, on
   Core or on the direct path, committed at its end.

Async calls run the same sync attempt in ONE greenlet on the event loop (the way
``AsyncConnection`` runs each of its methods), so the driver is still awaited on
the loop but a call no longer pays for a greenlet spawn per step; on a SQLite file
opened by ``from_conn_string`` they run it in a worker thread on a pysqlite engine
instead (one thread hop per call, where aiosqlite makes one per DBAPI call).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import Pool, PoolProxiedConnection
from sqlalchemy.util import greenlet_spawn

from lg_sqla import internals, migrate
from lg_sqla.dialects import poolers
from lg_sqla.dialects.autocommit import AutocommitHold, in_autocommit
from lg_sqla.plans import PREBUILT_CODES as PREBUILT
from lg_sqla.plans import Outcome, Plan, PlanSource, Step, T, one_row
from lg_sqla.runtime import direct, forks, locks, retry, timeouts
from lg_sqla.runtime.direct import DirectCompiler
from lg_sqla.runtime.drivers import (
    DirectDriver,
    direct_driver,
    guard_invalidation,
    guard_sessions,
    left_unusable,
)
from lg_sqla.runtime.kept import KeptConnection
from lg_sqla.runtime.routing import Path, Router

if TYPE_CHECKING:
    from lg_sqla.dialects import DialectOps


def drive(
    connection: Connection,
    plan: Plan[T],
    first: Step,
    *,
    commit: bool = False,
    again: Callable[[], None] | None = None,
) -> T:
    """Run a plan's statements on ``connection``, feeding each one's rows back; with
    ``commit``, commit at its end. Errors are marked for the retry decision
    (``runtime.retry``): after a ``COMMIT`` step, or by the final commit itself.
    ``again``: after each ``COMMIT`` step, begins the next statements' transaction
    (a session kept in autocommit, ``dialects.autocommit``)."""
    step = first
    committed = False
    try:
        while True:
            if step.statement is None:
                connection.commit()
                committed = True
                if again is not None:
                    again()
                step = plan.send(Outcome((), 0))
                continue
            result = connection.execute(step.statement, step.params)
            rows = result.all() if step.fetch else []
            step = plan.send(Outcome(rows, result.rowcount if not step.fetch else len(rows)))
    except StopIteration as done:
        if commit:
            try:
                connection.commit()
            except (DBAPIError, ConnectionError) as error:
                _end_refused_transaction(connection)
                mark = retry.mark_partly_committed if committed else retry.mark_failed_at_commit
                mark(error)
                raise
        return done.value  # type: ignore[no-any-return]
    except (DBAPIError, ConnectionError) as error:  # (pg8000: a raw socket error, retry.py)
        if committed:  # part of the plan is stored: running it again is not a retry
            retry.mark_partly_committed(error)
        raise


def _end_refused_transaction(connection: Connection) -> None:
    """Roll back what a refused COMMIT may leave open (SQLite answers SQLITE_BUSY and
    keeps the transaction). SQLAlchemy counts the transaction as ended either way, so
    neither it nor the pool would roll it back: a retry on the same pooled connection
    would see (and then commit) the failed attempt's rows."""
    if connection.invalidated:
        return
    with contextlib.suppress(connection.dialect.loaded_dbapi.Error):
        dbapi_connection = connection.connection.dbapi_connection
        if dbapi_connection is not None:
            dbapi_connection.rollback()


def _connect(engine: Engine) -> Connection:
    """``engine.connect()``, its error marked: nothing of the call ran (``runtime.retry``)."""
    try:
        return engine.connect()
    except DBAPIError as error:
        _not_started(engine, error)
        raise


def _not_started(engine: Engine, error: DBAPIError) -> None:
    """Mark an error met before the call ran anything (a checkout, the first
    connection's checks): waited for in the reconnect window, or run again at once
    when a pooler refused a prepared statement of SQLAlchemy's first-connect queries."""
    retry.mark_not_started(error)
    _pooler_refused(engine, error)


def _pooler_refused(engine: Engine, error: BaseException) -> bool:
    """Whether ``error`` is a pooler's answer to a prepared statement
    (``dialects.poolers``): the engine then prepares nothing from now on, and the call,
    which ran nothing, is run again (``runtime.retry``)."""
    orig = error.orig if isinstance(error, DBAPIError) else None
    if orig is None or not poolers.is_pooler_prepare_error(engine, orig):
        return False
    poolers.stop_preparing(engine)
    retry.mark_run_again(error)
    return True


def _poisoned(engine: Engine, dbapi_connection: Any, error: BaseException) -> bool:
    """Whether a call that raised ``error`` must not give its connection back to the
    pool as it is. Interrupted (``asyncio.CancelledError``, ``KeyboardInterrupt``: not
    an ``Exception``), a driver may be anywhere in its protocol, a statement half sent
    or its results half read (asyncmy then closes its socket; psycopg may have a
    query still running): SQLAlchemy's Core invalidates the connection then, and so
    does every path here. Or the driver's connection is left unusable in a way the
    error did not tell (``drivers.left_unusable``: a killed session's psycopg stuck
    in pipeline mode)."""
    if not isinstance(error, Exception) or isinstance(error, ConnectionError):
        # (ConnectionError: a socket's reset or broken pipe, which a driver such as
        # pg8000 raises as it is, and SQLAlchemy neither wraps nor counts as a
        # disconnect.)
        return True
    return left_unusable(engine.dialect, dbapi_connection)


def _mark_invalidated(error: BaseException) -> None:
    """A DBAPI error on a connection found dead after it is one on a dead connection:
    retried as such (``runtime.retry``: once, and only before any commit)."""
    if isinstance(error, DBAPIError):
        error.connection_invalidated = True
    elif isinstance(error, ConnectionError):
        retry.mark_connection_lost(error)


def _close_core(connection: Connection, pooled: PoolProxiedConnection) -> None:
    """Close a Core call's connection. Its check-in undoes the AUTOCOMMIT a call may
    have set (``run_on``) with a driver call; on a connection the server ended after
    the call's last statement, that raises, and SQLAlchemy (2.0, 2.1) then never
    gives the connection back to its pool: one leak per such call (psycopg2 and
    pg8000 under ``pg_terminate_backend``: the pool exhausted within 40 calls). The
    call's own outcome stands (its error, or its result: it ended before); the dead
    connection is detached from the pool, which opens another in its place, and
    closed."""
    try:
        connection.close()
    except Exception:  # (pg8000 raises the socket's own ConnectionResetError there)
        if pooled.is_valid and not pooled.is_detached:  # (a check-in that finished clears both)
            dbapi_connection = pooled.dbapi_connection
            pooled.detach()
            if dbapi_connection is not None:
                with contextlib.suppress(Exception):
                    dbapi_connection.close()


def _drive_held(connection: Connection, plan: Plan[T], first: Step, hold: AutocommitHold) -> T:
    """``drive`` on a session a plan of several statements took out of autocommit
    (``hold``): ``hold.again`` after each COMMIT step; once the plan is over (committed,
    or failed and rolled back), the session given back as it was (``hold.restore``).
    Interrupted, nothing more is sent: the caller invalidates the connection."""
    again = None if hold.again is None else partial(_begin_again, connection, hold.again)
    try:
        result = drive(connection, plan, first, commit=True, again=again)
    except Exception:
        _end_hold(connection, hold, roll_back=True)
        raise
    _end_hold(connection, hold, roll_back=False)
    return result


def _begin_again(connection: Connection, begin: Callable[[], None]) -> None:
    try:
        begin()
    except connection.dialect.loaded_dbapi.Error as error:  # (as Core raises it)
        internals.raise_as_connection(connection, error, "BEGIN", None, None)


def _end_hold(connection: Connection, hold: AutocommitHold, *, roll_back: bool) -> None:
    """Roll back what a failed plan left open (the pool's reset would skip it where the
    engine skips rollbacks in autocommit), then switch the session back to autocommit.
    A session that cannot be given back as it was is not pooled again (invalidated);
    the call's own outcome stands."""
    if connection.invalidated or (hold.restore is None and not roll_back):
        return
    try:
        if roll_back:
            connection.rollback()
        if hold.restore is not None:
            hold.restore()
    except Exception as error:
        if not connection.invalidated:
            connection.invalidate(error)


def _give_back_failed(
    engine: Engine,
    pooled: PoolProxiedConnection,
    connection: Connection | None,
    error: BaseException,
) -> None:
    """Return the connection of a failed direct-path call: to the pool, which rolls
    back what the plan may have left open (``connection``: the ``Connection`` that
    raised a DBAPI error, and may have invalidated it); invalidated instead (closed,
    replaced at a later checkout) when it is poisoned (``_poisoned``)."""
    if connection is not None and connection.invalidated:
        connection.close()
        return
    if pooled.is_valid and _poisoned(engine, pooled.dbapi_connection, error):
        _mark_invalidated(error)
        if connection is not None:
            connection.invalidate(error)
            connection.close()
        else:
            pooled.invalidate(error)  # (which gives it back to the pool)
        return
    (connection if connection is not None else pooled).close()


def _direct_failed(
    engine: Engine,
    pooled: PoolProxiedConnection,
    wrapped: list[Connection],
    kept: KeptConnection | None,
    error: BaseException,
    cut: bool,
) -> None:
    """After a direct-path plan failed: its connection invalidated where it is not to be
    pooled again (``cut`` by the watchdog: dead; or a pooler refused one of its prepared
    statements: a muddle), then given back, and its keeper told."""
    if (cut or _pooler_refused(engine, error)) and pooled.is_valid:
        (wrapped[0] if wrapped else pooled).invalidate(error)
    try:
        _give_back_failed(engine, pooled, wrapped[0] if wrapped else None, error)
    finally:
        if kept is not None:
            kept.put_back(committed=False)


def _direct_committed(pooled: PoolProxiedConnection, kept: KeptConnection | None) -> None:
    """After a direct-path plan committed: kept clean for the next call, or checked in
    without the pool's ROLLBACK of an ended transaction (on PyMySQL one more round trip
    per call; what Connection.close() tells the pool after a commit)."""
    if kept is not None:
        kept.put_back(committed=True)
    else:
        internals.check_in_after_commit(pooled)


def _lone_write(driver: DirectDriver, first: Step) -> bool:
    """Whether a whole plan runs in autocommit as one write
    (``DirectDriver.autocommits_lone_writes``): its step is one statement (sqlite3's
    ``executemany`` of several rows is several, each committed alone)."""
    return driver.autocommits_lone_writes and not first.fetch and driver.one_statement(first.params)


# A writer lock not asked for yet (None: the database has none).
_UNKNOWN_LOCK: Any = object()

# Every Runtime of the process, for a forked child's reset (``Runtime.forked``).
_RUNTIMES: weakref.WeakSet[Runtime] = weakref.WeakSet()


class Runtime:
    """One owner's (saver, store, node cache) execution state.

    Args:
        dialect_ops: The dialect's operations (statement cache, autocommit, writer lock).
        check_schema: Check on the first call that the schema is at lg_sqla's head.
        direct_path: Let prebuilt plans take the direct path where it applies
            (``runtime.routing``); False runs every plan through SQLAlchemy Core.
        keep_connection: Keep one pooled connection between direct-path calls where
            that changes nothing (``runtime.kept``: SQLite files, PostgreSQL on sync
            psycopg); the owner calls :meth:`release_connections` before it disposes
            an engine.
        reconnect_window: Seconds a call waits for a database that went away
            (``runtime.retry``: only once the owner has connected, only where the
            outcome is known or the call idempotent); 0: one immediate retry only.
        call_timeout: Seconds a call may wait for the database on one connection
            before its connection is cut and ``CallTimeoutError`` raised
            (``runtime.timeouts``); None: no limit.
    """

    def __init__(
        self,
        dialect_ops: DialectOps,
        *,
        check_schema: bool,
        direct_path: bool = True,
        keep_connection: bool = False,
        reconnect_window: float = retry.DEFAULT_RECONNECT_WINDOW_S,
        call_timeout: float | None = None,
    ) -> None:
        self.dialect_ops = dialect_ops
        self.reconnect_window = retry.check_window(reconnect_window)
        self.call_timeout = timeouts.check_timeout(call_timeout)
        self.keep_connection = keep_connection
        # By engine: the owner's few engines, which the owner keeps alive anyway (an
        # id() key could outlive its engine and name the next one).
        self._kept: dict[Engine, KeptConnection] = {}
        self.schema_checked = not check_schema
        self.direct_path = direct_path
        self.compiler = DirectCompiler()
        self.router = Router(dialect_ops, self.compiler, allowed=direct_path)
        # Set once a connection of the owner's engine was made: the dialect then knows
        # its server (MariaDB or MySQL...), so plans may build their statements
        # before a checkout.
        self._connected = False
        self._writer_locks: dict[Engine, threading.Lock | None] = {}
        # The async engines whose invalidations are guarded (``drivers.guard_invalidation``).
        self._guarded: set[Engine] = set()
        self._guarded_pools: dict[Engine, Pool] = {}  # (by engine: ``_guard_pool``)
        self._window_of = self._window
        # The direct path's driver settings by dialect (a saver has one or two).
        self._drivers: dict[Dialect, DirectDriver] = {}
        # The whole plans' first statements that run on ``_run_lean``, with the
        # ``routing.changing_reasons`` they were decided under (``_learn_lean``); and
        # by engine, whether any may.
        self._lean: dict[Any, tuple[Any, ...]] = {}
        self._lean_engines: dict[Engine, bool] = {}
        # (what no call of this owner can change: PostgreSQL and MySQL never learn)
        self._may_run_lean = not (
            dialect_ops.autocommit_single_statements
            or dialect_ops.prepares_sessions
            or self.call_timeout is not None
        )
        _RUNTIMES.add(self)

    def forked(self) -> None:
        """In a forked child, right after the fork (``runtime.forks``): the kept
        connections are the parent's, and the writer locks are asked for anew (the
        child has new ones, ``runtime.locks``)."""
        for kept in self._kept.values():
            kept.forget_parents()
        self._writer_locks = {}

    def set_up(self, engine: Engine) -> None:
        """The owner's ``setup()`` connected to ``engine``, brought the schema to head
        and let the dialect learn its server (``learn``). The first call skips
        ``_first_connection``, unless the engine's connections still need their pooler
        check (``dialects.poolers``: a psycopg engine the caller made), which it makes
        there, once."""
        self._connected = not poolers.needs_check(engine)
        self.schema_checked = True
        guard_sessions(engine)

    def learn(self, engine: Engine) -> None:
        """In the owner's ``setup()``: what the dialect asks of its server before the
        first call (``DialectOps.learn_server``: PostgreSQL, whether Citus is there),
        which the first call otherwise asks."""
        if self.dialect_ops.learns_server:
            with engine.connect() as connection:
                self.dialect_ops.learn_server(connection)

    async def alearn(self, engine: AsyncEngine) -> None:
        """``learn`` on an ``AsyncEngine``."""
        if self.dialect_ops.learns_server:
            async with engine.connect() as connection:
                await connection.run_sync(self.dialect_ops.learn_server)

    # --- sync ------------------------------------------------------------------

    def run(
        self,
        engine: Engine,
        source: PlanSource[T],
        *,
        writes: bool | None = None,
        idempotent: bool = False,
    ) -> T:
        """Run a plan on ``engine``; given a plan factory, again from scratch while the
        database rolls attempts back (``runtime.retry``).

        A plan whose function is declared ``plans.prebuilt`` may take the direct path
        (``runtime.routing``). ``writes``: whether it writes (None: it does unless its
        first step fetches rows), for the writer lock. ``idempotent``: its effect is
        the same run once or twice, so it may run again after an unknown outcome (a
        connection lost at COMMIT) within the reconnect window.
        """
        if not callable(source):
            return self.attempt(engine, source, writes)
        # The first attempt, as the retry loop would make it: the loop's bookkeeping
        # (a closure, the window, the attempts) is paid from the first failure on.
        try:
            return self.attempt(engine, source(), writes)  # (positional: cheaper)
        except (DBAPIError, ConnectionError) as error:
            failed = error
        try:
            return retry.with_retries(
                lambda: self.attempt(engine, source(), writes),
                self.dialect_ops,
                idempotent,
                self._window_of,  # (positional, and bound once)
                failed,
            )
        finally:  # (a frame holding its own exception: a cycle only gc frees)
            del failed

    def _window(self) -> float:
        """The reconnect window: none before the owner ever connected (a wrong URL or
        password is raised at once, not waited on)."""
        return self.reconnect_window if self._connected else 0.0

    def attempt(
        self,
        engine: Engine,
        plan: Plan[T],
        writes: bool | None = None,
    ) -> T:
        """One attempt at ``plan`` on a connection of ``engine``, in one transaction."""
        if not (self._connected and self.schema_checked):
            self._connect_first(engine)
        try:
            first = next(plan)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        # (_run_started, inlined: the path, then the writer lock around the run)
        prebuilt = id(getattr(plan, "gi_code", None)) in PREBUILT  # (is_prebuilt, inlined)
        lean = self._lean.get(first.statement) if first.whole_plan and prebuilt else None
        if lean is not None and lean == internals.engine_reasons(engine):
            run = self._run_lean  # (the router's decision, remembered: see _learn_lean)
        elif self.router.path_of(engine, first, prebuilt) is Path.DIRECT:
            run = self._run_direct
            if first.whole_plan and self._may_run_lean:
                self._learn_lean(engine, first)
        else:
            run = self._run_core
        if writes if writes is not None else not first.fetch:
            lock = self._writer_locks.get(engine, _UNKNOWN_LOCK)
            if lock is _UNKNOWN_LOCK:
                lock = self._writer_lock(engine, first, writes)
            if lock is not None:
                with lock:
                    return run(engine, plan, first)
        return run(engine, plan, first)

    def _connect_first(self, engine: Engine) -> None:
        """The schema check of the owner's first calls, on a connection of its own (async:
        in the async engine's greenlet). No statement of the plan has run."""
        try:
            with engine.connect() as connection:
                self._first_connection(connection)
        except DBAPIError as error:
            _not_started(engine, error)
            raise

    def _first_connection(self, connection: Connection) -> None:
        """The owner's first call: the dialect learns its server (plans may build
        statements that depend on it, e.g. MariaDB or MySQL), and the schema version is
        checked (``SchemaError`` names the fix), once."""
        # Before _connected is set: the owner's other first calls come here too, and
        # wait for a pooler's check (``dialects.poolers``) rather than run without it.
        poolers.check_first_connection(connection.engine, connection.connection.dbapi_connection)
        guard_sessions(connection.engine)
        self._connected = True
        self.prepare_session(connection.engine, connection.connection, connection)
        self.dialect_ops.learn_server(connection)
        if not self.schema_checked:
            migrate.check_schema(connection)
            self.schema_checked = True

    def _run_started(self, engine: Engine, plan: Plan[T], first: Step) -> T:
        prebuilt = id(getattr(plan, "gi_code", None)) in PREBUILT  # (is_prebuilt, inlined)
        if self.router.path_of(engine, first, prebuilt) is Path.DIRECT:
            return self._run_direct(engine, plan, first)
        return self._run_core(engine, plan, first)

    def _run_core(self, engine: Engine, plan: Plan[T], first: Step) -> T:
        connection = _connect(engine)
        pooled = connection.connection
        clock = None if self.call_timeout is None else timeouts.watch(pooled, self.call_timeout)
        try:
            self.prepare_session(engine, pooled, connection)
            result = self.run_on(connection, plan, first)
        except BaseException as error:
            if timeouts.ended(clock):  # (the watchdog cut it: dead)
                if not connection.invalidated:
                    connection.invalidate(error)
                raise timeouts.timed_out(clock) from error
            if _pooler_refused(engine, error) and not connection.invalidated:
                connection.invalidate(error)  # (its prepared statements are a muddle)
            elif not connection.invalidated and _poisoned(engine, pooled.dbapi_connection, error):
                connection.invalidate(error)
                _mark_invalidated(error)
            raise
        finally:
            _close_core(connection, pooled)
        if clock is not None:
            timeouts.ended(clock)
        return result

    def forget(self, statement: Any) -> None:
        """Drop what the runtime decided and compiled for ``statement``, which its
        builder's bounded cache dropped (``routing.Router.forget``)."""
        self.router.forget(statement)
        self._lean.pop(statement, None)

    def runs_direct(self, statement: Any, dialect: Dialect) -> bool:
        """Whether ``statement`` (built once) compiles for the direct path on
        ``dialect`` (parameters expanded at execution time do not)."""
        return self.compiler.get(statement, dialect) is not None

    def prepare_session(
        self, engine: Engine, pooled: PoolProxiedConnection, connection: Connection | None
    ) -> None:
        """The dialect's session settings (``DialectOps.prepare_session``: on a Galera
        node, causal reads), on every connection a call runs on, whichever the path and
        whoever made the engine. Once per DBAPI connection; after that one dict lookup.
        Its driver errors are wrapped as ``Connection`` wraps them, and a dead
        connection invalidated, so the retry loop treats them as any other."""
        if not self.dialect_ops.prepares_sessions:
            return
        try:
            self.dialect_ops.prepare_session(pooled, engine.get_execution_options())
        except engine.dialect.loaded_dbapi.Error as error:
            if engine.dialect.is_disconnect(error, pooled.dbapi_connection, None):
                if connection is not None:
                    connection.invalidate(error)
                else:
                    pooled.invalidate(error)
            try:
                internals.raise_checkout_error(error, engine)
            except DBAPIError as wrapped:
                retry.mark_not_started(wrapped)  # (no statement of the plan ran)
                raise

    def run_on(self, connection: Connection, plan: Plan[T], first: Step) -> T:
        """Run a started plan through Core on ``connection``, in one transaction."""
        if first.whole_plan and one_row(first.params):
            if self.dialect_ops.autocommit_single_statements:
                # One statement is atomic by itself: no BEGIN/COMMIT round trips. Before
                # any statement (the connection autobegins).
                connection.execution_options(isolation_level="AUTOCOMMIT")
            return drive(connection, plan, first, commit=True)
        # Several statements (or rows: ``plans.one_row``): one transaction even on a
        # session in autocommit (an AUTOCOMMIT engine, a driver connected so:
        # ``dialects.autocommit``). Elsewhere one flag read.
        dialect = connection.dialect
        try:
            hold = self.dialect_ops.out_of_autocommit(
                dialect, connection.connection.dbapi_connection
            )
        except dialect.loaded_dbapi.Error as error:  # (as Core raises it)
            internals.raise_as_connection(connection, error, "BEGIN", None, None)
            raise  # (raise_as_connection raised)
        if hold is None:
            return drive(connection, plan, first, commit=True)
        return _drive_held(connection, plan, first, hold)

    def _connection_for_direct(
        self, engine: Engine
    ) -> tuple[KeptConnection | None, PoolProxiedConnection]:
        """The direct path's connection: the kept one (with its keeper), else one checked
        out of the pool (no keeper)."""
        kept = (self._kept.get(engine) or self._keep(engine)) if self.keep_connection else None
        try:
            pooled = kept.take(engine) if kept is not None else None
            if pooled is None:
                return None, direct.checkout(engine)
        except DBAPIError as error:
            _pooler_refused(engine, error)  # (checkout marked it not started)
            raise
        return kept, pooled

    def _run_direct(self, engine: Engine, plan: Plan[T], first: Step) -> T:
        dialect = engine.dialect
        driver = self._drivers.get(dialect) or self._driver_of(dialect)
        if driver.begin is not None and self._guarded_pools.get(engine) is not engine.pool:
            self._guard_pool(engine)
        kept, pooled = self._connection_for_direct(engine)
        wrapped: list[Connection] = []

        def core() -> Connection:
            # Only on an error: SQLAlchemy's Connection wraps it, and invalidates a
            # dead connection, as on the Core path.
            wrapped.append(Connection(engine, connection=pooled))
            return wrapped[0]

        clock = None if self.call_timeout is None else timeouts.watch(pooled, self.call_timeout)
        try:
            if self.dialect_ops.prepares_sessions:
                self.prepare_session(engine, pooled, None)
            # Several statements (or rows) on a session in autocommit: one transaction
            # all the same (``dialects.autocommit``; drivers with ``begin`` send BEGIN
            # themselves). Elsewhere one flag read (the direct path's dialects all
            # tell, no I/O).
            held, dbapi_connection = None, pooled.dbapi_connection
            if (
                driver.begin is None  # (first: MySQL's one_statement measures the rows)
                and not (first.whole_plan and driver.one_statement(first.params))
                and dbapi_connection is not None
                and in_autocommit(dialect, dbapi_connection)
            ):
                held = self.dialect_ops.out_of_autocommit
            result = direct.run(
                pooled,
                dialect,
                core,
                self.compiler,
                driver,
                plan,
                first,
                first.whole_plan
                and (
                    self.dialect_ops.autocommit_single_statements
                    or driver.begin is not None
                    or _lone_write(driver, first)
                ),
                held,
            )
        except BaseException as error:
            cut = clock if timeouts.ended(clock) else None
            _direct_failed(engine, pooled, wrapped, kept, error, cut is not None)
            if cut is not None:
                raise timeouts.timed_out(cut) from error
            raise
        if clock is not None:
            timeouts.ended(clock)
        _direct_committed(pooled, kept)
        return result

    def _learn_lean(self, engine: Engine, first: Step) -> None:
        """Remember that plans starting with ``first`` (a whole plan's statement, which
        the router sent to the direct path) run on :meth:`_run_lean` while the engine's
        ``routing.changing_reasons`` stay the same, where nothing of ``_run_direct``
        applies but its statement and commit: a driver with plain cursors and implicit
        transactions (SQLite), no session settings, no call timeout."""
        lean = self._lean_engines.get(engine)
        if lean is None:
            driver = direct_driver(engine.dialect)
            lean = self._lean_engines[engine] = bool(
                driver is not None
                and driver.plain_cursors
                and not driver.keeps_cursors
                and driver.begin is None
            )
        if lean:  # (and the owner's _may_run_lean)
            direct.remember(self._lean, first.statement, internals.engine_reasons(engine))

    def _run_lean(self, engine: Engine, plan: Plan[T], first: Step) -> T:
        """``_run_direct`` for a plan :meth:`_learn_lean` remembered: the kept (or a
        pooled) connection, the plan run and committed by ``direct.run``, the
        connection kept or checked in; on an error, what ``_run_direct`` does."""
        kept, pooled = self._connection_for_direct(engine)
        dialect = engine.dialect
        driver = self._drivers.get(dialect) or self._driver_of(dialect)
        wrapped: list[Connection] = []

        def core() -> Connection:  # (see _run_direct)
            wrapped.append(Connection(engine, connection=pooled))
            return wrapped[0]

        try:
            one = driver.one_statement(first.params)
            lone = driver.autocommits_lone_writes and not first.fetch and one  # (_lone_write)
            held = None  # (an executemany of several rows on a session in autocommit)
            dbapi_connection = pooled.dbapi_connection
            if (
                not one
                and dbapi_connection is not None
                and in_autocommit(dialect, dbapi_connection)
            ):
                held = self.dialect_ops.out_of_autocommit
            result = direct.run(
                pooled, dialect, core, self.compiler, driver, plan, first, lone, held
            )
        except BaseException as error:
            _direct_failed(engine, pooled, wrapped, kept, error, False)
            raise
        if kept is not None:  # (_direct_committed, inlined: a frame less per call)
            kept.put_back(committed=True)
        else:
            internals.check_in_after_commit(pooled)
        return result

    def _guard_pool(self, engine: Engine) -> None:
        """A MySQL-family call leaves its session in autocommit only on a pool that switches
        it back at other checkouts (``drivers.guard_sessions``): also a pool assigned by
        hand after the first call (``engine.pool = ...``, none of the old's listeners)."""
        guard_sessions(engine)
        self._guarded_pools[engine] = engine.pool

    def _driver_of(self, dialect: Dialect) -> DirectDriver:
        driver = self._drivers[dialect] = direct_driver(dialect)  # type: ignore[assignment]
        assert driver is not None  # choose_path checked it
        return driver

    def _keep(self, engine: Engine) -> KeptConnection:
        return self._kept.setdefault(engine, KeptConnection())

    def release_connections(self) -> None:
        """Give the connections kept between calls back to their pools (before the
        owner disposes its engines; calls after this keep one again)."""
        for kept in list(self._kept.values()):
            kept.release()

    def _writer_lock(
        self, engine: Engine, first: Step, writes: bool | None
    ) -> threading.Lock | None:
        if not (writes if writes is not None else not first.fetch):
            return None
        try:
            return self._writer_locks[engine]
        except KeyError:
            lock = self._writer_locks[engine] = locks.writer_lock(self.dialect_ops, engine)
            return lock

    # --- async -------------------------------------------------------------------

    async def arun(
        self,
        engine: AsyncEngine,
        source: PlanSource[T],
        *,
        writes: bool | None = None,
        idempotent: bool = False,
    ) -> T:
        """Async twin of :meth:`run`. (On a SQLite file opened by ``from_conn_string``,
        the async saver and store run whole calls with :meth:`run` on a pysqlite
        engine in lg_sqla's worker threads instead: ``runtime.workers``.)"""
        if not callable(source):
            return await self._aattempt(engine, source, writes)
        try:  # (the first attempt: see run)
            return await self._aattempt(engine, source(), writes)
        except (DBAPIError, ConnectionError) as error:
            failed = error
        try:
            return await retry.awith_retries(
                lambda: self._aattempt(engine, source(), writes),
                self.dialect_ops,
                idempotent,
                self._window_of,
                failed,
            )
        finally:  # (see run)
            del failed

    async def _aattempt(self, engine: AsyncEngine, plan: Plan[T], writes: bool | None) -> T:
        if not (self._connected and self.schema_checked):
            await greenlet_spawn(self._connect_first, engine.sync_engine)
        try:
            first = next(plan)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        sync_engine = engine.sync_engine
        if sync_engine not in self._guarded:
            guard_invalidation(sync_engine)
            self._guarded.add(sync_engine)
        lock = None
        if writes if writes is not None else not first.fetch:  # (_writer_lock, inlined)
            lock = self._writer_locks.get(sync_engine, _UNKNOWN_LOCK)
            if lock is _UNKNOWN_LOCK:
                lock = self._writer_lock(sync_engine, first, writes)
        if lock is None:  # (most databases: no async context manager per call)
            result: Any = await greenlet_spawn(self._run_started, sync_engine, plan, first)
            return result  # type: ignore[no-any-return]
        async with locks.holding(lock):
            result = await greenlet_spawn(self._run_started, sync_engine, plan, first)
            return result  # type: ignore[no-any-return]


def _forked() -> None:
    for runtime in list(_RUNTIMES):
        runtime.forked()


forks.on_fork_in_child(_forked)
