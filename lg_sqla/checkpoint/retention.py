"""Retention as data: stored expiries, pins, keep-last pruning on write, the TTL sweep.

A thread's expiry is what is stored, never the policy of the process that reads or
sweeps it. Every put stamps its checkpoint's ``expires_at`` with the writing saver's
``default_ttl`` (``updated_at`` plus the TTL; NULL under no TTL) in the put's own
statement. A thread's TTL is then, first, the TTL an operator gave it
(``checkpoint_retention.ttl_minutes``: ``set_thread_ttl``, ``lg-sqla ttl set/apply``),
else the one its newest checkpoint was stamped with, else none: it never expires.

Its clock is its newest checkpoint's ``updated_at``, or the last read that refreshed
it (``checkpoint_retention.touched_at``, only with ``refresh_on_read``), whichever is
later; it expires ``ttl`` after that. A pinned thread never expires.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    CheckpointTuple,
)

from lg_sqla.checkpoint import codec, json_values, maintenance, operations
from lg_sqla.checkpoint.context import Context
from lg_sqla.checkpoint.policy import CheckpointTTL, Policy, check_ttl_minutes, policy_from
from lg_sqla.models import checkpoint_retention as R
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import Plan, Step
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
    """A thread's stored retention facts, and when they say it expires."""

    thread_id: str
    last_write: dt.datetime | None  # newest checkpoint's updated_at; None: no checkpoint
    stamped_expiry: dt.datetime | None  # newest checkpoint's expires_at (its writer's TTL)
    ttl_minutes: float | None  # the TTL an operator gave it; None: the stamped one
    pinned: bool
    touched_at: dt.datetime | None  # last refreshing read

    @property
    def last_activity(self) -> dt.datetime | None:
        times = [t for t in (self.last_write, self.touched_at) if t is not None]
        return max(times) if times else None

    @property
    def stamped_ttl(self) -> dt.timedelta | None:
        """The TTL its newest checkpoint's writer had (None: none)."""
        if self.stamped_expiry is None or self.last_write is None:
            return None
        return self.stamped_expiry - self.last_write

    @property
    def ttl(self) -> dt.timedelta | None:
        """Its own TTL, else the stamped one; None: it never expires."""
        if self.ttl_minutes is not None:
            return dt.timedelta(minutes=self.ttl_minutes)
        return self.stamped_ttl

    def runs_out_at(self) -> dt.datetime | None:
        """When its TTL runs out, pin or not (None: no TTL, or no checkpoint)."""
        ttl, last = self.ttl, self.last_activity
        if ttl is None or self.last_write is None or last is None:
            return None
        return last + ttl

    def expires_at(self) -> dt.datetime | None:
        """When it expires (None: never: pinned, no TTL, or nothing stored)."""
        return None if self.pinned else self.runs_out_at()


def _facts(thread_id: str, row: Any) -> ThreadRetention:
    return ThreadRetention(
        thread_id=thread_id,
        last_write=row.last_write,
        stamped_expiry=row.stamped_expiry,
        ttl_minutes=None if row.ttl_minutes is None else float(row.ttl_minutes),
        pinned=bool(row.pinned),
        touched_at=row.touched_at,
    )


def _newest_first() -> tuple[sa.ColumnElement[Any], ...]:
    """A thread's checkpoints, newest write first (ties broken by key)."""
    return (C.c.updated_at.desc(), C.c.checkpoint_ns_hash.desc(), C.c.checkpoint_id.desc())


def thread_retention(thread_id: str) -> Plan[ThreadRetention]:
    """One thread's facts, one statement (a thread without settings has no row)."""

    def setting(column: sa.Column[Any]) -> Any:
        return sa.select(column).where(R.c.thread_id == thread_id).scalar_subquery()

    of_thread = C.c.thread_id == thread_id
    stmt = sa.select(
        sa.select(sa.func.max(C.c.updated_at))
        .where(of_thread)
        .scalar_subquery()
        .label("last_write"),
        sa.select(C.c.expires_at)
        .where(of_thread)
        .order_by(*_newest_first())
        .limit(1)
        .scalar_subquery()
        .label("stamped_expiry"),
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
    rank = (
        sa.func.row_number()
        .over(partition_by=C.c.thread_id, order_by=_newest_first())
        .label("rank")
    )
    ranked = (
        sa.select(C.c.thread_id, C.c.updated_at, C.c.expires_at, rank)
        .where(C.c.thread_id.in_(list(thread_ids)))
        .subquery()
    )
    stmt = (
        sa.select(
            ranked.c.thread_id,
            ranked.c.updated_at.label("last_write"),
            ranked.c.expires_at.label("stamped_expiry"),
            R.c.ttl_minutes,
            R.c.pinned,
            R.c.touched_at,
        )
        .select_from(ranked.outerjoin(R, R.c.thread_id == ranked.c.thread_id))
        .where(ranked.c.rank == 1)
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
            for channel in json_values.json_object(row.checkpoint).get("updated_channels") or ()
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


def due(facts: Sequence[ThreadRetention], now: dt.datetime) -> list[ThreadRetention]:
    """The threads whose stored TTL ran out (a run in progress not yet ruled out)."""
    return [f for f in facts if (at := f.expires_at()) is not None and at <= now]


def expired_of(
    facts: Sequence[ThreadRetention], max_run: dt.timedelta, now: dt.datetime
) -> Plan[list[str]]:
    """The threads that have expired: TTL run out, and no run in progress (a run whose
    last write is older than ``max_run`` is taken for one whose process is gone)."""
    ran_out = due(facts, now)
    recent = [f.thread_id for f in ran_out if f.last_write and f.last_write + max_run > now]
    running = yield from runs_in_progress(recent)
    return [f.thread_id for f in ran_out if f.thread_id not in running]


def expired(facts: ThreadRetention, max_run: dt.timedelta, now: dt.datetime) -> Plan[bool]:
    """Whether this thread has expired (see ``expired_of``)."""
    return bool((yield from expired_of([facts], max_run, now)))


def visible(
    ctx: Context, thread_id: str, policy: Policy, *, refresh: bool, now: dt.datetime | None = None
) -> Plan[bool]:
    """Whether a read may see the thread (False: its stored expiry passed, not swept
    yet); a read of a live thread refreshes its clock when ``refresh`` (the policy's
    refresh_on_read on a writable saver). ``policy`` gives only ``max_run``: what
    expires is decided by the stored facts."""
    now = now or utc_now()
    facts = yield from thread_retention(thread_id)
    if facts.last_write is None:
        return True  # nothing stored: the read finds nothing by itself
    if (yield from expired(facts, policy.max_run, now)):
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
                step = step._replace(whole_plan=False)
            step = plan.send((yield step))
    except StopIteration as done:
        return done.value


def pruned_put(ctx: Context, put: Plan[RunnableConfig], keep_last: int) -> Plan[RunnableConfig]:
    """``put`` (an ``operations.put`` plan), then the namespace pruned to its newest
    ``keep_last`` checkpoints (with their DeltaChannel ancestry), in the same transaction."""
    stored: RunnableConfig = yield from _in_transaction(put)
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
    """Give a thread its own TTL (``ttl_minutes``; None: back to the one its last write
    was stamped with) and/or pin or unpin it; returns its facts afterwards."""
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
    ttl_minutes: float | None  # its own TTL, set by an operator (None: the stamped one)
    stamped_ttl_minutes: float | None  # the TTL its last write was stamped with
    effective_ttl_minutes: float | None  # its own, else the stamped; None: never expires
    pinned: bool
    expires_at: dt.datetime | None  # None: never (pinned, no TTL, or nothing stored)
    running: bool  # a run is in progress (kept past its TTL)
    expired: bool  # reads see nothing; the next sweep deletes it


def _minutes(ttl: dt.timedelta | None) -> float | None:
    return None if ttl is None else ttl.total_seconds() / 60


def describe(thread_id: Any, policy: Policy, now: dt.datetime | None = None) -> Plan[ThreadTTL]:
    """A thread's TTL report from its stored facts (one to three statements);
    ``policy`` gives only ``max_run``."""
    thread = codec.thread_id_str(thread_id)
    now = now or utc_now()
    facts = yield from thread_retention(thread)
    running = facts.last_write is not None and (yield from run_in_progress(thread))
    return ThreadTTL(
        thread_id=thread,
        exists=facts.last_write is not None,
        last_write=facts.last_write,
        touched_at=facts.touched_at,
        ttl_minutes=facts.ttl_minutes,
        stamped_ttl_minutes=_minutes(facts.stamped_ttl),
        effective_ttl_minutes=_minutes(facts.ttl),
        pinned=facts.pinned,
        expires_at=facts.expires_at(),
        running=running,
        expired=(yield from expired(facts, policy.max_run, now)),
    )


__all__ = [
    "CheckpointTTL",
    "Policy",
    "ThreadRetention",
    "ThreadTTL",
    "check_ttl_minutes",
    "policy_from",
]
