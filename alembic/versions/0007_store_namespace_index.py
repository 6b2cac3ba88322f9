"""Store: the namespace index in list_namespaces' order, so a page reads its namespaces only.

Revision ID: 0007_store_namespace_index
Revises: 0006_checkpoint_retention
Create Date: 2026-11-26

``store_items.prefix_head`` (revision 0004, indexed) held the first 200 characters of
``prefix``, the namespace joined by ".". It now holds them with each "." replaced by
U+0001, the character namespaces sort around (below every character a label may hold,
NUL being refused): the index is then in Python's tuple order, the order
``list_namespaces`` pages in (``("a", "b")`` before ``("a-",)``, where "." would sort
after "-"). A page of namespaces is an index walk that stops after ``offset + limit``
distinct heads, instead of every namespace under the prefix, distinct and sorted
(SQLite, 10,000 namespaces under a prefix, a page of 100: 8.5 ms, now 0.3 ms). A
search of namespace ``N`` reads the range ``N' <= prefix_head < N' + U+0002`` (``N'``
its head) as it read ``N <= prefix_head < N + "/"`` before. No column and no index is
added: a put costs what it did. Existing heads are rewritten in place; the downgrade
writes them back from ``prefix``.

Self-contained on purpose (no lg_sqla imports): a revision is a frozen record
of the schema, it must not change when the package's models do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0007_store_namespace_index"
down_revision: str | None = "0006_checkpoint_retention"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HEAD_LEN = 200


def _schema() -> str | None:
    # UPDATE names the table as given: the schema the tables are in (the stores'
    # schema=) is spelled out, as env.py put the version table there (None offline).
    schema: str | None = op.get_context().version_table_schema
    return schema


def _separator() -> sa.ColumnElement[str]:
    # U+0001 as each dialect spells it, so that `upgrade --sql` prints no control
    # character; MySQL/MariaDB's CHAR() is binary unless given a character set.
    name = op.get_bind().dialect.name
    if name in ("mysql", "mariadb"):
        return sa.literal_column("CHAR(1 USING utf8mb4)")
    if name == "sqlite":
        return sa.literal_column("char(1)")
    return sa.literal_column("chr(1)")  # PostgreSQL, DuckDB


def _set_heads(sort_order: bool) -> None:
    items = sa.table("store_items", sa.column("prefix"), sa.column("prefix_head"), schema=_schema())
    head: sa.ColumnElement[str] = sa.func.substr(items.c.prefix, 1, HEAD_LEN)
    if sort_order:
        head = sa.func.replace(head, ".", _separator())
    op.execute(items.update().values(prefix_head=head))


def upgrade() -> None:
    _set_heads(sort_order=True)


def downgrade() -> None:
    _set_heads(sort_order=False)
