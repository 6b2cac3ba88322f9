"""Store: an indexed head of each item's namespace, so a search reads its subtree only.

Revision ID: 0004_store_prefix_head
Revises: 0003_vectors_real_array
Create Date: 2026-11-23

``store_items.prefix_head`` holds the first 200 characters of ``prefix`` (the
namespace joined by "."), in a collation that compares code points (PostgreSQL
"C", MySQL/MariaDB binary NO PAD), with an index. A search of namespace ``N``
reads the index range ``N <= prefix_head < N + "/"`` ("/" follows "." in code
point order) instead of every item of the table; the full prefix, unbounded,
cannot be indexed everywhere (PostgreSQL B-tree entries stop near 2.7 kB).
Existing items get their head in place (``substr``, which counts characters on
every dialect, as Python's slicing).

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql

from alembic import op

revision: str = "0004_store_prefix_head"
down_revision: str | None = "0003_vectors_real_array"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HEAD_LEN = 200


def _ordered_key(length: int) -> sa.types.TypeEngine[str]:
    dialect = op.get_bind().dialect
    if dialect.name == "postgresql":
        return postgresql.VARCHAR(length, collation="C")
    if dialect.name in ("mysql", "mariadb"):
        collation = "utf8mb4_nopad_bin" if dialect.is_mariadb else "utf8mb4_0900_bin"
        return mysql.VARCHAR(length, charset="utf8mb4", collation=collation)
    return sa.String(length)


def _on_duckdb() -> bool:
    # DuckDB adds no NOT NULL column to a table that has an index: there (lg_sqla's
    # portable-dialect test bed) the column stays nullable and unindexed, and searches
    # scan, as before this revision.
    return op.get_bind().dialect.name == "duckdb"


def _schema() -> str | None:
    # ALTER, UPDATE and CREATE INDEX name the table as given, where CREATE TABLE followed
    # env.py's schema_translate_map: the schema the tables are in (the stores' schema=)
    # is spelled out. env.py puts the version table there too (None offline, --sql).
    schema: str | None = op.get_context().version_table_schema
    return schema


def upgrade() -> None:
    schema = _schema()
    # NOT NULL needs a default for the rows already there (SQLite cannot make a
    # column NOT NULL later without rebuilding the table); they get their head next.
    op.add_column(
        "store_items",
        sa.Column("prefix_head", _ordered_key(HEAD_LEN), nullable=_on_duckdb(), server_default=""),
        schema=schema,
    )
    items = sa.table("store_items", sa.column("prefix"), sa.column("prefix_head"), schema=schema)
    op.execute(items.update().values(prefix_head=sa.func.substr(items.c.prefix, 1, HEAD_LEN)))
    if not _on_duckdb():
        op.create_index("ix_store_items_prefix_head", "store_items", ["prefix_head"], schema=schema)


def downgrade() -> None:
    if _on_duckdb():
        _rebuild_without_head()
        return
    schema = _schema()
    op.drop_index("ix_store_items_prefix_head", table_name="store_items", schema=schema)
    op.drop_column("store_items", "prefix_head", schema=schema)


def _rebuild_without_head() -> None:
    """DuckDB drops no column of a table that has an index (even one dropped in the
    same transaction): copy the rows to the table as revisions 0002 and 0003 left it."""
    columns = [
        sa.Column("prefix_hash", sa.String(32), nullable=False),
        sa.Column("key_hash", sa.String(32), nullable=False),
        sa.Column("prefix", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("value", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ttl_minutes", sa.Double(), nullable=True),
    ]
    names = ", ".join(f'"{c.name}"' for c in columns)
    op.create_table(
        "store_items_0002",
        *columns,
        sa.PrimaryKeyConstraint("prefix_hash", "key_hash", name="pk_store_items"),
    )
    op.execute(f"INSERT INTO store_items_0002 ({names}) SELECT {names} FROM store_items")
    op.drop_table("store_items")
    op.rename_table("store_items_0002", "store_items")
    op.create_index("ix_store_items_expires_at", "store_items", ["expires_at"])
