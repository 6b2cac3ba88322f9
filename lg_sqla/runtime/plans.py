"""Plans: how lg_sqla's I/O-free operations talk to the sync and async shells.

An operation (``operations``, ``maintenance``, ``history``, ``rotation``) is a
*plan*: a generator that yields :class:`Step` s (a statement and its
parameters) and receives each step's :class:`Outcome` back. It does no I/O.
:func:`drive` runs a plan on a Core ``Connection``; the execution layer
(``lg_sqla.runtime``) runs it sync, or async in one greenlet, so every operation's
logic exists once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Executable

from lg_sqla.dialects import DialectOps
from lg_sqla.runtime import retry

T = TypeVar("T")
# A statement's parameters, or a result row's mapping (keys may be str or Column).
Record = Mapping[Any, Any]
Rows = Sequence[Row[Any]]


@dataclass(frozen=True)
class Step:
    """One statement to execute; ``fetch`` says whether the plan wants its rows.

    A step without a statement (``COMMIT``) commits the work so far; the next
    statement starts a new transaction. Plans that touch many threads use it
    so no single transaction grows with the data.

    ``whole_plan`` marks a first step that is the plan's only statement: one
    statement is atomic by itself, so where the dialect gains from it
    (``DialectOps.autocommit_single_statements``) the shell runs it without an
    explicit BEGIN/COMMIT, one round trip instead of three.
    """

    statement: Executable | None
    params: Sequence[Record] | Record | None = None
    fetch: bool = False
    whole_plan: bool = False


COMMIT = Step(None)


@dataclass(frozen=True)
class Outcome:
    """What a step sends back to its plan: the rows (if fetched) and the rowcount."""

    rows: Rows
    rowcount: int


Plan = Generator[Step, Outcome, T]
# What the shells run: a plan, run once, or a factory of fresh plans, which they may
# call again when the database rolled an attempt back (see lg_sqla.runtime.retry).
PlanSource = Plan[T] | Callable[[], Plan[T]]


@dataclass(frozen=True)
class Context:
    """What every plan needs from its saver."""

    ops: DialectOps
    serde: SerializerProtocol
    # The saver's get_next_version(None, None), called only where a tuple needs it
    # (a v<4 checkpoint with pending sends and no versions).
    next_version: Callable[[], Any] = lambda: None  # (callers that build no tuples)


def drive(connection: Connection, plan: Plan[T], first: Step, *, commit: bool = False) -> T:
    """Run a plan's statements on ``connection``, feeding each one's rows back; with
    ``commit``, commit at its end. Errors are marked for the retry decision
    (``runtime.retry``): after a ``COMMIT`` step, or by the final commit itself."""
    step = first
    committed = False
    try:
        while True:
            if step.statement is None:
                connection.commit()
                committed = True
                step = plan.send(Outcome((), 0))
                continue
            result = connection.execute(step.statement, step.params)
            rows = result.all() if step.fetch else []
            step = plan.send(Outcome(rows, result.rowcount if not step.fetch else len(rows)))
    except StopIteration as done:
        if commit:
            try:
                connection.commit()
            except DBAPIError as error:
                _end_refused_transaction(connection)
                mark = retry.mark_partly_committed if committed else retry.mark_failed_at_commit
                mark(error)
                raise
        return done.value  # type: ignore[no-any-return]
    except DBAPIError as error:
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


def in_one_transaction(plan: Plan[T]) -> Plan[T]:
    """The same plan with its ``COMMIT`` steps dropped, so all of it is one transaction
    (a dry run executes a plan this way and rolls the transaction back)."""
    try:
        step = next(plan)
        while True:
            # A COMMIT step is answered here and never reaches the database.
            outcome = Outcome((), 0) if step.statement is None else (yield step)
            step = plan.send(outcome)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
