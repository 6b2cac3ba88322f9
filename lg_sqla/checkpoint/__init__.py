"""The checkpointer: LangGraph's ``BaseCheckpointSaver`` on any SQLAlchemy database.

=============== ==============================================================
saver.py        ``SQLAlchemySaver``: the sync shell, each method one plan
aio.py          ``AsyncSQLAlchemySaver``: the same plans on an ``AsyncEngine``
base.py         what both savers share: construction, from_conn_string, versions, serde
calls.py        calls declared once (parameters, docs, plan) for both savers' faces
twins.py        the table of the calls with both faces; the faces and the bridges
operations.py   every checkpointer call as a sans-IO plan (get, list, put, ...)
statements.py   the statements the plans run: the page query, the blob load
codec.py        rows <-> LangGraph objects, input validation
json_values.py  JSON columns read back to exactly their values; JSON equality
history.py      ``get_delta_channel_history``: the parent-chain walk in SQL
maintenance.py  prune, delete_for_runs, copy_thread, retention sweep
retention.py    TTLs as stored data: a thread's expiry facts, pins, keep_last on put
ttl_sweep.py    the TTL sweep, giving existing threads a TTL (``set_threads_ttl``)
rotation.py     rewriting stored values into the current serializer (keys)
=============== ==============================================================

The plans are pure (no I/O); ``lg_sqla.runtime`` runs them, and
``lg_sqla.dialects`` answers every question on which the SQL differs.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
    from lg_sqla.checkpoint.saver import SQLAlchemySaver
else:
    from lg_sqla.shared import lazy_exports

    # The savers on first use: a module of this package that needs neither
    # (``policy``, ``maintenance`` for the ``lg-sqla`` command) is imported without
    # LangGraph's runtime and langchain_core.
    __getattr__ = lazy_exports(
        globals(),
        {
            "SQLAlchemySaver": "lg_sqla.checkpoint.saver",
            "AsyncSQLAlchemySaver": "lg_sqla.checkpoint.aio",
        },
    )
    del lazy_exports  # (not part of the package's namespace)


__all__ = ["AsyncSQLAlchemySaver", "SQLAlchemySaver"]
