"""Bound calls: plans run on the caller's connection, inside the caller's transaction.

A saver, store or node cache bound to an application's ``Connection`` / ``Session``
(``saver.bound(session)``; docs/application.md) runs every call here rather than
through ``Runtime.run``. A bound call:

* runs on the caller's connection (a ``Session``'s: ``session.connection()``, after
  the session's pending changes are flushed when it autoflushes), never on one of the
  owner's pool: no connection of its own, no COMMIT and no ROLLBACK of the caller's
  transaction. A plan's ``COMMIT`` steps (batches of a sweep) are dropped: the whole
  call is part of the caller's transaction, which commits or rolls back as a whole;
* runs in a SAVEPOINT (``begin_nested``), released at its end: a call that fails,
  whichever statement failed, leaves the caller's transaction usable (PostgreSQL
  included, where a failed statement aborts the whole transaction) with nothing of
  that call applied;
* is never retried. A deadlock or serialization failure inside a transaction the
  caller owns may have rolled the caller's earlier work back with it (MySQL and
  MariaDB roll the whole transaction back on a deadlock): only the caller can run its
  transaction again. The database's error is raised as it is, with a note saying so
  (``BOUND_CONFLICT_NOTE``);
* takes neither SQLite's in-process writer lock (``runtime.locks``: it is taken
  before a connection is checked out, and the caller already holds one, maybe with
  SQLite's own write lock; waiting for the in-process lock then could wait for a
  writer that waits for this transaction) nor the direct path (``runtime.direct``:
  the caller's connection goes through Core, as the caller's own statements do);
* is one at a time per bound target: a connection serves one statement at a time,
  while LangGraph calls its checkpointer from several threads (sync) or tasks
  (async) at once. Every view bound to the same target shares one lock.

lg_sqla's tables are found where the owner's engine says (``schema=``): the owner's
``schema_translate_map`` is set on the caller's connection for the call and the
caller's own put back after it.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from lg_sqla import migrate
from lg_sqla.errors import InvalidInputError
from lg_sqla.plans import Outcome, Plan, PlanSource, in_one_transaction

if TYPE_CHECKING:
    from lg_sqla.runtime.executor import Runtime

T = TypeVar("T")
TargetT = TypeVar("TargetT")
LockT = TypeVar("LockT")

SyncTarget = Connection | Session
AsyncTarget = AsyncConnection | AsyncSession

BOUND_CONFLICT_NOTE = (
    "lg_sqla did not retry this call: it ran inside your transaction (a bound saver, "
    "store or cache), which the database may have rolled back as a whole. Roll your "
    "transaction back and run it again from its start."
)

# One lock per bound target, shared by every view bound to it (a saver's and a
# store's on one session); weakly keyed: it goes with the session or connection.
_SYNC_LOCKS: weakref.WeakKeyDictionary[object, threading.RLock] = weakref.WeakKeyDictionary()
_ASYNC_LOCKS: weakref.WeakKeyDictionary[object, asyncio.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _lock_of(
    locks: weakref.WeakKeyDictionary[object, LockT], target: object, new: Callable[[], LockT]
) -> LockT:
    """``target``'s lock in ``locks``, made by ``new()`` on its first call."""
    with _LOCKS_GUARD:
        lock = locks.get(target)
        if lock is None:
            lock = locks[target] = new()
        return lock


class _Call:
    """What every bound call of one owner needs: its runtime (schema check, dialect)
    and where its tables are (the owner engine's ``schema_translate_map``)."""

    def __init__(self, runtime: Runtime, engine: Engine | AsyncEngine) -> None:
        self.runtime = runtime
        sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
        self.dialect_name = sync_engine.dialect.name
        translate = sync_engine.get_execution_options().get("schema_translate_map")
        self.translate: dict[Any, Any] | None = dict(translate) if translate else None

    def run_on(self, connection: Connection, plan: Plan[T]) -> T:
        """Run a plan (its COMMIT steps dropped) on the caller's connection, in a
        SAVEPOINT; never retried."""
        if connection.dialect.name != self.dialect_name:
            raise InvalidInputError(
                f"this lg_sqla object was made for {self.dialect_name}; it cannot be "
                f"bound to a {connection.dialect.name} connection"
            )
        theirs = connection.get_execution_options().get("schema_translate_map")
        if theirs != self.translate:
            connection.execution_options(schema_translate_map=self.translate)
        try:
            return self._in_savepoint(connection, in_one_transaction(plan))
        finally:
            if theirs != self.translate and not connection.closed:
                connection.execution_options(schema_translate_map=theirs)

    def _in_savepoint(self, connection: Connection, plan: Plan[T]) -> T:
        try:
            step = next(plan)  # (validates and builds before any statement)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        # A database whose own transaction lags SQLAlchemy's (pysqlite's legacy mode)
        # joins it first, or the savepoint's release would commit (DialectOps).
        self.runtime.dialect_ops.join_transaction(connection)
        savepoint = connection.begin_nested()
        try:
            if not self.runtime.schema_checked:
                migrate.check_schema(connection)
                self.runtime.schema_checked = True
            while True:
                assert step.statement is not None  # (in_one_transaction)
                result = connection.execute(step.statement, step.params)
                rows = result.all() if step.fetch else []
                step = plan.send(Outcome(rows, len(rows) if step.fetch else result.rowcount))
        except StopIteration as done:
            savepoint.commit()  # (RELEASE SAVEPOINT: the caller's transaction goes on)
            return done.value  # type: ignore[no-any-return]
        except BaseException as error:
            self._roll_back(savepoint, error)
            raise

    def _roll_back(self, savepoint: Any, error: BaseException) -> None:
        """Undo the failed call's statements, keep the caller's transaction. Where the
        database already ended that transaction (a MySQL deadlock), the savepoint is
        gone too: the call's own error is the one the caller sees."""
        orig = getattr(error, "orig", None)
        if orig is not None and self.runtime.dialect_ops.is_lock_conflict(orig):
            _note(error, BOUND_CONFLICT_NOTE)
        try:
            if savepoint.is_active:
                savepoint.rollback()
        except Exception:  # (the call's own error is what the caller must see)
            _note(
                error,
                "lg_sqla could not roll its SAVEPOINT back: your transaction is no longer "
                "usable; roll it back.",
            )


def _note(error: BaseException, note: str) -> None:
    add_note = getattr(error, "add_note", None)  # (Python 3.11+)
    if add_note is not None:
        add_note(note)


class _Bound(Generic[TargetT]):
    """What both bindings keep: the caller's target, checked to be of this face (the
    other face's target is named in the error), and the owner's call."""

    # The targets this face takes, those of the other face, and what to say of each.
    takes: tuple[type, ...]
    takes_text: str
    other_face: tuple[type, ...]
    other_face_error: str  # (``{name}``: the type given)

    def __init__(
        self,
        target: TargetT,
        runtime: Runtime,
        engine: Engine | AsyncEngine,
        mapper: type | None = None,
    ):
        name = type(target).__name__
        if isinstance(target, self.other_face):
            raise InvalidInputError(self.other_face_error.format(name=name))
        if not isinstance(target, self.takes):
            raise InvalidInputError(
                f"bound() takes a SQLAlchemy {self.takes_text} (in a transaction the "
                f"caller commits or rolls back), got {name}"
            )
        self.target = target
        # A Session's connection for lg_sqla's tables: Session.get_bind() by one of their
        # mapped classes (``Session(binds={lg_sqla.models.Base: engine})``), else its bind.
        self._bind_arguments = {"mapper": mapper} if mapper is not None else None
        self._call = _Call(runtime, engine)


class Binding(_Bound[SyncTarget]):
    """An owner bound to a sync ``Connection`` or ``Session`` (module docstring)."""

    takes = (Connection, Session)
    takes_text = "Connection or ORM Session"
    other_face = (AsyncConnection, AsyncSession)
    other_face_error = (
        "a sync lg_sqla object cannot be bound to an {name}: bind the async saver/store "
        "(AsyncSQLAlchemySaver, AsyncSQLAlchemyStore) or give a sync Connection or Session"
    )

    def __init__(
        self,
        target: SyncTarget,
        runtime: Runtime,
        engine: Engine | AsyncEngine,
        mapper: type | None = None,
    ):
        super().__init__(target, runtime, engine, mapper)
        # Reentrant: a progress callback of a sweep may call the same view again.
        self._lock = _lock_of(_SYNC_LOCKS, target, threading.RLock)

    def run(self, source: PlanSource[T]) -> T:
        plan = source() if callable(source) else source
        with self._lock:
            return self._call.run_on(self._connection(), plan)

    def _connection(self) -> Connection:
        target = self.target
        if isinstance(target, Connection):
            if target.closed or target.invalidated:
                raise InvalidInputError("the Connection this object is bound to is closed")
            return target
        if target.autoflush:  # the app's pending rows first, as its own queries see them
            target.flush()
        return target.connection(bind_arguments=self._bind_arguments)


class AsyncBinding(_Bound[AsyncTarget]):
    """An owner bound to an ``AsyncConnection`` or ``AsyncSession``: the same call as
    :class:`Binding`'s, run on the sync connection in one greenlet (``run_sync``)."""

    takes = (AsyncConnection, AsyncSession)
    takes_text = "AsyncConnection or AsyncSession"
    other_face = (Connection, Session)
    other_face_error = (
        "an async lg_sqla object cannot be bound to a {name}: bind the sync saver/store "
        "(SQLAlchemySaver, SQLAlchemyStore) or give an AsyncConnection or AsyncSession"
    )

    async def run(self, source: PlanSource[T]) -> T:
        plan = source() if callable(source) else source
        async with _lock_of(_ASYNC_LOCKS, self.target, asyncio.Lock):
            connection = await self._connection()
            run_on: Callable[[Connection, Plan[T]], T] = self._call.run_on
            return await connection.run_sync(run_on, plan)

    async def _connection(self) -> AsyncConnection:
        target = self.target
        if isinstance(target, AsyncConnection):
            if target.closed:
                raise InvalidInputError("the AsyncConnection this object is bound to is closed")
            return target
        if target.autoflush:
            await target.flush()
        return await target.connection(bind_arguments=self._bind_arguments)


OwnerT = TypeVar("OwnerT")


def bound_view(owner: OwnerT, binding: object) -> OwnerT:
    """A shallow clone of ``owner`` (a saver, a store) whose calls run on ``binding``
    (a :class:`Binding` or :class:`AsyncBinding`): the same runtime, serializer and
    settings; only where its statements run differs."""
    view = copy.copy(owner)
    view.__dict__["_binding"] = binding
    return view


def refuse_on_view(owner: object, call: str, kind: str) -> None:
    """Refuse ``call`` on a view :func:`bound_view` made: it would need a connection of
    its own. ``kind``: what the owner is to its user ("saver", "store")."""
    if getattr(owner, "_binding", None) is not None:
        raise InvalidInputError(
            f"{call}: this is a view bound to your transaction (bound()); call it on "
            f"the {kind} you bound, which has an engine of its own"
        )
