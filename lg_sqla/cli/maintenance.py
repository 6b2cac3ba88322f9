"""Maintenance commands: prune, delete-thread, sweep (retention), reencrypt, vacuum.

Deleting commands report first and ask on a terminal (``--yes`` skips the question);
``--dry-run`` runs the deletes in a transaction it rolls back, to measure them.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lg_sqla import migrate
from lg_sqla.cli import disk
from lg_sqla.cli.common import CommandError, Commands, positive, positive_number, sync_saver
from lg_sqla.cli.interrupts import resumable
from lg_sqla.cli.output import Progress, confirm, human_bytes, say
from lg_sqla.shared import utc_now

if TYPE_CHECKING:
    from lg_sqla.checkpoint.maintenance import RowCounts, SweepReport
    from lg_sqla.checkpoint.saver import SQLAlchemySaver


def register(commands: Commands) -> None:
    prune_ = _on_threads(
        commands, "prune", "prune threads: keep their newest checkpoints (or delete them)"
    )
    _strategy_options(
        prune_,
        ["keep_latest", "delete"],
        "keep_latest (default) or delete the threads",
        "checkpoints kept per namespace (default 1)",
    )
    _on_threads(commands, "delete-thread", "delete threads: every checkpoint, write and value")
    _sweep_command(commands)
    _reencrypt_command(commands)


def _on_threads(commands: Commands, name: str, help: str) -> argparse.ArgumentParser:
    """A destructive command on the THREAD_IDs given, run by :func:`prune` (which reads
    ``delete-thread`` as ``--strategy delete``)."""
    parser = commands.add(name, help, prune, commands.destructive)
    parser.add_argument("thread_ids", nargs="+", metavar="THREAD_ID")
    return parser


def register_vacuum(commands: Commands) -> None:
    """``vacuum``, apart: ``--help`` has always listed it last, after ``import``."""
    command = commands.add(
        "vacuum",
        "SQLite only: VACUUM the file, giving freed pages back to the file system",
        vacuum,
    )
    command.set_defaults(yes=True)


def _sweep_command(commands: Commands) -> None:
    sweep_ = commands.add(
        "sweep",
        "retention: delete (or prune) threads not written for N days",
        sweep,
        commands.destructive,
    )
    sweep_.add_argument(
        "--older-than-days",
        type=positive_number,
        required=True,
        help="the retention period, in days (> 0; fractions too: 0.5 = 12 hours)",
    )
    _strategy_options(
        sweep_,
        ["delete", "keep_latest"],
        "delete stale threads (default) or prune their old checkpoints",
        "keep_latest: checkpoints kept per namespace",
    )
    sweep_.add_argument(
        "--batch-size", type=positive, default=100, help="threads per batch (default 100)"
    )


def _strategy_options(
    parser: argparse.ArgumentParser, strategies: list[str], strategy_help: str, keep_help: str
) -> None:
    """What ``prune`` and ``sweep`` do to a thread: ``--strategy`` (the first of
    ``strategies`` by default), and ``--keep-last`` for ``keep_latest``."""
    parser.add_argument("--strategy", choices=strategies, default=strategies[0], help=strategy_help)
    parser.add_argument("--keep-last", type=positive, default=1, help=keep_help)


def _reencrypt_command(commands: Commands) -> None:
    rotate = commands.add(
        "reencrypt",
        "rewrite stored values with the current key from $LG_SQLA_AES_KEYS / "
        "$LANGGRAPH_AES_KEY (key rotation, or encrypting old plaintext rows)",
        reencrypt,
    )
    rotate.add_argument(
        "--batch-size", type=positive, default=500, help="rows per batch (default 500)"
    )
    rotate.add_argument(
        "--compress", action="store_true", help="also compress large values (zstd/zlib)"
    )


# --- reports -------------------------------------------------------------------------------


def _counts(counts: RowCounts) -> str:
    return f"{counts.checkpoints} checkpoint(s), {counts.writes} write(s), {counts.blobs} value(s)"


def _removed(report: SweepReport) -> str:
    return f"{report.removed.threads} thread(s), {_counts(report.removed)}"


def _would(report: dict[str, Any], strategy: str) -> str:
    verb = "delete" if strategy == "delete" else "prune"
    return (
        f"dry run: would {verb} {report['threads']} thread(s); remove {report['checkpoints']} "
        f"checkpoint(s), {report['writes']} write(s), {report['values']} value(s), "
        f"{human_bytes(report['bytes'])}{_pinned_note(report.get('pinned_skipped', 0))}"
    )


def _pinned_note(pinned: int) -> str:
    return f"; skipped {pinned} pinned" if pinned else ""


def _dry_run(saver: SQLAlchemySaver, plan: Any, thread_ids: Sequence[str] | None) -> dict[str, Any]:
    """Run a deleting plan in one transaction, measure, and roll it all back."""
    from lg_sqla import inspection as insp
    from lg_sqla.plans import in_one_transaction
    from lg_sqla.runtime.executor import drive

    def measured() -> Any:
        before = yield from insp.storage(saver.context, thread_ids=thread_ids)
        result = yield from in_one_transaction(plan)
        after = yield from insp.storage(saver.context, thread_ids=thread_ids)
        return before, result, after

    with saver.engine.connect() as connection:
        migrate.check_schema(connection)
        whole = measured()
        before, result, after = drive(connection, whole, next(whole))
        connection.rollback()
    counts = getattr(result, "removed", result)
    freed = {name: before.tables[name].bytes - after.tables[name].bytes for name in before.tables}
    return {
        "threads": counts.threads,
        "checkpoints": counts.checkpoints,
        "writes": counts.writes,
        "values": counts.blobs,
        "bytes": sum(freed.values()),
        "bytes_per_table": freed,
    }


# --- vacuum ----------------------------------------------------------------------------------


def vacuum(args: argparse.Namespace) -> int:
    with sync_saver(args) as saver:
        _vacuum(args, saver)
    return 0


def _vacuum(args: argparse.Namespace, saver: SQLAlchemySaver) -> None:
    statement = saver.context.dialect_ops.vacuum_statement
    if statement is None:
        raise CommandError(
            "vacuum is for SQLite files; PostgreSQL's autovacuum reuses freed space "
            "(VACUUM FULL returns it), MySQL/MariaDB: OPTIMIZE TABLE"
        )
    before = disk.file_size(saver)
    with (
        resumable("vacuum", lambda: "the file is as it was", in_batches=False),
        saver.engine.connect() as connection,
    ):
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(statement)
    if not getattr(args, "json", False):
        print(disk.vacuumed(before, disk.file_size(saver)))


# --- prune, delete-thread ---------------------------------------------------------------------


def prune(args: argparse.Namespace) -> int:
    """``prune`` and ``delete-thread`` (prune with the delete strategy), thread by thread."""
    from lg_sqla.checkpoint import maintenance

    strategy = "delete" if args.command == "delete-thread" else args.strategy
    keep_last = getattr(args, "keep_last", 1)
    threads = list(dict.fromkeys(args.thread_ids))
    with sync_saver(args) as saver:
        if args.dry_run:
            plan = maintenance.prune(saver.context, threads, strategy, keep_last)
            report = _dry_run(saver, plan, threads)
            say(args, {"dry_run": True, **report}, _would(report, strategy))
            return 0
        question = (
            f"Delete {len(threads)} thread(s) with all their checkpoints?"
            if strategy == "delete"
            else f"Prune {len(threads)} thread(s) to their newest {keep_last} checkpoint(s)?"
        )
        if not confirm(args, question):
            raise CommandError("cancelled: nothing was changed")
        _prune_each(args, saver, threads, strategy, keep_last)
        if args.vacuum:
            _vacuum(args, saver)
    return 0


def _prune_each(
    args: argparse.Namespace,
    saver: SQLAlchemySaver,
    threads: list[str],
    strategy: str,
    keep_last: int,
) -> None:
    from lg_sqla.checkpoint import maintenance

    verb = "deleted" if strategy == "delete" else "pruned"
    total = maintenance.RowCounts()
    with (
        resumable(
            args.command, lambda: f"{verb} {total.threads} thread(s), removed {_counts(total)}"
        ),
        Progress(verb, len(threads), args) as progress,
    ):
        for n, thread_id in enumerate(threads, start=1):
            total.add(saver.run(maintenance.prune(saver.context, [thread_id], strategy, keep_last)))
            progress.update(n, f"{total.checkpoints} checkpoint(s) removed")
    say(
        args,
        {"dry_run": False, **dataclasses.asdict(total), "values": total.blobs},
        f"done: {verb} {total.threads} thread(s); removed {_counts(total)}",
    )


# --- sweep -----------------------------------------------------------------------------------


def sweep(args: argparse.Namespace) -> int:
    with sync_saver(args) as saver:
        if args.dry_run:
            _sweep_dry_run(args, saver)
        else:
            _sweep(args, saver)
        # (also after a dry run, as the command always has: VACUUM deletes no data)
        if args.vacuum:
            _vacuum(args, saver)
    return 0


def _sweep_dry_run(args: argparse.Namespace, saver: SQLAlchemySaver) -> None:
    """What ``sweep`` would remove, page by page of its own selection (the updated_at
    index): ``delete`` removes whole threads, so each page's threads are counted once;
    ``keep_latest`` prunes a page's threads and counts them before and after. Only those
    threads are counted, never whole tables; the transaction is rolled back."""
    from lg_sqla.checkpoint import maintenance
    from lg_sqla.runtime.executor import drive

    older_than = dt.timedelta(days=args.older_than_days)
    maintenance.check_sweep(older_than, args.strategy, args.keep_last, args.batch_size)
    tally = _DryRun(args, saver, utc_now() - older_than)
    with saver.engine.connect() as connection:
        migrate.check_schema(connection)
        plan = tally.measured()
        drive(connection, plan, next(plan))
        connection.rollback()
    counts = tally.counts
    report = {
        "threads": counts.threads,
        "checkpoints": counts.checkpoints,
        "writes": counts.writes,
        "values": counts.blobs,
        "bytes": sum(tally.freed.values()),
        "bytes_per_table": tally.freed,
        "pinned_skipped": tally.pinned,
    }
    say(args, {"dry_run": True, **report}, _would(report, args.strategy))


class _DryRun:
    """A dry run's plan (``measured``) and what it counted."""

    def __init__(self, args: argparse.Namespace, saver: SQLAlchemySaver, cutoff: dt.datetime):
        from lg_sqla.checkpoint import maintenance

        self.args, self.saver, self.cutoff = args, saver, cutoff
        self.counts = maintenance.RowCounts()
        self.freed: dict[str, int] = {}
        self.pinned = 0

    def measured(self) -> Any:
        """Each page of stale threads, unpinned, measured (``_page``) until the last."""
        from lg_sqla import inspection as insp
        from lg_sqla.checkpoint import maintenance

        after: maintenance.PagePosition | None = None
        seen: set[str] = set()
        while True:
            stale, after = yield from maintenance.stale_threads(
                self.cutoff, self.args.strategy, after, self.args.batch_size, seen
            )
            batch, skipped = yield from maintenance.unpinned(stale)
            self.pinned += skipped
            for start in range(0, len(batch), insp.MAX_PAGE):
                yield from self._page(batch[start : start + insp.MAX_PAGE])
            if after is None:
                return None

    def _usage(self, threads: list[str]) -> Any:
        from lg_sqla import inspection as insp

        return (yield from insp.storage(self.saver.context, thread_ids=threads)).tables

    def _page(self, part: list[str]) -> Any:
        """What sweeping these threads removes: counted (``delete``: whole threads), or
        done and measured before and after (``keep_latest``)."""
        from lg_sqla.checkpoint import maintenance

        args, counts, context = self.args, self.counts, self.saver.context
        before = yield from self._usage(part)
        if args.strategy == "delete":
            counts.threads += len(part)
            counts.checkpoints += before["checkpoints"].rows
            counts.writes += before["checkpoint_writes"].rows
            counts.blobs += before["checkpoint_blobs"].rows
            gone = {name: usage.bytes for name, usage in before.items()}
        else:
            for thread_id in part:
                counts.add(
                    (
                        yield from maintenance.sweep_thread(
                            context, thread_id, self.cutoff, args.strategy, args.keep_last
                        )
                    )
                )
            left = yield from self._usage(part)
            gone = {name: before[name].bytes - left[name].bytes for name in before}
        for name, n in gone.items():
            self.freed[name] = self.freed.get(name, 0) + n


def _sweep(args: argparse.Namespace, saver: SQLAlchemySaver) -> None:
    from lg_sqla.checkpoint import maintenance

    older_than = dt.timedelta(days=args.older_than_days)
    cutoff = utc_now() - older_than
    # The progress total and the question: one statement over the whole table (the
    # sweep's own selection walks the updated_at index, batch by batch).
    stale = saver.run(maintenance.count_stale_threads(cutoff, args.strategy))
    question = (
        f"Delete {stale} thread(s) not written since {cutoff:%Y-%m-%d %H:%M} UTC?"
        if args.strategy == "delete"
        else f"Prune checkpoints older than {cutoff:%Y-%m-%d %H:%M} UTC in {stale} thread(s)?"
    )
    if stale and not confirm(args, question):
        raise CommandError("cancelled: nothing was changed")
    last: list[SweepReport] = []

    def so_far() -> str:
        if not last:
            return "nothing"
        return f"visited {last[-1].threads_visited} thread(s), removed {_removed(last[-1])}"

    def batch_done(report: SweepReport) -> None:
        last[:] = [report]
        progress.update(
            report.threads_visited, f"{report.removed.checkpoints} checkpoint(s) removed"
        )

    with resumable("sweep", so_far), Progress("sweep", stale, args) as progress:
        swept = saver.sweep(
            older_than,
            strategy=args.strategy,
            keep_last=args.keep_last,
            batch_size=args.batch_size,
            progress=batch_done,
        )
    _say_swept(args, swept)


def _say_swept(args: argparse.Namespace, swept: SweepReport) -> None:
    removed = swept.removed
    data = {
        "dry_run": False,
        "strategy": swept.strategy,
        "cutoff": swept.cutoff,
        "threads_visited": swept.threads_visited,
        "pinned_skipped": swept.pinned_skipped,
        **dataclasses.asdict(removed),
        "values": removed.blobs,
    }
    if args.strategy == "delete":
        text = f"done: removed {removed.threads} thread(s), {_counts(removed)}"
    else:
        text = (
            f"done: pruned {removed.threads} thread(s) (none deleted: each keeps its newest "
            f"{args.keep_last} checkpoint(s) per namespace); removed {_counts(removed)}"
        )
    say(
        args,
        data,
        f"{text}{_pinned_note(swept.pinned_skipped)}; cut-off {swept.cutoff:%Y-%m-%d %H:%M} UTC",
    )


# --- reencrypt -------------------------------------------------------------------------------


def reencrypt(args: argparse.Namespace) -> int:
    from lg_sqla import inspection as insp
    from lg_sqla.serde import CompressedSerializer, EncryptedSerializer, SerdeError

    try:
        serde = EncryptedSerializer.from_env(CompressedSerializer() if args.compress else None)
    except SerdeError as error:
        raise CommandError(str(error), 2) from error
    with sync_saver(args, serde=serde) as saver:
        usage = saver.run(insp.storage(saver.context))
        # (checkpoints: those with inline values are scanned for values to move to blobs)
        total = sum(
            usage.tables[name].rows
            for name in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        )
        with Progress("reencrypt", total, args) as progress:
            report = saver.reencrypt(
                batch_size=args.batch_size,
                progress=lambda r: progress.update(
                    sum(t.scanned for t in r.tables.values()),
                    f"batch {r.batches}: "
                    + ", ".join(
                        f"{name} scanned {t.scanned} rewritten {t.rewritten}"
                        for name, t in r.tables.items()
                    ),
                ),
            )
    print(f"done: {report.rewritten} row(s) rewritten in {report.batches} batch(es)")
    return 0
