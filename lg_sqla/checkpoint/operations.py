"""Every saver operation, written once, for both the sync and the async saver.

An operation is a *plan*: a generator that yields :class:`Step` s (a statement
and its parameters) and receives each step's rows back. It does no I/O, so the
sync saver drives it with ``conn.execute`` and the async saver with
``await conn.execute``; the logic exists once (see ``drive`` in saver.py and
aio.py). All inputs are validated and serialized before the first step is
yielded, so bad input never reaches the database and a failed call writes
nothing: the shell runs each plan inside one transaction.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, cast

import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.types import TASKS
from sqlalchemy.sql import Executable

from lg_sqla.checkpoint import checks, codec, complete, json_values, maintenance, state_reads
from lg_sqla.checkpoint.codec import StoredBlob, StoredWrite, stored_write
from lg_sqla.checkpoint.context import Context
from lg_sqla.checkpoint.history import delta_channel_history
from lg_sqla.checkpoint.statements import (
    AT_KIND,
    AT_STATE_REVISION,
    KIND_BLOB,
    KIND_CHECKPOINT,
    KIND_PARENT_SEND,
    KIND_WRITE,
    REVISED,
    LoadLayout,
    PageKey,
    PageQuery,
    layout_of,
    load_statement,
    one_checkpoint_load,
    page_key,
    page_params,
    select_blobs_for,
    select_page,
    select_writes_for,
)
from lg_sqla.checkpoint.upserts import (
    CHECKPOINT_UPDATE,
    HOT_PUTS,
    SPECIAL_WRITE,
    UPSERT_KEY,
    WRITE_UPDATE,
    lone_upsert,
    upsert_builder,
    writes_upsert,
)
from lg_sqla.dialects import bulk_params, bulk_rows_shape
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import Plan, Record, Step, prebuilt
from lg_sqla.shared import key_hash
from lg_sqla.types import naive_utc_text_now

# --- writing -----------------------------------------------------------------


_namespace = codec.namespace_of
_now, _UTC = dt.datetime.now, dt.timezone.utc
_clock_text = naive_utc_text_now
_DEFAULT_NS_HASH = codec.DEFAULT_NAMESPACE_HASH


_BLOB_SHARED = ("thread_id", "checkpoint_ns_hash", "created_at", "state_revision")
_BLOB_VARYING = ("channel", "version", "type", "blob")
_WRITE_SHARED = (
    "thread_id",
    "checkpoint_ns_hash",
    "checkpoint_id",
    "task_id",
    "task_path",
    "created_at",
    "state_revision",
)
_WRITE_VARYING = ("idx", "channel", "type", "blob")


def _one_statement_put(
    ctx: Context, update: Sequence[str], blob_rows: int | None, keys: int
) -> Executable:
    """The checkpoint upsert, with the blobs' insert-or-ignore as a CTE of it
    (``blob_rows``: their shape, None: no blobs), guarded when it names ``keys`` blobs."""
    checkpoint = ctx.dialect_ops.upsert(C, update)
    blobs = None
    if blob_rows is not None:
        blobs = ctx.dialect_ops.bulk_insert(B, _BLOB_SHARED, _BLOB_VARYING, rows=blob_rows)
    if keys:
        return complete.guarded_one_statement(blobs, checkpoint, keys)
    checkpoint = checkpoint.values(
        {c.name: sa.bindparam(_CHECKPOINT_PARAMS[c.name], type_=c.type) for c in C.columns}
    )
    return checkpoint if blobs is None else ctx.dialect_ops.one_statement([blobs, checkpoint])


_CHECKPOINT_PARAMS = complete.CHECKPOINT_PARAMS


# The hot calls' Step (statement, params, fetch, whole_plan, positional), made without
# the named tuple's Python __new__ (a frame on every call).
_step = functools.partial(tuple.__new__, Step)


class _PutRows(NamedTuple):
    """What one put stores: its checkpoint row, the blob rows of its new versions (their
    keys: ``new``), and the keys of every blob its checkpoint names
    (``complete.named_blobs``). A named tuple made by ``_put_rows_of`` (tuple's own
    constructor: no Python ``__init__`` frame on every put)."""

    checkpoint: Record
    blobs: Sequence[Record]
    new: set[complete.BlobKey] | frozenset[complete.BlobKey]
    named: Sequence[complete.BlobKey]
    values: Mapping[str, Any]
    versions: Mapping[str, str]

    def all_blobs(self, ctx: Context) -> Sequence[Record]:
        """Rows of every named blob, from the values in hand (the rare path)."""
        shared = {k: self.checkpoint[k] for k in _BLOB_SHARED}
        return complete.missing_blob_rows(ctx, self.values, self.versions, self.named, shared)


_put_rows_of = functools.partial(tuple.__new__, _PutRows)
_NO_KEYS: frozenset[complete.BlobKey] = frozenset()


@prebuilt
def put(
    ctx: Context,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Plan[RunnableConfig]:
    """Blobs of new versions (insert-or-ignore) and the checkpoint row (upsert); ``None``
    and small primitive values inline in the checkpoint document (``codec.dump_values``:
    a put whose values are all inline is the one upsert). The checkpoint is
    written only with every blob it names (``complete``): a blob deleted meanwhile is
    written again from the values in hand."""
    rows = _put_rows(ctx, config, checkpoint, metadata, new_versions)
    ops = ctx.dialect_ops
    # Every value inline (no blob written or named): on a dialect with a native upsert
    # and separate statements, the put is one upsert, atomic by itself (MariaDB runs it
    # in autocommit, without BEGIN and COMMIT); kept in ctx.hot_statements by its first
    # put (below), so later ones skip the dialect's branches. Here, not in
    # _put_in_steps: a generator less on the common path.
    lone = not rows.blobs and not rows.named
    row = rows.checkpoint
    nulls = (row["parent_checkpoint_id"] is None) + 2 * (row["run_id"] is None)
    if ops.distributed:
        yield from _put_routed(ctx, rows)
    elif lone and (upsert := ctx.hot_statements.get(HOT_PUTS[nulls])) is not None:
        yield _step((upsert, [rows.checkpoint], False, True, False))
    elif ops.writes_in_one_statement:
        yield from _put_in_one_statement(ctx, rows)
    elif not ops.native_upsert:
        yield from _put_portable(ctx, rows)
    elif not lone:  # (a blob written, or one named that this put does not write)
        yield from _put_in_steps(ctx, rows)
    else:
        upsert = ctx.hot_statements[HOT_PUTS[nulls]] = lone_upsert(ctx, nulls)
        yield _step((upsert, [rows.checkpoint], False, True, False))
    return {
        "configurable": {
            "thread_id": row["thread_id"],
            "checkpoint_ns": row["checkpoint_ns"],
            "checkpoint_id": row["checkpoint_id"],
        }
    }


def _put_rows(
    ctx: Context,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> _PutRows:
    """What a put writes, its keys and values checked and serialized."""
    thread_id, checkpoint_ns, parent_id = codec.checkpoint_key(config, "parent checkpoint_id")
    checkpoint_id = codec.new_checkpoint_id(checkpoint["id"])
    # One stamp for created_at and updated_at: the clock's text where the columns bind
    # text (``Context.stamps_text``), else a datetime (utc_now, without its frame).
    if ctx.stamps_text:
        now: dt.datetime | str = _clock_text()
        expires = None
    else:
        now = _now(_UTC)
        # The writer's TTL, stored with the checkpoint: the thread's expiry is data.
        expires = None if ctx.stamp_ttl is None else now + ctx.stamp_ttl
    document = codec.dump_checkpoint_document(checkpoint)
    stored_metadata = checks.dump_metadata(config, metadata)
    values = checkpoint["channel_values"]
    versions = document["channel_versions"]
    inline, blob_rows = codec.dump_values(
        ctx.serde, values, versions, new_versions, ctx.inline_types
    )
    every = len(inline) == len(versions)  # (inline keys are among versions')
    if every and ctx.dialect_ops.reads_all_inline:  # (first: codec.ALL_INLINE_KEY)
        document = {codec.ALL_INLINE_KEY: True, **document}
    if inline:
        document[codec.INLINE_KEY] = inline
    row = {
        "thread_id": thread_id,
        # (codec.namespace_hash, without its frame for the default namespace)
        "checkpoint_ns_hash": _DEFAULT_NS_HASH if checkpoint_ns == "" else key_hash(checkpoint_ns),
        "checkpoint_id": checkpoint_id,
        "checkpoint_ns": checkpoint_ns,
        "parent_checkpoint_id": parent_id,
        "run_id": (
            None if stored_metadata.get("run_id") is None else codec.run_id_of(stored_metadata)
        ),
        "checkpoint": document,
        "metadata": stored_metadata,
        "created_at": now,
        "updated_at": now,
        "expires_at": expires,
        # Every row of the put at the writing application's state revision (None: zero).
        "state_revision": ctx.state_head,
    }
    if not blob_rows and every:  # no blob written or named
        return _put_rows_of((row, blob_rows, _NO_KEYS, [], values, versions))
    return _with_blobs(row, inline, blob_rows, values, versions)


def _with_blobs(
    row: Record,
    inline: Mapping[str, Any],
    blob_rows: list[dict[str, Any]],
    values: Mapping[str, Any],
    versions: Mapping[str, str],
) -> _PutRows:
    """``_put_rows``' answer for a checkpoint that writes or names blobs: its blob rows
    with the checkpoint row's shared columns, and the keys written and named."""
    named = [] if len(inline) == len(versions) else complete.named_blobs(values, versions, inline)
    if not blob_rows:
        return _put_rows_of((row, blob_rows, _NO_KEYS, named, values, versions))
    shared = {k: row[k] for k in _BLOB_SHARED}
    blob_rows = [{**shared, **blob} for blob in blob_rows]
    new = {(blob["channel"], blob["version"]) for blob in blob_rows}
    if not new.issubset(named):  # a new version the document does not name
        named = list(dict.fromkeys([*named, *((r["channel"], r["version"]) for r in blob_rows)]))
    return _put_rows_of((row, blob_rows, new, named, values, versions))


def _put_in_one_statement(ctx: Context, rows: _PutRows) -> Plan[None]:
    """Blobs and checkpoint in one statement (PostgreSQL), guarded; when a named blob
    was missing, the same with every named blob (that statement's blobs are stored,
    the checkpoint is not: no reader ever sees it incomplete)."""
    params = {_CHECKPOINT_PARAMS[name]: value for name, value in rows.checkpoint.items()}
    if rows.named:
        params.update(complete.key_params(rows.named))
    blob_rows = rows.blobs
    for attempt in itertools.count():
        shape = bulk_rows_shape(blob_rows) if blob_rows else None
        statement = ctx.dialect_ops.cached(
            ("put", shape, len(rows.named)),
            functools.partial(_one_statement_put, ctx, CHECKPOINT_UPDATE, shape, len(rows.named)),
        )
        step_params = dict(params)
        if blob_rows:
            step_params.update(bulk_params(B, _BLOB_SHARED, _BLOB_VARYING, blob_rows))
        done = yield Step(statement, step_params, whole_plan=attempt == 0)
        if not rows.named or complete.check_stored(done.rowcount, attempt):
            return
        blob_rows = rows.all_blobs(ctx)


def _put_routed(ctx: Context, rows: _PutRows) -> Plan[None]:
    """Distributed tables (Citus): statements each routed whole to the thread's shards,
    in one transaction on one worker. (The one-statement put's ``INSERT ... SELECT``
    over CTEs is run through the coordinator, with a two-phase commit.) The named blobs
    that exist are locked first (``complete.held_blobs``), so a deleter waits for the
    put or the put sees the row gone; when one is missing every named blob is written."""
    blob_rows = rows.blobs
    if rows.named:
        statement = ctx.dialect_ops.cached(
            ("held blobs", len(rows.named)), lambda: complete.held_blobs(len(rows.named))
        )
        params = {
            _CHECKPOINT_PARAMS[n]: rows.checkpoint[n] for n in ("thread_id", "checkpoint_ns_hash")
        }
        held = yield Step(statement, {**params, **complete.key_params(rows.named)}, fetch=True)
        present = {(r.channel, r.version) for r in held.rows}
        new = {(r["channel"], r["version"]) for r in blob_rows}
        if set(rows.named) - present - new:
            blob_rows = rows.all_blobs(ctx)
    if blob_rows:
        shape = bulk_rows_shape(blob_rows)
        insert = ctx.dialect_ops.cached(
            ("put blobs", shape),
            lambda: ctx.dialect_ops.bulk_insert(B, _BLOB_SHARED, _BLOB_VARYING, rows=shape),
        )
        yield Step(insert, bulk_params(B, _BLOB_SHARED, _BLOB_VARYING, blob_rows))
    yield from ctx.dialect_ops.upsert_rows(C, [rows.checkpoint], CHECKPOINT_UPDATE)


def _put_in_steps(ctx: Context, rows: _PutRows) -> Plan[None]:
    """Blobs, then the checkpoint upsert guarded on the named blobs it did not just
    write; when one was missing, every named blob and the checkpoint unguarded, in the
    same transaction. The blobs this transaction wrote need no check: SQLite has one
    writer at a time, and InnoDB's insert-or-ignore keeps a lock on each row it wrote
    or found until the commit."""
    new = rows.new
    checked = [key for key in rows.named if key not in new] if rows.named else []
    if not checked and not rows.blobs:  # (put's own one-statement case)
        upsert = ctx.hot_statements.get(UPSERT_KEY)
        if upsert is None:
            upsert = _hot(ctx, UPSERT_KEY, upsert_builder(ctx))
        yield Step(upsert, [rows.checkpoint], whole_plan=True)
        return
    yield from ctx.dialect_ops.insert_ignore_rows(B, rows.blobs)
    if not checked:
        yield from ctx.dialect_ops.upsert_rows(C, [rows.checkpoint], CHECKPOINT_UPDATE)
        return
    statement = ctx.dialect_ops.cached(
        ("guarded put", len(checked)),
        lambda: complete.guarded_upsert(ctx.dialect_ops.upsert(C, CHECKPOINT_UPDATE), len(checked)),
    )
    params = {_CHECKPOINT_PARAMS[name]: value for name, value in rows.checkpoint.items()}
    done = yield Step(statement, {**params, **complete.key_params(checked)})
    if done.rowcount > 0:
        return
    yield from ctx.dialect_ops.insert_ignore_rows(B, rows.all_blobs(ctx))
    yield from ctx.dialect_ops.upsert_rows(C, [rows.checkpoint], CHECKPOINT_UPDATE)


def _put_portable(ctx: Context, rows: _PutRows) -> Plan[None]:
    """Dialects without a native upsert: the missing named blobs are looked up first
    (one more statement) and written with the new ones."""
    blob_rows = rows.blobs
    if rows.named:
        params = {
            _CHECKPOINT_PARAMS[n]: rows.checkpoint[n] for n in ("thread_id", "checkpoint_ns_hash")
        }
        missing = set((yield from complete.portable_missing(rows.named, params)))
        new = {(r["channel"], r["version"]) for r in blob_rows}
        if missing - new:
            blob_rows = rows.all_blobs(ctx)
    yield from ctx.dialect_ops.insert_ignore_rows(B, blob_rows)
    yield from ctx.dialect_ops.upsert_rows(C, [rows.checkpoint], CHECKPOINT_UPDATE)


@prebuilt
def put_writes(
    ctx: Context,
    config: RunnableConfig,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> Plan[None]:
    """Special-channel writes replace earlier ones; regular writes are first-wins."""
    thread_id, checkpoint_ns, checkpoint_id = codec.checkpoint_key(config)
    if checkpoint_id is None:
        raise InvalidInputError(
            'put_writes needs config["configurable"]["checkpoint_id"] (the config put returned)'
        )
    rows = codec.dump_writes(
        ctx.serde,
        writes,
        task_id,
        task_path,
        (
            thread_id,
            _DEFAULT_NS_HASH if checkpoint_ns == "" else key_hash(checkpoint_ns),
            checkpoint_id,
            # (the clock's text where the column binds text: Context.stamps_text)
            _clock_text() if ctx.stamps_text else _now(_UTC),
            ctx.state_head,
        ),
        ctx.packs_plain,
    )
    # Decided per write, as LangGraph's InMemorySaver does: a write to a special
    # channel (error, interrupt, scheduled, resume: negative idx) replaces the
    # stored one; a regular write never does, so a retried task is idempotent.
    # (Deciding per call, as the official SQL savers do, keeps a stale resume
    # value when a call mixes both, e.g. Command(resume=..., update=...).)
    # Within one call, a repeated special key keeps the last write (dump_writes).
    if not rows:
        return
    upsert: Executable | None = ctx.hot_statements.get("put_writes")
    if upsert is not None:  # (kept by the native-upsert branch below: its later calls)
        yield _step((upsert, rows, False, True, False))  # (see DirectDriver.one_statement)
    elif ctx.dialect_ops.writes_in_one_statement:
        shape = bulk_rows_shape(rows)
        statement = ctx.dialect_ops.cached(
            ("put_writes", shape),
            lambda: ctx.dialect_ops.bulk_insert(
                W, _WRITE_SHARED, _WRITE_VARYING, WRITE_UPDATE, replace=SPECIAL_WRITE, rows=shape
            ),
        )
        yield Step(statement, bulk_params(W, _WRITE_SHARED, _WRITE_VARYING, rows), whole_plan=True)
    elif ctx.dialect_ops.native_upsert:
        upsert = ctx.hot_statements["put_writes"] = writes_upsert(ctx)
        yield _step((upsert, rows, False, True, False))
    else:
        yield from ctx.dialect_ops.upsert_rows(W, [r for r in rows if r["idx"] < 0], WRITE_UPDATE)
        yield from ctx.dialect_ops.insert_ignore_rows(W, [r for r in rows if r["idx"] >= 0])


def delete_thread(ctx: Context, thread_id: str) -> Plan[None]:
    """Every row of the thread (``maintenance.delete_whole_threads``)."""
    yield from maintenance.delete_whole_threads(ctx, [codec.thread_id_str(thread_id)])


# --- reading -----------------------------------------------------------------


def _assemble(
    ctx: Context,
    checkpoint_rows: Sequence[Record],
    blobs: Mapping[PageKey, list[StoredBlob]],
    writes: Mapping[PageKey, list[StoredWrite]],
    sends: Mapping[PageKey, list[StoredWrite]],
) -> list[CheckpointTuple]:
    ordered = sorted(checkpoint_rows, key=page_key, reverse=True)
    return [
        codec.build_tuple(
            ctx.serde,
            row,
            blobs.get(page_key(row), ()),
            writes.get(page_key(row), ()),
            sends.get(page_key(row), ()),
            next_version=ctx.next_version,
        )
        for row in ordered
    ]


@prebuilt
def load_page(ctx: Context, q: PageQuery) -> Plan[list[CheckpointTuple]]:
    """Checkpoint tuples of one page, newest first."""
    if not ctx.dialect_ops.joins_channel_versions:
        return (yield from _load_page_portable(ctx, q))
    # (the statement and its reader in the same layout, chosen once here)
    layout = layout_of(ctx.dialect_ops, q)
    rows = (
        yield Step(
            load_statement(ctx.dialect_ops, q, layout),
            page_params(q),
            fetch=True,
            whole_plan=True,
            positional=True,
        )
    ).rows
    if not layout.keyed:
        found = _one_tuple(ctx, layout, rows, page_params(q), q.namespace or "")
        return [found] if found is not None else []
    if ctx.state is not None or any(row[AT_STATE_REVISION] is not None for row in rows):
        # Rows at a state revision: read in the newest shape (or refused: unknown).
        return state_reads.assemble_page(ctx, q, layout, rows)
    # Rows by position (statements.LoadLayout).
    checkpoint_rows: list[Record] = []
    blobs: dict[PageKey, list[StoredBlob]] = defaultdict(list)
    writes: dict[PageKey, list[StoredWrite]] = defaultdict(list)
    sends: dict[PageKey, list[StoredWrite]] = defaultdict(list)
    owned = {KIND_WRITE: writes, KIND_PARENT_SEND: sends}
    key_of, blob_of, write_of = layout.key_of, layout.blob_of, layout.write_of
    for row in rows:
        kind = row[AT_KIND]
        if kind == KIND_CHECKPOINT:
            checkpoint_rows.append(layout.record(row, q))
        elif kind == KIND_BLOB:
            blobs[key_of(row)].append(blob_of(row))
        else:
            owned[kind][key_of(row)].append(write_of(row))
    return _assemble(ctx, checkpoint_rows, blobs, writes, sends)


# _one_tuple's answer to lean rows of which one is at a state revision.
_READ_AGAIN = cast(CheckpointTuple, object())


def _one_tuple(
    ctx: Context, layout: LoadLayout, rows: Sequence[Any], params: Record, namespace: str
) -> CheckpointTuple | None:
    """``get_tuple``'s tuple from the rows of its page of one (``params``: the page's
    thread_id, ns_hash and checkpoint_id, if any): every blob and write is the
    checkpoint's own, so they carry no keys. ``_READ_AGAIN`` where ``layout`` is lean
    and a row is at a state revision (read it again in the full layout)."""
    found: Sequence[Any] | None = None
    blobs: list[StoredBlob] = []
    writes: list[StoredWrite] = []
    sends: list[StoredWrite] = []
    if layout.packed:
        rows = layout.unpack(rows)
    revised = ctx.state is not None
    lean = layout.lean
    blob_of, write_of = layout.blob_of, layout.write_of
    for row in rows:
        kind = row[AT_KIND]
        revised = revised or (kind >= REVISED if lean else row[AT_STATE_REVISION] is not None)
        if kind == KIND_BLOB:
            blobs.append(blob_of(row))
        elif kind == KIND_CHECKPOINT:
            found = row
        else:
            (writes if kind == KIND_WRITE else sends).append(write_of(row))
    if revised and lean:
        return _READ_AGAIN
    if revised:
        # Rows at a state revision: read in the newest shape (or refused: unknown).
        tuples = state_reads.assemble_page(ctx, _page_of_one(params, namespace), layout, rows)
        return tuples[0] if tuples else None
    if found is None:
        return None
    document, metadata, checkpoint_id, parent_id = layout.checkpoint_of(found)
    owned = type(document) is str and type(metadata) is str
    if owned:
        # (the two documents as one JSON text: one parse, one check for long numbers)
        document, metadata = json_values.json_loads(f"[{document},{metadata}]")
    key = (params["thread_id"], namespace, checkpoint_id)
    stored = (document, metadata)
    return codec.tuple_of(
        ctx.serde, key, parent_id, stored, blobs, writes, sends, ctx.next_version, owned
    )


def _page_of_one(params: Record, namespace: str) -> PageQuery:
    """The ``PageQuery`` of ``get_tuple``'s ``params`` (see ``_one_tuple``)."""
    return PageQuery(
        params["thread_id"],
        params["ns_hash"],
        params.get("checkpoint_id"),
        limit=1,
        namespace=namespace,
    )


def _load_page_portable(ctx: Context, q: PageQuery) -> Plan[list[CheckpointTuple]]:
    page = yield Step(select_page(ctx.dialect_ops, q), page_params(q), fetch=True)
    page_rows = [r._mapping for r in page.rows]
    if not page_rows:
        return []
    state_reads.refuse_revisions(page_rows)
    wanted: list[tuple[str, str, str, str]] = []
    write_keys: list[tuple[str, str, str]] = []
    parents: dict[tuple[str, str, str], list[PageKey]] = defaultdict(list)
    for row in page_rows:
        document = json_values.json_object(row["checkpoint"])
        t, h = row["thread_id"], row["checkpoint_ns_hash"]
        wanted.extend((t, h, ch, v) for ch, v in document["channel_versions"].items())
        write_keys.append((t, h, row["checkpoint_id"]))
        if document.get("v", 0) < 4 and row["parent_checkpoint_id"]:
            parent = (t, h, row["parent_checkpoint_id"])
            parents[parent].append(page_key(row))
            write_keys.append(parent)
    blobs: dict[PageKey, list[StoredBlob]] = defaultdict(list)
    if wanted:
        found = {
            (r.thread_id, r.checkpoint_ns_hash, r.channel, r.version): r._mapping
            for r in (yield Step(select_blobs_for(wanted), fetch=True)).rows
        }
        state_reads.refuse_revisions(found.values())
        for row in page_rows:
            t, h = row["thread_id"], row["checkpoint_ns_hash"]
            versions = json_values.json_object(row["checkpoint"])["channel_versions"]
            for ch, v in versions.items():
                if (t, h, ch, v) in found:
                    b = found[(t, h, ch, v)]
                    blobs[page_key(row)].append((b["channel"], b["type"], b["blob"]))
    writes: dict[PageKey, list[StoredWrite]] = defaultdict(list)
    sends: dict[PageKey, list[StoredWrite]] = defaultdict(list)
    for r in (yield Step(select_writes_for(write_keys), fetch=True)).rows:
        m = r._mapping
        state_reads.refuse_revisions((m,))
        owner = (m["thread_id"], m["checkpoint_ns_hash"], m["checkpoint_id"])
        write = stored_write(m)
        writes[(m["checkpoint_id"], m["thread_id"], m["checkpoint_ns_hash"])].append(write)
        if m["channel"] == TASKS:
            for child in parents.get(owner, ()):
                sends[child].append(write)
    return _assemble(ctx, page_rows, blobs, writes, sends)


@prebuilt
def get_tuple(ctx: Context, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
    """The checkpoint named by config, or the thread's latest in that namespace."""
    thread_id, namespace, checkpoint_id = codec.checkpoint_key(config)
    ns_hash = _DEFAULT_NS_HASH if namespace == "" else key_hash(namespace)
    params = {"thread_id": thread_id, "ns_hash": ns_hash}
    if checkpoint_id is not None:
        params["checkpoint_id"] = checkpoint_id
    if not ctx.dialect_ops.joins_channel_versions:
        tuples = yield from load_page(ctx, _page_of_one(params, namespace))
        return tuples[0] if tuples else None
    # (no PageQuery, no layout chosen per call, no frame for the namespace's hash: every
    # graph step's read; union sharing: learnt on connect, so asked each time) Without
    # state migrations, the lean layout: a row at a state revision is refused, naming its
    # revision, which the full layout's rows then carry (read again).
    by_id, lean = checkpoint_id is not None, ctx.state is None
    key = ("get_tuple", ctx.dialect_ops.union_sharing(), by_id, lean)
    statement, layout = ctx.hot_statements.get(key) or _one_checkpoint_load(ctx, key)
    rows = (yield _step((statement, params, True, True, True))).rows
    found = _one_tuple(ctx, layout, rows, params, namespace)
    if found is _READ_AGAIN:
        statement, layout = _one_checkpoint_load(ctx, (*key[:3], False))
        rows = (yield Step(statement, params, True, False, True)).rows
        found = _one_tuple(ctx, layout, rows, params, namespace)
    return found


def _one_checkpoint_load(ctx: Context, key: tuple[Any, ...]) -> tuple[Executable, LoadLayout]:
    """``one_checkpoint_load`` of get_tuple's key (sharing, by id, lean), kept by ``ctx``."""
    found: tuple[Executable, LoadLayout] | None = ctx.hot_statements.get(key)
    if found is None:
        found = ctx.hot_statements[key] = one_checkpoint_load(ctx.dialect_ops, key[2], key[3])
    return found


def _hot(ctx: Context, key: Hashable, build: Callable[[], Executable]) -> Executable:
    """``DialectOps.cached(key, build)``, kept in ``ctx.hot_statements`` (callers look it
    up there first: a statement has no truth value, so by ``is None``)."""
    statement = ctx.hot_statements[key] = ctx.dialect_ops.cached(key, build)
    return statement


def list_query(
    config: RunnableConfig | None,
    *,
    filter: Record | None,
    before: RunnableConfig | None,
) -> PageQuery:
    """The PageQuery of `list`: thread / namespace / checkpoint id / filter / before."""
    thread_id = ns_hash = checkpoint_id = before_id = None
    if config is not None:
        configurable = config.get("configurable") or {}
        if configurable.get("thread_id") is not None:
            thread_id = codec.thread_id_of(config)
        if configurable.get("checkpoint_ns") is not None:
            ns_hash = key_hash(_namespace(config))
        checkpoint_id = codec.checkpoint_id_of(config)
    before_id = codec.checkpoint_id_of(before, "before checkpoint_id")
    if filter is not None and not isinstance(filter, Mapping):
        raise InvalidInputError(f"filter must be a dict, got {type(filter).__name__}")
    for key, value in (filter or {}).items():
        if not isinstance(key, str):
            raise InvalidInputError(f"filter keys must be str, got {key!r}")
        checks.check_text(f"filter key {key!r}", key)
        # Metadata is JSON; a value JSON cannot hold could never match.
        checks.check_json(f"filter[{key!r}]", value, depth=1)  # inside the metadata dict
    return PageQuery(
        thread_id=thread_id,
        ns_hash=ns_hash,
        checkpoint_id=checkpoint_id,
        before_id=before_id,
        filter=filter or None,
    )


@dataclass
class Pages:
    """The pages of one ``list`` call: keyset-paginated queries, until the limit or the end.

    Each page is loaded in its own short transaction by the shell, so no
    connection is held while the caller consumes the iterator.

    Where the dialect cannot filter metadata in SQL (``DialectOps.filters_metadata_in_sql``
    is False), ``metadata_filter`` is applied to each loaded page instead: full pages
    are read until ``limit`` matches are found or the checkpoints run out, so a
    selective filter reads the whole listed range.
    """

    query: PageQuery
    remaining: int | None
    page_size: int
    done: bool = False
    metadata_filter: Mapping[str, Any] | None = None

    def next_query(self) -> PageQuery | None:
        if self.done or (self.remaining is not None and self.remaining <= 0):
            return None
        if self.remaining is None or self.metadata_filter:
            return replace(self.query, limit=self.page_size)
        return replace(self.query, limit=min(self.remaining, self.page_size))

    def advance(self, page: Sequence[CheckpointTuple]) -> list[CheckpointTuple]:
        """Record a loaded page (a short page is the last one); returns what to yield."""
        requested = self.next_query()
        kept = list(page)
        if self.metadata_filter:
            kept = [
                t for t in kept if json_values.metadata_matches(t.metadata, self.metadata_filter)
            ]
        if self.remaining is not None:
            kept = kept[: self.remaining]
        if requested is None or requested.limit is None or len(page) < requested.limit:
            self.done = True
            return kept
        if self.remaining is not None:
            self.remaining -= len(kept)
        last = page[-1].config["configurable"]
        cursor = (last["checkpoint_id"], last["thread_id"], key_hash(last["checkpoint_ns"]))
        self.query = replace(self.query, after=cursor)
        return kept


def list_pages(
    config: RunnableConfig | None,
    *,
    filter: Mapping[str, Any] | None,
    before: RunnableConfig | None,
    limit: int | None,
    page_size: int,
    filter_in_sql: bool = True,
) -> Pages:
    """Validate ``list``'s arguments and plan its pages."""
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise InvalidInputError(f"limit must be a non-negative int or None, got {limit!r}")
    query = list_query(config, filter=filter, before=before)
    if filter_in_sql or not query.filter:
        return Pages(query, limit, page_size)
    return Pages(replace(query, filter=None), limit, page_size, metadata_filter=query.filter)


@prebuilt
def delta_history(
    ctx: Context, config: RunnableConfig, channels: Sequence[str]
) -> Plan[dict[str, DeltaChannelHistory]]:
    """See ``history.delta_channel_history``."""
    checkpoint_id = codec.checkpoint_id_of(config)
    return (
        yield from delta_channel_history(
            ctx, codec.thread_id_of(config), _namespace(config), checkpoint_id, channels
        )
    )
