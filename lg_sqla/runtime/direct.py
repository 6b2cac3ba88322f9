"""Hot plans run straight on the DBAPI connection, with SQL SQLAlchemy compiled once.

``get_tuple``, ``list`` pages, ``put`` and ``put_writes`` are one or two cached
statements each. Through SQLAlchemy Core, every call pays for a transaction
object, an execution context, parameter and result objects: on SQLite 70 of the
85 µs a tiny ``get_tuple`` took, where the statement itself runs in 16 µs. Here
those statements are compiled by SQLAlchemy once per owner (same SQL text, same
bind processors: JSON, UTC timestamps, MySQL's canonical JSON), then executed on
the pooled connection's DBAPI cursor. Errors go through SQLAlchemy's own handler,
so callers see the same wrapped exceptions and a dead connection is invalidated
as usual.

When this path is taken is decided in one place, ``runtime.routing.choose_path``:
only on the drivers of ``runtime.drivers``, only when nothing would notice the
difference, and only while the SQLAlchemy internals this module reads are there
(``lg_sqla.internals``, probed once). Everything else runs the same plans
through Core.
"""

from __future__ import annotations

import contextlib
import logging
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlalchemy import LargeBinary
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import Executable

from lg_sqla import internals
from lg_sqla.dialects.autocommit import AutocommitHold
from lg_sqla.plans import Outcome, Plan, Step, T
from lg_sqla.runtime import retry
from lg_sqla.runtime.drivers import DIRECT_CHECKOUT, DirectDriver, Restore, direct_driver

logger = logging.getLogger(__name__)

# ``DialectOps.out_of_autocommit``: a plan of several statements' transaction on a
# session in autocommit (``dialects.autocommit``).
OutOfAutocommit = Callable[[Dialect, Any], AutocommitHold | None]


@dataclass(frozen=True)
class DirectStatement:
    """A statement compiled for one dialect, ready for ``cursor.execute``."""

    sql: str
    positional: tuple[str, ...] | None  # the order of qmark/format parameters
    processors: Mapping[str, Callable[[Any], Any]]
    # Values of parameters the statement carries itself (``literal()``, ``LIMIT 1``, ...),
    # through their bind processors already.
    defaults: Mapping[str, Any]
    # The same statement in the driver's native form (``DirectDriver.native_form``),
    # for the cursors that take it.
    native: DirectStatement | None = None
    # The result's column names, set by the first fetch (``DirectCompiler.column_names``):
    # on the statement itself, so they live and die with it.
    column_names: list[str] | None = field(default=None, compare=False, repr=False)
    # ``positional``'s values of a parameter dict, in C (built in __post_init__).
    _in_order: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = field(
        init=False, repr=False, compare=False
    )
    # Without defaults, a positional statement's parameters of one row, in one call
    # (``_row_function``); None where the general form applies.
    row_values: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        in_order = row_values = None
        if self.positional:
            getter = operator.itemgetter(*self.positional)
            # (itemgetter of one name returns the value itself, not a 1-tuple)
            in_order = getter if len(self.positional) > 1 else lambda values: (getter(values),)
            if not self.defaults:
                row_values = _row_function(self.positional, self.processors)
        object.__setattr__(self, "_in_order", in_order)
        object.__setattr__(self, "row_values", row_values)

    def parameters(self, params: Mapping[str, Any]) -> Any:
        row_values = self.row_values
        if row_values is not None:
            # Every name the SQL holds is the row's (no defaults): its values in order,
            # as the general form below gives them, without a copy of the row.
            return row_values(params)
        values = {**self.defaults, **params} if self.defaults else dict(params)
        for name, process in self.processors.items():
            if name in params:
                values[name] = process(values[name])
        if self.positional is None:
            return values
        return self._in_order(values) if self._in_order is not None else ()

    def parameters_many(self, rows: Sequence[Mapping[str, Any]]) -> list[Any]:
        """:meth:`parameters` of each row. In the general form, a value the rows share
        (the same object: a call's timestamp, its thread) goes through its bind
        processor once; a positional statement's rows each take one generated call."""
        if not rows:
            return []
        row_values = self.row_values
        if row_values is not None:
            # (a shared value's processor runs per row here: the timestamp's keeps its
            # last text, and the generated call costs less than the sharing's bookkeeping)
            return [row_values(row) for row in rows]
        defaults = self.defaults
        first = rows[0]
        # (name, processor, first row's value, its processed value) of each processed
        # parameter (the rows of one step all carry the same names). A loop, not a
        # list comprehension: one frame less per call.
        processed = []
        for name, process in self.processors.items():
            if name in first:
                raw = first[name]
                processed.append((name, process, raw, process(raw)))
        in_order = self._in_order
        out = []
        for row in rows:
            values = {**defaults, **row} if defaults else dict(row)
            for name, process, raw, done in processed:
                value = values[name]
                values[name] = done if value is raw else process(value)
            out.append(values if in_order is None else in_order(values))
        return out


def _row_function(
    positional: tuple[str, ...], processors: Mapping[str, Callable[[Any], Any]]
) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """A function of a row (a mapping of the statement's parameters) giving the DBAPI's
    positional parameters: each value in ``positional`` order, through its bind
    processor where it has one. Generated once per compiled statement, it is one
    expression: the generic form (the values by ``itemgetter``, then each processed
    one replaced in a list) ran about 100 bytecodes for a checkpoint's 12 parameters.
    The names are in the source as literals (``repr``), the processors are looked up
    in the function's namespace: nothing of a statement is executed as code."""
    namespace: dict[str, Any] = {}
    items = []
    for index, name in enumerate(positional):
        if name in processors:
            namespace[f"_process_{index}"] = processors[name]
            items.append(f"_process_{index}(row[{name!r}])")
        else:
            items.append(f"row[{name!r}]")
    source = f"def row_values(row):\n    return ({', '.join(items)},)\n"
    exec(compile(source, "<lg_sqla.runtime.direct row_values>", "exec"), namespace)
    function: Callable[[Mapping[str, Any]], tuple[Any, ...]] = namespace["row_values"]
    return function


class Row:
    """A fetched row: ``_mapping`` by column name, and each column as an attribute, as
    SQLAlchemy's rows offer them."""

    __slots__ = ("_mapping",)

    def __init__(self, mapping: dict[str, Any]) -> None:
        self._mapping = mapping

    def __getattr__(self, name: str) -> Any:
        if name == "_mapping":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        try:
            return self._mapping[name]
        except KeyError:
            raise AttributeError(name) from None


def compile_direct(statement: Executable, dialect: Dialect) -> DirectStatement | None:
    """The statement compiled for ``dialect``, or None where only Core can run it
    (parameters expanded at execution time, or names the DBAPI cannot take)."""
    compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
    if compiled.literal_execute_params or compiled.post_compile_params:
        return None
    if compiled.escaped_bind_names:
        return None
    # What SQLAlchemy's own execution context applies: the bind processors of every
    # type (JSON serializers, TypeDecorators such as UTCDateTime).
    bind_processors = internals.bind_processors(compiled)
    if bind_processors is None:
        return None
    processors = dict(bind_processors)
    driver = direct_driver(dialect)
    if driver is not None and driver.blob is not None:
        for name, bind in compiled.binds.items():
            if name in processors and _plain_binary(bind.type):
                processors[name] = driver.blob
    positional = tuple(compiled.positiontup) if compiled.positional else None
    # Only the names the SQL holds (``binds`` also has each anonymous bind under its
    # key; PyMySQL escapes every value of the dict it is given), processed once.
    used = set(compiled.bind_names.values())
    defaults = {
        name: processors[name](bind.effective_value) if name in processors else bind.effective_value
        for name, bind in compiled.binds.items()
        if not bind.required and name in used
    }
    native = None
    if driver is not None and driver.native_form is not None:
        converted = driver.native_form(compiled.string)
        if converted is None:
            return None
        native = DirectStatement(converted[0], converted[1], processors, defaults)
    return DirectStatement(compiled.string, positional, processors, defaults, native)


def _plain_binary(type_: Any) -> bool:
    """Whether ``type_`` is a ``LargeBinary`` bound as SQLAlchemy binds any (its bind
    processor not overridden): the driver's ``DirectDriver.blob`` may bind it instead."""
    return isinstance(type_, LargeBinary) and (
        type(type_).bind_processor is LargeBinary.bind_processor
    )


# How many statements a DirectCompiler (compiled forms) or a routing.Router (path
# decisions) remembers.
# Its callers give it only statements that are built once (``DialectOps.cached``) or
# held by the store's LRU of 512 shapes, which stay far below this; the bound makes
# the memory a fact, not a promise: past it, the oldest entries are dropped (and
# compiled again if they come back).
STATEMENTS_MAX = 2048


class DirectCompiler:
    """Each cached statement compiled once per dialect (a saver has one dialect).

    Keyed by the statement itself, which each entry keeps alive: an entry can never
    be taken for another statement (as one keyed by ``id()`` could, once its
    statement died and the id was reused). At most :data:`STATEMENTS_MAX` entries.
    """

    def __init__(self) -> None:
        # (read by ``run`` itself: one dict lookup per step, no call)
        self.compiled: dict[Executable, DirectStatement | None] = {}

    def get(self, statement: Executable, dialect: Dialect) -> DirectStatement | None:
        try:
            return self.compiled[statement]
        except KeyError:
            direct = compile_direct(statement, dialect)
            remember(self.compiled, statement, direct)
            return direct

    def required(self, statement: Executable, dialect: Dialect) -> DirectStatement:
        """:meth:`get`, for a statement the direct path runs: every step of a cached plan
        compiles (its first was checked), so one that does not is a bug."""
        direct = self.get(statement, dialect)
        if direct is None:
            raise RuntimeError(f"lg_sqla: cannot run directly: {statement}")
        return direct

    def forget(self, statement: Executable) -> None:
        """Drop what was compiled for ``statement`` (its builder's bounded cache dropped
        it: nothing here may outlive that cache's bound)."""
        self.compiled.pop(statement, None)

    @staticmethod
    def column_names(direct: DirectStatement, cursor: Any) -> list[str]:
        """The result's column names, read from the first cursor (the SQL fixes them;
        psycopg builds its description objects anew on every call) and kept on the
        statement they belong to."""
        names = direct.column_names
        if names is None:
            names = [c[0] for c in cursor.description]
            object.__setattr__(direct, "column_names", names)
        return names


def remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """``cache[key] = value``, the oldest entry dropped first past ``STATEMENTS_MAX``
    (a dict keeps its insertion order). Threads may race here: a lost entry is only
    compiled or decided again."""
    if len(cache) >= STATEMENTS_MAX:
        with contextlib.suppress(StopIteration, KeyError, RuntimeError):
            del cache[next(iter(cache))]
    cache[key] = value


def checkout(engine: Engine) -> PoolProxiedConnection:
    """A connection from ``engine``'s pool, its errors wrapped as ``engine.connect()``
    wraps them (a refused or dead server is a DBAPIError the retry loop knows)."""
    # (a session the direct path left in autocommit stays so: ``drivers.guard_sessions``)
    token = DIRECT_CHECKOUT.set(True)
    try:
        return engine.raw_connection()
    except engine.dialect.loaded_dbapi.Error as error:
        # What Connection.__init__ does with a failed checkout; nothing of the call ran.
        try:
            internals.raise_checkout_error(error, engine)
        except DBAPIError as wrapped:
            retry.mark_not_started(wrapped)
            raise
        raise
    finally:
        DIRECT_CHECKOUT.reset(token)


def run(
    pooled: PoolProxiedConnection,
    dialect: Dialect,
    core: Callable[[], Connection],
    compiler: DirectCompiler,
    driver: DirectDriver,
    plan: Plan[T],
    first: Step,
    autocommit: bool,
    out_of_autocommit: OutOfAutocommit | None = None,
) -> T:
    """Run ``plan`` on ``pooled``'s DBAPI connection; commit at its end (or per ``COMMIT``
    step), roll back on an error; ``autocommit``: its one statement without a transaction.
    ``core`` gives the ``Connection`` through which a DBAPI error is raised as SQLAlchemy
    raises it (callers without one build it only then); ``out_of_autocommit``: ``_prepare``."""
    dbapi_connection = pooled.dbapi_connection
    assert dbapi_connection is not None
    if autocommit and driver.begin is not None and not driver.one_statement(first.params):
        autocommit = False  # (an executemany the driver cuts into several statements)
    prepared = autocommit or out_of_autocommit or driver.begin or not driver.plain_cursors
    if prepared or driver.keeps_cursors:
        cursor, native, restore, begin = _prepare(
            pooled, dialect, core, driver, autocommit, out_of_autocommit
        )
    else:  # (a new cursor of the DBAPI's own, nothing to undo or begin: _prepare inlined)
        native, restore, begin = False, None, None
        try:
            cursor = dbapi_connection.cursor()
        except Exception as error:  # (interrupted: no more I/O, see below)
            _unprepared(dbapi_connection, dialect, core, restore, error)
            raise
    try:
        result, fetched = _steps(
            dbapi_connection,
            dialect,
            core,
            compiler,
            cursor,
            native,
            plan,
            first,
            not autocommit,
            begin,
        )
        if driver.keeps_cursors and (not fetched or driver.drop_results(cursor)):
            # A cursor holding no rows: a write's, or a read's once its rows are dropped
            # (kept, its result would hold blobs and all as long as the connection lives).
            pooled.info[_KEPT_CURSOR] = (dbapi_connection, cursor, native)
            cursor = None
        return result
    except BaseException as error:
        if not isinstance(error, Exception):
            # Interrupted (a cancelled task, KeyboardInterrupt), maybe midway through a
            # statement or the COMMIT: no more I/O here. The caller invalidates the
            # connection (``executor._poisoned``), as Core does: that ends the transaction.
            cursor = restore = None
        raise
    finally:
        if cursor is not None or restore is not None:
            _restore_quietly(dialect, cursor, restore)


def _steps(
    dbapi_connection: Any,
    dialect: Dialect,
    core: Callable[[], Connection],
    compiler: DirectCompiler,
    cursor: Any,
    native: bool,
    plan: Plan[T],
    step: Step,
    commit: bool,
    begin: Callable[[], None] | None = None,
) -> tuple[T, bool]:
    """Execute ``step`` and the plan's next ones on ``cursor`` (``native``: the SQL in the
    driver's form), then (``commit``) COMMIT; the result, and whether a step fetched rows.
    On an error, roll back first. ``begin``: see :func:`_commit_step`."""
    compiled, committed, fetched, sql, parameters = compiler.compiled, False, False, None, None
    try:
        while True:
            statement = step.statement
            if statement is None:
                committed = _commit_step(dbapi_connection, begin)
                step = plan.send(_COMMITTED)
                continue
            direct = compiled.get(statement) or compiler.required(statement, dialect)
            direct = direct.native if native and direct.native is not None else direct
            params: Any = step.params
            sql, kind = direct.sql, type(params)  # (a list or dict by type first: no ABC check)
            if kind is not list and (kind is dict or params is None or isinstance(params, Mapping)):
                row = params or {}
            else:  # (parameters_many's shared values need rows)
                row = params[0] if len(params) == _ONE_ROW else None
            if row is not None:  # (row_values: a row's parameters() without its frame)
                values = direct.row_values
                cursor.execute(sql, parameters := values(row) if values else direct.parameters(row))
            else:
                cursor.executemany(sql, parameters := direct.parameters_many(params))
            if not step.fetch:
                step = plan.send(_WRITTEN.get(cursor.rowcount) or Outcome((), cursor.rowcount))
                continue
            fetched = True  # (tuples where the plan reads by position, see Step)
            rows = cursor.fetchall() if step.positional else _rows(compiler, direct, cursor)
            step = plan.send(Outcome(rows, len(rows)))
    except StopIteration as done:
        result: T = done.value
    except dialect.loaded_dbapi.Error as error:
        _rollback_quietly(dbapi_connection, dialect)
        partly = retry.mark_partly_committed if committed else None
        _raise_wrapped(core(), error, sql, parameters, cursor, partly)
        raise  # (_raise_wrapped raised)
    except Exception:
        _rollback_quietly(dbapi_connection, dialect)
        raise
    if commit:  # (an error here is the COMMIT's alone: not the handlers' above)
        try:
            dbapi_connection.commit()
        except dialect.loaded_dbapi.Error as error:  # (maybe still open: SQLITE_BUSY)
            _rollback_quietly(dbapi_connection, dialect)  # (as Core's Connection.close)
            at = retry.mark_partly_committed if committed else retry.mark_failed_at_commit
            _raise_wrapped(core(), error, sql, parameters, cursor, at)
    return result, fetched


def _commit_step(dbapi_connection: Any, begin: Callable[[], None] | None) -> bool:
    """A plan's ``COMMIT`` step; ``begin`` (``DirectDriver.begin``, on a session kept in
    autocommit) then begins the transaction of the statements after it. True."""
    dbapi_connection.commit()
    if begin is not None:
        begin()
    return True


def _rows(compiler: DirectCompiler, direct: DirectStatement, cursor: Any) -> list[Any]:
    """The fetched rows, each a mapping by column name too."""
    names = compiler.column_names(direct, cursor)
    return [Row(dict(zip(names, values, strict=True))) for values in cursor.fetchall()]


# What a COMMIT step sends back to its plan.
_COMMITTED = Outcome((), 0)
# What a write sends back, by its usual rowcounts: made once (a named tuple's
# ``__new__`` is a Python call, about 3k instructions per step).
_WRITTEN = {rowcount: Outcome((), rowcount) for rowcount in range(-1, 17)}


def _unprepared(
    dbapi_connection: Any,
    dialect: Dialect,
    core: Callable[[], Connection],
    restore: Restore | None,
    error: Exception,
) -> None:
    """A plan's cursor or autocommit switch failed: fail as a step does (rolled back,
    the AUTOCOMMIT undone, a DBAPI error raised as SQLAlchemy would)."""
    _rollback_quietly(dbapi_connection, dialect)
    _restore_quietly(dialect, None, restore)
    if isinstance(error, dialect.loaded_dbapi.Error):
        _raise_wrapped(core(), error, None, None, None, None)


def _prepare(
    pooled: PoolProxiedConnection,
    dialect: Dialect,
    core: Callable[[], Connection],
    driver: DirectDriver,
    autocommit: bool,
    out_of_autocommit: OutOfAutocommit | None,
) -> tuple[Any, bool, Restore | None, Restore | None]:
    """The plan's cursor (the one the last plan on this connection kept, where the
    driver keeps cursors, or a new one); for ``autocommit``, what undoes the
    connection's AUTOCOMMIT; and what begins the transaction after a COMMIT step on a
    session kept in autocommit. ``out_of_autocommit`` (``DialectOps.out_of_autocommit``,
    given for a plan of several statements): asked first, it makes the plan one
    transaction on a session in autocommit, and says how to give the session back.
    Failing, they fail as a step does: rolled back, the AUTOCOMMIT undone, a DBAPI
    error raised as SQLAlchemy would."""
    dbapi_connection: Any = pooled.dbapi_connection  # (checked by ``run``)
    restore: Restore | None = None
    again: Restore | None = None
    try:
        if autocommit:
            restore = driver.autocommit(dialect, dbapi_connection)
        elif driver.begin is not None:  # (a session left in autocommit: DirectDriver.begin)
            driver.begin(dbapi_connection)
            again = partial(driver.begin, dbapi_connection)  # (after a COMMIT step)
        elif out_of_autocommit is not None:
            hold = out_of_autocommit(dialect, dbapi_connection)
            if hold is not None:
                restore, again = hold.restore, hold.again
        if driver.keeps_cursors:  # the cursor the last plan on this connection kept
            kept = pooled.info.pop(_KEPT_CURSOR, None)  # (out of info: this plan's alone)
            if kept is not None and kept[0] is dbapi_connection:
                return kept[1], kept[2], restore, again
        if driver.plain_cursors:  # (``_plain_cursor``, inlined: a frame less per call)
            return dbapi_connection.cursor(), False, restore, again
        cursor, native = driver.open_cursor(dbapi_connection)
        return cursor, native, restore, again
    except Exception as error:  # (interrupted: no more I/O, see run)
        _unprepared(dbapi_connection, dialect, core, restore, error)
        raise


# A step of one row (a checkpoint, a lone blob or write) is executed, not executemany'd:
# drivers' executemany costs more for it (PyMySQL matches and rebuilds the INSERT ...
# VALUES with regular expressions first).
_ONE_ROW = 1


# Where a plan's cursor waits for the next plan on the same connection (a pooled
# connection's ``info``: one DBAPI connection's, cleared when it is replaced).
_KEPT_CURSOR = "lg_sqla_kept_cursor"


def _restore_quietly(dialect: Dialect, cursor: Any, restore: Restore | None) -> None:
    """Close the cursor and undo AUTOCOMMIT; on a dead connection, SQLAlchemy's
    handler has already invalidated it, so errors here change nothing."""
    try:
        if cursor is not None:
            cursor.close()
        if restore is not None:
            restore()
    except dialect.loaded_dbapi.Error:
        pass


def _rollback_quietly(dbapi_connection: Any, dialect: Dialect) -> None:
    # On a dead connection this fails too; SQLAlchemy's handler then invalidates it.
    with contextlib.suppress(dialect.loaded_dbapi.Error):
        dbapi_connection.rollback()


def _raise_wrapped(
    connection: Connection,
    error: Exception,
    statement: str | None,
    parameters: Any,
    cursor: Any,
    mark: Callable[[BaseException], None] | None,
) -> None:
    """Raise ``error`` as SQLAlchemy would have: wrapped in its DBAPIError class, the
    connection invalidated if the error says it is dead; ``mark`` records where in the
    plan it happened, for the retry decision (``runtime.retry``)."""
    try:
        # SQLAlchemy's one place that wraps DBAPI errors, detects disconnects and
        # invalidates the pool's stale connections.
        internals.raise_as_connection(connection, error, statement, parameters, cursor)
    except Exception as wrapped:
        if mark is not None and hasattr(wrapped, "orig"):
            mark(wrapped)
        raise
