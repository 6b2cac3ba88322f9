"""Reading rows written at older state revisions: each checkpoint in the newest shape.

``operations.load_page`` hands a page here when its saver has state migrations, or
when a row of the page carries a state revision (a saver without migrations then
refuses it, naming the revision, rather than return a shape its graph does not
expect). Every row is migrated from the revision it was written at: the checkpoint's
names from the checkpoint's, each channel value from its blob's (a blob is shared by
later checkpoints that keep its version, so it may be older than the checkpoint that
names it), each pending write from its own (a resumed graph writes against the
checkpoint it resumed from, which may be older than the code writing).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple, PendingWrite, writes_sort_key

from lg_sqla.checkpoint import codec
from lg_sqla.checkpoint.codec import StoredWrite
from lg_sqla.checkpoint.context import Context
from lg_sqla.checkpoint.state_migrations import (
    DROPPED,
    StateMigrationError,
    StateMigrations,
    Step,
    migrate_metadata,
    migrate_names,
    migrate_value,
    unknown_revision,
)
from lg_sqla.checkpoint.statements import (
    AT_KIND,
    AT_STATE_REVISION,
    KIND_BLOB,
    KIND_CHECKPOINT,
    KIND_WRITE,
    LoadLayout,
    PageKey,
    PageQuery,
    claim_keyless,
    page_key,
)
from lg_sqla.plans import Record

# A stored blob with its revision: (channel, type, blob, state_revision).
RevisedBlob = tuple[str, str, bytes | None, str | None]
RevisedWrite = tuple[StoredWrite, str | None]


def refuse_revisions(rows: Iterable[Record]) -> None:
    """Raise on the first row written at a state revision (a saver that has none)."""
    for row in rows:
        if row["state_revision"] is not None:
            raise unknown_revision(row["state_revision"], _row_name(row), None)


def _row_name(row: Record) -> str:
    checkpoint = row.get("checkpoint_id")
    thread = row.get("thread_id")
    if checkpoint is None:
        return "a stored row"
    return f"checkpoint {checkpoint!r} of thread {thread!r}"


def assemble_page(
    ctx: Context, q: PageQuery, layout: LoadLayout, rows: Sequence[Any]
) -> list[CheckpointTuple]:
    """``operations.load_page``'s tuples, newest first, from the load UNION's rows (by
    position, ``layout``), each in the newest state shape."""
    checkpoint_rows: list[Record] = []
    blobs: dict[PageKey, list[RevisedBlob]] = defaultdict(list)
    writes: dict[PageKey, list[RevisedWrite]] = defaultdict(list)
    sends: dict[PageKey, list[RevisedWrite]] = defaultdict(list)
    for row in rows:
        kind = row[AT_KIND]
        if kind == KIND_CHECKPOINT:
            checkpoint_rows.append(layout.record(row, q))
            continue
        revision = row[AT_STATE_REVISION]
        if kind == KIND_BLOB:
            blobs[layout.key_of(row)].append((*layout.blob_of(row), revision))
        else:
            found = writes if kind == KIND_WRITE else sends
            found[layout.key_of(row)].append((layout.write_of(row), revision))
    if len(checkpoint_rows) == 1:
        claim_keyless(page_key(checkpoint_rows[0]), blobs, writes, sends)
    ordered = sorted(checkpoint_rows, key=page_key, reverse=True)
    return [
        migrated_tuple(
            ctx,
            row,
            blobs.get(page_key(row), ()),
            writes.get(page_key(row), ()),
            sends.get(page_key(row), ()),
        )
        for row in ordered
    ]


def _write_order(write: RevisedWrite) -> tuple[str, str, int]:
    stored = write[0]
    return writes_sort_key(stored[2] or "", stored[1], stored[3])


def migrated_tuple(
    ctx: Context,
    row: Record,
    blobs: Sequence[RevisedBlob],
    writes: Sequence[RevisedWrite],
    sends: Sequence[RevisedWrite],
) -> CheckpointTuple:
    """``codec.build_tuple`` of the row, then every part of it migrated to the head."""
    state, where = ctx.state, _row_name(row)
    revisions = {row["state_revision"], *(b[3] for b in blobs), *(w[1] for w in writes)}
    revisions.update(s[1] for s in sends)
    for revision in revisions:
        if revision is not None and (state is None or not state.known(revision)):
            raise unknown_revision(revision, where, state)
    ordered = sorted(writes, key=_write_order)  # build_tuple keeps this order (stable)
    found = codec.build_tuple(
        ctx.serde,
        row,
        [(channel, type_, blob) for channel, type_, blob, _ in blobs],
        [write for write, _ in ordered],
        [write for write, _ in sends],
        next_version=ctx.next_version,
    )
    if state is None:  # (only revision zero here: refused above otherwise)
        return found
    head = state.head
    stored_at = row["state_revision"]
    names = state.steps(stored_at, head)
    checkpoint: Any = migrate_names(found.checkpoint, names)
    blob_revision = {channel: revision for channel, _, _, revision in blobs}
    values = {}
    for channel, value in found.checkpoint["channel_values"].items():
        steps = state.steps(blob_revision.get(channel, stored_at), head)
        name, migrated = _migrated(steps, channel, value, where, state)
        if migrated is not DROPPED:
            values[name] = migrated
    checkpoint["channel_values"] = values
    pending: list[PendingWrite] = []
    for (task_id, channel, value), (_, revision) in zip(
        found.pending_writes or (), ordered, strict=True
    ):
        steps = state.steps(revision, head)
        name, migrated = _migrated(steps, channel, value, where, state, write=True)
        if migrated is not DROPPED:
            pending.append((task_id, name, migrated))
    metadata: Any = migrate_metadata(found.metadata, names)
    return found._replace(checkpoint=checkpoint, metadata=metadata, pending_writes=pending)


def _migrated(
    steps: Sequence[Step],
    channel: str,
    value: Any,
    where: str,
    state: StateMigrations,
    *,
    write: bool = False,
) -> tuple[str, Any]:
    try:
        return migrate_value(steps, channel, value, write=write)
    except Exception as error:
        kind = "a pending write" if write else "the value"
        raise StateMigrationError(
            f"state migration to {state.head!r} failed on {kind} of channel {channel!r} of "
            f"{where}: {type(error).__name__}: {error}"
        ) from error
