"""Checkpoints: the expiry stamped by the writing saver's TTL policy.

Revision ID: 0008_checkpoint_expiry
Revises: 0007_store_namespace_index
Create Date: 2026-11-28

``checkpoints.expires_at`` is the put's ``updated_at`` plus the ``default_ttl`` of the
saver that wrote the checkpoint, filled by the put's own statement (NULL: written
under no TTL). A thread expires as its newest checkpoint's stamp says, unless an
operator gave it a TTL of its own (``checkpoint_retention.ttl_minutes``), which still
wins: a thread's expiry is stored, never the reading or sweeping process's policy.
The index on it is the TTL sweep's walk (``expires_at < now``).

Existing checkpoints get NULL: after the upgrade, a thread expires only once written
again by a saver with a TTL, or given one (``lg-sqla ttl set``/``ttl apply``); threads
that already have a TTL of their own (a ``checkpoint_retention`` row) keep it.

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from alembic import op

revision: str = "0008_checkpoint_expiry"
down_revision: str | None = "0007_store_namespace_index"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp() -> sa.types.TypeEngine[object]:
    return sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _schema() -> str | None:
    # ALTER and CREATE INDEX name the table as given: the schema the tables are in (the
    # savers' schema=) is spelled out, as env.py put the version table there.
    schema: str | None = op.get_context().version_table_schema
    return schema


def _on_duckdb() -> bool:
    # DuckDB drops no column of a table that has an index (checkpoints has three more):
    # its downgrade leaves the nullable column, which older code never names.
    return op.get_bind().dialect.name == "duckdb"


def _has_column() -> bool:
    """Whether a downgraded DuckDB database still has the column (duckdb-engine reflects
    no columns: information_schema is asked)."""
    if op.get_context().as_sql:  # offline (--sql): nothing to ask, as from a new schema
        return False
    columns = sa.table(
        "columns",
        sa.column("table_schema"),
        sa.column("table_name"),
        sa.column("column_name"),
        schema="information_schema",
    )
    query = sa.select(sa.func.count()).where(
        columns.c.table_name == "checkpoints", columns.c.column_name == "expires_at"
    )
    if _schema() is not None:
        query = query.where(columns.c.table_schema == _schema())
    return bool(op.get_bind().execute(query).scalar())


def upgrade() -> None:
    # A nullable column without a default: the existing rows are not rewritten
    # (SQLite's batch mode adds it with ALTER TABLE ADD COLUMN, no table copy).
    if not (_on_duckdb() and _has_column()):
        with op.batch_alter_table("checkpoints", schema=_schema()) as batch:
            batch.add_column(sa.Column("expires_at", _timestamp(), nullable=True))
    op.create_index("ix_checkpoints_expires_at", "checkpoints", ["expires_at"], schema=_schema())


def downgrade() -> None:
    op.drop_index("ix_checkpoints_expires_at", table_name="checkpoints", schema=_schema())
    if _on_duckdb():
        return
    with op.batch_alter_table("checkpoints", schema=_schema()) as batch:
        batch.drop_column("expires_at")
