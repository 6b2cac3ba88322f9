"""Pending writes: one checkpoint's in execution order, and volume statistics over time."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from langgraph.checkpoint.base import writes_sort_key

from lg_sqla.checkpoint import codec
from lg_sqla.checkpoint.context import Context
from lg_sqla.errors import InvalidInputError
from lg_sqla.inspection.checks import (
    PUSH_PREFIX,
    SEND_TASK,
    STAT_GROUPS,
    _check_page,
    _checkpoint_id,
    _int,
    _thread,
    _window,
)
from lg_sqla.inspection.results import WriteInfo, WriteStats
from lg_sqla.inspection.summaries import node_of, summarize
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash


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
