"""The TTL sweep, and giving existing threads a TTL in bulk (``lg-sqla ttl apply``).

What expires is what the stored facts say (``retention``): the sweep never uses the
sweeping saver's policy to decide, only its ``max_run`` to keep runs in progress.
Its candidates come from two walks, each a page at a time:

- the ``expires_at`` index of ``checkpoints``, below now: threads whose checkpoints were
  stamped with a TTL that ran out (a thread written since, under no TTL or a longer
  one, is a candidate its facts then keep);
- the retention rows that hold a TTL an operator set, by primary key: every thread
  with a TTL of its own (however long ago it was last written).

Each page's facts take one statement; the due ones are read again in the transaction
that deletes them, whole. Pinned threads are never deleted and are counted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from lg_sqla.checkpoint import maintenance
from lg_sqla.checkpoint.context import Context
from lg_sqla.checkpoint.maintenance import RowCounts, SweepReport
from lg_sqla.checkpoint.policy import check_ttl_minutes
from lg_sqla.checkpoint.retention import ThreadRetention, expired_of, threads_retention
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_retention as R
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import COMMIT, Plan, Step
from lg_sqla.shared import utc_now


def _check_batch_size(batch_size: Any) -> None:
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be an int >= 1, got {batch_size!r}")


def sweep(
    ctx: Context,
    max_run: dt.timedelta,
    batch_size: int,
    progress: Callable[[SweepReport], None] | None,
    *,
    dry_run: bool = False,
    measure_instead: Callable[[list[str]], Plan[None]] | None = None,
    now: dt.datetime | None = None,
) -> Plan[SweepReport]:
    """Delete the threads whose stored TTL ran out, one transaction per page of them.

    ``dry_run``: delete nothing; ``removed`` counts the rows it would remove and
    ``thread_ids`` names the threads. ``measure_instead``: a dry run that runs this
    plan on each page's expired threads instead (the CLI measures their bytes).
    ``now``: the instant expiry is reckoned at (tests give a later one).
    """
    _check_batch_size(batch_size)
    now = now or utc_now()
    report = SweepReport(cutoff=now, strategy="ttl", dry_run=dry_run or bool(measure_instead))
    seen: set[str] = set()
    after: maintenance.PagePosition | None = None
    while True:  # stamped expiries that passed: a range of the expires_at index
        page, after = yield from maintenance.old_threads_page(
            now, after, batch_size, seen, column=C.c.expires_at
        )
        yield from _sweep_page(ctx, report, page, max_run, now, measure_instead)
        if progress is not None and page:
            progress(report)
        if after is None:
            break
    last: str | None = None
    while True:  # threads with a TTL of their own, by primary key
        page, last = yield from _own_ttl_page(last, batch_size, seen)
        yield from _sweep_page(ctx, report, page, max_run, now, measure_instead)
        if progress is not None and page:
            progress(report)
        if last is None:
            return report


def _own_ttl_page(
    after: str | None, batch_size: int, seen: set[str]
) -> Plan[tuple[list[str], str | None]]:
    """The next ``batch_size`` threads with a TTL of their own (retention rows in key
    order, after ``after``) not in ``seen`` (which it extends), and where the next
    page starts (None: this was the last)."""
    stmt = sa.select(R.c.thread_id).where(R.c.ttl_minutes.is_not(None))
    if after is not None:
        stmt = stmt.where(R.c.thread_id > after)
    rows = (yield Step(stmt.order_by(R.c.thread_id).limit(batch_size), fetch=True)).rows
    ids = [row.thread_id for row in rows]
    fresh = [t for t in ids if t not in seen]
    seen.update(fresh)
    return fresh, (ids[-1] if len(ids) == batch_size else None)


def _ran_out(facts: Sequence[ThreadRetention], now: dt.datetime) -> list[ThreadRetention]:
    return [f for f in facts if (at := f.runs_out_at()) is not None and at <= now]


def _sweep_page(
    ctx: Context,
    report: SweepReport,
    page: list[str],
    max_run: dt.timedelta,
    now: dt.datetime,
    measure_instead: Callable[[list[str]], Plan[None]] | None,
) -> Plan[None]:
    """One page of candidates: their facts (one statement), then, in one transaction,
    the due ones read again, checked for a run in progress and deleted whole."""
    if not page:
        yield COMMIT
        return
    report.batches += 1
    ran_out = _ran_out((yield from threads_retention(page)), now)
    yield COMMIT
    report.pinned_skipped += sum(f.pinned for f in ran_out)
    candidates = [f.thread_id for f in ran_out if not f.pinned]
    if not candidates:
        return
    report.threads_visited += len(candidates)
    # Again in the transaction that deletes them: a write since the page was read keeps
    # a thread (its clock restarts), and so do a pin and a run that started meanwhile.
    doomed = yield from expired_of((yield from threads_retention(candidates)), max_run, now)
    if doomed and measure_instead is not None:
        yield from measure_instead(doomed)
    elif doomed and report.dry_run:
        report.removed.add((yield from count_rows(doomed)))
        report.thread_ids.extend(doomed)
    elif doomed:
        report.removed.add((yield from delete_threads(ctx, doomed)))
    yield COMMIT


def _count(table: sa.Table, ids: list[str]) -> Plan[int]:
    stmt = sa.select(sa.func.count()).select_from(table).where(table.c.thread_id.in_(ids))
    return int((yield Step(stmt, fetch=True)).rows[0][0])


def count_rows(thread_ids: Sequence[str]) -> Plan[RowCounts]:
    """The rows deleting these threads whole would remove (three statements)."""
    ids = list(thread_ids)
    return RowCounts(
        threads=len(ids),
        checkpoints=(yield from _count(C, ids)),
        writes=(yield from _count(W, ids)),
        blobs=(yield from _count(B, ids)),
    )


def delete_threads(ctx: Context, thread_ids: Sequence[str]) -> Plan[RowCounts]:
    """Every row of these expired threads, settings included, in the caller's transaction
    (so each thread goes whole: a reader sees all of it or none), as
    ``maintenance.delete_whole_threads`` deletes them beside writers in flight."""
    ids = list(thread_ids)
    out = yield from maintenance.delete_whole_threads(ctx, ids)
    out.threads = len(ids)
    return out


# --- giving existing threads a TTL ---------------------------------------------------


@dataclass
class ApplyReport:
    """What ``set_threads_ttl`` / ``lg-sqla ttl apply`` found and (unless a dry run) did."""

    ttl_minutes: float
    dry_run: bool
    threads: int = 0  # selected: given the TTL (a dry run: would be)
    pinned_skipped: int = 0  # selected but pinned: left as they are
    batches: int = 0


def set_threads_ttl(
    ctx: Context,
    ttl_minutes: float,
    *,
    replace_existing: bool,
    idle_since: dt.datetime | None,
    batch_size: int,
    dry_run: bool,
) -> Plan[ApplyReport]:
    """Give existing threads a TTL of their own, ``ttl_minutes``, a page at a time (one
    transaction each), walking the threads of ``checkpoints`` in key order. (The
    defaults are the saver call's: ``calls.set_threads_ttl``.)

    Selected: threads that never expire (no TTL of their own, none stamped), or with
    ``replace_existing`` every thread; with ``idle_since``, only those last written
    before it. Pinned threads are skipped and counted. ``dry_run``: count only.
    """
    minutes = check_ttl_minutes(ttl_minutes)
    if minutes is None:
        raise InvalidInputError("set_threads_ttl: ttl_minutes must be a positive number of minutes")
    _check_batch_size(batch_size)
    report = ApplyReport(ttl_minutes=minutes, dry_run=dry_run)
    after: str | None = None
    while True:
        stmt = sa.select(C.c.thread_id).distinct().order_by(C.c.thread_id).limit(batch_size)
        if after is not None:
            stmt = stmt.where(C.c.thread_id > after)
        page = [row.thread_id for row in (yield Step(stmt, fetch=True)).rows]
        if page:
            report.batches += 1
            yield from _apply_page(ctx, report, page, replace_existing, idle_since)
        yield COMMIT
        if len(page) < batch_size:
            return report
        after = page[-1]


def _apply_page(
    ctx: Context,
    report: ApplyReport,
    page: list[str],
    replace_existing: bool,
    idle_since: dt.datetime | None,
) -> Plan[None]:
    chosen = [
        f
        for f in (yield from threads_retention(page))
        if (replace_existing or f.ttl is None)
        and (idle_since is None or (f.last_write is not None and f.last_write < idle_since))
    ]
    report.pinned_skipped += sum(f.pinned for f in chosen)
    targets = [f.thread_id for f in chosen if not f.pinned]
    report.threads += len(targets)
    if targets and not report.dry_run:
        now = utc_now()
        rows = [
            {"thread_id": t, "ttl_minutes": report.ttl_minutes, "updated_at": now} for t in targets
        ]
        yield from ctx.dialect_ops.upsert_rows(R, rows, ("ttl_minutes", "updated_at"))
