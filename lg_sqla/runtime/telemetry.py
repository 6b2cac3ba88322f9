"""What one call did, counted where plans meet the runtime, for ``lg_sqla.telemetry``.

Nothing here runs unless telemetry is turned on (``lg_sqla.telemetry.instrument``):
:func:`install` then wraps the four places a call's work passes through, and
:func:`uninstall` puts the originals back, so a process that never turns it on runs
exactly the code it would run without this module (no flag tested per call):

* ``Runtime.run`` / ``Runtime.arun``, where every plan enters the executor: the plan
  (or each fresh plan of a factory, one per attempt) is wrapped in :func:`_observed`,
  which counts the statements it yields, the rows and rowcounts sent back, and the
  bytes of binary parameters (serialized channel values and writes) and fetched
  binary columns;
* ``Router.path_of``: the execution path the call took (``direct`` or ``core``), and
  ``Runtime._run_lean``, the direct path of a plan whose path was remembered;
* ``retry.retry_delay``: each retry, and each lock conflict the database reported.

The counts go to the :class:`CallStats` of the public call in progress
(:data:`current`, a context variable: it follows a call into worker threads and
event-loop tasks, which copy the context). Plans run outside such a call (the
inspector's own queries, the CLI) are not counted.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError

from lg_sqla.plans import Outcome, Plan, PlanSource, Step, T, is_prebuilt, prebuilt
from lg_sqla.runtime import retry
from lg_sqla.runtime.executor import Runtime
from lg_sqla.runtime.routing import Path, Router

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from lg_sqla.dialects import DialectOps

# The table whose inserts are insert-or-ignore: a row offered and not written is a
# value already stored (a blob dedup hit).
BLOBS_TABLE = "checkpoint_blobs"


@dataclass
class CallStats:
    """What one public call did, summed over its plans and their attempts."""

    statements: int = 0
    rows_returned: int = 0
    rows_affected: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    attempts: int = 0
    retries: int = 0
    conflicts: int = 0
    paths: set[str] = field(default_factory=set)
    # Blob rows offered to an insert-or-ignore, and those the database wrote; None
    # while no such insert told (one-statement puts do not: PostgreSQL, MariaDB).
    blobs_offered: int = 0
    blobs_written: int | None = None

    @property
    def blob_dedup_hits(self) -> int | None:
        if self.blobs_written is None:
            return None
        return self.blobs_offered - self.blobs_written


current: contextvars.ContextVar[CallStats | None] = contextvars.ContextVar(
    "lg_sqla_call_stats", default=None
)


def _binary_bytes(params: Mapping[Any, Any] | Sequence[Mapping[Any, Any]] | None) -> int:
    if params is None:
        return 0
    rows = (params,) if isinstance(params, Mapping) else params
    return sum(
        len(value)
        for row in rows
        for value in row.values()
        if isinstance(value, (bytes, bytearray, memoryview))
    )


def _fetched_bytes(rows: Sequence[Any]) -> int:
    # (SQLAlchemy's and the direct path's rows by mapping; a driver's tuples as they are)
    return sum(
        len(value)
        for row in rows
        for value in (row._mapping.values() if hasattr(row, "_mapping") else row)
        if isinstance(value, (bytes, bytearray, memoryview))
    )


def _blob_rows(step: Step) -> int:
    """How many rows ``step`` offers to the blobs' insert-or-ignore (0: another step)."""
    table = getattr(step.statement, "table", None)
    if getattr(table, "name", None) != BLOBS_TABLE or not getattr(step.statement, "is_insert", 0):
        return 0
    params = step.params
    if params is None:
        return 0
    return 1 if isinstance(params, Mapping) else len(params)


def _observed(plan: Plan[T], stats: CallStats) -> Plan[T]:
    """``plan`` as it is, counted into ``stats``."""
    stats.attempts += 1
    try:
        step = next(plan)
        while True:
            offered = 0
            if step.statement is not None:
                stats.statements += 1
                stats.bytes_written += _binary_bytes(step.params)
                offered = _blob_rows(step)
            outcome: Outcome = yield step
            if step.fetch:
                stats.rows_returned += len(outcome.rows)
                stats.bytes_read += _fetched_bytes(outcome.rows)
            elif outcome.rowcount > 0:
                stats.rows_affected += outcome.rowcount
            if offered and outcome.rowcount >= 0:
                stats.blobs_offered += offered
                stats.blobs_written = (stats.blobs_written or 0) + outcome.rowcount
            step = plan.send(outcome)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


@prebuilt
def _observed_prebuilt(plan: Plan[T], stats: CallStats) -> Plan[T]:
    """:func:`_observed` of a prebuilt plan (``plans.prebuilt``), itself declared
    prebuilt: its statements are that plan's, so the direct and lean paths stay open
    to it with telemetry on (they would see an undeclared wrapper and send every
    call through Core)."""
    return (yield from _observed(plan, stats))


def _observed_as(plan: Plan[T], stats: CallStats) -> Plan[T]:
    """``plan`` counted into ``stats``, prebuilt where ``plan`` is."""
    return (_observed_prebuilt if is_prebuilt(plan) else _observed)(plan, stats)


_OBSERVED_CODES = (_observed.__code__, _observed_prebuilt.__code__)


class _ObservedFactory:
    """A plan factory whose every fresh plan (one per attempt) is counted."""

    __slots__ = ("factory", "stats")

    def __init__(self, factory: Callable[[], Plan[Any]], stats: CallStats) -> None:
        self.factory = factory
        self.stats = stats

    def __call__(self) -> Plan[Any]:
        return _observed_as(self.factory(), self.stats)


def _observe(source: PlanSource[T], stats: CallStats) -> PlanSource[T]:
    if isinstance(source, _ObservedFactory):  # (arun handing a call to run in a thread)
        return source
    if callable(source):
        return _ObservedFactory(source, stats)
    if getattr(source, "gi_code", None) in _OBSERVED_CODES:
        return source
    return _observed_as(source, stats)


_ORIGINALS: dict[str, Any] = {}


def installed() -> bool:
    return bool(_ORIGINALS)


def install() -> None:
    """Wrap the runtime's entry points (idempotent)."""
    if _ORIGINALS:
        return
    run, arun, path_of, retry_delay = Runtime.run, Runtime.arun, Router.path_of, retry.retry_delay
    run_lean = Runtime._run_lean
    _ORIGINALS.update(
        run=run, arun=arun, path_of=path_of, retry_delay=retry_delay, run_lean=run_lean
    )

    def counted_run(self: Runtime, engine: Engine, source: PlanSource[T], **options: Any) -> T:
        stats = current.get()
        if stats is not None:
            source = _observe(source, stats)
        return run(self, engine, source, **options)

    async def counted_arun(self: Runtime, engine: Any, source: PlanSource[T], **options: Any) -> T:
        stats = current.get()
        if stats is not None:
            source = _observe(source, stats)
        result: T = await arun(self, engine, source, **options)
        return result

    def counted_path_of(self: Router, engine: Engine, first: Step, prebuilt: bool) -> Path:
        path: Path = path_of(self, engine, first, prebuilt)
        stats = current.get()
        if stats is not None:
            stats.paths.add(path.value)
        return path

    def counted_run_lean(self: Runtime, engine: Engine, plan: Plan[T], first: Step) -> T:
        # (a plan the runtime remembered for its lean path asks no router: see attempt)
        stats = current.get()
        if stats is not None:
            stats.paths.add(Path.DIRECT.value)
        return run_lean(self, engine, plan, first)

    def counted_retry_delay(
        error: DBAPIError | ConnectionError, attempt: int, dialect_ops: DialectOps, **options: Any
    ) -> float | None:
        # (``options``: retry_delay's own keywords, passed on as they came)
        delay: float | None = retry_delay(error, attempt, dialect_ops, **options)
        stats = current.get()
        if stats is not None:
            orig = error.orig if isinstance(error, DBAPIError) else None
            if orig is not None and dialect_ops.is_lock_conflict(orig):
                stats.conflicts += 1
            if delay is not None:
                stats.retries += 1
        return delay

    Runtime.run = counted_run  # type: ignore[method-assign]
    Runtime.arun = counted_arun  # type: ignore[method-assign]
    Router.path_of = counted_path_of  # type: ignore[method-assign]
    Runtime._run_lean = counted_run_lean  # type: ignore[method-assign]
    retry.retry_delay = counted_retry_delay


def uninstall() -> None:
    """Put the runtime's entry points back as they were."""
    if not _ORIGINALS:
        return
    Runtime.run = _ORIGINALS["run"]  # type: ignore[method-assign]
    Runtime.arun = _ORIGINALS["arun"]  # type: ignore[method-assign]
    Router.path_of = _ORIGINALS["path_of"]  # type: ignore[method-assign]
    Runtime._run_lean = _ORIGINALS["run_lean"]  # type: ignore[method-assign]
    retry.retry_delay = _ORIGINALS["retry_delay"]
    _ORIGINALS.clear()
