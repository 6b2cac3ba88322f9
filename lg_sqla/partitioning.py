"""PostgreSQL: the checkpoint tables hash-partitioned by ``thread_id`` (opt-in).

Every key of ``checkpoints``, ``checkpoint_writes`` and ``checkpoint_blobs`` leads
with ``thread_id``, there are no foreign keys, and every per-thread statement names
``thread_id = :thread_id`` on each table it reads. So the tables can be split into N
hash partitions: a thread's reads and writes touch one partition of each table
(pruned when the statement is planned), and maintenance (VACUUM, reindexing, moving
data) works one partition at a time. It changes no result and no statement.

:func:`partition_by_thread` turns the tables of an *empty* database (fresh, or just
set up) into partitioned ones, with the same columns, keys, indexes and names as the
migrations create, so Alembic's revision check and its model comparison see the
schema they expect. For a database with data, see docs/scaling.md. The PostgreSQL
DDL itself (and the catalog query) is in ``lg_sqla.dialects.postgresql_partitioning``.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from lg_sqla import migrate
from lg_sqla.dialects import ops_for
from lg_sqla.dialects.postgresql_partitioning import (
    partition_statements,
    partitioned_copy,
    partitions_of,
)
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints

THREAD_TABLES = (checkpoints, checkpoint_writes, checkpoint_blobs)
MAX_PARTITIONS = 1024

__all__ = [
    "MAX_PARTITIONS",
    "THREAD_TABLES",
    "partition_by_thread",
    "partition_statements",
    "partitioned_copy",
    "partitions_of",
]


def partition_by_thread(engine: Engine, partitions: int) -> None:
    """Set the schema up (``alembic upgrade head``), then make the three checkpoint
    tables hash-partitioned by ``thread_id`` into ``partitions`` partitions each.

    Idempotent for the same count. Refused, with nothing changed, on a database other
    than PostgreSQL, when any of the tables holds a row, or when they are partitioned
    already with another count.
    """
    if not isinstance(partitions, int) or not 2 <= partitions <= MAX_PARTITIONS:
        raise InvalidInputError(
            f"partitions must be an int from 2 to {MAX_PARTITIONS}, got {partitions!r}"
        )
    if not ops_for(engine.dialect).partitions_by_thread:
        raise InvalidInputError(
            f"partitioning by thread_id needs PostgreSQL, not {engine.dialect.name}"
        )
    migrate.upgrade(engine)
    with engine.connect() as connection:
        schema = migrate.schema_of(connection)
        if schema is not None:
            connection.exec_driver_sql(f'SET LOCAL search_path TO "{schema}"')
        # The migration lock: no setup() of another process runs meanwhile.
        with ops_for(connection.dialect).migration_lock(connection):
            for table in THREAD_TABLES:
                _partition(connection, table, partitions)
        connection.commit()


def _partition(connection: Connection, table: sa.Table, partitions: int) -> None:
    existing = partitions_of(connection, table.name)
    if existing == partitions:
        return
    if existing:
        raise InvalidInputError(
            f"{table.name} has {existing} partitions already; lg_sqla does not "
            "repartition (see docs/scaling.md)"
        )
    rows = connection.execute(sa.select(sa.literal(1)).select_from(table).limit(1)).first()
    if rows is not None:
        raise InvalidInputError(
            f"{table.name} holds rows: partition_by_thread works on an empty database "
            "(docs/scaling.md shows how to move data into partitioned tables)"
        )
    table.drop(connection)
    partitioned_copy(table).create(connection)
    for statement in partition_statements(table, partitions):
        connection.exec_driver_sql(statement)
