"""Threads in SQL: their status (from the latest root checkpoint's keys), the
filters, orders and page statement of ``threads`` (``thread_queries``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT, TASKS
from sqlalchemy.sql.elements import ColumnElement

from lg_sqla.checkpoint.checks import check_json
from lg_sqla.checkpoint.context import Context
from lg_sqla.inspection.checks import ROOT_NS_HASH, _window
from lg_sqla.inspection.thread_search import _leaves, _Sort
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C


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
    return {
        "error": _written(thread, ERROR, head_id),
        "interrupted": _written(thread, INTERRUPT, head_id),
        "pending": sa.or_(_triggered(thread, head_id), _sends_queued(thread, head_id)),
    }


def _exists_on(
    rows: sa.FromClause,
    thread: ColumnElement[Any],
    checkpoint_id: ColumnElement[Any],
    *conditions: ColumnElement[bool],
) -> ColumnElement[bool]:
    """Whether ``rows`` (an alias of a checkpoint table) has a row of ``thread``'s root
    checkpoint ``checkpoint_id`` meeting ``conditions``: one key lookup."""
    return (
        sa.exists()
        .where(
            rows.c.thread_id == thread,
            rows.c.checkpoint_ns_hash == ROOT_NS_HASH,
            rows.c.checkpoint_id == checkpoint_id,
            *conditions,
        )
        .correlate_except(rows)
    )


def _written(
    thread: ColumnElement[Any], channel: str, checkpoint_id: ColumnElement[Any]
) -> ColumnElement[bool]:
    """Whether a task wrote ``channel`` on the root checkpoint ``checkpoint_id``."""
    write = W.alias(f"{channel.strip('_')}_write")
    return _exists_on(write, thread, checkpoint_id, write.c.channel == channel)


def _triggered(thread: ColumnElement[Any], head_id: sa.ScalarSelect[Any]) -> ColumnElement[bool]:
    """Whether the step that made the head checkpoint wrote a trigger channel."""
    head = C.alias("head")
    # The document's updated_channels as JSON text: a trigger is an element
    # beginning "branch:to:" or the element "__start__".
    updated = head.c.checkpoint["updated_channels"].as_string()
    return _exists_on(
        head,
        thread,
        head_id,
        sa.or_(
            updated.contains('"branch:to:', autoescape=True),
            updated.contains('"__start__"', autoescape=True),
        ),
    )


def _sends_queued(thread: ColumnElement[Any], head_id: sa.ScalarSelect[Any]) -> ColumnElement[bool]:
    """Whether ``Send`` packets wait for the head's step: ``__pregel_tasks`` writes
    on its parent."""
    parent = C.alias("parent_of_head")
    return _exists_on(
        parent, thread, head_id, _written(thread, TASKS, parent.c.parent_checkpoint_id)
    )


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
    """Conditions on a thread id column: metadata of one of its checkpoints (nested
    mappings match by containment, as Platform's), its status."""
    out: list[ColumnElement[bool]] = []
    if filter:
        check_json("filter", dict(filter))
        # One pass over the metadata (a semi-join), not a lookup per thread.
        matching = C.alias("matching")
        out.append(
            thread.in_(
                sa.select(matching.c.thread_id).where(
                    *(
                        ctx.dialect_ops.metadata_path_equals(
                            matching.c.metadata, tuple(map(str, keys)), value
                        )
                        for keys, value in _leaves((), filter)
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


def _of_thread(thread: ColumnElement[Any], *columns: Any) -> sa.ScalarSelect[Any]:
    """``columns`` (functions of a checkpoints alias) over the rows of ``thread``."""
    own = C.alias("own")
    return (
        sa.select(*(c(own) for c in columns))
        .where(own.c.thread_id == thread)
        .correlate_except(own)
        .scalar_subquery()
    )


def _last_write(t: sa.FromClause) -> Any:
    return sa.func.max(t.c.updated_at)


def _of_head(thread: ColumnElement[Any], column: str) -> sa.ScalarSelect[Any]:
    """``column`` of ``thread``'s latest root checkpoint: one index probe."""
    head = C.alias(f"head_{column}")
    return (
        sa.select(head.c[column])
        .where(head.c.thread_id == thread, head.c.checkpoint_ns_hash == ROOT_NS_HASH)
        .order_by(head.c.checkpoint_id.desc())
        .limit(1)
        .correlate_except(head)
        .scalar_subquery()
    )


@dataclass(frozen=True)
class Windows:
    """Time ranges: on the last write (``written_*``) and the first (``created_*``)."""

    written_after: dt.datetime | None = None
    written_before: dt.datetime | None = None
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None


def _matching_threads(
    ctx: Context, filter: Mapping[str, Any] | None, status: str | None, windows: Windows
) -> sa.Select[Any]:
    """Every thread id once: the primary key's leading column (an index-only pass);
    conditions per thread, not per checkpoint. Distributed (Citus, which refuses a
    subquery in HAVING that names the grouped column): the status is a WHERE condition,
    the same answer from a lookup per checkpoint row, on each shard."""
    per_thread = _thread_filters(ctx, C.c.thread_id, None, status)
    distributed = ctx.dialect_ops.distributed
    return (
        sa.select(C.c.thread_id)
        .where(
            *_thread_filters(ctx, C.c.thread_id, filter, None), *(per_thread if distributed else ())
        )
        .group_by(C.c.thread_id)
        .having(
            *_window(sa.func.max(C.c.updated_at), windows.written_after, windows.written_before),
            *_window(sa.func.min(C.c.created_at), windows.created_after, windows.created_before),
            *(() if distributed else per_thread),
        )
    )


def _sorted(sort: _Sort, key: Any, thread: ColumnElement[Any]) -> tuple[Any, ...]:
    """ORDER BY ``key`` in ``sort``'s direction; ties by thread id ascending, except
    newest write first, tied descending (the ``updated_at`` index's own order: InnoDB's
    secondary indexes end with the primary key)."""
    if key is None:
        return (thread.desc() if sort.descending else thread,)
    tie_descending = sort.descending and sort.order == "last_write"
    return (key.desc() if sort.descending else key, thread.desc() if tie_descending else thread)


def _ordered_threads(
    keys: sa.Select[Any], sort: _Sort, unfiltered: bool, windows: Windows
) -> sa.Select[Any]:
    """The thread ids in page order: unfiltered and newest write first, along the
    ``updated_at`` index; else ``keys`` sorted."""
    if sort.order == "last_write" and sort.descending and unfiltered:
        newest, updated_at = _newest_rows(windows.written_after, windows.written_before)
        return newest.order_by(*_sorted(sort, updated_at, newest.selected_columns.thread_id))
    key = {
        # Looked up for the matching threads only (the filters come first).
        "last_write": _of_thread(C.c.thread_id, _last_write),
        "first_write": sa.func.min(C.c.created_at),
        "checkpoints": sa.func.count(),
        "state_update": _of_head(C.c.thread_id, "created_at"),
        "thread_id": None,
    }[sort.order]
    return keys.order_by(*_sorted(sort, key, C.c.thread_id))


def _page_select(
    ctx: Context,
    page: sa.Subquery,
    keys: sa.Select[Any],
    sort: _Sort,
    count: bool,
    metadata: bool,
) -> sa.Select[Any]:
    """The page's threads with their sizes and status (and, with ``count``, how many
    threads ``keys`` matches; with ``metadata``, their latest root checkpoint's), in
    ``sort``'s order."""

    def size_of(table: sa.Table, *columns: Any) -> sa.ScalarSelect[Any]:
        return sa.select(*columns).where(table.c.thread_id == page.c.thread_id).scalar_subquery()

    last = _of_thread(page.c.thread_id, _last_write).label("last_write")
    first = size_of(C, sa.func.min(C.c.created_at)).label("first_write")
    checkpoints = size_of(C, sa.func.count()).label("checkpoints")
    state = _of_head(page.c.thread_id, "created_at").label("state_updated")
    columns: list[Any] = [
        page.c.thread_id,
        last,
        first,
        checkpoints,
        state,
        size_of(C, sa.func.count(sa.distinct(C.c.checkpoint_ns_hash))).label("namespaces"),
        thread_status(page.c.thread_id).label("status"),
        _bytes_of(B, ctx, page.c.thread_id).label("value_bytes"),
        _bytes_of(W, ctx, page.c.thread_id).label("write_bytes"),
    ]
    if metadata:
        columns.append(_of_head(page.c.thread_id, "metadata").label("head_metadata"))
    key = {
        "last_write": last,
        "first_write": first,
        "checkpoints": checkpoints,
        "state_update": state,
        "thread_id": None,
    }[sort.order]
    source: Any = page
    if count:
        # One row even when the page is empty: the page joined to a one-row anchor.
        matching = keys.subquery("matching")
        matching_count = sa.select(sa.func.count()).select_from(matching).scalar_subquery()
        columns.append(matching_count.label("total"))
        anchor = sa.select(sa.literal(1).label("one")).subquery("anchor")
        source = anchor.outerjoin(page, sa.true())
    return sa.select(*columns).select_from(source).order_by(*_sorted(sort, key, page.c.thread_id))
