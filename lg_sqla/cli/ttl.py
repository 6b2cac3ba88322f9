"""``lg-sqla ttl``: checkpoint retention by TTL from the command line.

``ttl show THREAD``, ``ttl set THREAD --days N`` (or ``--minutes``, or ``--default``),
``ttl pin THREAD`` / ``ttl unpin THREAD``, and ``ttl sweep``: delete the threads whose
TTL ran out. A thread's TTL is its own (``ttl set``) or the default given with
``--days``/``--minutes`` (the one the application's saver has in ``ttl=``); without a
default only threads with a TTL of their own expire. Runs in progress and pinned
threads are kept (docs/operations.md, "Retention by policy").
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import TYPE_CHECKING, Any

from lg_sqla.cli.common import CommandError, Commands, positive, sync_saver
from lg_sqla.cli.output import Progress, confirm, human_bytes, say, utc_time

if TYPE_CHECKING:
    from lg_sqla.checkpoint.policy import CheckpointTTL
    from lg_sqla.checkpoint.retention import ThreadTTL
    from lg_sqla.plans import Plan


def positive_number(text: str) -> float:
    """A positive, finite number (``--days 0.5``); argparse names the option on error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def register(commands: Commands) -> None:
    ttl = commands.add("ttl", "checkpoint TTLs: show, set, pin, unpin, sweep", _no_subcommand)
    sub = ttl.add_subparsers(dest="ttl_command", required=True, metavar="TTL_COMMAND")

    def add(name: str, help: str, handler: Any, *parents: argparse.ArgumentParser) -> Any:
        parser = sub.add_parser(name, parents=list(parents), help=help, description=help)
        parser.set_defaults(handler=handler)
        return parser

    show = add("show", "a thread's TTL, last write, pin and expiry", _show, commands.reading)
    show.add_argument("thread_id", metavar="THREAD_ID")
    _default_ttl(show, "the default TTL its expiry is reckoned with")

    set_ = add("set", "give a thread a TTL of its own", _set, commands.reading)
    set_.add_argument("thread_id", metavar="THREAD_ID")
    which = set_.add_mutually_exclusive_group(required=True)
    which.add_argument("--days", type=positive_number, help="its TTL in days")
    which.add_argument("--minutes", type=positive_number, help="its TTL in minutes")
    which.add_argument(
        "--default", action="store_true", help="drop its own TTL: the default applies again"
    )

    pin = add("pin", "pin a thread: it never expires", _pin, commands.reading)
    pin.add_argument("thread_id", metavar="THREAD_ID")
    unpin = add("unpin", "unpin a thread: its TTL applies again", _pin, commands.reading)
    unpin.add_argument("thread_id", metavar="THREAD_ID")

    sweep = add("sweep", "delete the threads whose TTL ran out", _sweep, commands.destructive)
    _default_ttl(sweep, "the TTL of threads without one of their own")
    sweep.add_argument(
        "--batch-size",
        type=positive,
        default=500,
        help="checkpoints read per page of the updated_at index (default 500)",
    )


def _default_ttl(parser: argparse.ArgumentParser, what: str) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--days", type=positive_number, help=f"{what}, in days")
    group.add_argument("--minutes", type=positive_number, help=f"{what}, in minutes")


def _no_subcommand(args: argparse.Namespace) -> int:  # pragma: no cover (argparse requires one)
    raise CommandError("ttl: name a subcommand (show, set, pin, unpin, sweep)", 2)


def _minutes(args: argparse.Namespace) -> float | None:
    if getattr(args, "days", None) is not None:
        return float(args.days) * 24 * 60
    minutes = getattr(args, "minutes", None)
    return None if minutes is None else float(minutes)


def _policy(args: argparse.Namespace) -> CheckpointTTL:
    minutes = _minutes(args)
    return {} if minutes is None else {"default_ttl": minutes}


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
        + (" (its own)" if info.ttl_minutes is not None else " (the default)")
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
    with sync_saver(args, ttl=_policy(args)) as saver:
        _report(args, saver.thread_ttl(args.thread_id))
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


def _sweep(args: argparse.Namespace) -> int:
    with sync_saver(args, ttl=_policy(args)) as saver:
        if args.dry_run:
            _dry_run(args, saver)
            return 0
        if not confirm(args, "Delete every thread whose TTL ran out?"):
            raise CommandError("cancelled: nothing was changed")
        with Progress("ttl sweep", None, args) as progress:
            report = saver.sweep_ttl(
                batch_size=args.batch_size,
                progress=lambda r: progress.update(
                    r.removed.threads, f"{r.removed.checkpoints} checkpoint(s) removed"
                ),
            )
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
        },
        f"done: deleted {removed.threads} expired thread(s); removed "
        f"{removed.checkpoints} checkpoint(s), {removed.writes} write(s), "
        f"{removed.blobs} value(s)",
    )
    return 0


def _dry_run(args: argparse.Namespace, saver: Any) -> None:
    """Which threads the sweep would delete, and their rows and bytes, counted once
    per page of expired threads (an expired thread is deleted whole); nothing written."""
    from lg_sqla import inspection as insp
    from lg_sqla.checkpoint import retention
    from lg_sqla.checkpoint.policy import Policy, policy_from

    policy = policy_from(_policy(args)) or Policy()
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
        return retention.sweep(
            saver.context,
            policy.default_ttl,
            policy.max_run,
            args.batch_size,
            None,
            measure_instead=measure,
        )

    saver.run(plan)
    say(
        args,
        {"dry_run": True, **totals},
        f"dry run: would delete {totals['threads']} expired thread(s); remove "
        f"{totals['checkpoints']} checkpoint(s), {totals['writes']} write(s), "
        f"{totals['values']} value(s), {human_bytes(totals['bytes'])}",
    )
