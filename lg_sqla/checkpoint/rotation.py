"""Re-encrypting stored values in place: key rotation, enabling encryption on old data.

Walks ``checkpoint_blobs`` and ``checkpoint_writes`` in primary-key order,
``batch_size`` rows at a time, and rewrites every row that is not in the
serializer's current form (plaintext while encryption is on, another key id,
EAX while GCM is primary, ...). Each batch is its own transaction and each row
update is guarded by its old type tag, so:

* data stays readable throughout, as long as the saver's serializer can read
  both the old and the new form (keep old keys in the keyring until done);
* an interrupted run resumes by running again: done rows no longer need it;
* rows written concurrently in the new form are left alone.

Rewriting never deserializes values (``lg_sqla.serde.rewrite`` only swaps the
encryption/compression layers), so nothing is imported from the database.

First, the values a plain serializer kept in checkpoint documents (small bool, int
and str, ``codec.dump_values``) that the saver's serializer would not keep there are
moved to ``checkpoint_blobs`` at their channel's version, serialized (encrypted) by
it, and dropped from the document: after enabling encryption no value carrying data
stays in plaintext. Batched the same way; each checkpoint row is locked while its
document is rewritten (a put of the same checkpoint waits), and a value already
moved is not found again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from langgraph.checkpoint.serde.base import SerializerProtocol

from lg_sqla.checkpoint import codec, json_values
from lg_sqla.checkpoint.codec import EMPTY_TYPE, INLINE_KEY
from lg_sqla.checkpoint.context import Context
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints
from lg_sqla.plans import COMMIT, Plan, Step
from lg_sqla.serde import needs_rewrite, rewrite
from lg_sqla.shared import utc_now


@dataclass
class TableProgress:
    scanned: int = 0
    rewritten: int = 0
    skipped_concurrent: int = 0


@dataclass
class RotationReport:
    """Progress of a re-encryption; ``tables`` maps table name to its counters."""

    tables: dict[str, TableProgress] = field(default_factory=dict)
    batches: int = 0

    @property
    def rewritten(self) -> int:
        return sum(t.rewritten for t in self.tables.values())


def reencrypt(
    ctx: Context,
    *,
    batch_size: int,
    source: SerializerProtocol | None = None,
    progress: Callable[[RotationReport], None] | None = None,
) -> Plan[RotationReport]:
    """Move the inline values ``ctx.serde`` would not inline to blobs, then rewrite
    every blob and write not in its current form."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be an int >= 1, got {batch_size!r}")
    report = RotationReport()
    yield from _move_inline_values(ctx, batch_size, report, progress)
    for table in (checkpoint_blobs, checkpoint_writes):
        counters = report.tables.setdefault(table.name, TableProgress())
        key = list(table.primary_key.columns)
        typed = sa.select(*key, table.c.type).where(table.c.type != EMPTY_TYPE)
        rewrite = functools.partial(_rewrite_stale, ctx, table, key, source, counters)
        yield from _in_batches(typed, key, batch_size, counters, report, progress, rewrite)
    return report


def _rewrite_stale(
    ctx: Context,
    table: sa.Table,
    key: list[Any],
    source: SerializerProtocol | None,
    counters: TableProgress,
    rows: Sequence[Any],
) -> Plan[None]:
    """Rewrite the ``rows`` of ``table`` not in ``ctx.serde``'s current form."""
    stale = [r for r in rows if needs_rewrite(r.type, ctx.serde)]
    if stale:
        yield from _rewrite_rows(ctx, table, key, stale, source, counters)


def _in_batches(
    rows: sa.Select[Any],
    key: list[Any],
    batch_size: int,
    counters: TableProgress,
    report: RotationReport,
    progress: Callable[[RotationReport], None] | None,
    each: Callable[[Sequence[Any]], Plan[None]],
) -> Plan[None]:
    """``rows`` in ``key`` order, ``batch_size`` at a time, each batch given to ``each``
    and committed (a rerun resumes where a failed one stopped: what is done is not
    found again)."""
    after: tuple[Any, ...] | None = None
    while True:
        page = rows if after is None else rows.where(sa.tuple_(*key) > sa.tuple_(*after))
        found = (yield Step(page.order_by(*key).limit(batch_size), fetch=True)).rows
        if not found:
            return
        after = tuple(found[-1])[: len(key)]
        counters.scanned += len(found)
        yield from each(found)
        report.batches += 1
        yield COMMIT
        if progress is not None:
            progress(report)


def _rewrite_rows(
    ctx: Context,
    table: sa.Table,
    key: list[sa.Column[Any]],
    stale: list[Any],
    source: SerializerProtocol | None,
    counters: TableProgress,
) -> Plan[None]:
    keys = [tuple(r)[: len(key)] for r in stale]
    payloads = (
        yield Step(
            sa.select(*key, table.c.type, table.c.blob).where(sa.tuple_(*key).in_(keys)),
            fetch=True,
        )
    ).rows
    for row in payloads:
        values = tuple(row)[: len(key)]
        new_type, new_blob = rewrite(row.type, row.blob, ctx.serde, source=source)
        # Guarded by the old tag: a row rewritten meanwhile is not touched twice.
        updated = (
            yield Step(
                sa.update(table)
                .where(
                    *(col == value for col, value in zip(key, values, strict=True)),
                    table.c.type == row.type,
                )
                .values(type=new_type, blob=new_blob)
            )
        ).rowcount
        if updated:
            counters.rewritten += 1
        else:
            counters.skipped_concurrent += 1


def _to_move(ctx: Context, inline: dict[str, Any]) -> dict[str, Any]:
    """The inline values ``ctx.serde``'s saver would keep in a blob (None never is)."""
    kinds = ctx.inline_types
    return {
        channel: value
        for channel, value in inline.items()
        if value is not None and not codec.fits_inline(value, kinds)
    }


def _move_inline_values(
    ctx: Context,
    batch_size: int,
    report: RotationReport,
    progress: Callable[[RotationReport], None] | None,
) -> Plan[None]:
    """Checkpoints in primary-key order, ``batch_size`` with inline values at a time
    (their ``INLINE_KEY`` member only); those holding a value to move are rewritten."""
    table = checkpoints
    counters = report.tables.setdefault(table.name, TableProgress())
    key = list(table.primary_key.columns)
    json_functions = ctx.dialect_ops.joins_channel_versions
    if json_functions:
        inline = ctx.dialect_ops.json_member(table.c.checkpoint, INLINE_KEY)
        start = sa.select(*key, inline.label("inline")).where(inline.is_not(None))
    else:  # (a database without JSON functions lg_sqla knows: every whole document)
        start = sa.select(*key, table.c.checkpoint.label("inline"))

    def move_values(rows: Sequence[Any]) -> Plan[None]:
        stale = [
            tuple(r)[: len(key)]
            for r in rows
            if _to_move(
                ctx,
                codec.inline_values_json(r.inline)
                if json_functions
                else codec.inline_values(json_values.json_object(r.inline)),
            )
        ]
        if stale:
            counters.rewritten += yield from _move_rows(ctx, key, stale)

    yield from _in_batches(start, key, batch_size, counters, report, progress, move_values)


def _move_rows(ctx: Context, key: list[sa.Column[Any]], stale: list[tuple[Any, ...]]) -> Plan[int]:
    """Lock the checkpoints, write a blob for each inline value to move (insert-or-ignore:
    one written before at that version holds the same value; the blob pass rewrites it
    if stale) and the document without them; how many documents were rewritten."""
    table = checkpoints
    read = sa.select(*key, table.c.checkpoint, table.c.state_revision).where(
        sa.tuple_(*key).in_(stale)
    )
    if ctx.dialect_ops.locks_rows:  # (SQLite: one writer at a time already)
        read = read.with_for_update()
    locked = (yield Step(read, fetch=True)).rows
    blobs: list[dict[str, Any]] = []
    documents: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for row in locked:
        document = json_values.json_object(row.checkpoint)
        inline = codec.inline_values(document)
        versions = document.get("channel_versions") or {}
        # (A value without a version has no blob key: never written so by a put.)
        moving = {ch: v for ch, v in _to_move(ctx, inline).items() if ch in versions}
        if not moving:
            continue  # moved meanwhile
        for channel, value in moving.items():
            type_, blob = ctx.serde.dumps_typed(value)
            blobs.append(
                {
                    "thread_id": row.thread_id,
                    "checkpoint_ns_hash": row.checkpoint_ns_hash,
                    "channel": channel,
                    "version": versions[channel],
                    "type": type_,
                    "blob": blob,
                    "created_at": utc_now(),
                    "state_revision": row.state_revision,
                }
            )
        kept = {ch: [v] for ch, v in inline.items() if ch not in moving}
        document.pop(INLINE_KEY)
        if kept:
            document[INLINE_KEY] = kept
        # (values now in blobs: a document that said it named none says so no more)
        documents.append(
            (
                tuple(row)[: len(key)],
                codec.marked_all_inline(document, ctx.dialect_ops.reads_all_inline),
            )
        )
    # Blobs first: the document never names a value that is in neither place.
    yield from ctx.dialect_ops.insert_ignore_rows(checkpoint_blobs, blobs)
    for values, document in documents:
        yield Step(
            sa.update(table)
            .where(*(col == value for col, value in zip(key, values, strict=True)))
            .values(checkpoint=document)
        )
    return len(documents)
