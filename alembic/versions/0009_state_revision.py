"""Checkpoints, blobs and writes: the state revision each row was written at.

Revision ID: 0009_state_revision
Revises: 0008_checkpoint_expiry
Create Date: 2026-11-28

``state_revision`` names the application's state revision (``lg_sqla.checkpoint.
state_migrations``) a row's shape follows: the channel names and value types of the
graph state that wrote it. NULL is revision zero, the shape before any declared
migration, which is what every existing row is: nothing is rewritten.

Each table carries its own column because the three kinds of rows outlive each
other's writers: a blob is shared by every later checkpoint that keeps its version
(a checkpoint at a newer revision may name a blob written at an older one), and a
resumed graph writes its pending writes against the checkpoint it resumed from,
which may be older than the code writing them. A reader migrates each row from the
revision it was written at.

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from alembic import op

revision: str = "0009_state_revision"
down_revision: str | None = "0008_checkpoint_expiry"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
# A state revision's id, as lg_sqla.limits.STATE_REVISION_MAX.
_LENGTH = 64


def _key() -> sa.types.TypeEngine[str]:
    # As revision 0001's keys: binary NO PAD collation on MySQL/MariaDB, so that the
    # ids compare exactly ("r1" is not "R1 ").
    dialect = op.get_context().dialect
    if dialect.name not in ("mysql", "mariadb"):
        return sa.String(_LENGTH)
    collation = "utf8mb4_nopad_bin" if dialect.is_mariadb else "utf8mb4_0900_bin"
    return mysql.VARCHAR(_LENGTH, charset="utf8mb4", collation=collation)


def _schema() -> str | None:
    schema: str | None = op.get_context().version_table_schema
    return schema


def _on_duckdb() -> bool:
    # DuckDB drops no column of a table that has an index: its downgrade leaves the
    # nullable columns, which older code never names (as revision 0008).
    return op.get_context().dialect.name == "duckdb"


def _has_column(table: str) -> bool:
    """Whether a downgraded DuckDB database still has the column (duckdb-engine
    reflects no columns: information_schema is asked)."""
    if op.get_context().as_sql:
        return False
    columns = sa.table(
        "columns",
        sa.column("table_schema"),
        sa.column("table_name"),
        sa.column("column_name"),
        schema="information_schema",
    )
    query = sa.select(sa.func.count()).where(
        columns.c.table_name == table, columns.c.column_name == "state_revision"
    )
    if _schema() is not None:
        query = query.where(columns.c.table_schema == _schema())
    return bool(op.get_bind().execute(query).scalar())


def upgrade() -> None:
    # Nullable without a default: no existing row is rewritten (revision zero is NULL),
    # and SQLite adds each with ALTER TABLE ADD COLUMN, no table copy.
    for table in TABLES:
        if _on_duckdb() and _has_column(table):
            continue
        with op.batch_alter_table(table, schema=_schema()) as batch:
            batch.add_column(sa.Column("state_revision", _key(), nullable=True))


def downgrade() -> None:
    # The rows keep their values in their newest shape: an application that goes back
    # to code without these migrations first runs `lg-sqla state downgrade` (it says
    # which revisions cannot go down).
    if _on_duckdb():
        return
    for table in TABLES:
        with op.batch_alter_table(table, schema=_schema()) as batch:
            batch.drop_column("state_revision")
