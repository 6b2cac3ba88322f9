"""Retention by policy: checkpoint TTLs, pins, keep-last pruning on write, the TTL sweep.

A thread's clock is its newest checkpoint's ``updated_at`` (every put writes it, so
refresh on write costs nothing), or the last read that refreshed it
(``checkpoint_retention.touched_at``, only with ``refresh_on_read``), whichever is
later. It expires ``ttl`` after that: its own TTL (``checkpoint_retention.ttl_minutes``)
or else the policy's ``default_ttl``. A pinned thread never expires.

A run in progress is never expired: a thread whose newest root checkpoint still has
tasks to run (a trigger channel among its ``updated_channels``) and no interrupt or
error write is mid-run, and is kept until ``max_run_minutes`` after its last write
(after that it is taken for a run whose process died).

Expiry is whole-thread and atomic: the sweep deletes all rows of an expired thread
in one transaction, and every read of a saver with a policy first asks whether the
thread has expired, so an expired thread not yet swept reads as absent, never as
half of itself.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)

from lg_sqla.checkpoint import codec, maintenance, operations
from lg_sqla.checkpoint.base import Context
from lg_sqla.checkpoint.maintenance import RowCounts, SweepReport
from lg_sqla.checkpoint.policy import CheckpointTTL, Policy, check_ttl_minutes, policy_from
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import checkpoint_retention as R
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import COMMIT, Plan, Step
from lg_sqla.shared import key_hash, utc_now

ROOT_NS_HASH = key_hash("")
# Channels whose update schedules a task (LangGraph's edges, joins, Send, the input).
_TRIGGER_PREFIXES = ("branch:to:", "join:")
_TRIGGER_NAMES = frozenset({"__start__", "__pregel_tasks"})
# Writes that end a run without finishing it: it waits for a human, or it failed.
_RUN_ENDED = ("__interrupt__", "__error__")


# --- what is known of a thread ---------------------------------------------------------


@dataclass(frozen=True)
class ThreadRetention:
    """A thread's retention facts and, under a default TTL, when it expires."""

    thread_id: str
    last_write: dt.datetime | None  # newest checkpoint's updated_at; None: no checkpoint
    ttl_minutes: float | None  # its own TTL; None: the policy's default
    pinned: bool
    touched_at: dt.datetime | None  # last refreshing read

    @property
    def last_activity(self) -> dt.datetime | None:
        times = [t for t in (self.last_write, self.touched_at) if t is not None]
        return max(times) if times else None

    def ttl(self, default: dt.timedelta | None) -> dt.timedelta | None:
        return dt.timedelta(minutes=self.ttl_minutes) if self.ttl_minutes is not None else default

    def expires_at(self, default: dt.timedelta | None) -> dt.datetime | None:
        """When the thread's TTL runs out (None: pinned, no TTL, or no checkpoint)."""
        ttl, last = self.ttl(default), self.last_activity
        if self.pinned or ttl is None or self.last_write is None or last is None:
            return None
        return last + ttl


def _facts(thread_id: str, row: Any) -> ThreadRetention:
    return ThreadRetention(
        thread_id=thread_id,
        last_write=row.last_write,
        ttl_minutes=None if row.ttl_minutes is None else float(row.ttl_minutes),
        pinned=bool(row.pinned),
        touched_at=row.touched_at,
    )


def thread_retention(thread_id: str) -> Plan[ThreadRetention]:
    """One thread's facts, one statement (a thread without settings has no row)."""

    def setting(column: sa.Column[Any]) -> Any:
        return sa.select(column).where(R.c.thread_id == thread_id).scalar_subquery()

    stmt = sa.select(
        sa.select(sa.func.max(C.c.updated_at))
        .where(C.c.thread_id == thread_id)
        .scalar_subquery()
        .label("last_write"),
        setting(R.c.ttl_minutes).label("ttl_minutes"),
        setting(R.c.pinned).label("pinned"),
        setting(R.c.touched_at).label("touched_at"),
    )
    row = (yield Step(stmt, fetch=True)).rows[0]
    return _facts(thread_id, row)


def threads_retention(thread_ids: Sequence[str]) -> Plan[list[ThreadRetention]]:
    """The facts of a batch of threads that have checkpoints, one statement."""
    if not thread_ids:
        return []
    stmt = (
        sa.select(
            C.c.thread_id,
            sa.func.max(C.c.updated_at).label("last_write"),
            R.c.ttl_minutes,
            R.c.pinned,
            R.c.touched_at,
        )
        .select_from(C.outerjoin(R, R.c.thread_id == C.c.thread_id))
        .where(C.c.thread_id.in_(list(thread_ids)))
        .group_by(C.c.thread_id, R.c.ttl_minutes, R.c.pinned, R.c.touched_at)
    )
    rows = (yield Step(stmt, fetch=True)).rows
    return [_facts(row.thread_id, row) for row in rows]


def _is_trigger(channel: str) -> bool:
    return channel in _TRIGGER_NAMES or channel.startswith(_TRIGGER_PREFIXES)


def runs_in_progress(thread_ids: Sequence[str]) -> Plan[set[str]]:
    """The threads (of these) whose newest root checkpoint has tasks still to run, with
    no interrupt or error written against it: a graph is between its supersteps.
    Two statements, whatever the number of threads."""
    if not thread_ids:
        return set()
    rank = (
        sa.func.row_number()
        .over(partition_by=C.c.thread_id, order_by=C.c.checkpoint_id.desc())
        .label("rank")
    )
    ranked = (
        sa.select(C.c.thread_id, C.c.checkpoint_id, C.c.checkpoint, rank)
        .where(C.c.thread_id.in_(list(thread_ids)), C.c.checkpoint_ns_hash == ROOT_NS_HASH)
        .subquery()
    )
    newest = (
        yield Step(
            sa.select(ranked.c.thread_id, ranked.c.checkpoint_id, ranked.c.checkpoint).where(
                ranked.c.rank == 1
            ),
            fetch=True,
        )
    ).rows
    pending = {
        (row.thread_id, row.checkpoint_id)
        for row in newest
        if any(
            isinstance(channel, str) and _is_trigger(channel)
            for channel in codec.json_object(row.checkpoint).get("updated_channels") or ()
        )
    }
    if not pending:
        return set()
    ended = (
        yield Step(
            sa.select(W.c.thread_id, W.c.checkpoint_id)
            .where(
                sa.tuple_(W.c.thread_id, W.c.checkpoint_ns_hash, W.c.checkpoint_id).in_(
                    [(thread, ROOT_NS_HASH, cid) for thread, cid in sorted(pending)]
                ),
                W.c.channel.in_(_RUN_ENDED),
            )
            .distinct(),
            fetch=True,
        )
    ).rows
    return {thread for thread, _ in pending - {(r.thread_id, r.checkpoint_id) for r in ended}}


def run_in_progress(thread_id: str) -> Plan[bool]:
    """Whether a graph is between the supersteps of a run on this thread."""
    return thread_id in (yield from runs_in_progress([thread_id]))


def due(
    facts: Sequence[ThreadRetention], default: dt.timedelta | None, now: dt.datetime
) -> list[ThreadRetention]:
    """The threads whose TTL ran out (a run in progress not yet ruled out)."""
    return [f for f in facts if (at := f.expires_at(default)) is not None and at <= now]


def expired_of(
    facts: Sequence[ThreadRetention],
    default: dt.timedelta | None,
    max_run: dt.timedelta,
    now: dt.datetime,
) -> Plan[list[str]]:
    """The threads that have expired: TTL run out, and no run in progress (a run whose
    last write is older than ``max_run`` is taken for one whose process is gone)."""
    ran_out = due(facts, default, now)
    recent = [f.thread_id for f in ran_out if f.last_write and f.last_write + max_run > now]
    running = yield from runs_in_progress(recent)
    return [f.thread_id for f in ran_out if f.thread_id not in running]


def expired(
    facts: ThreadRetention, default: dt.timedelta | None, max_run: dt.timedelta, now: dt.datetime
) -> Plan[bool]:
    """Whether this thread has expired (see ``expired_of``)."""
    return bool((yield from expired_of([facts], default, max_run, now)))


def visible(
    ctx: Context, thread_id: str, policy: Policy, *, refresh: bool, now: dt.datetime | None = None
) -> Plan[bool]:
    """Whether a read may see the thread (False: it expired, not swept yet); a read of
    a live thread refreshes its clock when ``refresh`` (the policy's refresh_on_read on
    a writable saver)."""
    now = now or utc_now()
    facts = yield from thread_retention(thread_id)
    if facts.last_write is None:
        return True  # nothing stored: the read finds nothing by itself
    if (yield from expired(facts, policy.default_ttl, policy.max_run, now)):
        return False
    if refresh:
        yield from ctx.dialect_ops.upsert_rows(
            R,
            [{"thread_id": thread_id, "touched_at": now, "updated_at": now}],
            ("touched_at", "updated_at"),
        )
    return True


def get_tuple(
    ctx: Context, config: RunnableConfig, policy: Policy, refresh: bool
) -> Plan[CheckpointTuple | None]:
    """``operations.get_tuple``, after the expiry check, in the same transaction."""
    if not (yield from visible(ctx, codec.thread_id_of(config), policy, refresh=refresh)):
        return None
    return (yield from operations.get_tuple(ctx, config))


def _in_transaction(plan: Plan[Any]) -> Plan[Any]:
    """``plan`` with no step marked ``whole_plan``: more statements follow it here, so
    its first one must not run on its own, outside the transaction."""
    try:
        step = next(plan)
        while True:
            if step.whole_plan:
                step = replace(step, whole_plan=False)
            step = plan.send((yield step))
    except StopIteration as done:
        return done.value


def put(
    ctx: Context,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
    keep_last: int,
) -> Plan[RunnableConfig]:
    """``operations.put``, then the namespace pruned to its newest ``keep_last``
    checkpoints (with their DeltaChannel ancestry), in the same transaction."""
    stored: RunnableConfig = yield from _in_transaction(
        operations.put(ctx, config, checkpoint, metadata, new_versions)
    )
    configurable = stored["configurable"]
    yield from maintenance.prune_thread(
        ctx,
        configurable["thread_id"],
        keep_last=keep_last,
        namespace_hash=key_hash(configurable["checkpoint_ns"]),
    )
    return stored


# --- per-thread settings -----------------------------------------------------------------


def set_thread(
    ctx: Context, thread_id: Any, *, ttl_minutes: float | None = None, pinned: bool | None = None
) -> Plan[ThreadRetention]:
    """Give a thread its own TTL (``ttl_minutes``; None: back to the default) and/or pin
    or unpin it; returns its facts afterwards."""
    thread = codec.thread_id_str(thread_id)
    now = utc_now()
    row: dict[str, Any] = {"thread_id": thread, "updated_at": now}
    update = ["updated_at"]
    if ttl_minutes is not None or pinned is None:
        row["ttl_minutes"] = check_ttl_minutes(ttl_minutes)
        update.append("ttl_minutes")
    if pinned is not None:
        row["pinned"] = bool(pinned)
        update.append("pinned")
    yield from ctx.dialect_ops.upsert_rows(R, [row], tuple(update))
    return (yield from thread_retention(thread))


@dataclass(frozen=True)
class ThreadTTL:
    """What ``thread_ttl`` / ``lg-sqla ttl show`` report of one thread."""

    thread_id: str
    exists: bool  # it has checkpoints
    last_write: dt.datetime | None
    touched_at: dt.datetime | None
    ttl_minutes: float | None  # its own TTL (None: the default applies)
    effective_ttl_minutes: float | None  # its own, else the default; None: never expires
    pinned: bool
    expires_at: dt.datetime | None  # None: never (pinned, no TTL, or nothing stored)
    running: bool  # a run is in progress (kept past its TTL)
    expired: bool  # reads see nothing; the next sweep deletes it


def describe(thread_id: Any, policy: Policy) -> Plan[ThreadTTL]:
    """A thread's TTL report under ``policy`` (one to three statements)."""
    thread = codec.thread_id_str(thread_id)
    now = utc_now()
    facts = yield from thread_retention(thread)
    ttl = facts.ttl(policy.default_ttl)
    running = facts.last_write is not None and (yield from run_in_progress(thread))
    return ThreadTTL(
        thread_id=thread,
        exists=facts.last_write is not None,
        last_write=facts.last_write,
        touched_at=facts.touched_at,
        ttl_minutes=facts.ttl_minutes,
        effective_ttl_minutes=None if ttl is None else ttl.total_seconds() / 60,
        pinned=facts.pinned,
        expires_at=facts.expires_at(policy.default_ttl),
        running=running,
        expired=(yield from expired(facts, policy.default_ttl, policy.max_run, now)),
    )


# --- the TTL sweep -----------------------------------------------------------------------


def _shortest_ttl(default: dt.timedelta | None) -> Plan[dt.timedelta | None]:
    """The shortest TTL any unpinned thread can have: the default or a thread's own
    (the first entry of the ttl_minutes index that is not pinned)."""
    stmt = (
        sa.select(R.c.ttl_minutes)
        .where(R.c.ttl_minutes.is_not(None), R.c.pinned == sa.false())
        .order_by(R.c.ttl_minutes)
        .limit(1)
    )
    rows = (yield Step(stmt, fetch=True)).rows
    own = dt.timedelta(minutes=float(rows[0][0])) if rows else None
    candidates = [t for t in (default, own) if t is not None]
    return min(candidates) if candidates else None


def sweep(
    ctx: Context,
    default: dt.timedelta | None,
    max_run: dt.timedelta,
    batch_size: int,
    progress: Callable[[SweepReport], None] | None,
    *,
    measure_instead: Callable[[list[str]], Plan[None]] | None = None,
) -> Plan[SweepReport]:
    """Delete expired threads, one transaction per thread.

    The candidates are threads with a checkpoint older than the shortest TTL, read a
    page at a time from the ``updated_at`` index; their facts take one statement per
    page. Each expired thread is checked again inside its own transaction (its TTL,
    then whether a run is in progress) and only then deleted, whole.

    ``measure_instead``: a dry run: instead of deleting a page's expired threads, run
    this plan on them (the CLI counts their rows and bytes, once).
    """
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be an int >= 1, got {batch_size!r}")
    now = utc_now()
    shortest = yield from _shortest_ttl(default)
    report = SweepReport(cutoff=now if shortest is None else now - shortest, strategy="ttl")
    yield COMMIT
    if shortest is None:
        return report
    seen: set[str] = set()
    after: maintenance.PagePosition | None = None
    while True:
        fresh, after = yield from maintenance.old_threads_page(
            report.cutoff, after, batch_size, seen
        )
        if fresh:
            yield from _sweep_page(ctx, report, fresh, default, max_run, now, measure_instead)
            if progress is not None:
                progress(report)
        if after is None:
            return report


def _sweep_page(
    ctx: Context,
    report: SweepReport,
    page: list[str],
    default: dt.timedelta | None,
    max_run: dt.timedelta,
    now: dt.datetime,
    measure_instead: Callable[[list[str]], Plan[None]] | None,
) -> Plan[None]:
    """One batch of candidates: their facts (one statement), then, in one transaction,
    the due ones read again, checked for a run in progress and deleted whole."""
    report.batches += 1
    candidates = due((yield from threads_retention(page)), default, now)
    yield COMMIT
    if not candidates:
        return
    report.threads_visited += len(candidates)
    # Again in the transaction that deletes them: a write since the page was read keeps
    # a thread (its TTL restarts), and so does a run that started meanwhile.
    again = yield from threads_retention([f.thread_id for f in candidates])
    doomed = yield from expired_of(again, default, max_run, now)
    if doomed and measure_instead is not None:
        yield from measure_instead(doomed)
    elif doomed:
        report.removed.add((yield from delete_threads(ctx, doomed)))
    yield COMMIT


def delete_threads(ctx: Context, thread_ids: Sequence[str]) -> Plan[RowCounts]:
    """Every row of these expired threads, settings included, in the caller's transaction
    (so each thread goes whole: a reader sees all of it or none)."""
    ids = list(thread_ids)
    out = yield from maintenance.delete_whole_threads(ctx, ids)
    yield Step(sa.delete(R).where(R.c.thread_id.in_(ids)))
    out.threads = len(ids)
    return out


__all__ = [
    "CheckpointTTL",
    "Policy",
    "ThreadRetention",
    "ThreadTTL",
    "check_ttl_minutes",
    "policy_from",
]
