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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from langgraph.checkpoint.serde.base import SerializerProtocol

from lg_sqla.checkpoint.codec import EMPTY_TYPE
from lg_sqla.checkpoint.context import Context
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import checkpoint_blobs, checkpoint_writes
from lg_sqla.plans import COMMIT, Plan, Step
from lg_sqla.serde import needs_rewrite, rewrite


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
    """Rewrite every blob and write not in ``ctx.serde``'s current form."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be an int >= 1, got {batch_size!r}")
    report = RotationReport()
    for table in (checkpoint_blobs, checkpoint_writes):
        counters = report.tables.setdefault(table.name, TableProgress())
        key = list(table.primary_key.columns)
        after: tuple[Any, ...] | None = None
        while True:
            page = sa.select(*key, table.c.type).where(table.c.type != EMPTY_TYPE)
            if after is not None:
                page = page.where(sa.tuple_(*key) > sa.tuple_(*after))
            rows = (yield Step(page.order_by(*key).limit(batch_size), fetch=True)).rows
            if not rows:
                break
            after = tuple(rows[-1])[: len(key)]
            counters.scanned += len(rows)
            stale = [r for r in rows if needs_rewrite(r.type, ctx.serde)]
            if stale:
                yield from _rewrite_rows(ctx, table, key, stale, source, counters)
            report.batches += 1
            yield COMMIT
            if progress is not None:
                progress(report)
    return report


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
