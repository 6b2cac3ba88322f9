"""Revision 0005: PostgreSQL compresses new large values of the value columns with lz4
(PostgreSQL 14+ built with lz4); the revision changes nothing anywhere else, and
values written before, during and after it read back as they were written."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from helpers import checkpoint, config, new_thread
from servers import create_database, drop_database, sqlalchemy_url

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver, migrate

pytestmark = pytest.mark.any_dialect

BEFORE = "0004_store_prefix_head"
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


def reflected_schema(engine: sa.Engine) -> list[Any]:
    """The schema as the database's own catalog reports it (SQLite: each object's DDL;
    others: every attribute of every column in information_schema)."""
    if engine.dialect.name == "sqlite":
        sql = "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
    else:
        current = (
            "DATABASE()" if engine.dialect.name in ("mysql", "mariadb") else "current_schema()"
        )
        sql = (
            f"SELECT * FROM information_schema.columns WHERE table_schema = {current} "
            "ORDER BY table_name, ordinal_position"
        )
    with engine.connect() as conn:
        return [tuple(row) for row in conn.exec_driver_sql(sql)]


async def write_thread(db: Backend, mode: str, *, check_schema: bool = True) -> str:
    """A checkpoint and a pending write, both holding a large value, read back equal."""
    thread_id = new_thread()
    value = large_value(thread_id)
    cp = checkpoint({"notes": value}, {"notes": 1})
    if mode == "sync":
        engine = db.engine()
        try:
            saver = SQLAlchemySaver(engine, check_schema=check_schema)
            stored = saver.put(config(thread_id), cp, {}, {"notes": 1})
            saver.put_writes(stored, [("notes", value)], "task-1")
        finally:
            engine.dispose()
    else:
        async_engine = db.async_engine()
        try:
            asaver = AsyncSQLAlchemySaver(async_engine, check_schema=check_schema)
            stored = await asaver.aput(config(thread_id), cp, {}, {"notes": 1})
            await asaver.aput_writes(stored, [("notes", value)], "task-1")
        finally:
            await async_engine.dispose()
    await assert_reads_back(db, mode, thread_id)
    return thread_id


async def assert_reads_back(db: Backend, mode: str, thread_id: str) -> None:
    value = large_value(thread_id)
    if mode == "sync":
        engine = db.engine()
        try:
            got = SQLAlchemySaver(engine, check_schema=False).get_tuple(config(thread_id))
        finally:
            engine.dispose()
    else:
        async_engine = db.async_engine()
        try:
            asaver = AsyncSQLAlchemySaver(async_engine, check_schema=False)
            got = await asaver.aget_tuple(config(thread_id))
        finally:
            await async_engine.dispose()
    assert got is not None
    assert got.checkpoint["channel_values"]["notes"] == value
    assert [(w[1], w[2]) for w in got.pending_writes or []] == [("notes", value)]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_revision_0005_compresses_new_values_with_lz4_on_postgres(
    fresh_database: Backend, mode: str
) -> None:
    """PostgreSQL (15 here, built with lz4): upgrade sets every value column to lz4 and
    new large values are stored lz4-compressed; rows written before keep pglz; all read
    back equal; downgrade returns the columns to the server's default. Every other
    dialect: the revision changes nothing in the reflected schema, both ways."""
    db = fresh_database
    engine = db.engine()
    try:
        migrate.upgrade(engine, BEFORE)
        at_0004 = reflected_schema(engine)
        assert all(table in str(at_0004) for table, _ in VALUE_COLUMNS)  # not vacuous
        old_thread = await write_thread(db, mode, check_schema=False)
        migrate.upgrade(engine)
        with engine.connect() as conn:
            migrate.check_schema(conn)  # head: the savers' schema check passes
        new_thread_ = await write_thread(db, mode)  # check_schema=True: at head
        await assert_reads_back(db, mode, old_thread)
        if db.name == "postgres":
            columns = column_compression(engine)
            assert {c: columns[c] for c in VALUE_COLUMNS} == {c: "l" for c in VALUE_COLUMNS}
            assert columns[("checkpoint_blobs", "channel")] == ""  # keys are left alone
            assert stored_compression(engine, new_thread_) == {"lz4"}
            assert stored_compression(engine, old_thread) == {"pglz"}  # not rewritten
        else:
            assert reflected_schema(engine) == at_0004

        with engine.connect() as conn:
            migrate.downgrade_connection(conn, BEFORE)
        after_downgrade = await write_thread(db, mode, check_schema=False)
        for thread_id in (old_thread, new_thread_):
            await assert_reads_back(db, mode, thread_id)
        if db.name == "postgres":
            columns = column_compression(engine)
            assert {c: columns[c] for c in VALUE_COLUMNS} == {c: "" for c in VALUE_COLUMNS}
            assert stored_compression(engine, new_thread_) == {"lz4"}  # still readable
            assert stored_compression(engine, after_downgrade) == {"pglz"}
        else:
            assert reflected_schema(engine) == at_0004

        migrate.upgrade(engine)
        with engine.connect() as conn:
            migrate.check_schema(conn)
        if db.name == "postgres":
            columns = column_compression(engine)
            assert {c: columns[c] for c in VALUE_COLUMNS} == {c: "l" for c in VALUE_COLUMNS}
    finally:
        engine.dispose()


@pytest.fixture
def postgres_without_lz4(pgvector_admin_url: str) -> Iterator[Backend]:
    """A fresh database on the second test server (pgserver's PostgreSQL 16, which is
    built without lz4: tests/servers.py pgvector_server)."""
    name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
    create_database(pgvector_admin_url, name)
    url = sqlalchemy_url(pgvector_admin_url, "psycopg", name)
    try:
        yield Backend("postgres", url, url)
    finally:
        drop_database(pgvector_admin_url, name)


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_revision_0005_is_a_no_op_on_postgres_built_without_lz4(
    postgres_without_lz4: Backend, mode: str
) -> None:
    db = postgres_without_lz4
    engine = db.engine()
    try:
        with engine.connect() as conn:
            refused = sa.exc.DBAPIError
            with pytest.raises(refused, match="invalid value"):  # the server this test needs
                conn.exec_driver_sql("SET default_toast_compression = lz4")
        migrate.upgrade(engine)
        columns = column_compression(engine)
        assert {c: columns[c] for c in VALUE_COLUMNS} == {c: "" for c in VALUE_COLUMNS}
        thread_id = await write_thread(db, mode)
        assert stored_compression(engine, thread_id) == {"pglz"}
        with engine.connect() as conn:
            migrate.downgrade_connection(conn, BEFORE)
        assert column_compression(engine) == columns
        await assert_reads_back(db, mode, thread_id)
        migrate.upgrade(engine)
        with engine.connect() as conn:
            migrate.check_schema(conn)
    finally:
        engine.dispose()
