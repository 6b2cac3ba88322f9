"""Size limits of key columns, shared by the models, the input checks and the docs;
and the fixed choices of the inspector's arguments, shared with the command line.

Every key must fit InnoDB's 3072-byte index limit with utf8mb4 (4 bytes/char);
tests/unit/test_key_budget.py recomputes the budget from the models.

Nothing is imported here: the ``lg-sqla`` command builds its parser from these
without loading the inspector (LangGraph, langchain_core).
"""

from __future__ import annotations

THREAD_ID_MAX = 255
CHECKPOINT_ID_MAX = 64
CHANNEL_MAX = 255
VERSION_MAX = 128
TASK_ID_MAX = 255
BLOB_TYPE_MAX = 64
RUN_ID_MAX = 255
# The id of an application's state revision (lg_sqla.checkpoint.state_migrations).
STATE_REVISION_MAX = 64
# An MD5 hex digest of checkpoint_ns: fixed width however deep the subgraph nesting.
NS_HASH_LEN = 32
# A store item's indexed field path ("content", "sections[*].text.0"); LangGraph's
# IndexConfig fields are short JSON paths.
FIELD_PATH_MAX = 255
# The first characters of a store item's namespace, kept in an indexed column
# (store_items.prefix_head) so that a search of a namespace reads its subtree only;
# 800 bytes in utf8mb4, a small index entry on every dialect (the full namespace is
# unbounded: PostgreSQL's B-tree entries stop near 2.7 kB).
NS_HEAD_LEN = 200

# The orders of ``Inspector.threads`` (``lg-sqla threads --order``).
THREAD_ORDERS = ("last_write", "first_write", "thread_id", "checkpoints")
# ``sort_by`` of ``Inspector.threads`` (LangGraph Platform's names; ``--sort-by``).
THREAD_SORT_KEYS = ("thread_id", "created_at", "updated_at", "state_updated_at", "checkpoints")
# The fields ``select`` may name (``ThreadInfo``'s, and ``bytes`` and ``extracted``).
THREAD_FIELDS = (
    "thread_id",
    "status",
    "checkpoints",
    "namespaces",
    "first_write",
    "last_write",
    "state_updated",
    "value_bytes",
    "write_bytes",
    "bytes",
    "extracted",
)
# A thread's status, from its latest checkpoint in the root namespace
# (``inspection.thread_status``; ``lg-sqla threads --status``).
THREAD_STATUSES = ("interrupted", "pending", "idle", "error")
