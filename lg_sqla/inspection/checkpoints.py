"""One thread's checkpoints: its history, one checkpoint, two compared, a channel's latest value."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from langgraph.checkpoint.serde.types import TASKS
from sqlalchemy.sql.elements import ColumnElement

from lg_sqla.checkpoint import codec, json_values
from lg_sqla.checkpoint.context import Context
from lg_sqla.checkpoint.statements import versioned_blobs
from lg_sqla.errors import InvalidInputError, NotFoundError
from lg_sqla.inspection.checks import EMPTY_TYPE, MAX_PAGE, _check_page, _checkpoint_id, _thread
from lg_sqla.inspection.results import (
    ChannelChange,
    CheckpointView,
    HistoryEntry,
    LatestValue,
    ValueView,
)
from lg_sqla.inspection.summaries import list_change, next_nodes, summarize
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash


def _pending_count(
    thread_id: str, checkpoint_id: ColumnElement[Any], *extra: ColumnElement[bool]
) -> Any:
    # The thread as a bound value, as the page's own: a distributed planner (Citus)
    # routes the whole statement to the thread's shard.
    return (
        sa.select(sa.func.count())
        .where(
            W.c.thread_id == thread_id,
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
            _pending_count(thread_id, C.c.checkpoint_id).label("pending"),
            _pending_count(thread_id, C.c.parent_checkpoint_id, W.c.channel == TASKS).label(
                "sends"
            ),
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
        metadata = json_values.json_object(r.metadata)
        step = metadata.get("step")
        out.append(
            HistoryEntry(
                r.checkpoint_id,
                r.parent_checkpoint_id,
                step if isinstance(step, int) else None,
                metadata.get("source"),
                r.created_at,
                next_nodes(json_values.json_object(r.checkpoint)),
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
        documents[r.checkpoint_id] = json_values.json_object(r.checkpoint)
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
        changes.append(_channel_change(channel, before, after, old, new))
    return changes


def _channel_change(
    channel: str, before: Any, after: Any, old: ValueView | None, new: ValueView | None
) -> ChannelChange:
    """A changed channel; for a list channel, also what changed in the list."""
    values = [None if v is None else v.value for v in (old, new)]
    lists = [v for v in values if isinstance(v, list)]
    items = (  # a list channel (absent on one side: an empty list there)
        list_change(values[0] or [], values[1] or [])
        if lists and all(v is None or isinstance(v, list) for v in values)
        else None
    )
    return ChannelChange(
        channel,
        None if before is None else str(before),
        None if after is None else str(after),
        old,
        new,
        items,
    )


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
    stmt = _latest_select(ctx, channel, ids, checkpoint_ns)
    rows = (yield Step(stmt, fetch=True, whole_plan=True)).rows
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


def _latest_select(
    ctx: Context, channel: str, ids: list[str], checkpoint_ns: str
) -> sa.CompoundSelect[Any]:
    """``channel``'s blob row, or its value kept inline, in each thread's latest checkpoint."""
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
    return sa.union_all(stored, inline)
