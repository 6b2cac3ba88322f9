"""Initial schema: checkpoints, checkpoint_writes, checkpoint_blobs.

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-22

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql

from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


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


def _created_at() -> sa.Column[object]:
    # No server default: lg_sqla writes UTC timestamps itself (a MySQL default would
    # also need CURRENT_TIMESTAMP(6) to match DATETIME(6), and the session time zone).
    return sa.Column("created_at", _timestamp(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column("thread_id", _key(255), nullable=False),
        sa.Column("checkpoint_ns_hash", _key(32), nullable=False),
        sa.Column("checkpoint_id", _key(64), nullable=False),
        sa.Column("checkpoint_ns", _text(), nullable=False),
        sa.Column("parent_checkpoint_id", _key(64), nullable=True),
        sa.Column("run_id", _key(255), nullable=True),
        sa.Column("checkpoint", _json(), nullable=False),
        sa.Column("metadata", _json(), nullable=False),
        _created_at(),
        sa.Column("updated_at", _timestamp(), nullable=False),
        sa.PrimaryKeyConstraint(
            "thread_id", "checkpoint_ns_hash", "checkpoint_id", name="pk_checkpoints"
        ),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
        mariadb_charset="utf8mb4",
        mariadb_collate="utf8mb4_bin",
    )
    op.create_index("ix_checkpoints_run_id", "checkpoints", ["run_id"])
    op.create_index("ix_checkpoints_updated_at", "checkpoints", ["updated_at"])

    op.create_table(
        "checkpoint_writes",
        sa.Column("thread_id", _key(255), nullable=False),
        sa.Column("checkpoint_ns_hash", _key(32), nullable=False),
        sa.Column("checkpoint_id", _key(64), nullable=False),
        sa.Column("task_id", _key(255), nullable=False),
        sa.Column("idx", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("task_path", _text(), nullable=False),
        sa.Column("channel", _key(255), nullable=False),
        sa.Column("type", _key(64), nullable=False),
        sa.Column("blob", _binary(), nullable=False),
        _created_at(),
        sa.PrimaryKeyConstraint(
            "thread_id",
            "checkpoint_ns_hash",
            "checkpoint_id",
            "task_id",
            "idx",
            name="pk_checkpoint_writes",
        ),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
        mariadb_charset="utf8mb4",
        mariadb_collate="utf8mb4_bin",
    )

    op.create_table(
        "checkpoint_blobs",
        sa.Column("thread_id", _key(255), nullable=False),
        sa.Column("checkpoint_ns_hash", _key(32), nullable=False),
        sa.Column("channel", _key(255), nullable=False),
        sa.Column("version", _key(128), nullable=False),
        sa.Column("type", _key(64), nullable=False),
        sa.Column("blob", _binary(), nullable=True),
        _created_at(),
        sa.PrimaryKeyConstraint(
            "thread_id", "checkpoint_ns_hash", "channel", "version", name="pk_checkpoint_blobs"
        ),
        mysql_charset="utf8mb4",
        mysql_collate="utf8mb4_bin",
        mariadb_charset="utf8mb4",
        mariadb_collate="utf8mb4_bin",
    )


def downgrade() -> None:
    op.drop_table("checkpoint_blobs")
    op.drop_table("checkpoint_writes")
    op.drop_index("ix_checkpoints_updated_at", table_name="checkpoints")
    op.drop_index("ix_checkpoints_run_id", table_name="checkpoints")
    op.drop_table("checkpoints")
