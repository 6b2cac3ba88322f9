"""Any other SQLAlchemy dialect: portable SQL only (the portable path)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.elements import ColumnElement

from lg_sqla.dialects.base import DialectOps


class GenericOps(DialectOps):
    """Any other SQLAlchemy dialect: portable SQL, a few more round trips."""

    native_upsert = False
    filters_metadata_in_sql = False

    def insert_ignore(self, table: sa.Table) -> sa.Insert:
        # Callers filter out existing keys first (see operations._insert_ignore).
        return sa.insert(table)

    def upsert(self, table: sa.Table, update: Sequence[str]) -> sa.Insert:
        raise NotImplementedError("GenericOps upserts by delete + insert in operations")

    def upsert_where(
        self, table: sa.Table, update: Sequence[str], replace: ColumnElement[bool]
    ) -> sa.Insert:
        raise NotImplementedError("GenericOps upserts by delete + insert in operations")

    def metadata_equals(
        self, column: ColumnElement[Any], key: str, value: Any
    ) -> ColumnElement[bool]:
        raise NotImplementedError(
            "metadata filters need JSON support of the dialect; "
            "use SQLite, PostgreSQL or MySQL/MariaDB, or list without `filter`"
        )
