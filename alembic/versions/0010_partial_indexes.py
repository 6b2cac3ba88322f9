"""Indexes of mostly-NULL columns hold only the rows where the column is set.

Revision ID: 0010_partial_indexes
Revises: 0009_state_revision
Create Date: 2026-11-29

``checkpoints.run_id`` and ``checkpoints.expires_at``, ``store_items.expires_at`` and
``cache_entries.expires_at`` are NULL on most rows (a put without a run id, anything
written under no TTL), yet each row had an entry in their indexes: every such write
touched those b-trees (on SQLite a page each, written again to the WAL at every
commit). On SQLite and PostgreSQL they become partial (``WHERE <column> IS NOT
NULL``): a write that leaves the column NULL skips the index. Every query that reads
them compares the column (``run_id = / IN``, ``expires_at < / <= now``), which implies
``IS NOT NULL`` to both planners, so each still reads its range of the index.

MySQL/MariaDB have no partial indexes (theirs stay whole), nor has DuckDB: nothing
changes there.

Each index is rebuilt under its own name (a scan of its table, under the migration's
lock on PostgreSQL: writes to that table wait meanwhile).

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0010_partial_indexes"
down_revision: str | None = "0009_state_revision"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, column): an index named ix_<table>_<column> on that one column.
MOSTLY_NULL = (
    ("checkpoints", "run_id"),
    ("checkpoints", "expires_at"),
    ("store_items", "expires_at"),
    ("cache_entries", "expires_at"),
)
# The dialects that have partial indexes (Citus and the poolers are PostgreSQL).
PARTIAL_ON = ("sqlite", "postgresql")


def _schema() -> str | None:
    # CREATE/DROP INDEX name the table as given: the schema the tables are in (the
    # savers' schema=) is spelled out, as env.py put the version table there.
    schema: str | None = op.get_context().version_table_schema
    return schema


def _rebuild(*, partial: bool) -> None:
    if op.get_context().dialect.name not in PARTIAL_ON:
        return
    for table, column in MOSTLY_NULL:
        name = f"ix_{table}_{column}"
        where = sa.text(f"{column} IS NOT NULL") if partial else None
        op.drop_index(name, table_name=table, schema=_schema())
        op.create_index(
            name,
            table,
            [column],
            schema=_schema(),
            sqlite_where=where,
            postgresql_where=where,
        )


def upgrade() -> None:
    _rebuild(partial=True)


def downgrade() -> None:
    _rebuild(partial=False)
