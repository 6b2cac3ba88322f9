"""Checkpoints: per-thread retention settings (a TTL of its own, a pin, a read refresh).

Revision ID: 0006_checkpoint_retention
Revises: 0005_scale_indexes
Create Date: 2026-11-26

``checkpoint_retention`` holds one row per thread that has a setting: a TTL
overriding the saver's policy default (``ttl_minutes``), a pin that keeps it from
expiring, and the time of the last read that refreshed its TTL (``touched_at``,
written only when the policy has ``refresh_on_read``). A thread's expiry is
otherwise derived from its newest checkpoint's ``updated_at``: no column is added
to the checkpoint tables, so a put costs what it did.

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from alembic import op

revision: str = "0006_checkpoint_retention"
down_revision: str | None = "0005_scale_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _key(length: int) -> sa.types.TypeEngine[str]:
    # As revision 0001: binary NO PAD collation on MySQL/MariaDB, keys are exact.
    dialect = op.get_bind().dialect
    if dialect.name not in ("mysql", "mariadb"):
        return sa.String(length)
    collation = "utf8mb4_nopad_bin" if dialect.is_mariadb else "utf8mb4_0900_bin"
    return mysql.VARCHAR(length, charset="utf8mb4", collation=collation)


def _timestamp() -> sa.types.TypeEngine[object]:
    return sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "checkpoint_retention",
        sa.Column("thread_id", _key(255), nullable=False),
        sa.Column("ttl_minutes", sa.Double(), nullable=True),
        sa.Column("pinned", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("touched_at", _timestamp(), nullable=True),
        sa.Column("updated_at", _timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("thread_id", name="pk_checkpoint_retention"),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
        mariadb_charset="utf8mb4",
        mariadb_collate="utf8mb4_bin",
    )
    op.create_index("ix_checkpoint_retention_ttl_minutes", "checkpoint_retention", ["ttl_minutes"])


def downgrade() -> None:
    op.drop_index("ix_checkpoint_retention_ttl_minutes", table_name="checkpoint_retention")
    op.drop_table("checkpoint_retention")
