"""Keeping tables bounded: prune, delete_for_runs, copy_thread, retention sweeps, blob GC.

Like operations.py, each operation is a plan run inside one transaction by the
sync or async shell; prune and sweep run one transaction *per thread*, so a
huge clean-up never holds one giant lock.

DeltaChannel safety: a DeltaChannel stores a value only at snapshot steps;
between them its state is rebuilt from ancestors' writes. Pruning keeps, for
every kept checkpoint, each ancestor back to the nearest stored value of every
channel its metadata counts as changed since its last snapshot
(``counters_since_delta_snapshot``), with their writes, so reconstruction after a
prune equals reconstruction before it.
"""

from __future__ import annotations

import datetime as dt
import itertools
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from lg_sqla import limits
from lg_sqla.checkpoint import checks, codec, json_values
from lg_sqla.checkpoint.context import Context
from lg_sqla.checkpoint.history import walk_chain
from lg_sqla.checkpoint.statements import blob_keys
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_retention as R
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import COMMIT, Plan, Step
from lg_sqla.shared import utc_now

PRUNE_STRATEGIES = ("keep_latest", "delete")
# Bound on bound parameters per statement (SQLite allows 32766, PostgreSQL 65535).
_CHUNK = 500

CheckpointKey = tuple[str, str]  # (checkpoint_ns_hash, checkpoint_id) within one thread
# Where a walk of the updated_at index stopped: the last instant it read whole.
PagePosition = dt.datetime


@dataclass
class RowCounts:
    """Rows an operation removed (or, for copy_thread, wrote)."""

    threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    blobs: int = 0

    def add(self, other: RowCounts) -> None:
        self.threads += other.threads
        self.checkpoints += other.checkpoints
        self.writes += other.writes
        self.blobs += other.blobs


@dataclass
class SweepReport:
    """What a retention sweep removed, and how it went about it."""

    cutoff: dt.datetime
    strategy: str
    batches: int = 0
    threads_visited: int = 0
    removed: RowCounts = field(default_factory=RowCounts)
    # Threads the sweep would have taken but kept because they are pinned.
    pinned_skipped: int = 0
    # A dry run deletes nothing: ``removed`` counts what it would remove, and
    # ``thread_ids`` names the threads it would delete whole.
    dry_run: bool = False
    thread_ids: list[str] = field(default_factory=list)


def _thread(thread_id: Any) -> str:
    return codec.thread_id_str(thread_id)


def check_strategy(strategy: str, keep_last: int) -> None:
    if strategy not in PRUNE_STRATEGIES:
        raise InvalidInputError(
            f"unknown prune strategy {strategy!r}; use one of {', '.join(PRUNE_STRATEGIES)}"
        )
    if not isinstance(keep_last, int) or keep_last < 1:
        raise InvalidInputError(f"keep_last must be an int >= 1, got {keep_last!r}")


def _chunks(items: Sequence[Any], size: int = _CHUNK) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _rows_in(
    key: sa.ColumnElement[Any], values: Sequence[Any], *columns: sa.ColumnElement[Any]
) -> Plan[Sequence[Any]]:
    """The rows (of ``columns``) whose ``key`` is one of ``values``: one statement."""
    return (yield Step(sa.select(*columns).where(key.in_(values)), fetch=True)).rows


# --- blob garbage collection -------------------------------------------------------


def lock_blobs(ctx: Context, thread_ids: Sequence[str]) -> Plan[None]:
    """Lock every blob of these threads (``FOR UPDATE``) before deciding which to delete.

    A put locks the blobs its checkpoint names (``complete``) until it commits. So a
    put in flight finishes first, and the deleter's next statement sees its checkpoint
    (READ COMMITTED: a snapshot per statement; InnoDB: DML reads the latest rows); a
    later put waits for the deleter, finds the blob gone and writes it again. Deciding
    first and deleting the rows after a wait would delete a blob that the put which
    held it has just committed a checkpoint naming (PostgreSQL does not re-check a row
    that was only locked)."""
    if not ctx.dialect_ops.locks_rows:
        return
    # Distributed tables (Citus): FOR UPDATE runs on one shard only, so a thread each.
    size = 1 if ctx.dialect_ops.distributed else _CHUNK
    for chunk in _chunks(list(dict.fromkeys(thread_ids)), size):
        locked = sa.select(B.c.thread_id).where(B.c.thread_id.in_(chunk)).with_for_update()
        yield Step(sa.select(sa.func.count()).select_from(locked.subquery()), fetch=True)


def collect_garbage_blobs(
    ctx: Context, thread_ids: Sequence[str], *, locked: bool = False
) -> Plan[int]:
    """Delete blobs of these threads that no remaining checkpoint's channel_versions
    names (``locked``: the caller already ran ``lock_blobs``)."""
    if not locked:
        yield from lock_blobs(ctx, thread_ids)
    removed = 0
    for chunk in _chunks(list(dict.fromkeys(thread_ids))):
        if ctx.dialect_ops.joins_channel_versions:
            pairs, channel, version = ctx.dialect_ops.channel_versions(C.c.checkpoint)
            referenced = (
                sa.select(C.c.thread_id, C.c.checkpoint_ns_hash, channel, version)
                .select_from(C.join(pairs, sa.true()))
                .where(C.c.thread_id.in_(chunk))
            )
            removed += (
                yield Step(ctx.dialect_ops.delete_unreferenced(B, chunk, referenced))
            ).rowcount
            continue
        # Portable path: compute the referenced set in Python.
        documents = yield from _rows_in(
            C.c.thread_id, chunk, C.c.thread_id, C.c.checkpoint_ns_hash, C.c.checkpoint
        )
        keep = {
            (r.thread_id, r.checkpoint_ns_hash, ch, v)
            for r in documents
            for ch, v in json_values.json_object(r.checkpoint)["channel_versions"].items()
        }
        blobs = yield from _rows_in(
            B.c.thread_id, chunk, B.c.thread_id, B.c.checkpoint_ns_hash, B.c.channel, B.c.version
        )
        garbage = [tuple(b) for b in blobs if tuple(b) not in keep]
        for part in _chunks(garbage):
            removed += (yield Step(sa.delete(B).where(blob_keys(part)))).rowcount
    return removed


# --- deleting ------------------------------------------------------------------------


def delete_whole_threads(ctx: Context, thread_ids: Sequence[str]) -> Plan[RowCounts]:
    """Every checkpoint, write and blob of these threads, as one snapshot sees them.

    After ``lock_blobs`` (a put in flight that names an existing blob commits first,
    and is deleted here with the rest). PostgreSQL deletes the three tables in ONE
    statement: a put committing between two DELETE statements would lose the blobs
    of its (surviving) checkpoint. A put committing after that snapshot survives whole,
    as a write after the delete. (InnoDB's deletes lock the key ranges they read, so
    such a put waits; SQLite has one writer at a time.)
    """
    ids = list(thread_ids)
    yield from lock_blobs(ctx, ids)
    out = RowCounts()
    if not ctx.dialect_ops.writes_in_one_statement:
        out.checkpoints = (yield Step(sa.delete(C).where(C.c.thread_id.in_(ids)))).rowcount
        out.writes = (yield Step(sa.delete(W).where(W.c.thread_id.in_(ids)))).rowcount
        out.blobs = (yield Step(sa.delete(B).where(B.c.thread_id.in_(ids)))).rowcount
        yield Step(sa.delete(R).where(R.c.thread_id.in_(ids)))  # no setting outlives it
        return out
    deleted = [
        sa.delete(t).where(t.c.thread_id.in_(ids)).returning(t.c.thread_id).cte(f"gone_{t.name}")
        for t in (C, W, B, R)  # (the retention row too: no setting outlives its thread)
    ]
    counts = sa.select(
        *(sa.select(sa.func.count()).select_from(d).scalar_subquery() for d in deleted)
    )  # (every CTE named in the query: SQLAlchemy renders only those)
    row: Sequence[Any] = (yield Step(counts, fetch=True)).rows[0]
    out.checkpoints, out.writes, out.blobs = int(row[0]), int(row[1]), int(row[2])
    return out


def delete_thread_rows(ctx: Context, thread_id: str) -> Plan[RowCounts]:
    """Every row of one thread, all namespaces (``delete_whole_threads``)."""
    out = yield from delete_whole_threads(ctx, [thread_id])
    # Counted only if it existed: reports say what was really removed.
    out.threads = int(bool(out.checkpoints or out.writes or out.blobs))
    return out


def _writes_of(checkpoints: Sequence[Any]) -> sa.ColumnElement[bool]:
    """Writes of these (thread_id, checkpoint_ns_hash, checkpoint_id) checkpoints, as
    ``thread = t AND ns = h AND checkpoint_id IN (...)`` per namespace: a primary-key
    range each on every dialect. (SQLite reads every write of the table for the
    equivalent ``(thread, ns, checkpoint_id) IN (VALUES ...)``.)"""
    ids: dict[tuple[str, str], list[str]] = {}
    for thread_id, nsh, checkpoint_id in checkpoints:
        ids.setdefault((thread_id, nsh), []).append(checkpoint_id)
    return sa.or_(
        *(
            sa.and_(
                W.c.thread_id == thread_id,
                W.c.checkpoint_ns_hash == nsh,
                W.c.checkpoint_id.in_(checkpoint_ids),
            )
            for (thread_id, nsh), checkpoint_ids in ids.items()
        )
    )


def delete_for_runs(ctx: Context, run_ids: Sequence[str]) -> Plan[RowCounts]:
    """Checkpoints whose metadata run_id is listed, their writes, then orphaned blobs."""
    out = RowCounts()
    run_ids = [checks.check_length("run_id", str(r), limits.RUN_ID_MAX) for r in run_ids]
    affected: set[str] = set()
    for chunk in _chunks(run_ids):
        doomed = yield from _rows_in(
            C.c.run_id, chunk, C.c.thread_id, C.c.checkpoint_ns_hash, C.c.checkpoint_id
        )
        if not doomed:
            continue
        affected.update(r.thread_id for r in doomed)
        for part in _chunks(doomed):
            out.writes += (yield Step(sa.delete(W).where(_writes_of(part)))).rowcount
        out.checkpoints += (yield Step(sa.delete(C).where(C.c.run_id.in_(chunk)))).rowcount
    if affected:
        out.blobs = yield from collect_garbage_blobs(ctx, sorted(affected))
        yield from drop_settings_of_gone_threads(sorted(affected))
    return out


def drop_settings_of_gone_threads(thread_ids: Sequence[str]) -> Plan[None]:
    """Delete the retention rows (TTL, pin) of these threads that have no checkpoint
    left, in the caller's transaction: no setting outlives its thread."""
    gone = ~sa.select(C.c.thread_id).where(C.c.thread_id == R.c.thread_id).exists()
    for chunk in _chunks(list(thread_ids)):
        yield Step(sa.delete(R).where(R.c.thread_id.in_(chunk), gone))


# --- copying -------------------------------------------------------------------------


def copy_thread(ctx: Context, source: str, target: str) -> Plan[RowCounts]:
    """Copy every checkpoint, write and blob of ``source`` to ``target`` (same ids)."""
    source, target = _thread(source), _thread(target)
    if source == target:
        raise InvalidInputError("copy_thread: source and target thread ids are the same")
    present = (
        yield Step(
            sa.select(C.c.thread_id, sa.func.count().label("n"))
            .where(C.c.thread_id.in_([source, target]))
            .group_by(C.c.thread_id),
            fetch=True,
        )
    ).rows
    counts = {row.thread_id: row.n for row in present}
    if counts.get(target):
        raise InvalidInputError(
            f"copy_thread: target thread {target!r} already has {counts[target]} checkpoint(s); "
            "delete it first or choose another id"
        )
    if not counts.get(source):
        raise InvalidInputError(f"copy_thread: source thread {source!r} has no checkpoints")
    written_at = utc_now()
    now = sa.literal(written_at, C.c.created_at.type)
    # The copy is written now, by this saver: its expiry is stamped as a put's.
    expires = sa.literal(
        None if ctx.stamp_ttl is None else written_at + ctx.stamp_ttl, C.c.expires_at.type
    )
    copied = RowCounts(threads=1)
    for table, counter in ((C, "checkpoints"), (W, "writes"), (B, "blobs")):
        names = [c.name for c in table.columns]
        values = [
            sa.literal(target, table.c.thread_id.type)
            if name == "thread_id"
            else now
            if name in ("created_at", "updated_at")
            else expires
            if name == "expires_at"
            else table.c[name]
            for name in names
        ]
        written = (
            yield Step(
                sa.insert(table).from_select(
                    names, sa.select(*values).where(table.c.thread_id == source)
                )
            )
        ).rowcount
        setattr(copied, counter, written)
    return copied


# --- pruning -------------------------------------------------------------------------


def _kept_heads(
    thread_id: str, keep_last: int, newer_than: dt.datetime | None, namespace_hash: str | None
) -> sa.Select[Any]:
    """The newest ``keep_last`` checkpoints per namespace (plus any newer than a cut-off)."""
    rank = (
        sa.func.row_number()
        .over(partition_by=C.c.checkpoint_ns_hash, order_by=C.c.checkpoint_id.desc())
        .label("rank")
    )
    of_thread = sa.select(
        C.c.checkpoint_ns_hash, C.c.checkpoint_id, C.c.metadata, C.c.updated_at, rank
    ).where(C.c.thread_id == thread_id)
    if namespace_hash is not None:
        of_thread = of_thread.where(C.c.checkpoint_ns_hash == namespace_hash)
    ranked = of_thread.subquery()
    keep = ranked.c.rank <= keep_last
    if newer_than is not None:
        keep = sa.or_(keep, ranked.c.updated_at >= newer_than)
    return sa.select(ranked.c.checkpoint_ns_hash, ranked.c.checkpoint_id, ranked.c.metadata).where(
        keep
    )


def _delta_channels(metadata: Any) -> list[str]:
    counters = json_values.json_object(metadata).get("counters_since_delta_snapshot") or {}
    return sorted(counters) if isinstance(counters, dict) else []


def prune_thread(
    ctx: Context,
    thread_id: str,
    *,
    keep_last: int = 1,
    newer_than: dt.datetime | None = None,
    namespace_hash: str | None = None,
) -> Plan[RowCounts]:
    """Keep the newest ``keep_last`` checkpoints per namespace and their DeltaChannel
    ancestry; delete the thread's older checkpoints, their writes and orphan blobs.
    ``namespace_hash``: that namespace only (keep_last on write prunes the put's).

    Safe beside live traffic: only checkpoints *older* than the oldest kept one
    of a namespace seen here are deleted, so a checkpoint (or a namespace)
    written while the prune runs is never touched.
    """
    heads = (
        yield Step(_kept_heads(thread_id, keep_last, newer_than, namespace_hash), fetch=True)
    ).rows
    floor: dict[str, str] = {}  # namespace -> oldest kept checkpoint id
    ancestry: set[CheckpointKey] = set()
    for head in heads:
        nsh = head.checkpoint_ns_hash
        floor[nsh] = min(floor.get(nsh, head.checkpoint_id), head.checkpoint_id)
        channels = _delta_channels(head.metadata)
        if not channels:
            continue
        chain = yield from walk_chain(ctx, thread_id, nsh, head.checkpoint_id, channels)
        needed = chain.depth_needed(channels)
        ancestry.update((nsh, cid) for cid in chain.ids[: needed + 1])
    out = RowCounts()
    kept_ancestors = sorted(ancestry)
    for chunk in _chunks(sorted(floor.items())):
        for table, counter in ((C, "checkpoints"), (W, "writes")):
            older = sa.or_(
                *(
                    sa.and_(table.c.checkpoint_ns_hash == nsh, table.c.checkpoint_id < oldest)
                    for nsh, oldest in chunk
                )
            )
            condition = sa.and_(table.c.thread_id == thread_id, older)
            if kept_ancestors:
                pair = sa.tuple_(table.c.checkpoint_ns_hash, table.c.checkpoint_id)
                condition = sa.and_(condition, pair.not_in(kept_ancestors))
            removed = (yield Step(sa.delete(table).where(condition))).rowcount
            setattr(out, counter, getattr(out, counter) + removed)
    if out.checkpoints or out.writes:
        out.blobs = yield from collect_garbage_blobs(ctx, [thread_id])
    if out.checkpoints:
        out.threads = 1
    return out


def prune(
    ctx: Context, thread_ids: Sequence[str], strategy: str, keep_last: int
) -> Plan[RowCounts]:
    """Prune threads, committing after each one (one transaction per thread)."""
    check_strategy(strategy, keep_last)
    threads = [_thread(t) for t in dict.fromkeys(thread_ids)]
    total = RowCounts()
    for thread_id in threads:
        if strategy == "delete":
            total.add((yield from delete_thread_rows(ctx, thread_id)))
        else:
            total.add((yield from prune_thread(ctx, thread_id, keep_last=keep_last)))
        yield COMMIT
    return total


# --- retention -----------------------------------------------------------------------


def sweep(
    ctx: Context,
    older_than: dt.timedelta,
    strategy: str,
    keep_last: int,
    batch_size: int,
    progress: Callable[[SweepReport], None] | None,
) -> Plan[SweepReport]:
    """Retention: visit stale threads in batches, one transaction per thread; pinned
    threads are kept whole (``report.pinned_skipped``)."""
    check_sweep(older_than, strategy, keep_last, batch_size)
    report = SweepReport(cutoff=utc_now() - older_than, strategy=strategy)
    after: PagePosition | None = None
    seen: set[str] = set()  # a thread with old checkpoints on several pages is visited once
    while True:
        stale, after = yield from stale_threads(report.cutoff, strategy, after, batch_size, seen)
        batch, pinned = yield from unpinned(stale)
        report.pinned_skipped += pinned
        yield COMMIT
        if batch:
            report.batches += 1
            for thread_id in batch:
                report.threads_visited += 1
                report.removed.add(
                    (yield from sweep_thread(ctx, thread_id, report.cutoff, strategy, keep_last))
                )
                yield COMMIT
            if progress is not None:
                progress(report)
        if after is None:
            return report


def check_sweep(older_than: Any, strategy: str, keep_last: int, batch_size: Any) -> None:
    check_strategy(strategy, keep_last)
    if not isinstance(older_than, dt.timedelta) or older_than < dt.timedelta(0):
        raise InvalidInputError(f"older_than must be a non-negative timedelta, got {older_than!r}")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be an int >= 1, got {batch_size!r}")


def old_threads_page(
    cutoff: dt.datetime,
    after: dt.datetime | None,
    batch_size: int,
    seen: set[str],
    column: sa.Column[Any] = C.c.updated_at,
) -> Plan[tuple[list[str], dt.datetime | None]]:
    """The next ``batch_size`` threads not in ``seen`` (which it extends) that hold a
    checkpoint last written before the cut-off, oldest first, and where the next batch
    starts (None: this was the last).

    It reads the ``updated_at`` index in its own order, ``batch_size`` rows a statement,
    from just after ``after``: a page's cost is its size, not the table's (issue 21: the
    old selection grouped the whole primary key). A page cut in the middle of one
    instant's rows reads the rest of that instant by equality, so the next page can
    start strictly after it (ordering by a tie-breaker as well made SQLite sort the
    whole range). A thread with old checkpoints on several pages is returned once.

    ``column``: another indexed timestamp of ``checkpoints`` to walk the same way (the
    TTL sweep walks ``expires_at``).
    """
    threads: list[str] = []
    while True:
        stmt = sa.select(column.label("instant"), C.c.thread_id).where(column < cutoff)
        if after is not None:
            stmt = stmt.where(column > after)
        rows = [
            (r.instant, r.thread_id)
            for r in (yield Step(stmt.order_by(column).limit(batch_size), fetch=True)).rows
        ]
        complete = len(rows) < batch_size
        if not complete:
            last = rows[-1][0]
            rest = (yield Step(sa.select(C.c.thread_id).where(column == last), fetch=True)).rows
            rows = [r for r in rows if r[0] != last] + [(last, r.thread_id) for r in rest]
        for instant, group in itertools.groupby(rows, key=operator.itemgetter(0)):
            new = [t for t in dict.fromkeys(thread for _, thread in group) if t not in seen]
            if threads and len(threads) + len(new) > batch_size:
                return threads, after  # full: the next batch starts at this instant
            threads.extend(new)
            seen.update(new)
            after = instant
        if complete:
            return threads, None
        if len(threads) >= batch_size:
            return threads, after


def _pinned(thread_id: sa.ColumnElement[Any]) -> sa.Exists:
    """The thread is pinned (its retention row says so)."""
    return (
        sa.select(R.c.thread_id).where(R.c.thread_id == thread_id, R.c.pinned == sa.true()).exists()
    )


def unpinned(thread_ids: Sequence[str]) -> Plan[tuple[list[str], int]]:
    """These threads but the pinned ones, and how many were pinned (one statement)."""
    if not thread_ids:
        return [], 0
    rows = (
        yield Step(
            sa.select(R.c.thread_id).where(
                R.c.thread_id.in_(list(thread_ids)), R.c.pinned == sa.true()
            ),
            fetch=True,
        )
    ).rows
    pinned = {row.thread_id for row in rows}
    return [t for t in thread_ids if t not in pinned], len(pinned)


def stale_threads(
    cutoff: dt.datetime,
    strategy: str,
    after: PagePosition | None,
    batch_size: int,
    seen: set[str],
) -> Plan[tuple[list[str], PagePosition | None]]:
    """The next page of threads a sweep should visit, and where the next page starts.

    ``delete``: threads whose newest checkpoint was written before the cut-off.
    ``keep_latest``: threads holding any checkpoint written before the cut-off.
    Both walk the ``updated_at`` index (``old_threads_page``); ``delete`` then keeps
    the threads with no newer checkpoint, one statement on their primary key ranges.
    """
    threads, after = yield from old_threads_page(cutoff, after, batch_size, seen)
    if strategy == "delete" and threads:
        alive = (
            yield Step(
                sa.select(C.c.thread_id)
                .where(C.c.thread_id.in_(threads), C.c.updated_at >= cutoff)
                .distinct(),
                fetch=True,
            )
        ).rows
        living = {row.thread_id for row in alive}
        threads = [t for t in threads if t not in living]
    return threads, after


def count_stale_threads(cutoff: dt.datetime, strategy: str) -> Plan[int]:
    """How many threads a sweep with this cut-off would visit (pinned ones are not),
    in one statement.

    It groups the whole table (60-180 ms on 10k threads; it grows with the table): the
    CLI's progress total and question. The sweep itself never runs it (its selection
    walks the ``updated_at`` index).
    """
    check_strategy(strategy, 1)
    if strategy == "delete":
        stale = (
            sa.select(C.c.thread_id)
            .where(~_pinned(C.c.thread_id))
            .group_by(C.c.thread_id)
            .having(sa.func.max(C.c.updated_at) < cutoff)
        )
    else:
        stale = (
            sa.select(C.c.thread_id)
            .where(C.c.updated_at < cutoff, ~_pinned(C.c.thread_id))
            .distinct()
        )
    stmt = sa.select(sa.func.count()).select_from(stale.subquery())
    return int((yield Step(stmt, fetch=True)).rows[0][0])


def sweep_thread(
    ctx: Context, thread_id: str, cutoff: dt.datetime, strategy: str, keep_last: int
) -> Plan[RowCounts]:
    """One thread of a sweep, in its own transaction.

    ``delete`` removes only checkpoints last written before the cut-off, so a
    thread that comes back to life while the sweep runs keeps its new
    checkpoints (with their writes and the blobs they reference); a thread pinned
    since its page was read is left whole (the delete itself asks), and a thread
    deleted whole goes with its retention row.
    """
    if strategy != "delete":
        return (yield from prune_thread(ctx, thread_id, keep_last=keep_last, newer_than=cutoff))
    out = RowCounts()
    # Blobs locked first (``lock_blobs``): a put in flight commits before this looks.
    yield from lock_blobs(ctx, [thread_id])
    out.checkpoints = (
        yield Step(
            sa.delete(C).where(
                C.c.thread_id == thread_id, C.c.updated_at < cutoff, ~_pinned(C.c.thread_id)
            )
        )
    ).rowcount
    # Old writes whose checkpoint is gone (a write stored now, perhaps before its
    # checkpoint, is newer than the cut-off), then the blobs no checkpoint names: by
    # reference, never "all of the thread's", so a put committing meanwhile keeps its rows.
    has_checkpoint = (
        sa.select(sa.literal(1))
        .where(
            C.c.thread_id == W.c.thread_id,
            C.c.checkpoint_ns_hash == W.c.checkpoint_ns_hash,
            C.c.checkpoint_id == W.c.checkpoint_id,
        )
        .exists()
    )
    out.writes = (
        yield Step(
            sa.delete(W).where(W.c.thread_id == thread_id, W.c.created_at < cutoff, ~has_checkpoint)
        )
    ).rowcount
    if out.checkpoints:
        out.blobs = yield from collect_garbage_blobs(ctx, [thread_id], locked=True)
    left = (
        yield Step(sa.select(sa.func.count()).where(C.c.thread_id == thread_id), fetch=True)
    ).rows[0][0]
    out.threads = int(left == 0 and bool(out.checkpoints))
    if out.threads:
        yield Step(sa.delete(R).where(R.c.thread_id == thread_id))  # no setting outlives it
    return out
