"""PostgreSQL: compress large values with lz4 instead of pglz (PostgreSQL 14+ built with lz4).

Revision ID: 0005_lz4_value_columns
Revises: 0004_store_prefix_head
Create Date: 2026-11-23

PostgreSQL compresses a value of a row wider than about 2 kB before storing it
(TOAST), with pglz unless the column says otherwise. On this project's benchmark
server (PostgreSQL 15), pglz took 1.4-1.8 ms of server CPU to write a 50 kB value, lz4
0.2-0.5 ms, and lz4 read back no slower; on English prose and JSON-like rows lz4
stored between 13% less and 6% more than pglz, on the benchmark's very repetitive
synthetic text about twice as much (docs/configuration.md, "Large values", has the
figures; ``python -m benchmarks.toast`` measures them).

So the columns holding serialized channel values, pending writes, cached values and
JSON documents are set to lz4. Only new values are compressed with it: rows already
stored keep their pglz values, which read as before. Elsewhere this revision does
nothing: SQLite, MySQL/MariaDB, other dialects, PostgreSQL before 14 and PostgreSQL
built without lz4. The server is asked inside the statement (``pg_settings`` lists
the compressions it was built with), so offline ``--sql`` output decides the same way
when the DBA runs it; the ALTERs are dynamic SQL, which PostgreSQL before 14 never
parses. ``ALTER ... SET COMPRESSION`` rewrites nothing, but takes an ACCESS EXCLUSIVE
lock on each table for the moment it runs.

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0005_lz4_value_columns"
down_revision: str | None = "0004_store_prefix_head"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VALUE_COLUMNS = (
    ("checkpoint_blobs", "blob"),
    ("checkpoint_writes", "blob"),
    ("checkpoints", "checkpoint"),
    ("checkpoints", "metadata"),
    ("store_items", "value"),
    ("cache_entries", "value"),
)
# Built with lz4 (the setting exists from PostgreSQL 14 on, and lists lz4 only then).
_HAS_LZ4 = (
    "SELECT FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)"
)
# PostgreSQL 14 or later: SET COMPRESSION exists.
_HAS_COMPRESSION = "SELECT FROM pg_settings WHERE name = 'default_toast_compression'"
_TAG = "$lg_sqla_0005$"


def _schema() -> str | None:
    # ALTER names the table as given, where CREATE TABLE followed env.py's
    # schema_translate_map: the schema the tables are in (the savers' schema=) is
    # spelled out, as in 0004. env.py puts the version table there (None offline, --sql).
    schema: str | None = op.get_context().version_table_schema
    return schema


def _set_compression(condition: str, method: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    preparer = op.get_bind().dialect.identifier_preparer
    schema = _schema()
    statements = []
    for table, column in VALUE_COLUMNS:
        name = preparer.quote(table)
        if schema is not None:
            name = f"{preparer.quote_schema(schema)}.{name}"
        ddl = f"ALTER TABLE {name} ALTER COLUMN {preparer.quote(column)} SET COMPRESSION {method}"
        if "$lg_sqla" in ddl:  # would end the dollar quotes below
            raise ValueError(f"schema name {schema!r} contains '$lg_sqla'")
        statements.append(f"    EXECUTE {_TAG}{ddl}{_TAG};")
    body = "\n".join(statements)
    block = (
        f"DO $lg_sqla$\nBEGIN\n  IF EXISTS ({condition}) THEN\n{body}\n  END IF;\nEND\n$lg_sqla$"
    )
    # DDL, not text(): no ":name" in a schema name is taken for a bind parameter.
    op.execute(sa.DDL(block))


def upgrade() -> None:
    _set_compression(_HAS_LZ4, "lz4")


def downgrade() -> None:
    # DEFAULT: the server's default_toast_compression (pglz unless the DBA changed it).
    _set_compression(_HAS_COMPRESSION, "DEFAULT")
