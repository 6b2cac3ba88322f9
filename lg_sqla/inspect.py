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

    from lg_sqla.inspect import Inspector, AsyncInspector

    page = Inspector(saver).threads(limit=20)           # SQLAlchemySaver
    page = await AsyncInspector(async_saver).threads()  # AsyncSQLAlchemySaver

``python -m lg_sqla threads | history | show | diff | writes | stats | latest |
storage`` print the same results as tables or JSON.
"""

from __future__ import annotations

import datetime as dt
import difflib
import reprlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from langgraph.checkpoint.base import writes_sort_key
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT, TASKS
from sqlalchemy.sql.elements import ColumnElement

from lg_sqla import limits, models
from lg_sqla.checkpoint import codec
from lg_sqla.checkpoint.base import Context
from lg_sqla.checkpoint.statements import versioned_blobs
from lg_sqla.dialects import DialectOps, store_sql_for
from lg_sqla.errors import InvalidInputError, NotFoundError
from lg_sqla.limits import THREAD_ORDERS, THREAD_STATUSES
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.models import metadata
from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash

if TYPE_CHECKING:
    from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
    from lg_sqla.checkpoint.saver import SQLAlchemySaver

MAX_PAGE = 1000
ROOT_NS_HASH = key_hash("")
STAT_GROUPS = ("node", "channel", "thread")
EMPTY_TYPE = "empty"
PUSH_PREFIX = "~__pregel_push"
SEND_TASK = "<send>"  # stats group of Send (push) tasks: their node is inside the packet


def _check_page(limit: int, offset: int = 0) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit must be an int from 1 to {MAX_PAGE}, got {limit!r}")
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInputError(f"offset must be an int >= 0, got {offset!r}")


def _thread(thread_id: Any, field_name: str = "thread_id") -> str:
    if not isinstance(thread_id, str):
        raise InvalidInputError(f"{field_name} must be a string, got {thread_id!r}")
    return codec.check_length(field_name, thread_id, limits.THREAD_ID_MAX)


def _checkpoint_id(checkpoint_id: Any, field_name: str = "checkpoint_id") -> str:
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        raise InvalidInputError(f"{field_name} must be a non-empty string, got {checkpoint_id!r}")
    return codec.check_length(field_name, checkpoint_id, limits.CHECKPOINT_ID_MAX)


def _window(
    column: ColumnElement[Any], since: dt.datetime | None, until: dt.datetime | None
) -> list[ColumnElement[bool]]:
    out = []
    for name, value in (("since", since), ("until", until)):
        if value is None:
            continue
        if not isinstance(value, dt.datetime) or value.tzinfo is None:
            raise InvalidInputError(f"{name} must be a timezone-aware datetime, got {value!r}")
        out.append(column >= value if name == "since" else column < value)
    return out


def _int(value: Any) -> int:
    return int(value or 0)  # SUM over no rows is NULL; PostgreSQL sums bigints as numeric


# --- results ---------------------------------------------------------------------


@dataclass(frozen=True)
class ThreadInfo:
    """One thread: its status, how many checkpoints, namespaces, when written, how large."""

    thread_id: str
    status: str  # one of THREAD_STATUSES
    checkpoints: int
    namespaces: int
    first_write: dt.datetime
    last_write: dt.datetime
    value_bytes: int  # serialized channel values (checkpoint_blobs)
    write_bytes: int  # serialized pending writes (checkpoint_writes)

    @property
    def bytes(self) -> int:
        return self.value_bytes + self.write_bytes


@dataclass(frozen=True)
class ThreadPage:
    threads: list[ThreadInfo]
    next_offset: int | None  # pass as ``offset`` for the next page; None on the last one
    total: int | None = None  # threads matching the filters, when asked for (``count=True``)


@dataclass(frozen=True)
class HistoryEntry:
    """One checkpoint of a thread's history, as ``get_state_history`` would list it."""

    checkpoint_id: str
    parent_id: str | None
    step: int | None
    source: str | None
    created_at: dt.datetime
    next: tuple[str, ...]  # nodes whose trigger channels changed since they last ran
    sends: int  # Send packets queued for the next step (their node is in the packet)
    pending_writes: int


@dataclass(frozen=True)
class ValueView:
    """A channel value: the value itself, and for humans its type and a bounded preview."""

    type: str
    preview: str
    size: int | None = None  # len() of strings, bytes and collections
    value: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class CheckpointView:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    metadata: dict[str, Any]
    channel_versions: dict[str, str]
    values: dict[str, ValueView]
    pending_writes: list[tuple[str, str, ValueView]]  # (task_id, channel, value)


@dataclass(frozen=True)
class ListChange:
    """How a list value changed: items appended (or inserted), removed, replaced.

    LangChain messages are matched by ``id`` (``add_messages`` replaces a message
    by id); other items by position, aligned as difflib aligns sequences.
    """

    appended: list[Any]
    removed: list[Any]
    replaced: list[tuple[Any, Any]]  # (old, new)


@dataclass(frozen=True)
class ChannelChange:
    channel: str
    old_version: str | None
    new_version: str | None
    old: ValueView | None
    new: ValueView | None
    items: ListChange | None = None  # when both values are lists


@dataclass(frozen=True)
class WriteInfo:
    """One pending write, without its value unless asked for."""

    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    bytes: int
    created_at: dt.datetime
    value: ValueView | None = None


@dataclass(frozen=True)
class WriteStats:
    key: str  # the node, channel or thread, per ``by``
    writes: int
    bytes: int
    threads: int
    first_write: dt.datetime | None
    last_write: dt.datetime | None

    @property
    def avg_bytes(self) -> float:
        return self.bytes / self.writes if self.writes else 0.0


@dataclass(frozen=True)
class LatestValue:
    thread_id: str
    checkpoint_id: str
    version: str
    value: Any


@dataclass(frozen=True)
class TableUsage:
    rows: int
    bytes: int  # payload bytes: JSON documents of checkpoints, serialized values/writes


@dataclass
class StorageReport:
    tables: dict[str, TableUsage] = field(default_factory=dict)

    @property
    def writes_to_values(self) -> float | None:
        """Writes volume over values volume (above 1: several tasks wrote the same channel)."""
        values, writes = self.tables.get("checkpoint_blobs"), self.tables.get("checkpoint_writes")
        if values is None or writes is None or not values.bytes:
            return None
        return writes.bytes / values.bytes

    @property
    def bytes(self) -> int:
        """Payload bytes of every table reported."""
        return sum(t.bytes for t in self.tables.values())


# --- summaries -------------------------------------------------------------------


def _repr_of(width: int) -> reprlib.Repr:
    """A ``reprlib.Repr`` whose nested strings and objects get ``width`` characters too."""
    shortener = reprlib.Repr()
    shortener.maxstring = shortener.maxother = max(width, 12)
    shortener.maxlist = shortener.maxtuple = shortener.maxdict = shortener.maxset = 6
    shortener.maxlevel = 3
    return shortener


def summarize(value: Any, width: int = 120) -> ValueView:
    """A view of a value: its type, length and a preview of at most ``width`` chars
    (nested strings are cut at ``width`` too); the value itself in ``value``."""
    if not isinstance(width, int) or width < 1:
        raise InvalidInputError(f"width must be an int >= 1, got {width!r}")
    size = len(value) if isinstance(value, (str, bytes, list, tuple, dict, set)) else None
    text = _repr_of(width).repr(value)
    if len(text) > width:
        text = text[: width - 1] + "…"
    return ValueView(type(value).__name__, text, size, value)


def _message_id(item: Any) -> str | None:
    """The id of a LangChain message (``add_messages`` keys messages by it), else None."""
    from langchain_core.messages import BaseMessage

    return item.id if isinstance(item, BaseMessage) and item.id else None


def list_change(old: Sequence[Any], new: Sequence[Any]) -> ListChange:
    """What turned list ``old`` into list ``new``: by message id when every item of
    both is an identified message, else by position (a ``difflib`` alignment)."""
    old_ids = [_message_id(m) for m in old]
    new_ids = [_message_id(m) for m in new]
    if None not in old_ids and None not in new_ids:
        before = dict(zip(old_ids, old, strict=True))
        after = dict(zip(new_ids, new, strict=True))
        return ListChange(
            [m for i, m in after.items() if i not in before],
            [m for i, m in before.items() if i not in after],
            [(before[i], m) for i, m in after.items() if i in before and before[i] != m],
        )
    appended: list[Any] = []
    removed: list[Any] = []
    replaced: list[tuple[Any, Any]] = []
    # Items compared by repr: list items need not be hashable (dicts, lists).
    matcher = difflib.SequenceMatcher(None, list(map(repr, old)), list(map(repr, new)), False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        gone, came = list(old[i1:i2]), list(new[j1:j2])
        paired = min(len(gone), len(came))
        replaced.extend(zip(gone[:paired], came[:paired], strict=True))
        removed.extend(gone[paired:])
        appended.extend(came[paired:])
    return ListChange(appended, removed, replaced)


def _version_key(version: Any) -> tuple[float, str]:
    text = str(version)
    try:
        return (float(text.split(".")[0]), text)
    except ValueError:
        return (float("-inf"), text)


def next_nodes(document: Mapping[str, Any]) -> tuple[str, ...]:
    """Nodes a checkpoint would run next, from its versions only (no value decoded).

    LangGraph runs a node when one of its trigger channels (``branch:to:<node>``,
    or ``__start__`` for the input node) holds a value newer than the node last
    saw. A trigger is consumed by the step that follows its write, so it holds
    a value exactly when the step that made this checkpoint updated it
    (``updated_channels``, format v4); older checkpoints fall back to versions.
    """
    versions: Mapping[str, Any] = document.get("channel_versions") or {}
    seen: Mapping[str, Mapping[str, Any]] = document.get("versions_seen") or {}
    updated = document.get("updated_channels")
    out = []
    for channel, version in versions.items():
        if channel.startswith("branch:to:"):
            node = channel[len("branch:to:") :]
        elif channel == "__start__":
            node = "__start__"
        else:
            continue
        if updated is not None and channel not in updated:
            continue
        last = (seen.get(node) or {}).get(channel)
        if last is None or _version_key(last) < _version_key(version):
            out.append(node)
    return tuple(sorted(out))


def node_of(task_path: str) -> str:
    """The node of a task from its path: ``"~__pregel_pull, agent"`` -> ``agent``."""
    parts = [p.strip() for p in (task_path or "").split(",")]
    if len(parts) >= 2 and parts[0] == "~__pregel_pull":
        return parts[1]
    if parts and parts[0] == PUSH_PREFIX:
        return SEND_TASK
    return task_path or "?"


# --- plans -------------------------------------------------------------------------


def _bytes_of(table: sa.Table, ctx: Context, thread: ColumnElement[Any]) -> sa.ScalarSelect[Any]:
    return (
        sa.select(sa.func.coalesce(sa.func.sum(ctx.dialect_ops.byte_length(table.c.blob)), 0))
        .where(table.c.thread_id == thread)
        .scalar_subquery()
    )


def _latest_root_checkpoint(thread: ColumnElement[Any]) -> sa.ScalarSelect[Any]:
    """The id of ``thread``'s latest checkpoint in the root namespace: one index probe."""
    latest = C.alias("latest")
    return (
        sa.select(latest.c.checkpoint_id)
        .where(latest.c.thread_id == thread, latest.c.checkpoint_ns_hash == ROOT_NS_HASH)
        .order_by(latest.c.checkpoint_id.desc())
        .limit(1)
        .correlate_except(latest)  # to ``thread``'s table, however deep it is nested
        .scalar_subquery()
    )


def _status_conditions(thread: ColumnElement[Any]) -> dict[str, ColumnElement[bool]]:
    """What makes ``thread``'s status, first match wins, from its latest root
    checkpoint, by key lookups only (no value decoded):

    * ``error``: a task's ``__error__`` write on it (the step failed);
    * ``interrupted``: an ``__interrupt__`` write on it (``interrupt()`` waits for a
      human; ``Command(resume=...)`` continues it);
    * ``pending``: tasks to run next: the step that made it wrote a trigger channel
      (``branch:to:<node>``, ``__start__``: its ``updated_channels``) or queued
      ``Send`` packets (``__pregel_tasks`` writes on its parent); a run in progress,
      one that crashed, or a static ``interrupt_before``/``interrupt_after`` stop;
    * ``idle``: none of these (the run finished; also threads without a root checkpoint).
    """
    head_id = _latest_root_checkpoint(thread)
    head = C.alias("head")

    def written(channel: str, checkpoint_id: ColumnElement[Any]) -> ColumnElement[bool]:
        write = W.alias(f"{channel.strip('_')}_write")
        return (
            sa.exists()
            .where(
                write.c.thread_id == thread,
                write.c.checkpoint_ns_hash == ROOT_NS_HASH,
                write.c.checkpoint_id == checkpoint_id,
                write.c.channel == channel,
            )
            .correlate_except(write)
        )

    # The document's updated_channels as JSON text: a trigger is an element
    # beginning "branch:to:" or the element "__start__".
    updated = head.c.checkpoint["updated_channels"].as_string()
    triggered = (
        sa.exists()
        .where(
            head.c.thread_id == thread,
            head.c.checkpoint_ns_hash == ROOT_NS_HASH,
            head.c.checkpoint_id == head_id,
            sa.or_(
                updated.contains('"branch:to:', autoescape=True),
                updated.contains('"__start__"', autoescape=True),
            ),
        )
        .correlate_except(head)
    )
    parent = C.alias("parent_of_head")
    sends = (
        sa.exists()
        .where(
            parent.c.thread_id == thread,
            parent.c.checkpoint_ns_hash == ROOT_NS_HASH,
            parent.c.checkpoint_id == head_id,
            written(TASKS, parent.c.parent_checkpoint_id),
        )
        .correlate_except(parent)
    )
    return {
        "error": written(ERROR, head_id),
        "interrupted": written(INTERRUPT, head_id),
        "pending": sa.or_(triggered, sends),
    }


def thread_status(thread: ColumnElement[Any]) -> ColumnElement[str]:
    """The status of ``thread``, one of ``THREAD_STATUSES`` (``_status_conditions``)."""
    conditions = _status_conditions(thread)
    return sa.case(
        *((conditions[s], sa.literal(s)) for s in ("error", "interrupted", "pending")),
        else_=sa.literal("idle"),
    )


def _status_is(thread: ColumnElement[Any], status: str) -> ColumnElement[bool]:
    """Whether ``thread`` is in ``status``: the CASE of ``thread_status`` as conditions,
    so a filter on ``error`` or ``interrupted`` costs one or two key lookups."""
    conditions = _status_conditions(thread)
    earlier = ("error", "interrupted", "pending")
    if status == "idle":
        return sa.and_(*(~conditions[s] for s in earlier))
    before = earlier[: earlier.index(status)]
    return sa.and_(*(~conditions[s] for s in before), conditions[status])


def _thread_filters(
    ctx: Context,
    thread: ColumnElement[Any],
    filter: Mapping[str, Any] | None,
    status: str | None,
) -> list[ColumnElement[bool]]:
    """Conditions on a thread id column: metadata of one of its checkpoints, its status."""
    out: list[ColumnElement[bool]] = []
    if filter:
        codec.check_json("filter", dict(filter))
        # One pass over the metadata (a semi-join), not a lookup per thread.
        matching = C.alias("matching")
        out.append(
            thread.in_(
                sa.select(matching.c.thread_id).where(
                    *(
                        ctx.dialect_ops.metadata_equals(matching.c.metadata, key, value)
                        for key, value in filter.items()
                    )
                )
            )
        )
    if status is not None:
        out.append(_status_is(thread, status))
    return out


def _newest_rows(
    written_after: dt.datetime | None, written_before: dt.datetime | None
) -> tuple[sa.Select[Any], ColumnElement[Any]]:
    """Each thread's newest checkpoint row (by ``updated_at``, ties broken by key):
    walked newest first along the ``updated_at`` index, a page of threads reads only
    the rows written since its oldest thread's last write."""
    row, newer = C.alias("row"), C.alias("newer")
    is_newest = ~sa.exists().where(
        newer.c.thread_id == row.c.thread_id,
        sa.or_(
            newer.c.updated_at > row.c.updated_at,
            sa.and_(
                newer.c.updated_at == row.c.updated_at,
                sa.tuple_(newer.c.checkpoint_ns_hash, newer.c.checkpoint_id)
                > sa.tuple_(row.c.checkpoint_ns_hash, row.c.checkpoint_id),
            ),
        ),
    )
    stmt = sa.select(row.c.thread_id, row.c.updated_at.label("last_write")).where(
        *_window(row.c.updated_at, written_after, written_before), is_newest
    )
    return stmt, row.c.updated_at


def threads(
    ctx: Context,
    *,
    filter: Mapping[str, Any] | None = None,
    status: str | None = None,
    written_after: dt.datetime | None = None,
    written_before: dt.datetime | None = None,
    order: str = "last_write",
    limit: int = 50,
    offset: int = 0,
    count: bool = False,
) -> Plan[ThreadPage]:
    """A page of threads with their status and sizes; one statement.

    Unfiltered, ``last_write`` (newest first) walks the ``updated_at`` index and
    ``thread_id`` the primary key: a page costs the rows of the threads it passes
    over, not the table. ``filter`` and ``status`` (and the other orders) take one
    pass over the threads, the status by key lookups on each thread's latest
    checkpoint. ``count`` adds the number of threads matching the filters (one pass).
    """
    _check_page(limit, offset)
    if order not in THREAD_ORDERS:
        raise InvalidInputError(f"order must be one of {', '.join(THREAD_ORDERS)}, got {order!r}")
    if status is not None and status not in THREAD_STATUSES:
        raise InvalidInputError(
            f"status must be one of {', '.join(THREAD_STATUSES)}, got {status!r}"
        )

    def of_thread(thread: ColumnElement[Any], *columns: Any) -> sa.ScalarSelect[Any]:
        own = C.alias("own")
        return (
            sa.select(*(c(own) for c in columns))
            .where(own.c.thread_id == thread)
            .correlate_except(own)
            .scalar_subquery()
        )

    def last_write(t: sa.FromClause) -> Any:
        return sa.func.max(t.c.updated_at)

    # Every thread id once: the primary key's leading column (an index-only pass);
    # conditions per thread, not per checkpoint.
    keys = (
        sa.select(C.c.thread_id)
        .where(*_thread_filters(ctx, C.c.thread_id, filter, None))
        .group_by(C.c.thread_id)
        .having(
            *_window(sa.func.max(C.c.updated_at), written_after, written_before),
            *_thread_filters(ctx, C.c.thread_id, None, status),
        )
    )
    if order == "last_write" and not filter and status is None:
        newest, updated_at = _newest_rows(written_after, written_before)
        # Newest first, ties by key descending: the updated_at index's own order
        # (InnoDB's secondary indexes end with the primary key).
        candidates = newest.order_by(updated_at.desc(), newest.selected_columns.thread_id.desc())
    else:
        sort = {
            # Looked up for the matching threads only (the filters come first).
            "last_write": (of_thread(C.c.thread_id, last_write).desc(), C.c.thread_id.desc()),
            "first_write": (sa.func.min(C.c.created_at).desc(), C.c.thread_id),
            "checkpoints": (sa.func.count().desc(), C.c.thread_id),
            "thread_id": (C.c.thread_id,),
        }[order]
        candidates = keys.order_by(*sort)
    page = candidates.limit(limit + 1).offset(offset).subquery("page")

    def size_of(table: sa.Table, *columns: Any) -> sa.ScalarSelect[Any]:
        return sa.select(*columns).where(table.c.thread_id == page.c.thread_id).scalar_subquery()

    last = of_thread(page.c.thread_id, last_write).label("last_write")
    first = size_of(C, sa.func.min(C.c.created_at)).label("first_write")
    checkpoints = size_of(C, sa.func.count()).label("checkpoints")
    columns: list[Any] = [
        page.c.thread_id,
        last,
        first,
        checkpoints,
        size_of(C, sa.func.count(sa.distinct(C.c.checkpoint_ns_hash))).label("namespaces"),
        thread_status(page.c.thread_id).label("status"),
        _bytes_of(B, ctx, page.c.thread_id).label("value_bytes"),
        _bytes_of(W, ctx, page.c.thread_id).label("write_bytes"),
    ]
    outer_sort = {
        "last_write": (last.desc(), page.c.thread_id.desc()),
        "first_write": (first.desc(), page.c.thread_id),
        "checkpoints": (checkpoints.desc(), page.c.thread_id),
        "thread_id": (page.c.thread_id,),
    }[order]
    source: Any = page
    if count:
        # One row even when the page is empty: the page joined to a one-row anchor.
        matching = keys.subquery("matching")
        matching_count = sa.select(sa.func.count()).select_from(matching).scalar_subquery()
        columns.append(matching_count.label("total"))
        anchor = sa.select(sa.literal(1).label("one")).subquery("anchor")
        source = anchor.outerjoin(page, sa.true())
    stmt = sa.select(*columns).select_from(source).order_by(*outer_sort)
    rows = (yield Step(stmt, fetch=True, whole_plan=True)).rows
    total = _int(rows[0].total) if count and rows else None
    found = [r for r in rows if r.thread_id is not None]
    items = [
        ThreadInfo(
            r.thread_id,
            r.status,
            r.checkpoints,
            r.namespaces,
            r.first_write,
            r.last_write,
            _int(r.value_bytes),
            _int(r.write_bytes),
        )
        for r in found[:limit]
    ]
    return ThreadPage(items, offset + limit if len(found) > limit else None, total)


def _pending_count(checkpoint_id: ColumnElement[Any], *extra: ColumnElement[bool]) -> Any:
    return (
        sa.select(sa.func.count())
        .where(
            W.c.thread_id == C.c.thread_id,
            W.c.checkpoint_ns_hash == C.c.checkpoint_ns_hash,
            W.c.checkpoint_id == checkpoint_id,
            *extra,
        )
        .scalar_subquery()
    )


def history(
    ctx: Context,
    thread_id: str,
    *,
    checkpoint_ns: str = "",
    before: str | None = None,
    limit: int = 50,
) -> Plan[list[HistoryEntry]]:
    """A thread's checkpoints in one namespace, newest first; one statement per page."""
    thread_id = _thread(thread_id)
    _check_page(limit)
    stmt = (
        sa.select(
            C.c.checkpoint_id,
            C.c.parent_checkpoint_id,
            C.c.checkpoint,
            C.c.metadata,
            C.c.created_at,
            _pending_count(C.c.checkpoint_id).label("pending"),
            _pending_count(C.c.parent_checkpoint_id, W.c.channel == TASKS).label("sends"),
        )
        .where(C.c.thread_id == thread_id, C.c.checkpoint_ns_hash == key_hash(checkpoint_ns))
        .order_by(C.c.checkpoint_id.desc())
        .limit(limit)
    )
    if before is not None:
        stmt = stmt.where(C.c.checkpoint_id < _checkpoint_id(before, "before"))
    rows = (yield Step(stmt, fetch=True, whole_plan=True)).rows
    out = []
    for r in rows:
        metadata = codec.json_object(r.metadata)
        step = metadata.get("step")
        out.append(
            HistoryEntry(
                r.checkpoint_id,
                r.parent_checkpoint_id,
                step if isinstance(step, int) else None,
                metadata.get("source"),
                r.created_at,
                next_nodes(codec.json_object(r.checkpoint)),
                r.sends,
                r.pending,
            )
        )
    return out


def _checkpoint_values(
    ctx: Context, thread_id: str, ns_hash: str, checkpoint_ids: Sequence[str]
) -> sa.Select[Any]:
    """The checkpoints' documents, metadata and (channel, version, type, blob) rows."""
    if not ctx.dialect_ops.joins_channel_versions:
        raise InvalidInputError(
            "this inspection needs JSON functions of the database "
            f"({ctx.dialect_ops.name} has none lg_sqla knows); "
            "use SQLite, PostgreSQL or MySQL/MariaDB"
        )
    page = (
        sa.select(C)
        .where(
            C.c.thread_id == thread_id,
            C.c.checkpoint_ns_hash == ns_hash,
            C.c.checkpoint_id.in_(list(checkpoint_ids)),
        )
        .cte("page")
    )
    found = versioned_blobs(ctx.dialect_ops, page)
    values = (
        sa.select(
            page.c.checkpoint_id,
            found.channel.label("channel"),
            found.version.label("version"),
            found.blob.c.type,
            found.blob.c.blob,
        )
        .select_from(found.joined)
        .subquery("vals")
    )
    return sa.select(
        page, values.c.channel, values.c.version, values.c.type, values.c.blob
    ).select_from(page.outerjoin(values, values.c.checkpoint_id == page.c.checkpoint_id))


def resolve_checkpoint(
    ctx: Context, thread_id: str, prefix: str, *, checkpoint_ns: str = ""
) -> Plan[str]:
    """The checkpoint of a thread whose id is ``prefix`` or, uniquely, begins with it
    (as ``git`` takes abbreviated hashes); one statement, an index range of two rows.
    Raises InvalidInputError naming the prefix when none or several match."""
    thread_id = _thread(thread_id)
    prefix = _checkpoint_id(prefix)
    stmt = (
        sa.select(C.c.checkpoint_id)
        .where(
            C.c.thread_id == thread_id,
            C.c.checkpoint_ns_hash == key_hash(checkpoint_ns),
            C.c.checkpoint_id >= prefix,
            sa.func.substr(C.c.checkpoint_id, 1, len(prefix)) == prefix,
        )
        .order_by(C.c.checkpoint_id)
        .limit(2)
    )
    found = [r.checkpoint_id for r in (yield Step(stmt, fetch=True, whole_plan=True)).rows]
    if found and (found[0] == prefix or len(found) == 1):
        return str(found[0])
    where = f"thread {thread_id!r} (namespace {checkpoint_ns!r})"
    if not found:
        raise NotFoundError(f"{where} has no checkpoint {prefix!r}")
    raise InvalidInputError(
        f"checkpoint id prefix {prefix!r} is ambiguous in {where}: "
        f"{found[0]!r}, {found[1]!r}, ...; give more characters"
    )


def diff(
    ctx: Context,
    thread_id: str,
    old_id: str,
    new_id: str,
    *,
    checkpoint_ns: str = "",
    width: int = 120,
) -> Plan[list[ChannelChange]]:
    """Channels whose version differs between two checkpoints, with both values; one statement."""
    thread_id = _thread(thread_id)
    old_id, new_id = (
        _checkpoint_id(old_id, "old checkpoint_id"),
        _checkpoint_id(new_id, "new checkpoint_id"),
    )
    stmt = _checkpoint_values(ctx, thread_id, key_hash(checkpoint_ns), [old_id, new_id])
    rows = (yield Step(stmt, fetch=True, whole_plan=True)).rows
    documents: dict[str, dict[str, Any]] = {}
    blobs: dict[tuple[str, str], tuple[str, bytes | None]] = {}
    for r in rows:
        documents[r.checkpoint_id] = codec.json_object(r.checkpoint)
        if r.channel is not None:
            blobs[(r.checkpoint_id, r.channel)] = (r.type, r.blob)
    for name, cid in (("old checkpoint_id", old_id), ("new checkpoint_id", new_id)):
        if cid not in documents:
            raise NotFoundError(f"{name} {cid!r} is not a checkpoint of thread {thread_id!r}")
    old_versions = documents[old_id].get("channel_versions") or {}
    new_versions = documents[new_id].get("channel_versions") or {}

    def view(cid: str, channel: str) -> ValueView | None:
        inline = codec.inline_values(documents[cid])
        if channel in inline:
            return summarize(inline[channel], width)
        found = blobs.get((cid, channel))
        if found is None or found[0] == EMPTY_TYPE:
            return None
        return summarize(codec.load_value(ctx.serde, *found), width)

    changes = []
    for channel in sorted(set(old_versions) | set(new_versions)):
        before, after = old_versions.get(channel), new_versions.get(channel)
        if before == after:
            continue
        old = view(old_id, channel) if before is not None else None
        new = view(new_id, channel) if after is not None else None
        values = [None if v is None else v.value for v in (old, new)]
        lists = [v for v in values if isinstance(v, list)]
        items = (  # a list channel (absent on one side: an empty list there)
            list_change(values[0] or [], values[1] or [])
            if lists and all(v is None or isinstance(v, list) for v in values)
            else None
        )
        changes.append(
            ChannelChange(
                channel,
                None if before is None else str(before),
                None if after is None else str(after),
                old,
                new,
                items,
            )
        )
    return changes


def show(
    ctx: Context,
    thread_id: str,
    checkpoint_id: str | None = None,
    *,
    checkpoint_ns: str = "",
    width: int = 120,
) -> Plan[CheckpointView | None]:
    """One checkpoint (the latest without ``checkpoint_id``) with its values summarized,
    its metadata and its pending writes; one statement (``get_tuple``'s)."""
    from lg_sqla.checkpoint import operations

    configurable: dict[str, Any] = {"thread_id": _thread(thread_id), "checkpoint_ns": checkpoint_ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = _checkpoint_id(checkpoint_id)
    found = yield from operations.get_tuple(ctx, {"configurable": configurable})
    if found is None:
        return None
    cfg = found.config["configurable"]
    parent = (found.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    return CheckpointView(
        cfg["thread_id"],
        cfg.get("checkpoint_ns", ""),
        cfg["checkpoint_id"],
        parent,
        dict(found.metadata),
        {k: str(v) for k, v in found.checkpoint["channel_versions"].items()},
        {k: summarize(v, width) for k, v in sorted(found.checkpoint["channel_values"].items())},
        [
            (task, channel, summarize(value, width))
            for task, channel, value in found.pending_writes or ()
        ],
    )


def writes(
    ctx: Context,
    thread_id: str,
    checkpoint_id: str,
    *,
    checkpoint_ns: str = "",
    values: bool = False,
    width: int = 120,
) -> Plan[list[WriteInfo]]:
    """The writes of one checkpoint in execution order (``writes_sort_key``); one statement.

    Values are deserialized only with ``values=True``.
    """
    columns = [
        W.c.task_id,
        W.c.task_path,
        W.c.idx,
        W.c.channel,
        W.c.type,
        ctx.dialect_ops.byte_length(W.c.blob).label("bytes"),
        W.c.created_at,
    ]
    if values:
        columns.append(W.c.blob)
    stmt = sa.select(*columns).where(
        W.c.thread_id == _thread(thread_id),
        W.c.checkpoint_ns_hash == key_hash(checkpoint_ns),
        W.c.checkpoint_id == _checkpoint_id(checkpoint_id),
    )
    rows = (yield Step(stmt, fetch=True, whole_plan=True)).rows
    ordered = sorted(rows, key=lambda r: writes_sort_key(r.task_path or "", r.task_id, r.idx))
    return [
        WriteInfo(
            r.task_id,
            r.task_path,
            r.idx,
            r.channel,
            r.type,
            _int(r.bytes),
            r.created_at,
            summarize(codec.load_value(ctx.serde, r.type, r.blob), width) if values else None,
        )
        for r in ordered
    ]


def write_stats(
    ctx: Context,
    *,
    by: str = "node",
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    thread_id: str | None = None,
    checkpoint_ns: str | None = None,
    limit: int = 100,
) -> Plan[list[WriteStats]]:
    """Write count and volume per node, channel or thread over a time window; one statement.

    Nodes come from the task path (``~__pregel_pull, <node>``); writes of Send
    tasks are grouped as ``<send>`` (their node is inside the packet).
    """
    if by not in STAT_GROUPS:
        raise InvalidInputError(f"by must be one of {', '.join(STAT_GROUPS)}, got {by!r}")
    _check_page(limit)
    # Send (push) tasks have one path per packet; grouped in SQL so thread counts stay exact.
    send = sa.func.substr(W.c.task_path, 1, len(PUSH_PREFIX)) == PUSH_PREFIX
    node_key = sa.case((send, sa.literal(SEND_TASK)), else_=W.c.task_path)
    key = {"node": node_key, "channel": W.c.channel, "thread": W.c.thread_id}[by]
    size = ctx.dialect_ops.byte_length(W.c.blob)
    stmt = sa.select(
        key.label("key"),
        sa.func.count().label("writes"),
        sa.func.coalesce(sa.func.sum(size), 0).label("bytes"),
        sa.func.count(sa.distinct(W.c.thread_id)).label("threads"),
        sa.func.min(W.c.created_at).label("first_write"),
        sa.func.max(W.c.created_at).label("last_write"),
    ).where(*_window(W.c.created_at, since, until))
    if thread_id is not None:
        stmt = stmt.where(W.c.thread_id == _thread(thread_id))
    if checkpoint_ns is not None:
        stmt = stmt.where(W.c.checkpoint_ns_hash == key_hash(checkpoint_ns))
    stmt = stmt.group_by(key)
    if by != "node":
        # Task paths are merged into nodes in Python; other groups are final in SQL.
        stmt = stmt.order_by(sa.func.count().desc(), key).limit(limit)
    rows = (yield Step(stmt, fetch=True, whole_plan=True)).rows
    merged: dict[str, list[Any]] = {}
    for r in rows:
        name = node_of(r.key) if by == "node" else r.key
        acc = merged.setdefault(name, [0, 0, 0, None, None])
        acc[0] += r.writes
        acc[1] += _int(r.bytes)
        acc[2] += r.threads  # one task path per pull node: a node's count is exact
        acc[3] = r.first_write if acc[3] is None else min(acc[3], r.first_write)
        acc[4] = r.last_write if acc[4] is None else max(acc[4], r.last_write)
    out = [WriteStats(k, *v) for k, v in merged.items()]
    out.sort(key=lambda s: (-s.writes, s.key))
    return out[:limit]


def latest(
    ctx: Context,
    channel: str,
    thread_ids: Sequence[str],
    *,
    checkpoint_ns: str = "",
) -> Plan[dict[str, LatestValue]]:
    """The value of ``channel`` in the latest checkpoint of each thread; one statement.

    Threads without checkpoints, or whose latest checkpoint has no value for
    the channel, are absent from the result.
    """
    if not isinstance(channel, str) or not channel:
        raise InvalidInputError(f"channel must be a non-empty string, got {channel!r}")
    ids = list(dict.fromkeys(_thread(t) for t in thread_ids))
    if not ids:
        return {}
    if len(ids) > MAX_PAGE:
        raise InvalidInputError(f"thread_ids: at most {MAX_PAGE} per call, got {len(ids)}")
    if not ctx.dialect_ops.joins_channel_versions:
        raise InvalidInputError(
            f"latest needs JSON functions of the database ({ctx.dialect_ops.name} has none lg_sqla "
            "knows); use SQLite, PostgreSQL or MySQL/MariaDB"
        )
    rank = (
        sa.func.row_number()
        .over(partition_by=C.c.thread_id, order_by=C.c.checkpoint_id.desc())
        .label("rank")
    )
    ranked = (
        sa.select(C.c.thread_id, C.c.checkpoint_ns_hash, C.c.checkpoint_id, C.c.checkpoint, rank)
        .where(C.c.thread_id.in_(ids), C.c.checkpoint_ns_hash == key_hash(checkpoint_ns))
        .subquery("ranked")
    )
    heads = sa.select(ranked).where(ranked.c.rank == 1).cte("heads")
    found = versioned_blobs(ctx.dialect_ops, heads)
    blob = found.blob
    stored = sa.select(
        heads.c.thread_id,
        heads.c.checkpoint_id,
        blob.c.version,
        blob.c.type,
        blob.c.blob,
        sa.null().label("inline"),
    ).select_from(found.joined)
    stored = stored.where(
        found.channel == ctx.dialect_ops.as_key(sa.literal(channel, B.c.channel.type))
    )
    # A value kept in the document itself (codec.INLINE_KEY), e.g. None.
    inline_member = ctx.dialect_ops.json_member(heads.c.checkpoint, codec.INLINE_KEY, channel)
    inline = sa.select(
        heads.c.thread_id,
        heads.c.checkpoint_id,
        ctx.dialect_ops.channel_version(heads.c.checkpoint, channel),
        sa.null(),
        sa.null(),
        inline_member,
    ).where(inline_member.is_not(None))
    rows = (yield Step(sa.union_all(stored, inline), fetch=True, whole_plan=True)).rows
    out: dict[str, LatestValue] = {}
    for r in sorted(rows, key=lambda r: r.inline is not None):  # inline read last, wins
        if r.inline is not None:
            value = codec.inline_value_json(r.inline)
        elif r.type == EMPTY_TYPE:
            continue
        else:
            value = codec.load_value(ctx.serde, r.type, r.blob)
        out[r.thread_id] = LatestValue(r.thread_id, r.checkpoint_id, r.version, value)
    return out


def storage(
    ctx: Context,
    *,
    thread_id: str | None = None,
    thread_ids: Sequence[str] | None = None,
    tables: Collection[str] | None = None,
) -> Plan[StorageReport]:
    """Rows and payload bytes of each table (all threads, one, or a few); one statement.

    Every lg_sqla table: the checkpoint tables, the store's and the node cache's (those
    hold no threads: left out when threads are named). ``tables`` limits the report to
    these names (a downgrade counts only the tables it drops)."""
    dialect_ops = ctx.dialect_ops
    ids = None if thread_ids is None else [_thread(t) for t in thread_ids]
    if ids is not None and len(ids) > MAX_PAGE:
        raise InvalidInputError(f"thread_ids: at most {MAX_PAGE} per call, got {len(ids)}")
    per_thread = thread_id is not None or ids is not None

    def usage(table: sa.Table, size: ColumnElement[Any]) -> sa.Select[Any]:
        stmt = sa.select(
            sa.literal(table.name).label("name"),
            sa.func.count().label("rows"),
            sa.func.coalesce(sa.func.sum(size), 0).label("bytes"),
        ).select_from(table)  # a size of 0 names no column: the FROM must be explicit
        if thread_id is not None:
            stmt = stmt.where(table.c.thread_id == _thread(thread_id))
        if ids is not None:
            stmt = stmt.where(table.c.thread_id.in_(ids))
        return stmt

    selects = [
        usage(table, size)
        for table, size in _payload_sizes(dialect_ops).items()
        if (tables is None or table.name in tables) and (not per_thread or "thread_id" in table.c)
    ]
    if not selects:
        return StorageReport()
    rows = (yield Step(sa.union_all(*selects), fetch=True, whole_plan=True)).rows
    by_name = {r.name: TableUsage(r.rows, _int(r.bytes)) for r in rows}
    # In the models' order, whatever order the union's rows came in.
    return StorageReport({name: by_name[name] for name in metadata.tables if name in by_name})


def _payload_sizes(dialect_ops: DialectOps) -> dict[sa.Table, ColumnElement[Any]]:
    """Each table's payload size expression (its documents, values, vectors); a table
    added to the models without one here is still counted, as 0 bytes."""
    sizes: dict[sa.Table, ColumnElement[Any]] = {
        C: dialect_ops.json_byte_length(C.c.checkpoint)
        + dialect_ops.json_byte_length(C.c.metadata),
        W: dialect_ops.byte_length(W.c.blob),
        B: sa.func.coalesce(dialect_ops.byte_length(B.c.blob), 0),
        models.store_items: dialect_ops.json_byte_length(models.store_items.c.value),
        models.store_vectors: store_sql_for(dialect_ops).vector_byte_length(
            models.store_vectors.c.embedding
        ),
        models.cache_entries: dialect_ops.byte_length(models.cache_entries.c.value),
    }
    for table in metadata.tables.values():
        sizes.setdefault(table, sa.literal(0, sa.BigInteger))
    return sizes


# --- front ends ----------------------------------------------------------------------
# The same calls on both savers; each builds its plan with the plan function above,
# whose docstring describes it. Only ``await`` differs between the two classes.


class Inspector:
    """The inspection queries on a :class:`~lg_sqla.SQLAlchemySaver` (sync).

    Example:
        >>> inspector = Inspector(saver)
        >>> page = inspector.threads(filter={"user": "ada"}, limit=20)
        >>> [t.thread_id for t in page.threads], page.next_offset
    """

    def __init__(self, saver: SQLAlchemySaver) -> None:
        self.saver = saver

    def threads(
        self,
        *,
        filter: Mapping[str, Any] | None = None,
        status: str | None = None,
        written_after: dt.datetime | None = None,
        written_before: dt.datetime | None = None,
        order: str = "last_write",
        limit: int = 50,
        offset: int = 0,
        count: bool = False,
    ) -> ThreadPage:
        """A page of threads: ``order`` is one of ``THREAD_ORDERS``; ``filter`` keeps threads
        with a checkpoint whose metadata matches, ``status`` (one of ``THREAD_STATUSES``)
        threads in that status; the times bound the last write; ``count`` also counts
        all matching threads (``ThreadPage.total``)."""
        return self.saver.run(
            threads(
                self.saver.context,
                filter=filter,
                status=status,
                written_after=written_after,
                written_before=written_before,
                order=order,
                limit=limit,
                offset=offset,
                count=count,
            )
        )

    def resolve_checkpoint(self, thread_id: str, prefix: str, *, checkpoint_ns: str = "") -> str:
        """The full id of the thread's checkpoint whose id is or uniquely begins with
        ``prefix`` (NotFoundError if none, InvalidInputError if several)."""
        return self.saver.run(
            resolve_checkpoint(self.saver.context, thread_id, prefix, checkpoint_ns=checkpoint_ns)
        )

    def history(
        self, thread_id: str, *, checkpoint_ns: str = "", before: str | None = None, limit: int = 50
    ) -> list[HistoryEntry]:
        """A thread's checkpoints in one namespace, newest first (``before``: paging)."""
        return self.saver.run(
            history(
                self.saver.context,
                thread_id,
                checkpoint_ns=checkpoint_ns,
                before=before,
                limit=limit,
            )
        )

    def show(
        self,
        thread_id: str,
        checkpoint_id: str | None = None,
        *,
        checkpoint_ns: str = "",
        width: int = 120,
    ) -> CheckpointView | None:
        """One checkpoint (default: the latest) with values summarized to ``width`` chars."""
        return self.saver.run(
            show(
                self.saver.context,
                thread_id,
                checkpoint_id,
                checkpoint_ns=checkpoint_ns,
                width=width,
            )
        )

    def diff(
        self,
        thread_id: str,
        old_id: str,
        new_id: str,
        *,
        checkpoint_ns: str = "",
        width: int = 120,
    ) -> list[ChannelChange]:
        """The channels whose version differs between two checkpoints, with both values."""
        return self.saver.run(
            diff(
                self.saver.context,
                thread_id,
                old_id,
                new_id,
                checkpoint_ns=checkpoint_ns,
                width=width,
            )
        )

    def writes(
        self,
        thread_id: str,
        checkpoint_id: str,
        *,
        checkpoint_ns: str = "",
        values: bool = False,
        width: int = 120,
    ) -> list[WriteInfo]:
        """A checkpoint's writes in execution order; values only with ``values=True``."""
        return self.saver.run(
            writes(
                self.saver.context,
                thread_id,
                checkpoint_id,
                checkpoint_ns=checkpoint_ns,
                values=values,
                width=width,
            )
        )

    def write_stats(
        self,
        *,
        by: str = "node",
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        limit: int = 100,
    ) -> list[WriteStats]:
        """Write count and bytes per node, channel or thread (``by``) in a time window."""
        return self.saver.run(
            write_stats(
                self.saver.context,
                by=by,
                since=since,
                until=until,
                thread_id=thread_id,
                checkpoint_ns=checkpoint_ns,
                limit=limit,
            )
        )

    def latest(
        self, channel: str, thread_ids: Sequence[str], *, checkpoint_ns: str = ""
    ) -> dict[str, LatestValue]:
        """The value of ``channel`` in each thread's latest checkpoint."""
        return self.saver.run(
            latest(self.saver.context, channel, thread_ids, checkpoint_ns=checkpoint_ns)
        )

    def storage(
        self, *, thread_id: str | None = None, thread_ids: Sequence[str] | None = None
    ) -> StorageReport:
        """Rows and payload bytes per table: all threads, one, or a few."""
        return self.saver.run(
            storage(self.saver.context, thread_id=thread_id, thread_ids=thread_ids)
        )


class AsyncInspector:
    """The same queries on an :class:`~lg_sqla.AsyncSQLAlchemySaver`."""

    def __init__(self, saver: AsyncSQLAlchemySaver) -> None:
        self.saver = saver

    async def threads(
        self,
        *,
        filter: Mapping[str, Any] | None = None,
        status: str | None = None,
        written_after: dt.datetime | None = None,
        written_before: dt.datetime | None = None,
        order: str = "last_write",
        limit: int = 50,
        offset: int = 0,
        count: bool = False,
    ) -> ThreadPage:
        return await self.saver.arun(
            threads(
                self.saver.context,
                filter=filter,
                status=status,
                written_after=written_after,
                written_before=written_before,
                order=order,
                limit=limit,
                offset=offset,
                count=count,
            )
        )

    async def resolve_checkpoint(
        self, thread_id: str, prefix: str, *, checkpoint_ns: str = ""
    ) -> str:
        return await self.saver.arun(
            resolve_checkpoint(self.saver.context, thread_id, prefix, checkpoint_ns=checkpoint_ns)
        )

    async def history(
        self, thread_id: str, *, checkpoint_ns: str = "", before: str | None = None, limit: int = 50
    ) -> list[HistoryEntry]:
        return await self.saver.arun(
            history(
                self.saver.context,
                thread_id,
                checkpoint_ns=checkpoint_ns,
                before=before,
                limit=limit,
            )
        )

    async def show(
        self,
        thread_id: str,
        checkpoint_id: str | None = None,
        *,
        checkpoint_ns: str = "",
        width: int = 120,
    ) -> CheckpointView | None:
        return await self.saver.arun(
            show(
                self.saver.context,
                thread_id,
                checkpoint_id,
                checkpoint_ns=checkpoint_ns,
                width=width,
            )
        )

    async def diff(
        self,
        thread_id: str,
        old_id: str,
        new_id: str,
        *,
        checkpoint_ns: str = "",
        width: int = 120,
    ) -> list[ChannelChange]:
        return await self.saver.arun(
            diff(
                self.saver.context,
                thread_id,
                old_id,
                new_id,
                checkpoint_ns=checkpoint_ns,
                width=width,
            )
        )

    async def writes(
        self,
        thread_id: str,
        checkpoint_id: str,
        *,
        checkpoint_ns: str = "",
        values: bool = False,
        width: int = 120,
    ) -> list[WriteInfo]:
        return await self.saver.arun(
            writes(
                self.saver.context,
                thread_id,
                checkpoint_id,
                checkpoint_ns=checkpoint_ns,
                values=values,
                width=width,
            )
        )

    async def write_stats(
        self,
        *,
        by: str = "node",
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        limit: int = 100,
    ) -> list[WriteStats]:
        return await self.saver.arun(
            write_stats(
                self.saver.context,
                by=by,
                since=since,
                until=until,
                thread_id=thread_id,
                checkpoint_ns=checkpoint_ns,
                limit=limit,
            )
        )

    async def latest(
        self, channel: str, thread_ids: Sequence[str], *, checkpoint_ns: str = ""
    ) -> dict[str, LatestValue]:
        return await self.saver.arun(
            latest(self.saver.context, channel, thread_ids, checkpoint_ns=checkpoint_ns)
        )

    async def storage(
        self, *, thread_id: str | None = None, thread_ids: Sequence[str] | None = None
    ) -> StorageReport:
        return await self.saver.arun(
            storage(self.saver.context, thread_id=thread_id, thread_ids=thread_ids)
        )
