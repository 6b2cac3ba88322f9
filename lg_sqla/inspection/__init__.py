"""Looking inside: threads, histories, checkpoints, writes, statistics, storage.

What operators otherwise do by hand in SQL on the three tables (listing
threads, walking a history, the writes of one checkpoint in execution order,
write volume per node over a time window, the latest value of one channel for
a batch of threads, writes versus values volume), each as **one statement** on
SQLite, PostgreSQL and MySQL/MariaDB, bounded by a page size. Nothing is
deserialized unless the call's purpose is to show values (``show``, ``diff``,
``latest``, ``writes(values=True)``).

Every query is a sans-IO plan (see ``lg_sqla.plans``), so the sync and async
front ends differ only by ``await``::

    from lg_sqla.inspection import Inspector, AsyncInspector

    page = Inspector(saver).threads(limit=20)           # SQLAlchemySaver
    page = await AsyncInspector(async_saver).threads()  # AsyncSQLAlchemySaver

``python -m lg_sqla threads | history | show | diff | writes | stats | latest |
storage`` print the same results as tables or JSON.

The package, by what each module answers: ``checks`` (page limits, input checks),
``results`` (the returned dataclasses), ``summaries`` (previews and list changes,
no database), ``thread_pages`` (thread status; the SQL of pages of threads),
``thread_search`` (paths, value filters, sort names), ``thread_queries``
(``threads`` and ``count_threads``: the search and its cost model),
``checkpoints`` (history, show, diff, latest), ``pending_writes`` (writes and
their statistics), ``table_sizes`` (storage), ``inspectors`` (``Inspector`` and
``AsyncInspector``). ``lg_sqla.inspect``, its former name, still imports them all.
"""

from lg_sqla.inspection.checkpoints import diff, history, latest, resolve_checkpoint, show
from lg_sqla.inspection.checks import (
    EMPTY_TYPE,
    MAX_PAGE,
    PUSH_PREFIX,
    ROOT_NS_HASH,
    SEND_TASK,
    STAT_GROUPS,
)
from lg_sqla.inspection.inspectors import AsyncInspector, Inspector
from lg_sqla.inspection.pending_writes import write_stats, writes
from lg_sqla.inspection.results import (
    ChannelChange,
    CheckpointView,
    DiskUsage,
    HistoryEntry,
    LatestValue,
    ListChange,
    StorageReport,
    TableUsage,
    ThreadInfo,
    ThreadPage,
    ValueView,
    WriteInfo,
    WriteStats,
)
from lg_sqla.inspection.summaries import list_change, next_nodes, node_of, summarize
from lg_sqla.inspection.table_sizes import disk_usage, storage
from lg_sqla.inspection.thread_pages import Windows, thread_status
from lg_sqla.inspection.thread_queries import count_threads, threads

__all__ = [
    "EMPTY_TYPE",
    "MAX_PAGE",
    "PUSH_PREFIX",
    "ROOT_NS_HASH",
    "SEND_TASK",
    "STAT_GROUPS",
    "AsyncInspector",
    "ChannelChange",
    "CheckpointView",
    "DiskUsage",
    "HistoryEntry",
    "Inspector",
    "LatestValue",
    "ListChange",
    "StorageReport",
    "TableUsage",
    "ThreadInfo",
    "ThreadPage",
    "ValueView",
    "Windows",
    "WriteInfo",
    "WriteStats",
    "count_threads",
    "diff",
    "disk_usage",
    "history",
    "latest",
    "list_change",
    "next_nodes",
    "node_of",
    "resolve_checkpoint",
    "show",
    "storage",
    "summarize",
    "thread_status",
    "threads",
    "write_stats",
    "writes",
]
