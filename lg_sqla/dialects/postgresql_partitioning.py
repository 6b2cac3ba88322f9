"""PostgreSQL's declarative hash partitioning of the checkpoint tables by ``thread_id``:
the DDL and the catalog query. ``lg_sqla.partitioning`` decides when to use them (an
empty database, under the migration lock) and which tables."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def partition_statements(table: sa.Table, partitions: int) -> list[str]:
    """The partitions of ``table`` (a partitioned table already), as DDL."""
    return [
        f"CREATE TABLE {table.name}_p{n} PARTITION OF {table.name} "
        f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {n})"
        for n in range(partitions)
    ]


def partitioned_copy(table: sa.Table) -> sa.Table:
    """``table`` as the same model, declared ``PARTITION BY HASH (thread_id)``."""
    copy = table.to_metadata(sa.MetaData(naming_convention=table.metadata.naming_convention))
    copy.dialect_options["postgresql"]["partition_by"] = "HASH (thread_id)"
    return copy


def partitions_of(connection: Connection, table: str) -> int:
    """How many partitions ``table`` has in the current schema (0: not partitioned)."""
    return int(
        connection.execute(
            sa.text(
                "SELECT count(*) FROM pg_inherits i "
                "JOIN pg_class parent ON parent.oid = i.inhparent "
                "JOIN pg_namespace ns ON ns.oid = parent.relnamespace "
                "WHERE parent.relname = :table AND ns.nspname = current_schema()"
            ),
            {"table": table},
        ).scalar_one()
    )
