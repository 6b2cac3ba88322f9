"""Any other SQLAlchemy dialect: portable SQL only (the portable path)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement

from lg_sqla.dialects.base import DialectOps, Record, rows_with_keys
from lg_sqla.plans import Plan, Step


class GenericOps(DialectOps):
    """Any other SQLAlchemy dialect: portable SQL, a few more round trips."""

    native_upsert = False
    filters_metadata_in_sql = False

    def insert_ignore(self, table: sa.Table) -> sa.Insert:
        # Existing keys are filtered out first (insert_ignore_rows).
        return sa.insert(table)

    def upsert(self, table: sa.Table, update: Sequence[str]) -> sa.Insert:
        raise NotImplementedError("GenericOps upserts by delete + insert (upsert_rows)")

    # The emulations, for the checkpointer and the node cache alike: one more round
    # trip than a native upsert, in the same transaction.

    def insert_ignore_rows(self, table: sa.Table, rows: Sequence[Record]) -> Plan[None]:
        if not rows:
            return
        pk = [c.name for c in table.primary_key.columns]
        existing = yield Step(
            sa.select(*table.primary_key.columns).where(rows_with_keys(table, rows)), fetch=True
        )
        seen = {tuple(r) for r in existing.rows}
        new = [r for r in rows if tuple(r[name] for name in pk) not in seen]
        if new:
            yield Step(sa.insert(table), new)

    def upsert_rows(
        self, table: sa.Table, rows: Sequence[Record], update: Sequence[str]
    ) -> Plan[None]:
        if rows:
            yield Step(sa.delete(table).where(rows_with_keys(table, rows)))
            yield Step(sa.insert(table), rows)

    def upsert_where(
        self, table: sa.Table, update: Sequence[str], replace: ColumnElement[bool]
    ) -> sa.Insert:
        raise NotImplementedError("GenericOps upserts by delete + insert in operations")

    def metadata_path_equals(
        self, column: ColumnElement[Any], keys: tuple[str, ...], value: Any
    ) -> ColumnElement[bool]:
        if len(keys) > 1:
            raise NotImplementedError(f"nested metadata filters are not supported on {self.name}")
        raise NotImplementedError(
            "metadata filters need JSON support of the dialect; "
            "use SQLite, PostgreSQL or MySQL/MariaDB, or list without `filter`"
        )
