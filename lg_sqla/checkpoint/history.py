"""Walking a checkpoint's parent chain in SQL: DeltaChannel history and its seeds.

``get_delta_channel_history`` in the base class does one ``get_tuple`` per
ancestor. Here it is ONE statement whatever the chain length (``history_statement``):
a recursive CTE walks ``parent_checkpoint_id`` from the target's parent until every
requested channel has met a stored value (a non-``"empty"`` blob at the ancestor's
version, or a value inline in the ancestor's document; see ``seed_walk_cte``),
carrying per ancestor the channels found nearer than it; the same statement then
reads, by key from each ancestor, the requested channels' writes (up to each
channel's seed), each channel's seed blob, and the inline values of the ancestors
where a seed is.

Past ``_MASK_CHANNELS`` channels at once the walk cannot track them in one bit mask:
two statements then (``walk_chain``, then the writes and seeds up to the deepest).

The walk follows parent links, not id ranges: forks share ancestors, and
uuid6 ids are only monotonic per process.
"""

from __future__ import annotations

import functools
import weakref
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from langgraph.checkpoint.base import DeltaChannelHistory, PendingWrite, writes_sort_key
from sqlalchemy.sql.selectable import CTE

from lg_sqla.checkpoint import codec
from lg_sqla.checkpoint.codec import EMPTY_TYPE, INLINE_KEY
from lg_sqla.checkpoint.context import Context
from lg_sqla.checkpoint.statements import WRITE_VALUE_COLUMNS
from lg_sqla.dialects import DialectOps, ordered_join
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash


@dataclass
class Chain:
    """The ancestors of a checkpoint, nearest first, and where each channel's seed is."""

    ids: list[str] = field(default_factory=list)  # ids[d] is the ancestor at depth d
    seed_depth: dict[str, int] = field(default_factory=dict)
    seed_version: dict[str, str] = field(default_factory=dict)  # a blob seed's version
    seed_inline: dict[str, Any] = field(default_factory=dict)  # an inline seed's value

    def depth_needed(self, channels: Sequence[str]) -> int:
        """Deepest ancestor any channel needs: its seed, or the root if it has none."""
        if not self.ids:
            return -1
        if any(ch not in self.seed_depth for ch in channels):
            return len(self.ids) - 1
        return max((self.seed_depth[ch] for ch in channels), default=-1)


def _start_id(thread_id: Any, nsh: Any, checkpoint_id: Any | None) -> Any:
    """Scalar subquery: the parent id of the target (the latest when no id is given)."""
    target = sa.select(C.c.parent_checkpoint_id).where(
        C.c.thread_id == thread_id, C.c.checkpoint_ns_hash == nsh
    )
    if checkpoint_id is not None:
        target = target.where(C.c.checkpoint_id == checkpoint_id)
    else:
        target = target.order_by(C.c.checkpoint_id.desc()).limit(1)
    return target.scalar_subquery()


def chain_cte(
    dialect_ops: DialectOps,
    thread_id: Any,
    nsh: Any,
    start: Any,
    max_depth: Any | None = None,
    *,
    name: str = "chain",
) -> CTE:
    """Recursive CTE of (checkpoint_id, parent_checkpoint_id, depth) from ``start`` upwards."""
    anchor = sa.select(
        C.c.checkpoint_id,
        C.c.parent_checkpoint_id,
        sa.cast(sa.literal_column("0"), sa.Integer).label("depth"),
    ).where(C.c.thread_id == thread_id, C.c.checkpoint_ns_hash == nsh, C.c.checkpoint_id == start)
    chain = anchor.cte(name, recursive=True)
    parent, parents = _parents(dialect_ops, chain, thread_id, nsh)
    step = sa.select(
        parent.c.checkpoint_id, parent.c.parent_checkpoint_id, chain.c.depth + 1
    ).select_from(parents)
    if max_depth is not None:
        step = step.where(chain.c.depth < max_depth)
    return chain.union_all(step)


def _parents(dialect_ops: DialectOps, chain: CTE, thread_id: Any, nsh: Any) -> tuple[Any, Any]:
    """The recursive step's FROM: each chain row joined to its parent's row, looked up by
    key (PostgreSQL otherwise read the thread's checkpoints at every level)."""
    parent, on = dialect_ops.keyed_lookup(
        C,
        sa.and_(
            C.c.thread_id == thread_id,
            C.c.checkpoint_ns_hash == nsh,
            C.c.checkpoint_id == chain.c.parent_checkpoint_id,
        ),
    )
    return parent, chain.join(parent, on)


# Channels a seed walk tracks in one bit mask each (a BIGINT); a request for more
# walks to the root, as every walk did before.
_MASK_CHANNELS = 62


def _stored_mask(
    dialect_ops: DialectOps, thread_id: Any, nsh: Any, document: Any, channels: Sequence[str]
) -> Any:
    """Bit i set when ``channels[i]`` has a stored value (a non-"empty" blob at the
    version ``document`` (a checkpoint document column) names, or a value inline in
    ``document``)."""
    mask: Any = sa.cast(sa.literal_column("0"), sa.BigInteger)
    for bit, channel in enumerate(channels):
        stored = sa.or_(
            dialect_ops.json_member(document, INLINE_KEY, channel).is_not(None),
            sa.exists().where(
                B.c.thread_id == thread_id,
                B.c.checkpoint_ns_hash == nsh,
                B.c.channel == channel,
                B.c.version == dialect_ops.channel_version(document, channel),
                B.c.type != EMPTY_TYPE,
            ),
        )
        mask = mask + sa.case((stored, sa.literal_column(str(1 << bit))), else_=0)
    return mask


def seed_walk_cte(
    dialect_ops: DialectOps, thread_id: Any, nsh: Any, start: Any, channels: Sequence[str]
) -> CTE:
    """:func:`chain_cte` that stops at the first ancestor by which every channel has met
    a stored value (its seed), instead of walking to the root.

    A DeltaChannel snapshots its value every few steps, so its seed is near while the
    thread may be thousands of checkpoints long: walking all of them made a history
    cost 350 ms at 800 checkpoints on PostgreSQL (LangGraph's own walk does two
    ``get_tuple``). Each row carries the channels found at or below it as a bit mask
    (OR of the ancestors' stored channels); a row with every bit set has no parent row.
    """
    if len(channels) > _MASK_CHANNELS:
        return chain_cte(dialect_ops, thread_id, nsh, start)
    everything = (1 << len(channels)) - 1
    anchor = sa.select(
        C.c.checkpoint_id,
        C.c.parent_checkpoint_id,
        sa.cast(sa.literal_column("0"), sa.Integer).label("depth"),
        _stored_mask(dialect_ops, thread_id, nsh, C.c.checkpoint, channels).label("found"),
        # The channels found on the ancestors nearer than this one: a channel's seed is
        # the ancestor whose `found` has its bit and whose `nearer` has not.
        sa.cast(sa.literal_column("0"), sa.BigInteger).label("nearer"),
    ).where(C.c.thread_id == thread_id, C.c.checkpoint_ns_hash == nsh, C.c.checkpoint_id == start)
    chain = anchor.cte("chain", recursive=True)
    parent, parents = _parents(dialect_ops, chain, thread_id, nsh)
    step = (
        sa.select(
            parent.c.checkpoint_id,
            parent.c.parent_checkpoint_id,
            chain.c.depth + 1,
            chain.c.found.op("|")(
                _stored_mask(dialect_ops, thread_id, nsh, parent.c.checkpoint, channels)
            ),
            chain.c.found,
        )
        .select_from(parents)
        .where(chain.c.found != sa.literal_column(str(everything)))
    )
    return chain.union_all(step)


def _stored_value(
    dialect_ops: DialectOps, thread_id: Any, nsh: Any, channel: str, checkpoint: Any
) -> tuple[Any, Any]:
    """The blob row of ``channel`` at the version ``checkpoint``'s document names (none for
    an empty version), joined by key from the checkpoint row."""
    return dialect_ops.keyed_lookup(
        B,
        sa.and_(
            B.c.thread_id == thread_id,
            B.c.checkpoint_ns_hash == nsh,
            B.c.channel == channel,
            B.c.version == dialect_ops.channel_version(checkpoint.c.checkpoint, channel),
            B.c.type != EMPTY_TYPE,
        ),
    )


def _select_chain(
    dialect_ops: DialectOps, thread_id: Any, nsh: Any, start: Any, channels: Sequence[str]
) -> Any:
    """Stage 1: every ancestor up to the seeds (channel NULL), with the values inline in
    its document (JSON text, or NULL), plus one row per (ancestor, stored blob)."""
    chain = seed_walk_cte(dialect_ops, thread_id, nsh, start, channels)

    def ancestor_row() -> tuple[Any, Any]:
        """Each chain row's checkpoint row, by key (the FROM item, its join condition)."""
        return dialect_ops.keyed_lookup(
            C,
            sa.and_(
                C.c.thread_id == thread_id,
                C.c.checkpoint_ns_hash == nsh,
                C.c.checkpoint_id == chain.c.checkpoint_id,
            ),
        )

    document, document_on = ancestor_row()
    ancestors = sa.select(
        chain.c.depth,
        chain.c.checkpoint_id,
        sa.null().label("channel"),
        sa.null().label("version"),
        dialect_ops.json_member(document.c.checkpoint, INLINE_KEY).label("inline"),
    ).select_from(ordered_join(chain, document, document_on))
    parts: list[Any] = [ancestors]
    for channel in channels:
        # From each ancestor of the walk to its row, then to the channel's blob: never
        # the other way round (PostgreSQL would read every checkpoint of the thread).
        checkpoint, checkpoint_on = ancestor_row()
        blob, blob_on = _stored_value(dialect_ops, thread_id, nsh, channel, checkpoint)
        parts.append(
            sa.select(
                chain.c.depth, chain.c.checkpoint_id, blob.c.channel, blob.c.version, sa.null()
            ).select_from(
                ordered_join(ordered_join(chain, checkpoint, checkpoint_on), blob, blob_on)
            )
        )
    return sa.union_all(*parts)


# The two statements of a history are built once per shape (the channels asked for,
# the channels with a seed, by id or latest) and reused with new values: building
# them took 80% of a call's time (5 ms, where the SQL runs in under 1 ms).
def _keys(thread_id: str, nsh: str, checkpoint_id: str | None) -> dict[str, Any]:
    keys = {"thread_id": thread_id, "nsh": nsh}
    if checkpoint_id is not None:
        keys["checkpoint_id"] = checkpoint_id
    return keys


def _bound_start(by_id: bool) -> tuple[Any, Any, Any]:
    """Bound ``thread_id`` and ``nsh``, and the walk's start (by ``checkpoint_id``, or the
    latest checkpoint's parent)."""
    thread_id: sa.BindParameter[str] = sa.bindparam("thread_id")
    nsh: sa.BindParameter[str] = sa.bindparam("nsh")
    checkpoint_id = sa.bindparam("checkpoint_id", type_=C.c.checkpoint_id.type) if by_id else None
    return thread_id, nsh, _start_id(thread_id, nsh, checkpoint_id)


@functools.lru_cache(maxsize=128)
def _walk_statement(dialect_ops: DialectOps, channels: tuple[str, ...], by_id: bool) -> Any:
    """Stage 1 (``_select_chain``) with bound ``thread_id``, ``nsh``, ``checkpoint_id``."""
    thread_id, nsh, start = _bound_start(by_id)
    return _select_chain(dialect_ops, thread_id, nsh, start, channels)


@functools.lru_cache(maxsize=128)
def _history_statement(
    dialect_ops: DialectOps, channels: tuple[str, ...], seeded: tuple[str, ...], by_id: bool
) -> Any:
    """Stage 2: the channels' writes on the ancestors down to ``max_depth``, and the seed
    blobs of the ``seeded`` channels (versions bound as ``seed_0``, ``seed_1``...)."""
    thread_id, nsh, start = _bound_start(by_id)
    ancestors = chain_cte(
        dialect_ops,
        thread_id,
        nsh,
        start,
        sa.bindparam("max_depth", type_=sa.Integer),
        name="ancestors",
    )
    # Each ancestor's writes by key, never the thread's writes matched to ancestors.
    write, write_on = dialect_ops.keyed_lookup(
        W,
        sa.and_(
            W.c.thread_id == thread_id,
            W.c.checkpoint_ns_hash == nsh,
            W.c.checkpoint_id == ancestors.c.checkpoint_id,
            W.c.channel.in_(list(channels)),
        ),
    )
    writes = sa.select(
        ancestors.c.depth, *(write.c[name] for name in WRITE_VALUE_COLUMNS)
    ).select_from(ordered_join(ancestors, write, write_on))
    if not seeded:
        return writes
    seeds = sa.select(
        sa.cast(sa.literal_column("-1"), sa.Integer).label("depth"),
        B.c.channel,
        sa.null(),
        sa.null(),
        sa.null(),
        B.c.type,
        B.c.blob,
    ).where(
        B.c.thread_id == thread_id,
        B.c.checkpoint_ns_hash == nsh,
        sa.or_(
            *(
                sa.and_(B.c.channel == channel, B.c.version == sa.bindparam(f"seed_{i}"))
                for i, channel in enumerate(seeded)
            )
        ),
    )
    return sa.union_all(writes, seeds)


# Row kinds of the one-statement history.
_WRITE, _SEED_BLOB, _INLINE = 0, 1, 2
# Delta-history statements a DialectOps keeps (one per channel set and by-id/latest;
# a graph asks for subsets of its few DeltaChannels): beyond, they are built per
# call (and run through Core, whose compiled cache serves them).
_SHAPES_MAX = 32
_shapes: weakref.WeakKeyDictionary[DialectOps, set[tuple[tuple[str, ...], bool]]] = (
    weakref.WeakKeyDictionary()
)


def _kind(kind: int) -> Any:
    return sa.cast(sa.literal_column(str(kind)), sa.Integer).label("kind")


def _bit_of(channel: Any, channels: Sequence[str]) -> Any:
    """The bit of ``channel`` (a column holding one of ``channels``) in a walk's masks."""
    return sa.case(
        *((channel == name, sa.literal_column(str(1 << bit))) for bit, name in enumerate(channels)),
        else_=sa.literal_column("0"),
    )


def _select_history(dialect_ops: DialectOps, channels: tuple[str, ...], by_id: bool) -> Any:
    """The whole history in one statement (rows of ``kind`` _WRITE, _SEED_BLOB, _INLINE,
    with the ancestor's ``depth``): see the module docstring."""
    thread_id, nsh, start = _bound_start(by_id)
    chain = seed_walk_cte(dialect_ops, thread_id, nsh, start, channels)
    walk = _Walk(dialect_ops, chain, thread_id, nsh)
    return sa.union_all(
        _write_rows(walk, channels),
        *(_seed_blob_rows(walk, bit, channel) for bit, channel in enumerate(channels)),
        _inline_rows(walk),
    )


@dataclass(frozen=True)
class _Walk:
    """The parent walk of one history statement, and the keys its lookups bind."""

    dialect_ops: DialectOps
    chain: CTE  # one row per ancestor (depth, found, nearer masks)
    thread_id: Any
    nsh: Any

    def ancestor_row(self) -> tuple[Any, Any]:
        """A keyed lookup of each ancestor's checkpoint row (a new alias each call)."""
        return self.dialect_ops.keyed_lookup(
            C,
            sa.and_(
                C.c.thread_id == self.thread_id,
                C.c.checkpoint_ns_hash == self.nsh,
                C.c.checkpoint_id == self.chain.c.checkpoint_id,
            ),
        )


def _write_rows(walk: _Walk, channels: tuple[str, ...]) -> Any:
    """The ancestors' writes of ``channels`` (rows of kind _WRITE)."""
    chain, null = walk.chain, walk.dialect_ops.typed_null
    # Each ancestor's writes by key, never the thread's writes matched to ancestors;
    # a channel's only up to its seed (its bit not yet found nearer).
    write, write_on = walk.dialect_ops.keyed_lookup(
        W,
        sa.and_(
            W.c.thread_id == walk.thread_id,
            W.c.checkpoint_ns_hash == walk.nsh,
            W.c.checkpoint_id == chain.c.checkpoint_id,
            # One bound value each (an expanding IN is rendered per call: not cacheable).
            W.c.channel.in_([sa.literal(name, W.c.channel.type) for name in channels]),
        ),
    )
    return (
        sa.select(
            _kind(_WRITE),
            chain.c.depth,
            *(write.c[name] for name in WRITE_VALUE_COLUMNS),
            null(C.c.checkpoint_ns.type).label("inline"),
        )
        .select_from(ordered_join(chain, write, write_on))
        .where(chain.c.nearer.op("&")(_bit_of(write.c.channel, channels)) == 0)
    )


def _seed_blob_rows(walk: _Walk, bit: int, channel: str) -> Any:
    """``channel``'s seed blob (a row of kind _SEED_BLOB): looked up on the one
    ancestor where the channel is first found (a stored blob or an inline value there)."""
    chain, null = walk.chain, walk.dialect_ops.typed_null
    checkpoint, checkpoint_on = walk.ancestor_row()
    blob, blob_on = _stored_value(walk.dialect_ops, walk.thread_id, walk.nsh, channel, checkpoint)
    return (
        sa.select(
            _kind(_SEED_BLOB),
            chain.c.depth,
            blob.c.channel,
            null(W.c.task_id.type),
            null(W.c.task_path.type),
            null(W.c.idx.type),
            blob.c.type,
            blob.c.blob,
            null(C.c.checkpoint_ns.type),
        )
        .select_from(ordered_join(ordered_join(chain, checkpoint, checkpoint_on), blob, blob_on))
        .where(
            chain.c.found.op("&")(sa.literal_column(str(1 << bit))) != 0,
            chain.c.nearer.op("&")(sa.literal_column(str(1 << bit))) == 0,
        )
    )


def _inline_rows(walk: _Walk) -> Any:
    """The inline values of the ancestors where some channel is first found (one of
    them may be that channel's seed; at one checkpoint the inline value wins)."""
    chain, null = walk.chain, walk.dialect_ops.typed_null
    document, document_on = walk.ancestor_row()
    inline = walk.dialect_ops.json_member(document.c.checkpoint, INLINE_KEY)
    return (
        sa.select(
            _kind(_INLINE),
            chain.c.depth,
            null(W.c.channel.type),
            null(W.c.task_id.type),
            null(W.c.task_path.type),
            null(W.c.idx.type),
            null(B.c.type.type),
            null(B.c.blob.type),
            inline,
        )
        .select_from(ordered_join(chain, document, document_on))
        .where(chain.c.found != chain.c.nearer, inline.is_not(None))
    )


def history_statement(dialect_ops: DialectOps, channels: tuple[str, ...], by_id: bool) -> Any:
    """:func:`_select_history`, kept by ``dialect_ops`` (so the direct path may run it)
    for the first ``_SHAPES_MAX`` shapes, built per call beyond."""
    key = (channels, by_id)
    known = _shapes.setdefault(dialect_ops, set())
    if key in known or len(known) < _SHAPES_MAX:
        known.add(key)
        return dialect_ops.cached(
            ("delta_history", key), lambda: _select_history(dialect_ops, channels, by_id)
        )
    return _select_history(dialect_ops, channels, by_id)


def _deep_recursion(dialect_ops: DialectOps) -> Any | None:
    """``DialectOps.before_deep_recursion``, kept by ``dialect_ops`` (a cached plan's
    every statement is)."""
    if dialect_ops.before_deep_recursion() is None:
        return None
    return dialect_ops.cached(("deep_recursion",), dialect_ops.before_deep_recursion)


def _one_statement_history(
    ctx: Context, thread_id: str, nsh: str, checkpoint_id: str | None, channels: list[str]
) -> Plan[dict[str, DeltaChannelHistory]]:
    if (lift_limit := _deep_recursion(ctx.dialect_ops)) is not None:
        yield Step(lift_limit)
    statement = history_statement(ctx.dialect_ops, tuple(channels), checkpoint_id is not None)
    rows = (
        yield Step(
            statement,
            _keys(thread_id, nsh, checkpoint_id),
            fetch=True,
            whole_plan=lift_limit is None,
        )
    ).rows
    serde = ctx.serde
    wanted = set(channels)
    seed_depth: dict[str, int] = {}
    seed_blob: dict[str, tuple[str, bytes | None]] = {}
    seed_inline: dict[str, Any] = {}
    writes: dict[str, list[tuple[int, tuple[str, str, int], PendingWrite]]] = defaultdict(list)
    inline_rows = []
    for row in rows:
        m = row._mapping
        kind, depth, channel = m["kind"], m["depth"], m["channel"]
        if kind == _WRITE:
            key = writes_sort_key(m["task_path"] or "", m["task_id"], m["idx"])
            value = codec.load_value(serde, m["type"], m["blob"])
            writes[channel].append((depth, key, (m["task_id"], channel, value)))
        elif kind == _SEED_BLOB:
            seed_depth[channel] = depth
            seed_blob[channel] = (m["type"], m["blob"])
        else:
            inline_rows.append((depth, m["inline"]))
    for depth, text in sorted(inline_rows, key=lambda item: -item[0]):  # nearest last
        for channel, value in codec.inline_values_json(text).items():
            # At one checkpoint the inline value is the one read (as get_tuple).
            if channel in wanted and depth <= seed_depth.get(channel, 1 << 62):
                seed_depth[channel] = depth
                seed_inline[channel] = value
                seed_blob.pop(channel, None)
    result: dict[str, DeltaChannelHistory] = {}
    for channel in channels:
        entry: DeltaChannelHistory = {"writes": []}
        if channel in seed_inline:
            entry["seed"] = seed_inline[channel]
        elif channel in seed_blob:
            entry["seed"] = codec.load_value(serde, *seed_blob[channel])
        items = writes.get(channel)
        if items:
            # Oldest ancestor (deepest) first; within one checkpoint, writes_sort_key order.
            limit = seed_depth.get(channel, 1 << 62)
            items.sort(key=lambda item: (-item[0], item[1]))
            entry["writes"] = [write for depth, _, write in items if depth <= limit]
        result[channel] = entry
    return result


def walk_chain(
    ctx: Context, thread_id: str, nsh: str, checkpoint_id: str | None, channels: Sequence[str]
) -> Plan[Chain]:
    """Stage 1 as a plan: the target's ancestors and each channel's nearest stored value."""
    if (lift_limit := ctx.dialect_ops.before_deep_recursion()) is not None:
        yield Step(lift_limit)
    statement = _walk_statement(ctx.dialect_ops, tuple(channels), checkpoint_id is not None)
    rows = (yield Step(statement, _keys(thread_id, nsh, checkpoint_id), fetch=True)).rows
    chain = Chain()
    by_depth: dict[int, str] = {}
    wanted = set(channels)
    for row in rows:
        if row.channel is not None:
            # A blob: the nearest one unless an inline value is as near (see below).
            if row.depth < chain.seed_depth.get(row.channel, 1 << 62):
                chain.seed_depth[row.channel] = row.depth
                chain.seed_version[row.channel] = row.version
                chain.seed_inline.pop(row.channel, None)
            continue
        by_depth[row.depth] = row.checkpoint_id
        if row.inline is None:
            continue
        for channel, value in codec.inline_values_json(row.inline).items():
            # At one checkpoint the inline value is the one read (as get_tuple).
            if channel in wanted and row.depth <= chain.seed_depth.get(channel, 1 << 62):
                chain.seed_depth[channel] = row.depth
                chain.seed_inline[channel] = value
                chain.seed_version.pop(channel, None)
    chain.ids = [by_depth[d] for d in range(len(by_depth))]
    return chain


def delta_channel_history(
    ctx: Context,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str | None,
    channels: Sequence[str],
) -> Plan[dict[str, DeltaChannelHistory]]:
    """Per channel: writes oldest→newest from the target's ancestors, and the seed."""
    channels = list(dict.fromkeys(channels))
    nsh = key_hash(checkpoint_ns)
    if not channels:
        return {}
    if len(channels) <= _MASK_CHANNELS:
        return (yield from _one_statement_history(ctx, thread_id, nsh, checkpoint_id, channels))
    chain = yield from walk_chain(ctx, thread_id, nsh, checkpoint_id, channels)
    result: dict[str, DeltaChannelHistory] = {ch: {"writes": []} for ch in channels}
    for ch, value in chain.seed_inline.items():
        result[ch]["seed"] = value
    max_depth = chain.depth_needed(channels)
    if max_depth < 0:
        return result
    seeds = list(chain.seed_version.items())
    statement = _history_statement(
        ctx.dialect_ops, tuple(channels), tuple(ch for ch, _ in seeds), checkpoint_id is not None
    )
    params = {
        **_keys(thread_id, nsh, checkpoint_id),
        "max_depth": max_depth,
        **{f"seed_{i}": version for i, (_, version) in enumerate(seeds)},
    }
    rows = (yield Step(statement, params, fetch=True)).rows
    per_channel: dict[str, list[tuple[int, tuple[str, str, int], PendingWrite]]] = defaultdict(list)
    for row in rows:
        if row.depth == -1:
            result[row.channel]["seed"] = codec.load_value(ctx.serde, row.type, row.blob)
            continue
        limit = chain.seed_depth.get(row.channel, len(chain.ids) - 1)
        if row.depth > limit:
            continue  # beyond this channel's seed: another channel needed that far
        key = writes_sort_key(row.task_path or "", row.task_id, row.idx)
        value = codec.load_value(ctx.serde, row.type, row.blob)
        per_channel[row.channel].append((row.depth, key, (row.task_id, row.channel, value)))
    for ch, items in per_channel.items():
        # Oldest ancestor (deepest) first; within one checkpoint, writes_sort_key order.
        items.sort(key=lambda item: (-item[0], item[1]))
        result[ch]["writes"] = [write for _, _, write in items]
    return result
