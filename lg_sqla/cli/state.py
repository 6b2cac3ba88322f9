"""``lg-sqla state``: the application's graph-state revisions in stored checkpoints.

``state show`` counts the rows at each state revision; ``state upgrade`` rewrites them
to the newest (``--to`` another), ``state downgrade --to REV`` back to an older one,
always counting first (``--dry-run`` stops there), a batch of threads per transaction,
resumable (run again after a crash). The application's migrations come from an import
path, ``--migrations myapp.state:MIGRATIONS`` (a ``StateMigrations``); its serializer,
where it is not LangGraph's default (encryption, compression), from ``--serde
myapp.state:SERDE`` (a serializer, or a function of no argument returning one).
See docs/state-migrations.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from lg_sqla.cli.common import CommandError, Commands, positive, sync_saver
from lg_sqla.cli.output import Progress, confirm, say

if TYPE_CHECKING:
    from lg_sqla.checkpoint.state_migrations import StateMigrations
    from lg_sqla.checkpoint.state_upgrade import StateUpgradeReport


def register(commands: Commands) -> None:
    state = commands.add(
        "state", "graph-state revisions of stored checkpoints: show, upgrade, downgrade", _none
    )
    sub = state.add_subparsers(dest="state_command", required=True, metavar="STATE_COMMAND")

    def add(name: str, help: str, handler: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(
            name, parents=[commands.reading], help=help, description=help
        )
        parser.set_defaults(handler=handler)
        parser.add_argument(
            "--migrations",
            metavar="MODULE:ATTRIBUTE",
            required=name != "show",
            help="the application's StateMigrations, e.g. myapp.state:MIGRATIONS",
        )
        return parser

    add("show", "how many checkpoints, blobs and writes sit at each state revision", _show)
    upgrade = add("upgrade", "rewrite stored rows to the newest state revision", _upgrade)
    upgrade.add_argument("--to", default="head", help="a revision id, or base (default: head)")
    downgrade = add("downgrade", "rewrite stored rows back to an older state revision", _upgrade)
    downgrade.add_argument("--to", required=True, help="a revision id, or base")
    for parser in (upgrade, downgrade):
        parser.add_argument(
            "--serde",
            metavar="MODULE:ATTRIBUTE",
            help="the application's serializer (default: LangGraph's JsonPlusSerializer)",
        )
        parser.add_argument(
            "--batch-size", type=positive, default=100, help="threads per transaction (100)"
        )
        parser.add_argument("--dry-run", action="store_true", help="only count what changes")
        parser.add_argument("--yes", "-y", action="store_true", help="do not ask on a terminal")


def _none(args: argparse.Namespace) -> int:  # pragma: no cover (argparse requires one)
    return 2


def load_object(spec: str, what: str) -> Any:
    """``module:attribute`` (dotted attributes allowed) imported from the current
    directory too, as ``python -m`` would."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CommandError(f"{what} must be MODULE:ATTRIBUTE (e.g. myapp.state:X), got {spec!r}", 2)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise CommandError(f"{what}: cannot import {module_name!r}: {error}", 2) from error
    for name in attribute.split("."):
        if not hasattr(found, name):
            raise CommandError(f"{what}: {module_name!r} has no attribute {attribute!r}", 2)
        found = getattr(found, name)
    return found


def _migrations(args: argparse.Namespace) -> StateMigrations | None:
    from lg_sqla.checkpoint.state_migrations import StateMigrations

    if args.migrations is None:
        return None
    found = load_object(args.migrations, "--migrations")
    if not isinstance(found, StateMigrations):
        raise CommandError(
            f"--migrations: {args.migrations} is a {type(found).__name__}, not a StateMigrations",
            2,
        )
    return found


def _serde(args: argparse.Namespace) -> Any:
    if getattr(args, "serde", None) is None:
        return None
    found = load_object(args.serde, "--serde")
    if not hasattr(found, "dumps_typed") and callable(found):
        found = found()
    if not (hasattr(found, "dumps_typed") and hasattr(found, "loads_typed")):
        raise CommandError(f"--serde: {args.serde} is not a serializer (no dumps_typed)", 2)
    return found


def _label(revision: str | None) -> str:
    return "(zero)" if revision is None else revision


def _show(args: argparse.Namespace) -> int:
    from lg_sqla.checkpoint.state_upgrade import state_counts

    migrations = _migrations(args)
    with sync_saver(args) as saver:
        counts = state_counts(saver)
    order: list[str | None] = [None]
    if migrations is not None:
        order += [r.id for r in migrations.revisions]
    for table in counts.values():
        order += sorted((r for r in table if r not in order), key=str)
    rows = []
    for revision in order:
        row: dict[str, Any] = {"revision": revision}
        row.update({name: t.get(revision, 0) for name, t in counts.items()})
        if migrations is not None:
            row["known"] = migrations.known(revision)
            row["head"] = revision == migrations.head
        if revision is None or any(row[name] for name in counts):
            rows.append(row)
    lines = ["revision            checkpoints  blobs  writes"]
    for row in rows:
        note = " (head)" if row.get("head") else " (unknown)" if row.get("known") is False else ""
        lines.append(
            f"{_label(row['revision']):<20}{row['checkpoints']:>11}  {row['blobs']:>5}  "
            f"{row['writes']:>6}{note}"
        )
    say(args, rows, "\n".join(lines))
    return 0


def _upgrade(args: argparse.Namespace) -> int:
    from lg_sqla.checkpoint.state_upgrade import upgrade_state

    migrations = _migrations(args)
    with sync_saver(args, serde=_serde(args), state_migrations=migrations) as saver:
        counted = upgrade_state(saver, to=args.to, batch_size=args.batch_size, dry_run=True)
        target = _label(counted.target)
        pending = counted.pending
        summary = (
            f"{pending['checkpoints']} checkpoint(s), {pending['blobs']} blob(s) and "
            f"{pending['writes']} write(s) of {counted.pending_threads} thread(s) are not at "
            f"state revision {target}"
        )
        if args.dry_run or not counted.pending_threads:
            say(args, dataclasses.asdict(counted), summary)
            return 0
        if not args.json:
            print(summary)
        if not confirm(args, f"rewrite them to {target}?"):
            print("cancelled: nothing changed")
            return 1
        with Progress("state", counted.pending_threads, args) as progress:
            report = upgrade_state(
                saver,
                to=args.to,
                batch_size=args.batch_size,
                progress=lambda r: progress.update(
                    r.threads_visited + len(r.threads_running),
                    f"batch {r.batches}: {r.checkpoints} checkpoint(s) rewritten",
                ),
            )
    return _report(args, report)


def _report(args: argparse.Namespace, report: StateUpgradeReport) -> int:
    lines = [
        f"done: {report.checkpoints} checkpoint(s), {report.blobs} blob(s) and "
        f"{report.writes} write(s) rewritten to state revision {_label(report.target)} "
        f"in {report.batches} batch(es) of {report.threads_visited} thread(s)"
    ]
    if report.threads_running:
        lines.append(
            f"skipped {len(report.threads_running)} thread(s) a graph is running on "
            f"({', '.join(report.threads_running[:5])}): run again once they pause"
        )
    for failure in report.failures:
        lines.append(
            f"left as it was: checkpoint {failure.checkpoint_id} of thread "
            f"{failure.thread_id!r} (namespace {failure.checkpoint_ns!r}): {failure.error}"
        )
    say(args, dataclasses.asdict(report), "\n".join(lines))
    return 1 if report.failures else 0
