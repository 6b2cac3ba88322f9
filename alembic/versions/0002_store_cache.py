"""Store and cache: store_items, store_vectors, cache_entries.

Revision ID: 0002_store_cache
Revises: 0001_initial
Create Date: 2026-11-23

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql

from alembic import op

revision: str = "0002_store_cache"
down_revision: str | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# mariadb_ too: SQLAlchemy reads options by the dialect's name ("mariadb" for a
# mariadb:// URL).
_TABLE_OPTIONS = {
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
    "mariadb_charset": "utf8mb4",
    "mariadb_collate": "utf8mb4_bin",
}


def _key(length: int) -> sa.types.TypeEngine[str]:
    # Binary NO PAD collation on MySQL/MariaDB: keys are exact, case- and
    # trailing-space-sensitive. The two servers name it differently.
    dialect = op.get_bind().dialect
    if dialect.name not in ("mysql", "mariadb"):
        return sa.String(length)
    collation = "utf8mb4_nopad_bin" if dialect.is_mariadb else "utf8mb4_0900_bin"
    return mysql.VARCHAR(length, charset="utf8mb4", collation=collation)


def _text() -> sa.types.TypeEngine[str]:
    return sa.Text().with_variant(
        mysql.MEDIUMTEXT(charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def _binary() -> sa.types.TypeEngine[bytes]:
    return sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def _timestamp() -> sa.types.TypeEngine[object]:
    return sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "store_items",
        sa.Column("prefix_hash", _key(32), nullable=False),
        sa.Column("key_hash", _key(32), nullable=False),
        sa.Column("prefix", _text(), nullable=False),
        sa.Column("key", _text(), nullable=False),
        sa.Column("value", _json(), nullable=False),
        sa.Column("created_at", _timestamp(), nullable=False),
        sa.Column("updated_at", _timestamp(), nullable=False),
        sa.Column("expires_at", _timestamp(), nullable=True),
        sa.Column("ttl_minutes", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("prefix_hash", "key_hash", name="pk_store_items"),
        **_TABLE_OPTIONS,
    )
    op.create_index("ix_store_items_expires_at", "store_items", ["expires_at"])

    op.create_table(
        "store_vectors",
        sa.Column("prefix_hash", _key(32), nullable=False),
        sa.Column("key_hash", _key(32), nullable=False),
        sa.Column("field", _key(255), nullable=False),
        sa.Column("embedding", _binary(), nullable=False),
        sa.Column("created_at", _timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("prefix_hash", "key_hash", "field", name="pk_store_vectors"),
        **_TABLE_OPTIONS,
    )

    op.create_table(
        "cache_entries",
        sa.Column("namespace_hash", _key(32), nullable=False),
        sa.Column("key_hash", _key(32), nullable=False),
        sa.Column("namespace", _text(), nullable=False),
        sa.Column("key", _text(), nullable=False),
        sa.Column("type", _key(64), nullable=False),
        sa.Column("value", _binary(), nullable=False),
        sa.Column("expires_at", _timestamp(), nullable=True),
        sa.PrimaryKeyConstraint("namespace_hash", "key_hash", name="pk_cache_entries"),
        **_TABLE_OPTIONS,
    )
    op.create_index("ix_cache_entries_expires_at", "cache_entries", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_cache_entries_expires_at", table_name="cache_entries")
    op.drop_table("cache_entries")
    op.drop_table("store_vectors")
    op.drop_index("ix_store_items_expires_at", table_name="store_items")
    op.drop_table("store_items")
