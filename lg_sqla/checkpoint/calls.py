"""The saver calls whose parameters are declared once, for both savers.

Each function here is a call's declaration: its parameters, its documentation and
what it runs, as a ``twins.Call`` (the plan source; whether it is one of LangGraph's
checkpointer calls, idempotent, run with ``_checkpointer_call`` rather than ``run``;
whether it writes). ``twins.runs_on_engine`` makes the sync saver's method of it,
``twins.aruns_on_engine`` the async saver's ``a*`` one (and ``iterates_on_engine`` /
``aiterates_on_engine`` for ``list``), so a call's signature is written once.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata

from lg_sqla.checkpoint import maintenance, operations, retention
from lg_sqla.checkpoint.maintenance import SweepReport
from lg_sqla.checkpoint.operations import Pages
from lg_sqla.checkpoint.ttl_sweep import ApplyReport
from lg_sqla.checkpoint.twins import Call

if TYPE_CHECKING:
    from lg_sqla.checkpoint.base import SaverBase

    Saver = SaverBase[Any, Any]


def list_(
    saver: Saver,
    config: RunnableConfig | None,
    *,
    filter: dict[str, Any] | None = None,
    before: RunnableConfig | None = None,
    limit: int | None = None,
) -> tuple[Pages, bool]:
    """List checkpoints newest first, filtered in SQL before the limit.

    Args:
        config: ``thread_id`` (and optionally ``checkpoint_ns``,
            ``checkpoint_id``) to list; ``None`` lists every thread.
        filter: Top-level metadata equality, e.g. ``{"source": "input", "step": 1}``.
            Keys and values are bound parameters.
        before: Only checkpoints whose id is smaller than this config's ``checkpoint_id``.
        limit: At most this many checkpoints.
    """
    # A TTL policy: each listed thread's expiry is asked once; list(None) refreshes none.
    return saver._pages(config, filter, before, limit), saver._refresh and config is not None


def put(
    saver: Saver,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Call[RunnableConfig]:
    """Store a checkpoint: blobs of ``new_versions`` and the checkpoint row, atomically.

    Channel values are written once per version (insert-or-ignore: blobs are
    immutable); the checkpoint row is an upsert, written only with every blob
    its ``channel_versions`` names: one that a prune, ``keep_last`` or
    ``delete_thread`` removed meanwhile (beside a second writer) is written
    again from ``checkpoint["channel_values"]``, so no reader ever sees a
    checkpoint with a value missing (docs/operations.md, "Deletes, prunes and
    writers in flight"). The parent is
    ``config["configurable"]["checkpoint_id"]``. Metadata is merged with the
    config's as LangGraph does (NUL characters stripped, ``writes`` dropped).

    Args:
        config: The config of the parent (thread_id, checkpoint_ns, checkpoint_id).
        checkpoint: The checkpoint to store.
        metadata: Its metadata; must be JSON (it is stored as such, for filters).
        new_versions: The channels whose version is new in this checkpoint.

    Returns:
        The config of the stored checkpoint (thread_id, checkpoint_ns, checkpoint_id).

    Raises:
        InvalidInputError: a key is too long or holds a NUL, or metadata is not
            JSON; nothing is written. A serializer error also writes nothing.
    """

    # (a partial, not a closure: one Python frame less on the hot path)
    stored = functools.partial(
        operations.put, saver.context, config, checkpoint, metadata, new_versions
    )
    if (keep_last := saver._keep_last()) is not None:  # shallow-like: prune in the put
        return lambda: retention.pruned_put(saver.context, stored(), keep_last), False, True
    return stored, True, True


def put_writes(
    saver: Saver,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str = "",
) -> Call[None]:
    """Store a task's pending writes against the checkpoint in ``config``.

    Writes to special channels (errors, interrupts, ...) replace earlier ones
    of the same task; others are first-wins, so retries are idempotent.

    The checkpoint need not exist yet (LangGraph may store a step's writes
    before its checkpoint): writes of a checkpoint that does not exist are
    kept, pending, and read only once it does; the thread's next delete or
    prune past them removes them.

    Args:
        config: The config ``put`` returned (it names the checkpoint).
        writes: ``(channel, value)`` pairs, in the task's order.
        task_id: The task that produced them.
        task_path: The task's path, stored so reads can sort writes as
            LangGraph applies them (``writes_sort_key``).

    Raises:
        InvalidInputError: ``config`` has no ``checkpoint_id``, or a key is too long.
    """
    return (
        lambda: operations.put_writes(saver.context, config, writes, task_id, task_path),
        True,
        True,
    )


def sweep(
    saver: Saver,
    older_than: dt.timedelta,
    *,
    strategy: str = "delete",
    keep_last: int = 1,
    batch_size: int = 100,
    progress: Callable[[SweepReport], None] | None = None,
) -> Call[SweepReport]:
    """Retention: remove what has not been written for ``older_than``.

    ``"delete"`` deletes whole threads whose newest checkpoint is older than
    the cut-off; ``"keep_latest"`` prunes, in every thread, checkpoints older
    than the cut-off except the newest ``keep_last`` per namespace (DeltaChannel
    safe, as ``prune``). Threads are visited ``batch_size`` at a time, each in
    its own short transaction, so it can run beside live traffic.

    Returns:
        What was removed: threads, checkpoints, writes, blobs, batches.
    """
    return (
        lambda: maintenance.sweep(
            saver.context, older_than, strategy, keep_last, batch_size, progress
        ),
        False,
        True,
    )


def sweep_ttl(
    saver: Saver,
    *,
    batch_size: int = 500,
    progress: Callable[[SweepReport], None] | None = None,
    dry_run: bool = False,
    now: dt.datetime | None = None,
) -> Call[SweepReport]:
    """Delete the threads whose stored TTL ran out; whole threads, one transaction
    per page of them. This saver's own policy decides nothing (a thread expires by
    the TTL stamped on it or given to it); pinned threads and threads with a run in
    progress are kept, the pinned ones counted in ``pinned_skipped``.

    Args:
        batch_size: Candidates read per page of the ``expires_at`` index.
        progress: Called with the report after each page.
        dry_run: Delete nothing: ``removed`` counts what would be removed and
            ``thread_ids`` names the threads.
        now: The instant expiry is reckoned at (default: now).
    """
    return saver._ttl_sweep(batch_size, progress, dry_run, now), False, not dry_run


def set_threads_ttl(
    saver: Saver,
    ttl_minutes: float,
    *,
    replace_existing: bool = False,
    idle_for: dt.timedelta | None = None,
    batch_size: int = 500,
    dry_run: bool = False,
) -> Call[ApplyReport]:
    """Give existing threads a TTL of their own (``lg-sqla ttl apply``): by default
    the threads that never expire (written under no TTL, given none); with
    ``replace_existing`` every thread; with ``idle_for`` only those last written
    longer ago. Pinned threads are skipped and counted. ``dry_run``: count only.
    """
    # (_apply_ttl refuses a read-only saver itself, under this call's sync name.)
    plans = saver._apply_ttl(ttl_minutes, replace_existing, idle_for, batch_size, dry_run)
    return plans, False, False
