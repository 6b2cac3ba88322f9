"""PostgreSQL's lz4 compression of large values, an operator's option
(docs/configuration.md, "Large values"): lg_sqla's schema leaves the value columns at
the server's default, and a database whose columns were switched to lz4 with the
documented statements keeps working, old and new values alike."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory, saver_in_mode
from helpers import checkpoint, config, new_thread

from lg_sqla import migrate

pytestmark = pytest.mark.postgres

VALUE_COLUMNS = {
    ("checkpoint_blobs", "blob"),
    ("checkpoint_writes", "blob"),
    ("checkpoints", "checkpoint"),
    ("checkpoints", "metadata"),
    ("store_items", "value"),
    ("cache_entries", "value"),
}
# pg_attribute.attcompression: "" is the server's default_toast_compression, "l" lz4.
COLUMN_COMPRESSION = """
SELECT c.relname, a.attname, a.attcompression::text
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = coalesce(:schema, current_schema()) AND c.relkind = 'r' AND a.attnum > 0
  AND NOT a.attisdropped
"""
# Which compression each stored value of a thread got (NULL: stored uncompressed).
STORED_COMPRESSION = """
SELECT pg_column_compression(blob) FROM {schema}checkpoint_blobs WHERE thread_id = :t
UNION ALL
SELECT pg_column_compression(blob) FROM {schema}checkpoint_writes WHERE thread_id = :t
"""


def large_value(tag: str) -> dict[str, Any]:
    """About 40 kB serialized, compressible: PostgreSQL compresses a row over ~2 kB."""
    return {"tag": tag, "lines": [f"line {i} of {tag}: the same words again" for i in range(800)]}


def column_compression(engine: sa.Engine, schema: str | None = None) -> dict[tuple[str, str], str]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(COLUMN_COMPRESSION), {"schema": schema}).all()
    return {(table, column): method for table, column, method in rows}


def stored_compression(engine: sa.Engine, thread_id: str, schema: str | None = None) -> set[str]:
    prefix = "" if schema is None else engine.dialect.identifier_preparer.quote(schema) + "."
    with engine.connect() as conn:
        sql = sa.text(STORED_COMPRESSION.format(schema=prefix))
        return {row[0] for row in conn.execute(sql, {"t": thread_id})}


async def write_thread(db: Backend, mode: str, *, check_schema: bool = True) -> str:
    """A checkpoint and a pending write, both holding a large value, read back equal."""
    thread_id = new_thread()
    value = large_value(thread_id)
    cp = checkpoint({"notes": value}, {"notes": 1})
    async with saver_in_mode(db, mode, check_schema=check_schema) as saver:
        stored = await saver.put(config(thread_id), cp, {}, {"notes": 1})
        await saver.put_writes(stored, [("notes", value)], "task-1")
    await assert_reads_back(db, mode, thread_id)
    return thread_id


async def assert_reads_back(db: Backend, mode: str, thread_id: str) -> None:
    value = large_value(thread_id)
    async with saver_in_mode(db, mode, check_schema=False) as saver:
        got = await saver.get_tuple(config(thread_id))
    assert got is not None
    assert got.checkpoint["channel_values"]["notes"] == value
    assert [(w[1], w[2]) for w in got.pending_writes or []] == [("notes", value)]


# The statements docs/configuration.md gives (and their way back).
def set_compression(engine: sa.Engine, method: str) -> None:
    with engine.begin() as conn:
        for table, column in sorted(VALUE_COLUMNS):
            conn.exec_driver_sql(
                f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION {method}"
            )


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_value_columns_switched_to_lz4_keep_working(
    make_engine: EngineFactory, fresh_database: Backend, mode: str
) -> None:
    """At head the value columns use the server's default (pglz): lg_sqla never trades
    stored size for speed on its own. Switched to lz4 (PostgreSQL 15 here, built with
    it), new large values are stored lz4-compressed, values stored before keep pglz,
    all read back equal, and the savers' schema check still passes; switched back,
    new values are pglz again."""
    db = fresh_database
    engine = make_engine(db)
    migrate.upgrade(engine)
    columns = column_compression(engine)
    assert {c: columns[c] for c in VALUE_COLUMNS} == {c: "" for c in VALUE_COLUMNS}
    before = await write_thread(db, mode)
    assert stored_compression(engine, before) == {"pglz"}

    set_compression(engine, "lz4")
    columns = column_compression(engine)
    assert {c: columns[c] for c in VALUE_COLUMNS} == {c: "l" for c in VALUE_COLUMNS}
    assert columns[("checkpoint_blobs", "channel")] == ""  # keys are left alone
    with engine.connect() as conn:
        migrate.check_schema(conn)
    after = await write_thread(db, mode)  # check_schema=True
    assert stored_compression(engine, after) == {"lz4"}
    assert stored_compression(engine, before) == {"pglz"}  # not rewritten
    await assert_reads_back(db, mode, before)

    set_compression(engine, "DEFAULT")
    back = await write_thread(db, mode)
    assert stored_compression(engine, back) == {"pglz"}
    for thread_id in (before, after):
        await assert_reads_back(db, mode, thread_id)
