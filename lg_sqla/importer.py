"""Adopting lg_sqla: copy threads from any other checkpointer, ids and all.

``import_threads(source, target)`` reads every thread of ``source`` (any
``BaseCheckpointSaver``: LangGraph's ``PostgresSaver``, ``SqliteSaver``, the
community MySQL saver, ``InMemorySaver``...) through its public API and writes
it into an lg_sqla saver: same thread ids, checkpoint ids, parents, metadata,
channel values and pending writes. ``aimport_threads`` does the same with
async savers.

Resumable and idempotent: checkpoints the target already holds are skipped,
and a checkpoint's writes are stored *before* the checkpoint itself, so a
checkpoint present in the target always has its writes; running the import
again after an interruption finishes the job, and running it once more copies
nothing.

``BaseCheckpointSaver`` does not expose a write's ``task_path``: pass
``task_paths=`` (``lg-sqla import`` reads them from the official savers'
tables) to keep LangGraph's write order exactly; without it, writes are stored
with an empty path and come back ordered by task id.

Imported rows keep their age: checkpoints and their writes are stamped with
the checkpoint's own ``ts`` (LangGraph's creation time), not the time of the
import, so retention (``sweep``) and ``stats --since`` see the real history.

From a shell: ``lg-sqla --url <lg_sqla database> import <source database URL>``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from lg_sqla.dialects import ops_for
from lg_sqla.dialects.base import OfficialSchema
from lg_sqla.migrate import VERSION_TABLE
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash

if TYPE_CHECKING:
    from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
    from lg_sqla.checkpoint.saver import SQLAlchemySaver

# (checkpoint_ns, checkpoint_id, task_id) -> task_path, for one thread.
TaskPaths = Mapping[tuple[str, str, str], str]


@dataclass
class ImportReport:
    """What an import did; ``progress`` receives it after every thread."""

    threads_total: int = 0
    threads_done: int = 0
    checkpoints_imported: int = 0
    checkpoints_skipped: int = 0  # already in the target (a resumed or repeated import)
    writes_imported: int = 0
    current_thread: str | None = None
    threads: list[str] = field(default_factory=list)


def existing_checkpoints(thread_id: str) -> Plan[set[tuple[str, str]]]:
    """(namespace hash, checkpoint id) of every checkpoint the target holds for a thread."""
    stmt = sa.select(C.c.checkpoint_ns_hash, C.c.checkpoint_id).where(C.c.thread_id == thread_id)
    rows = (yield Step(stmt, fetch=True, whole_plan=True)).rows
    return {(r.checkpoint_ns_hash, r.checkpoint_id) for r in rows}


def _ts(checkpoint: Mapping[str, Any]) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(str(checkpoint.get("ts")))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def restamp(thread_id: str, tuples: Iterable[CheckpointTuple]) -> Plan[None]:
    """Give imported checkpoints and their writes the checkpoint's own creation time
    (all of the thread's, so a rerun also heals an import interrupted before this)."""
    rows = []
    for t in tuples:
        when = _ts(t.checkpoint)
        if when is not None:
            cfg = t.config["configurable"]
            nsh = key_hash(cfg.get("checkpoint_ns", ""))
            rows.append(
                {"b_thread": thread_id, "b_nsh": nsh, "b_id": cfg["checkpoint_id"], "b_ts": when}
            )
    if not rows:
        return
    key: tuple[sa.BindParameter[Any], ...] = (
        sa.bindparam("b_thread"),
        sa.bindparam("b_nsh"),
        sa.bindparam("b_id"),
    )
    ts = sa.bindparam("b_ts", type_=C.c.created_at.type)
    for table, values in ((C, {"created_at": ts, "updated_at": ts}), (W, {"created_at": ts})):
        stmt = (
            sa.update(table)
            .where(
                table.c.thread_id == key[0],
                table.c.checkpoint_ns_hash == key[1],
                table.c.checkpoint_id == key[2],
            )
            .values(values)
        )
        yield Step(stmt, rows)  # one executemany per table


def discover_threads(source: BaseCheckpointSaver[Any]) -> list[str]:
    """Thread ids of a saver, through ``list(None)`` (any saver; reads every checkpoint)."""
    return sorted({t.config["configurable"]["thread_id"] for t in source.list(None)})


async def adiscover_threads(source: BaseCheckpointSaver[Any]) -> list[str]:
    return sorted({t.config["configurable"]["thread_id"] async for t in source.alist(None)})


def _thread_config(thread_id: str) -> RunnableConfig:
    # No checkpoint_ns: the official savers then list every namespace of the thread.
    return {"configurable": {"thread_id": thread_id}}


@dataclass(frozen=True)
class _Copy:
    """The target calls that recreate one source checkpoint (writes first)."""

    key: tuple[str, str]
    writes: list[tuple[RunnableConfig, list[tuple[str, Any]], str, str]]
    put: tuple[RunnableConfig, Any, Any, Any]


def _copies(
    tuples: Iterable[CheckpointTuple], paths: TaskPaths, existing: set[tuple[str, str]]
) -> tuple[list[_Copy], int]:
    """The copies still to make, oldest first, and how many checkpoints are already there."""
    todo, skipped = [], 0
    ordered = sorted(tuples, key=lambda t: t.config["configurable"]["checkpoint_id"])
    for t in ordered:
        cfg = t.config["configurable"]
        ns, checkpoint_id = cfg.get("checkpoint_ns", ""), cfg["checkpoint_id"]
        key = (key_hash(ns), checkpoint_id)
        if key in existing:
            skipped += 1
            continue
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in t.pending_writes or ():
            by_task.setdefault(task_id, []).append((channel, value))
        own: RunnableConfig = {
            "configurable": {
                "thread_id": cfg["thread_id"],
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        writes = [
            (own, w, task_id, paths.get((ns, checkpoint_id, task_id), ""))
            for task_id, w in by_task.items()
        ]
        parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        put_config: RunnableConfig = {
            "configurable": {
                "thread_id": cfg["thread_id"],
                "checkpoint_ns": ns,
                **({"checkpoint_id": parent} if parent else {}),
            }
        }
        checkpoint = t.checkpoint
        # Every versioned channel: values are stored once per version (insert-or-ignore),
        # and a channel without a value is recorded as empty, as LangGraph left it.
        new_versions = dict(checkpoint["channel_versions"])
        todo.append(_Copy(key, writes, (put_config, checkpoint, t.metadata, new_versions)))
    return todo, skipped


# The import, written once for both faces: a generator that yields each saver call it
# needs, as (name, arguments), and is sent the call's answer. import_threads makes the
# calls on the sync savers, aimport_threads awaits their async forms.
_Call = tuple[str, tuple[Any, ...]]


def _import(
    report: ImportReport,
    threads: list[str],
    task_paths: Callable[[str], TaskPaths] | None,
    progress: Callable[[ImportReport], None] | None,
) -> Generator[_Call, Any, None]:
    for thread_id in threads:
        report.current_thread = thread_id
        existing = yield ("run", (existing_checkpoints(thread_id),))
        tuples = yield ("list", (thread_id,))
        paths = task_paths(thread_id) if task_paths is not None else {}
        todo, skipped = _copies(tuples, paths, existing)
        report.checkpoints_skipped += skipped
        for copy in todo:
            for config, writes, task_id, task_path in copy.writes:
                yield ("put_writes", (config, writes, task_id, task_path))
                report.writes_imported += len(writes)
            yield ("put", copy.put)
            report.checkpoints_imported += 1
        yield ("run", (restamp(thread_id, tuples),))
        report.threads_done += 1
        report.threads.append(thread_id)
        if progress is not None:
            progress(report)
    report.current_thread = None


def _next_call(importing: Generator[_Call, Any, None], answer: Any) -> _Call | None:
    """The import's next saver call, sent the last one's answer; None once it is done."""
    try:
        return importing.send(answer)
    except StopIteration:
        return None


def import_threads(
    source: BaseCheckpointSaver[Any],
    target: SQLAlchemySaver,
    *,
    thread_ids: Sequence[str] | None = None,
    task_paths: Callable[[str], TaskPaths] | None = None,
    progress: Callable[[ImportReport], None] | None = None,
) -> ImportReport:
    """Copy threads from ``source`` into ``target``, one thread at a time.

    Args:
        source: Any checkpointer to read from (its sync ``list`` is used).
        target: The lg_sqla saver to write into (``setup()`` already run).
        thread_ids: The threads to copy (default: every thread of ``source``).
        task_paths: Optional lookup of each write's ``task_path`` per thread.
        progress: Called after each thread with the running report.

    Returns:
        The report: threads, checkpoints imported and skipped, writes imported.
    """
    threads = list(thread_ids) if thread_ids is not None else discover_threads(source)
    calls: dict[str, Callable[..., Any]] = {
        "run": target.run,
        "list": lambda thread_id: list(source.list(_thread_config(thread_id))),
        "put_writes": target.put_writes,
        "put": target.put,
    }
    report = ImportReport(threads_total=len(threads))
    importing, answer = _import(report, threads, task_paths, progress), None
    while (call := _next_call(importing, answer)) is not None:
        answer = calls[call[0]](*call[1])
    return report


async def aimport_threads(
    source: BaseCheckpointSaver[Any],
    target: AsyncSQLAlchemySaver,
    *,
    thread_ids: Sequence[str] | None = None,
    task_paths: Callable[[str], TaskPaths] | None = None,
    progress: Callable[[ImportReport], None] | None = None,
) -> ImportReport:
    """:func:`import_threads` with async savers (the source's ``alist`` is used)."""
    threads = list(thread_ids) if thread_ids is not None else await adiscover_threads(source)
    calls: dict[str, Callable[..., Awaitable[Any]]] = {
        "run": target.arun,
        "list": lambda thread_id: _alist(source, thread_id),
        "put_writes": target.aput_writes,
        "put": target.aput,
    }
    report = ImportReport(threads_total=len(threads))
    importing, answer = _import(report, threads, task_paths, progress), None
    while (call := _next_call(importing, answer)) is not None:
        answer = await calls[call[0]](*call[1])
    return report


async def _alist(source: BaseCheckpointSaver[Any], thread_id: str) -> list[CheckpointTuple]:
    return [t async for t in source.alist(_thread_config(thread_id))]


# --- the official savers' databases ------------------------------------------------------


@dataclass(frozen=True)
class SchemaGaps:
    """How a database falls short of an official saver's tables (all empty: it has them)."""

    tables: list[str]  # every table of the database, whoever made it
    missing_tables: list[str]
    missing_columns: dict[str, list[str]]  # table -> columns it lacks

    @property
    def is_lg_sqla(self) -> bool:
        """The database holds lg_sqla's own tables (its migrations' version table)."""
        return VERSION_TABLE in self.tables

    def __bool__(self) -> bool:
        # Only what the official saver's tables lack: lg_sqla's version table beside
        # complete official tables (lg_sqla in another schema of the same MySQL
        # database server keeps it here) is no gap; it names the cause when there is one.
        return bool(self.missing_tables or self.missing_columns)


def official_schema_gaps(connection: sa.Connection, expected: OfficialSchema) -> SchemaGaps:
    """What the database ``connection`` lacks of ``expected``, read from its catalog only
    (nothing created, nothing read from the tables)."""
    inspector = sa.inspect(connection)
    tables = sorted(inspector.get_table_names())
    missing_columns: dict[str, list[str]] = {}
    for table, needed in expected.tables.items():
        if table in tables:
            present = {str(c["name"]).lower() for c in inspector.get_columns(table)}
            if lacking := sorted(needed - present):
                missing_columns[table] = lacking
    missing_tables = [table for table in expected.tables if table not in tables]
    return SchemaGaps(tables, missing_tables, missing_columns)


def official_thread_ids(connection: sa.Connection) -> list[str]:
    """Thread ids in an official saver's ``checkpoints`` table, in one query."""
    table = sa.table("checkpoints", sa.column("thread_id"))
    stmt = sa.select(table.c.thread_id).distinct().order_by(table.c.thread_id)
    return [str(r[0]) for r in connection.execute(stmt)]


def official_task_paths(engine: sa.Engine) -> Callable[[str], TaskPaths]:
    """A ``task_paths`` lookup reading an official saver's writes table."""
    name = ops_for(engine.dialect).official_writes_table or "checkpoint_writes"
    table = sa.table(
        name,
        sa.column("thread_id"),
        sa.column("checkpoint_ns"),
        sa.column("checkpoint_id"),
        sa.column("task_id"),
        sa.column("task_path"),
    )

    def lookup(thread_id: str) -> TaskPaths:
        stmt = sa.select(
            table.c.checkpoint_ns, table.c.checkpoint_id, table.c.task_id, table.c.task_path
        ).where(table.c.thread_id == thread_id)
        with engine.connect() as connection:
            return {
                (str(r[0] or ""), str(r[1]), str(r[2])): str(r[3] or "")
                for r in connection.execute(stmt)
            }

    return lookup
