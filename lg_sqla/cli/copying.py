"""``copy-thread``: a thread's history under a new thread id, on the same database.

Without ``--checkpoint`` it is ``SQLAlchemySaver.copy_thread``: every namespace, every
checkpoint, write and value, in one transaction (the copy is written now). With
``--checkpoint ID`` (or a unique prefix) the new thread is a fork at that checkpoint:
the checkpoint and its ancestors in ``--ns``, with their pending writes, copied by the
importer (``lg_sqla.importer.import_threads``) one checkpoint at a time, writes first,
keeping each checkpoint's own creation time; interrupted, the same command resumes.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from lg_sqla.cli.common import CommandError, Commands, sync_saver
from lg_sqla.cli.interrupts import resumable
from lg_sqla.cli.output import say

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

    from lg_sqla.checkpoint.saver import SQLAlchemySaver


def register(commands: Commands) -> None:
    copy = commands.add(
        "copy-thread",
        "copy a thread's history to a new thread id (a fork with --checkpoint)",
        copy_thread,
        commands.reading,
        commands.namespace,
    )
    copy.add_argument("source", metavar="SOURCE_THREAD")
    copy.add_argument("target", metavar="NEW_THREAD")
    copy.add_argument(
        "--checkpoint",
        metavar="CHECKPOINT_ID",
        help="copy only this checkpoint (an id or a unique prefix) and its ancestors in "
        "--ns: the new thread continues from there",
    )


def copy_thread(args: argparse.Namespace) -> int:
    with sync_saver(args) as saver:
        if args.checkpoint is None:
            with resumable("copy-thread", lambda: "nothing was copied", in_batches=False):
                saver.run(_whole_copy(saver, args.source, args.target))
            _say_copied(args, saver)
            return 0
        copied = _fork(args, saver)
    say(
        args,
        {
            "source": args.source,
            "target": args.target,
            "checkpoint": copied[0],
            "checkpoints": copied[1],
        },
        f"done: thread {args.target!r} starts from checkpoint {copied[0]} of "
        f"{args.source!r}: {copied[1]} checkpoint(s) copied",
    )
    return 0


def _say_copied(args: argparse.Namespace, saver: SQLAlchemySaver) -> None:
    from lg_sqla import inspection as insp

    # Counted from the copy (rowcounts of INSERT ... SELECT are not every driver's).
    tables = saver.run(insp.storage(saver.context, thread_id=args.target)).tables
    counts = {
        "checkpoints": tables["checkpoints"].rows,
        "writes": tables["checkpoint_writes"].rows,
        "values": tables["checkpoint_blobs"].rows,
    }
    say(
        args,
        {"source": args.source, "target": args.target, **counts},
        f"done: copied thread {args.source!r} to {args.target!r}: "
        f"{counts['checkpoints']} checkpoint(s), {counts['writes']} write(s), "
        f"{counts['values']} value(s)",
    )


def _whole_copy(saver: SQLAlchemySaver, source: str, target: str) -> Any:
    from lg_sqla.checkpoint import maintenance

    return lambda: maintenance.copy_thread(saver.context, source, target)


def _fork(args: argparse.Namespace, saver: SQLAlchemySaver) -> tuple[str, int]:
    """The checkpoint's lineage copied to the target; its full id and the count copied."""
    from lg_sqla import inspection as insp
    from lg_sqla.importer import existing_checkpoints, import_threads

    if args.source == args.target:
        raise CommandError("copy-thread: the source and the new thread are the same", 2)
    checkpoint_id = saver.run(
        insp.resolve_checkpoint(saver.context, args.source, args.checkpoint, checkpoint_ns=args.ns)
    )
    lineage = _lineage(saver, args.source, args.ns, checkpoint_id)
    ids = {t.config["configurable"]["checkpoint_id"] for t in lineage}
    there = {found for _, found in saver.run(existing_checkpoints(args.target))}
    if not there <= ids:
        raise CommandError(
            f"copy-thread: thread {args.target!r} already has other checkpoints; "
            "delete it first or choose another id"
        )
    source = cast("BaseCheckpointSaver[Any]", _Renamed(lineage, args.target))
    # Writes first, then the checkpoint, oldest first: a rerun skips what is there.
    with resumable("copy-thread", lambda: "the oldest checkpoints"):
        report = import_threads(source, saver, thread_ids=[args.target])
    return checkpoint_id, report.checkpoints_imported + report.checkpoints_skipped


def _lineage(
    saver: SQLAlchemySaver, thread_id: str, ns: str, checkpoint_id: str
) -> list[CheckpointTuple]:
    """The checkpoint and its ancestors, newest first (one read each)."""
    config: Any = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
    found = []
    while config is not None:
        current = saver.get_tuple(config)
        if current is None:
            break  # (a parent pruned away: the fork starts at the oldest kept)
        found.append(current)
        config = current.parent_config
    return found


class _Renamed:
    """The lineage as the importer reads a source (``list``), under the new thread id."""

    def __init__(self, lineage: list[CheckpointTuple], target: str) -> None:
        self.lineage = lineage
        self.target = target

    def list(self, config: Any, **kwargs: Any) -> Iterator[CheckpointTuple]:
        for found in self.lineage:
            yield found._replace(
                config=self._renamed(found.config), parent_config=self._renamed(found.parent_config)
            )

    def _renamed(self, config: Any) -> Any:
        if config is None:
            return None
        return {"configurable": {**config["configurable"], "thread_id": self.target}}
