"""``lg-sqla ttl``: checkpoint retention by TTL from the command line.

``ttl show THREAD``, ``ttl set THREAD --days N`` (or ``--minutes``, or ``--default``),
``ttl pin THREAD`` / ``ttl unpin THREAD``, ``ttl apply --days N``: give existing threads
a TTL (counted, dry-run first), and ``ttl sweep``: delete the threads whose TTL ran out.
A thread's TTL is stored: its own (``ttl set``/``ttl apply``), else the one the saver
that last wrote it stamped (its ``ttl=`` default), else none: it never expires. No
command here takes a default TTL: what expires never depends on who sweeps. Runs in
progress and pinned threads are kept (docs/operations.md, "Retention by policy").
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import TYPE_CHECKING, Any

from lg_sqla.cli.common import CommandError, Commands, positive, positive_number, sync_saver
from lg_sqla.cli.interrupts import resumable
from lg_sqla.cli.output import Progress, confirm, human_bytes, say, utc_time

if TYPE_CHECKING:
    from lg_sqla.checkpoint.maintenance import SweepReport
    from lg_sqla.checkpoint.retention import ThreadTTL
    from lg_sqla.checkpoint.ttl_sweep import ApplyReport
    from lg_sqla.plans import Plan


def register(commands: Commands) -> None:
    ttl = commands.add(
        "ttl", "checkpoint TTLs: show, set, pin, unpin, apply, sweep", _no_subcommand
    )
    sub = ttl.add_subparsers(dest="ttl_command", required=True, metavar="TTL_COMMAND")

    def add(name: str, help: str, handler: Any, *parents: argparse.ArgumentParser) -> Any:
        parser = sub.add_parser(name, parents=list(parents), help=help, description=help)
        parser.set_defaults(handler=handler)
        return parser

    show = add("show", "a thread's TTL, last write, pin and expiry", _show, commands.reading)
    show.add_argument("thread_id", metavar="THREAD_ID")
    _no_default_ttl(show)

    set_ = add("set", "give a thread a TTL of its own", _set, commands.reading)
    set_.add_argument("thread_id", metavar="THREAD_ID")
    which = set_.add_mutually_exclusive_group(required=True)
    which.add_argument("--days", type=positive_number, help="its TTL in days")
    which.add_argument("--minutes", type=positive_number, help="its TTL in minutes")
    which.add_argument(
        "--default",
        action="store_true",
        help="drop its own TTL: the one its last write was stamped with applies again",
    )

    pin = add("pin", "pin a thread: it never expires", _pin, commands.reading)
    pin.add_argument("thread_id", metavar="THREAD_ID")
    unpin = add("unpin", "unpin a thread: its TTL applies again", _pin, commands.reading)
    unpin.add_argument("thread_id", metavar="THREAD_ID")

    _apply_command(add, commands)
    sweep = add("sweep", "delete the threads whose TTL ran out", _sweep, commands.destructive)
    _no_default_ttl(sweep)
    sweep.add_argument(
        "--batch-size",
        type=positive,
        default=500,
        help="candidates read per page of the expires_at index (default 500)",
    )


def _no_default_ttl(parser: argparse.ArgumentParser) -> None:
    """The default TTL these commands took before revision 0008, hidden: given, the
    command says why it is gone and what replaces it."""
    for option in ("--days", "--minutes"):
        parser.add_argument(option, dest="old_default_ttl", help=argparse.SUPPRESS)


def _refuse_default_ttl(args: argparse.Namespace) -> None:
    if getattr(args, "old_default_ttl", None) is not None:
        raise CommandError(
            f"ttl {args.ttl_command} takes no default TTL any more: a thread's expiry is "
            "stored (stamped by the saver that last wrote it, or set with `lg-sqla ttl "
            "set`); give existing threads a TTL with `lg-sqla ttl apply --days N`",
            2,
        )


def _apply_command(add: Any, commands: Commands) -> None:
    apply = add(
        "apply",
        "give existing threads a TTL of their own (by default those that never expire)",
        _apply,
        commands.reading,
    )
    which = apply.add_mutually_exclusive_group(required=True)
    which.add_argument("--days", type=positive_number, help="the TTL, in days")
    which.add_argument("--minutes", type=positive_number, help="the TTL, in minutes")
    apply.add_argument(
        "--idle-days",
        type=non_negative_number,
        help="only threads last written more than this many days ago",
    )
    apply.add_argument(
        "--replace",
        action="store_true",
        help="also threads that already have a TTL (their own or stamped): this one wins",
    )
    apply.add_argument(
        "--dry-run", action="store_true", help="only count the threads it would change"
    )
    apply.add_argument(
        "--yes", "-y", action="store_true", help="do not ask for confirmation on a terminal"
    )
    apply.add_argument(
        "--batch-size", type=positive, default=500, help="threads per transaction (default 500)"
    )


def non_negative_number(text: str) -> float:
    """A finite number >= 0 (``--idle-days 0``); argparse names the option on error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def _no_subcommand(args: argparse.Namespace) -> int:  # pragma: no cover (argparse requires one)
    raise CommandError("ttl: name a subcommand (show, set, pin, unpin, apply, sweep)", 2)


def _minutes(args: argparse.Namespace) -> float | None:
    if getattr(args, "days", None) is not None:
        return float(args.days) * 24 * 60
    minutes = getattr(args, "minutes", None)
    return None if minutes is None else float(minutes)


def _report(args: argparse.Namespace, info: ThreadTTL) -> None:
    data = dataclasses.asdict(info)
    if not info.exists:
        state = "no checkpoints"
    elif info.expired:
        state = "EXPIRED (reads see nothing; the next sweep deletes it)"
    elif info.running:
        state = "a run is in progress (kept past its TTL)"
    else:
        state = "live"
    ttl = (
        "none (never expires)"
        if info.effective_ttl_minutes is None
        else f"{info.effective_ttl_minutes:g} min"
        + (" (its own)" if info.ttl_minutes is not None else " (stamped by its last write)")
    )
    lines = [
        f"thread {info.thread_id}: {state}",
        f"  last write  {utc_time(info.last_write) or '-'}",
        f"  ttl         {ttl}",
        f"  pinned      {'yes' if info.pinned else 'no'}",
        f"  expires at  {utc_time(info.expires_at) or 'never'}",
    ]
    if info.touched_at is not None:
        lines.insert(2, f"  last read   {utc_time(info.touched_at)} (refreshed the TTL)")
    say(args, data, "\n".join(lines))


def _show(args: argparse.Namespace) -> int:
    _refuse_default_ttl(args)
    with sync_saver(args) as saver:
        info = saver.thread_ttl(args.thread_id)
    if not info.exists and info.ttl_minutes is None and not info.pinned:
        # As every read command: a thread named that does not exist is an error (exit 1).
        raise CommandError(f"no thread {args.thread_id!r}: it has no checkpoints", 1)
    _report(args, info)
    return 0


def _set(args: argparse.Namespace) -> int:
    with sync_saver(args) as saver:
        _report(
            args, saver.set_thread_ttl(args.thread_id, None if args.default else _minutes(args))
        )
    return 0


def _pin(args: argparse.Namespace) -> int:
    with sync_saver(args) as saver:
        _report(args, saver.pin_thread(args.thread_id, args.ttl_command == "pin"))
    return 0


def _apply(args: argparse.Namespace) -> int:
    import datetime as dt

    minutes = _minutes(args)
    assert minutes is not None  # (argparse: --days or --minutes is required)
    idle = None if args.idle_days is None else dt.timedelta(days=args.idle_days)
    with sync_saver(args) as saver:

        def run(dry_run: bool) -> ApplyReport:
            return saver.set_threads_ttl(
                minutes,
                replace_existing=args.replace,
                idle_for=idle,
                batch_size=args.batch_size,
                dry_run=dry_run,
            )

        counted = run(dry_run=True)
        if args.dry_run or not counted.threads:
            _say_applied(args, counted)
            return 0
        if not confirm(args, f"Give {counted.threads} thread(s) a TTL of {minutes:g} min?"):
            raise CommandError("cancelled: nothing was changed")
        _say_applied(args, run(dry_run=False))
    return 0


def _say_applied(args: argparse.Namespace, report: ApplyReport) -> None:
    verb = "would give" if report.dry_run else "gave"
    pinned = _pinned_note(report.pinned_skipped)
    say(
        args,
        dataclasses.asdict(report),
        f"{'dry run: ' if report.dry_run else 'done: '}{verb} {report.threads} thread(s) "
        f"a TTL of {report.ttl_minutes:g} min{pinned}",
    )


def _sweep(args: argparse.Namespace) -> int:
    _refuse_default_ttl(args)
    with sync_saver(args) as saver:
        if args.dry_run:
            _dry_run(args, saver)
            return 0
        if not confirm(args, "Delete every thread whose TTL ran out?"):
            raise CommandError("cancelled: nothing was changed")
        last: list[SweepReport] = []

        def page_done(report: SweepReport) -> None:
            last[:] = [report]
            progress.update(
                report.removed.threads, f"{report.removed.checkpoints} checkpoint(s) removed"
            )

        def so_far() -> str:
            removed = last[0].removed if last else None
            if removed is None:
                return "nothing"
            return (
                f"deleted {removed.threads} expired thread(s) ({removed.checkpoints} "
                f"checkpoint(s), {removed.writes} write(s), {removed.blobs} value(s))"
            )

        with resumable("ttl sweep", so_far), Progress("ttl sweep", None, args) as progress:
            report = saver.sweep_ttl(batch_size=args.batch_size, progress=page_done)
        if args.vacuum:
            from lg_sqla.cli.maintenance import _vacuum

            _vacuum(args, saver)
    removed = report.removed
    say(
        args,
        {
            "dry_run": False,
            "threads": removed.threads,
            "checkpoints": removed.checkpoints,
            "writes": removed.writes,
            "values": removed.blobs,
            "batches": report.batches,
            "cutoff": report.cutoff,
            "pinned_skipped": report.pinned_skipped,
        },
        f"done: deleted {removed.threads} expired thread(s); removed "
        f"{removed.checkpoints} checkpoint(s), {removed.writes} write(s), "
        f"{removed.blobs} value(s){_pinned_note(report.pinned_skipped)}",
    )
    return 0


def _pinned_note(pinned: int) -> str:
    return f"; skipped {pinned} pinned" if pinned else ""


def _dry_run(args: argparse.Namespace, saver: Any) -> None:
    """Which threads the sweep would delete, and their rows and bytes, counted once
    per page of expired threads (an expired thread is deleted whole); nothing written."""
    from lg_sqla import inspection as insp
    from lg_sqla.checkpoint import ttl_sweep
    from lg_sqla.checkpoint.policy import Policy

    totals: dict[str, int] = {}

    def measure(threads: list[str]) -> Plan[None]:
        for start in range(0, len(threads), insp.MAX_PAGE):
            part = threads[start : start + insp.MAX_PAGE]
            tables = (yield from insp.storage(saver.context, thread_ids=part)).tables
            totals["threads"] += len(part)
            totals["checkpoints"] += tables["checkpoints"].rows
            totals["writes"] += tables["checkpoint_writes"].rows
            totals["values"] += tables["checkpoint_blobs"].rows
            totals["bytes"] += sum(t.bytes for t in tables.values())

    def plan() -> Plan[Any]:
        # (a fresh count on each attempt: the runtime may retry a plan from the start)
        totals.update(threads=0, checkpoints=0, writes=0, values=0, bytes=0)
        return ttl_sweep.sweep(
            saver.context, Policy().max_run, args.batch_size, None, measure_instead=measure
        )

    report = saver.run(plan)
    say(
        args,
        {"dry_run": True, **totals, "pinned_skipped": report.pinned_skipped},
        f"dry run: would delete {totals['threads']} expired thread(s); remove "
        f"{totals['checkpoints']} checkpoint(s), {totals['writes']} write(s), "
        f"{totals['values']} value(s), {human_bytes(totals['bytes'])}"
        f"{_pinned_note(report.pinned_skipped)}",
    )
