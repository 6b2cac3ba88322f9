"""Citus (distributed PostgreSQL): what lg_sqla does differently when the ``citus``
extension is in the database, beside what ``postgresql.py`` does on every PostgreSQL.

Citus shards a distributed table by one column across worker servers. lg_sqla's tables
shard by the column every call names: the checkpoint tables by ``thread_id`` (co-located,
so a thread's rows of every table are on one worker), the store's by ``prefix_hash`` (a
namespace), the node cache's by ``namespace_hash``. :data:`PLACEMENT` says which, for
every table; ``lg_sqla.distributing`` applies it.

What changes on such a database (``PostgresOps.distributed``, learned once per engine):

* a page of checkpoints not bound to one thread joins its blobs and writes plainly: the
  ``LATERAL (... OFFSET 0)`` fence PostgreSQL needs is a subquery Citus cannot push down
  when it reads a table function (``jsonb_each_text``);
* ``threads`` reads its page of thread ids first, then their sizes and status (a second
  statement): correlated subqueries over an intermediate result, and subqueries in
  HAVING, are refused; a status filter is a WHERE condition;
* the store's key lists also name ``prefix_hash = ANY(...)``, so Citus prunes them to
  the namespaces' shards (one namespace: one shard, no two-phase commit);
* migrations run in sequential mode (DDL and a function after a parallel statement on
  a distributed table are refused in the same transaction), and a table a revision
  creates is distributed like the others once the database's tables are distributed;
* a worker node refuses migrations with the coordinator's address (DDL on distributed
  tables runs on the coordinator).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from lg_sqla.errors import SchemaError


@dataclass(frozen=True)
class Placement:
    """How one of lg_sqla's tables is distributed: by ``column``, in the same shard
    group as ``colocate_with`` (None: a group of its own)."""

    column: str
    colocate_with: str | None = None


# Every table of lg_sqla's models (tests/unit: none is missing), by name. A new table
# needs an entry: `distribute_on_citus` refuses a table it has no placement for.
PLACEMENT: dict[str, Placement] = {
    "checkpoints": Placement("thread_id"),
    "checkpoint_blobs": Placement("thread_id", "checkpoints"),
    "checkpoint_writes": Placement("thread_id", "checkpoints"),
    "checkpoint_retention": Placement("thread_id", "checkpoints"),
    "store_items": Placement("prefix_hash"),
    "store_vectors": Placement("prefix_hash", "store_items"),
    "cache_entries": Placement("namespace_hash"),
}
# The table whose distribution means "this database's tables are distributed".
ANCHOR = "checkpoints"

_PROBE = "SELECT 1 FROM pg_extension WHERE extname = 'citus'"
# Per engine (``Engine``; an async engine's sync one): whether its database has Citus.
_KNOWN: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()


def has_citus(connection: Connection) -> bool:
    """Whether the connection's database has the citus extension, asked once per engine."""
    engine = connection.engine
    known = _KNOWN.get(engine)
    if known is None:
        known = _KNOWN[engine] = connection.exec_driver_sql(_PROBE).first() is not None
    return known


def has_citus_uncached(connection: Connection) -> bool:
    """``has_citus`` asked now (migrations: the extension may have just been created)."""
    return connection.exec_driver_sql(_PROBE).first() is not None


def sequential_mode(connection: Connection) -> None:
    """Citus opens one connection per worker, not one per shard, for the rest of the
    transaction: DDL, functions and distribution may then follow a statement that
    touched many shards (otherwise "cannot run ... because there was a parallel
    operation on a distributed table")."""
    connection.exec_driver_sql("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")


def coordinator_address(connection: Connection) -> str | None:
    """``host:port`` of the coordinator when this session is on a Citus worker node
    (None on the coordinator, or when the worker does not know it)."""
    if connection.exec_driver_sql("SELECT citus_is_coordinator()").scalar():
        return None
    row = connection.exec_driver_sql(
        "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid = 0 LIMIT 1"
    ).first()
    return f"{row[0]}:{row[1]}" if row is not None else "unknown (no coordinator in pg_dist_node)"


def _qualified(connection: Connection, schema: str | None, table: str) -> str:
    quote = connection.dialect.identifier_preparer.quote
    return f"{quote(schema)}.{quote(table)}" if schema else quote(table)


def _schema_literal(schema: str | None) -> str:
    return "current_schema()" if schema is None else "'" + schema.replace("'", "''") + "'"


def distributed_tables(connection: Connection, schema: str | None) -> dict[str, str]:
    """lg_sqla's tables (and others) of ``schema`` that Citus manages, by name: their
    kind ("distributed" or "reference")."""
    rows = connection.exec_driver_sql(
        "SELECT c.relname, CASE WHEN p.partmethod = 'n' THEN 'reference' ELSE 'distributed' END "
        "FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid "
        f"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = {_schema_literal(schema)}"
    ).all()
    return {str(name): str(kind) for name, kind in rows}


def existing_tables(connection: Connection, schema: str | None) -> set[str]:
    rows = connection.exec_driver_sql(
        "SELECT tablename FROM pg_tables WHERE schemaname = " + _schema_literal(schema)
    ).all()
    return {str(r[0]) for r in rows}


def distribute(
    connection: Connection, schema: str | None, tables: list[str], version_table: str
) -> list[str]:
    """Distribute those of ``tables`` (lg_sqla's, in dependency order) not distributed
    yet, co-located by :data:`PLACEMENT`, and make ``version_table`` a reference table
    (a copy on every node: savers on a worker check the schema version there). Returns
    what it changed. Runs in the caller's transaction, in sequential mode."""
    unknown = [t for t in tables if t not in PLACEMENT]
    if unknown:
        raise SchemaError(
            f"lg_sqla has no Citus placement for table(s) {', '.join(unknown)} "
            "(lg_sqla.dialects.citus.PLACEMENT): this lg_sqla cannot distribute them"
        )
    sequential_mode(connection)
    done = distributed_tables(connection, schema)
    present = existing_tables(connection, schema)
    changed: list[str] = []
    # Groups first: a table co-located with another needs that one distributed.
    ordered = sorted(tables, key=lambda t: PLACEMENT[t].colocate_with is not None)
    for table in ordered:
        if table in done or table not in present:
            continue
        placement = PLACEMENT[table]
        colocate = placement.colocate_with
        connection.execute(
            sa.text("SELECT create_distributed_table(:table, :column, colocate_with => :colocate)"),
            {
                "table": _qualified(connection, schema, table),
                "column": placement.column,
                "colocate": _qualified(connection, schema, colocate) if colocate else "none",
            },
        )
        changed.append(table)
    if version_table in present and version_table not in done:
        connection.execute(
            sa.text("SELECT create_reference_table(:table)"),
            {"table": _qualified(connection, schema, version_table)},
        )
        changed.append(version_table)
    return changed


def distribute_new_tables(
    connection: Connection, schema: str | None, tables: list[str], version_table: str
) -> list[str]:
    """After a migration: when this database's tables are distributed (:data:`ANCHOR`
    is), distribute the ones a revision created. Elsewhere nothing (one catalog read)."""
    if ANCHOR not in distributed_tables(connection, schema):
        return []
    return distribute(connection, schema, tables, version_table)
