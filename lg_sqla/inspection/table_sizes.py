"""Rows and payload bytes of every lg_sqla table: all threads, one, or a few."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement

from lg_sqla import models
from lg_sqla.checkpoint.context import Context
from lg_sqla.dialects import DialectOps, store_sql_for
from lg_sqla.errors import InvalidInputError
from lg_sqla.inspection.checks import MAX_PAGE, _int, _thread
from lg_sqla.inspection.results import DiskUsage, StorageReport, TableUsage
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.models import metadata
from lg_sqla.plans import Plan, Step


def storage(
    ctx: Context,
    *,
    thread_id: str | None = None,
    thread_ids: Sequence[str] | None = None,
    tables: Collection[str] | None = None,
) -> Plan[StorageReport]:
    """Rows and payload bytes of each table (all threads, one, or a few); one statement.

    Every lg_sqla table: the checkpoint tables, the store's and the node cache's (those
    hold no threads: left out when threads are named). ``tables`` limits the report to
    these names (a downgrade counts only the tables it drops)."""
    dialect_ops = ctx.dialect_ops
    ids = None if thread_ids is None else [_thread(t) for t in thread_ids]
    if ids is not None and len(ids) > MAX_PAGE:
        raise InvalidInputError(f"thread_ids: at most {MAX_PAGE} per call, got {len(ids)}")
    per_thread = thread_id is not None or ids is not None

    def usage(table: sa.Table, size: ColumnElement[Any]) -> sa.Select[Any]:
        stmt = sa.select(
            sa.literal(table.name).label("name"),
            sa.func.count().label("rows"),
            sa.func.coalesce(sa.func.sum(size), 0).label("bytes"),
        ).select_from(table)  # a size of 0 names no column: the FROM must be explicit
        if thread_id is not None:
            stmt = stmt.where(table.c.thread_id == _thread(thread_id))
        if ids is not None:
            stmt = stmt.where(table.c.thread_id.in_(ids))
        return stmt

    selects = [
        usage(table, size)
        for table, size in _payload_sizes(dialect_ops).items()
        if (tables is None or table.name in tables) and (not per_thread or "thread_id" in table.c)
    ]
    if not selects:
        return StorageReport()
    rows = (yield Step(sa.union_all(*selects), fetch=True, whole_plan=True)).rows
    by_name = {r.name: TableUsage(r.rows, _int(r.bytes)) for r in rows}
    # In the models' order, whatever order the union's rows came in.
    return StorageReport({name: by_name[name] for name in metadata.tables if name in by_name})


def _payload_sizes(dialect_ops: DialectOps) -> dict[sa.Table, ColumnElement[Any]]:
    """Each table's payload size expression (its documents, values, vectors); a table
    added to the models without one here is still counted, as 0 bytes."""
    sizes: dict[sa.Table, ColumnElement[Any]] = {
        C: dialect_ops.json_byte_length(C.c.checkpoint)
        + dialect_ops.json_byte_length(C.c.metadata),
        W: dialect_ops.byte_length(W.c.blob),
        B: sa.func.coalesce(dialect_ops.byte_length(B.c.blob), 0),
        models.store_items: dialect_ops.json_byte_length(models.store_items.c.value),
        models.store_vectors: store_sql_for(dialect_ops).vector_byte_length(
            models.store_vectors.c.embedding
        ),
        models.cache_entries: dialect_ops.byte_length(models.cache_entries.c.value),
    }
    for table in metadata.tables.values():
        sizes.setdefault(table, sa.literal(0, sa.BigInteger))
    return sizes


def disk_usage(ctx: Context, schema: str | None = None) -> Plan[DiskUsage]:
    """What lg_sqla's tables take on disk, indexes included, where the database can
    tell (SQLite's dbstat, PostgreSQL's pg_total_relation_size, MySQL/MariaDB's
    information_schema), and the database file's size and free pages (SQLite). Unlike
    :func:`storage`'s payload bytes, this is what the disk holds: page headers, free
    space in pages, indexes, TOAST."""
    dialect_ops = ctx.dialect_ops
    usage = DiskUsage()
    statement = dialect_ops.table_disk_usage(list(metadata.tables), schema)
    probe = dialect_ops.table_disk_usage_probe()
    if probe is not None and not (yield Step(probe, fetch=True)).rows:
        statement = None
    if statement is not None:
        rows = (yield Step(statement, fetch=True)).rows
        by_name = {r.name: _int(r.bytes) for r in rows}
        usage.tables = {name: by_name[name] for name in metadata.tables if name in by_name}
    file_usage = dialect_ops.file_usage()
    if file_usage is not None:
        row = (yield Step(file_usage, fetch=True)).rows[0]
        usage.file_bytes, usage.free_bytes = _int(row.bytes), _int(row.free_bytes)
    return usage
