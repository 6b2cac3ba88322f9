"""Plans: the language every database operation of lg_sqla is written in.

An operation (the checkpointer's calls and maintenance, the store's batches, the node
cache, inspection) is a *plan*: a generator that yields :class:`Step` s (a
statement and its parameters) and receives each step's :class:`Outcome` back. It
does no I/O, so each operation's logic exists once; ``lg_sqla.runtime`` runs plans,
sync or async, on SQLAlchemy Core or the direct path. This module imports nothing of
lg_sqla's: every layer may use it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from types import CodeType
from typing import Any, NamedTuple, TypeVar

from sqlalchemy.engine import Row
from sqlalchemy.sql import Executable

T = TypeVar("T")
PlanFunction = TypeVar("PlanFunction", bound=Callable[..., Any])
# A statement's parameters, or a result row's mapping (keys may be str or Column).
Record = Mapping[Any, Any]
Rows = Sequence[Row[Any]]


class Step(NamedTuple):
    """One statement to execute; ``fetch`` says whether the plan wants its rows.

    A step without a statement (``COMMIT``) commits the work so far; the next
    statement starts a new transaction. Plans that touch many threads use it
    so no single transaction grows with the data.

    ``whole_plan`` marks a first step that is the plan's only statement: one
    statement is atomic by itself, so where the dialect gains from it
    (``DialectOps.autocommit_single_statements``) the shell runs it without an
    explicit BEGIN/COMMIT, one round trip instead of three.

    ``positional``: the plan reads the fetched rows by position only (``row[i]``, in
    the statement's column order), so the direct path may hand it the driver's rows
    as they are, without a mapping per row; Core's rows are sequences too.

    Immutable, and a named tuple (not a frozen dataclass): each call makes a step or
    two and an outcome per step, and a frozen dataclass's ``__init__`` sets each field
    through ``object.__setattr__``, nearly three times a tuple's cost.
    """

    statement: Executable | None
    params: Sequence[Record] | Record | None = None
    fetch: bool = False
    whole_plan: bool = False
    positional: bool = False


COMMIT = Step(None)


def one_row(params: Sequence[Record] | Record | None) -> bool:
    """Whether a step's parameters are one row (a list of one is executed as one). A
    step of several rows is an ``executemany``, which most drivers send as a statement
    per row (sqlite3, psycopg2), each committed alone on a session in autocommit: it
    is atomic only in a transaction, as a plan of several statements."""
    return type(params) is not list or len(params) <= 1


class Outcome(NamedTuple):
    """What a step sends back to its plan: the rows (if fetched) and the rowcount
    (a named tuple, as :class:`Step`)."""

    rows: Rows
    rowcount: int


Plan = Generator[Step, Outcome, T]
# What the shells run: a plan, run once, or a factory of fresh plans, which they may
# call again when the database rolled an attempt back (see lg_sqla.runtime.retry).
PlanSource = Plan[T] | Callable[[], Plan[T]]


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


# The code of every plan function declared :func:`prebuilt`, by ``id`` (a plan is a
# generator: its ``gi_code`` names the function that made it). By id, not by the code
# object: a code object's hash is computed anew at each lookup (over its bytecode and
# constants: thousands of instructions per call). Kept here, so no id is reused.
_PREBUILT: dict[int, CodeType] = {}
# The same mapping, for the runtime's per-call test (``id(plan.gi_code) in ...``,
# inlined where a call of :func:`is_prebuilt` would be one more frame per call).
PREBUILT_CODES: Mapping[int, CodeType] = _PREBUILT


def prebuilt(function: PlanFunction) -> PlanFunction:
    """Declare a plan function *prebuilt*: every statement its plans may run comes from
    ``DialectOps.cached`` (built once, compiled once), so the runtime may take the
    direct path for them (``runtime.routing``). Said once, here, by the function that
    builds the statements, never by its callers; the runtime reads it from the plan
    (:func:`is_prebuilt`). A plan function that builds any statement per call
    (``IN`` lists of its arguments, per-call filters) must not be declared."""
    _PREBUILT[id(function.__code__)] = function.__code__
    return function


def is_prebuilt(plan: object) -> bool:
    """Whether ``plan`` was made by a plan function declared :func:`prebuilt`."""
    return id(getattr(plan, "gi_code", None)) in _PREBUILT


@prebuilt
def declared_prebuilt(plan: Plan[T]) -> Plan[T]:
    """``plan``, declared prebuilt: for a plan function whose statements are prebuilt
    or not by its arguments (the store's batches: by their ops and the store's
    index), the function that builds its plan decides, and says so with this."""
    return (yield from plan)
