"""Citus: lg_sqla's tables distributed across worker servers (opt-in).

:func:`distribute_on_citus` sets the schema up (``alembic upgrade head``) on the
coordinator, then makes every table of lg_sqla's models a Citus distributed table,
sharded by the column its calls name and co-located with its kin
(``lg_sqla.dialects.citus.PLACEMENT``):

=============================================================== ===================
``checkpoints``, ``checkpoint_blobs``, ``checkpoint_writes``,    ``thread_id``, one
``checkpoint_retention``                                         co-location group
``store_items``, ``store_vectors``                               ``prefix_hash``
``cache_entries``                                                ``namespace_hash``
=============================================================== ===================

and lg_sqla's version table a reference table (a copy on every node), so savers may run
through any node. Idempotent: tables already distributed are left as they are. Tables
holding rows are distributed with them (Citus copies them into shards). A later
revision's new tables are distributed by the migration itself once ``checkpoints`` is
(``PostgresOps.after_migrations``). docs/scaling.md has the measurements.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from lg_sqla import migrate
from lg_sqla.dialects import ops_for
from lg_sqla.dialects.citus import PLACEMENT, distribute, has_citus_uncached
from lg_sqla.errors import InvalidInputError, SchemaError
from lg_sqla.models import metadata

__all__ = ["PLACEMENT", "distribute_on_citus"]


def distribute_on_citus(engine: Engine) -> list[str]:
    """Set the schema up, then distribute lg_sqla's tables on Citus (module docstring).

    Returns the tables it distributed (empty: all were already). Refused, with nothing
    changed, on a database without the citus extension, and on a worker node (the
    error names the coordinator).
    """
    if engine.dialect.name != "postgresql":
        raise InvalidInputError(
            f"distributing lg_sqla's tables needs PostgreSQL with Citus, not {engine.dialect.name}"
        )
    with engine.connect() as connection:
        if not has_citus_uncached(connection):
            raise InvalidInputError(
                "this database has no citus extension: CREATE EXTENSION citus on the "
                "coordinator and every worker, add the workers (citus_add_node), then "
                "distribute (docs/scaling.md)"
            )
        refused = ops_for(connection.dialect).migrations_refused(connection)
        if refused is not None:
            raise SchemaError(refused)
    migrate.upgrade(engine)
    with engine.connect() as connection:
        schema = migrate.schema_of(connection)
        # The migration lock: no setup() of another process runs meanwhile (and
        # sequential mode, which distribution after other statements needs).
        with ops_for(connection.dialect).migration_lock(connection):
            changed = distribute(
                connection,
                schema,
                [t.name for t in metadata.sorted_tables],
                migrate.VERSION_TABLE,
            )
        connection.commit()
    return changed
