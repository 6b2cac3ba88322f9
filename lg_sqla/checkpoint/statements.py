"""Statement builders shared by the sync and async savers. Pure: no I/O.

The read path loads a *page* of checkpoints together with everything needed to
rebuild them — the blobs their ``channel_versions`` point at, their pending
writes, and (for checkpoints older than format v4) their parent's pending
sends — as one ``UNION ALL`` over a ``page`` CTE. ``get_tuple`` is a page of
one; ``list`` is pages of ``page_size``. So each costs one round trip, however
many channels, writes or checkpoints it returns. Dialects that cannot expand a
JSON object into rows fall back to three batched statements per page.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import orjson
import sqlalchemy as sa
from langgraph.checkpoint.serde.types import TASKS
from sqlalchemy.sql import Executable, visitors
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import FromClause

from lg_sqla.checkpoint.codec import ALL_INLINE_KEY
from lg_sqla.dialects import DialectOps, ordered_join, sql_constant
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import Record

if TYPE_CHECKING:
    from lg_sqla.checkpoint.codec import StoredBlob, StoredWrite

# Row kinds in the load UNION.
KIND_CHECKPOINT, KIND_BLOB, KIND_WRITE, KIND_PARENT_SEND = 0, 1, 2, 3

# What a pending write is rebuilt from (with its checkpoint's keys).
WRITE_VALUE_COLUMNS = ("channel", "task_id", "task_path", "idx", "type", "blob")
# What a checkpoint is rebuilt from (``codec.build_tuple``'s record).
CHECKPOINT_COLUMNS = (
    "thread_id",
    "checkpoint_ns_hash",
    "checkpoint_id",
    "checkpoint_ns",
    "parent_checkpoint_id",
    "checkpoint",
    "metadata",
    "state_revision",
)
# A page of one's checkpoint row (its thread and namespace: the query's), in this order.
_ONE_CHECKPOINT_COLUMNS = ("checkpoint", "metadata", "checkpoint_id", "parent_checkpoint_id")
# Where a checkpoint is rebuilt from a load row (rows read by position: a page of a
# thousand pending writes is a thousand rows; a mapping per row cost more than the
# rows' values did).
AT_KIND, AT_STATE_REVISION = 0, 1
# A lean layout's kind column: the row's kind, plus this where the row is at a state
# revision (LoadLayout.lean: its rows carry no state_revision column).
REVISED = 4

# (checkpoint_id, thread_id, checkpoint_ns_hash): the total order of `list`.
PageKey = tuple[str, str, str]
# A page of one checkpoint (get_tuple) sends its blobs and writes without keys.
_KEYLESS: Any = (None, None, None)
# A load column: (the checkpoint row's value in it, a blob or write row's value in it).
Slot = tuple[str | None, str | None]


class LoadLayout:
    """The columns of the load UNION: which value each kind of row puts where.

    A checkpoint row and a blob or write row carry different values, so the branches
    share columns by position (``slots``) instead of each leaving the others' columns
    NULL: the drivers pay per column of every row (pysqlite a call per value, PyMySQL
    a field descriptor parsed in Python per column on every execute). ``keyed``: the
    blob and write rows carry their checkpoint's keys (a page of several); without
    them (``get_tuple``), every row is the page's one checkpoint's. ``packed``: the
    first that many slots come as one column, a JSON array of their values
    (``DialectOps.packs_load_rows``), which ``unpack`` spreads back into the slots.
    """

    def __init__(
        self, slots: Sequence[Slot], *, keyed: bool, lean: bool = False, packed: int = 0
    ) -> None:
        assert slots[AT_KIND] == ("kind", "kind")
        revision_at = [at for at, slot in enumerate(slots) if slot[0] == "state_revision"]
        assert revision_at == ([] if lean else [AT_STATE_REVISION])
        assert 0 <= packed < len(slots)
        self.slots = tuple(slots)
        self.keyed = keyed
        self.lean = lean
        self.packed = packed
        self.checkpoint_at = {c: i for i, (c, _) in enumerate(slots) if c is not None}
        self.value_at = {v: i for i, (_, v) in enumerate(slots) if v is not None}
        # Each checkpoint column the rows carry; the others (keyless: the keys) None.
        # (in C: the present ones by one itemgetter, the others None; record()'s path)
        present = [n for n in CHECKPOINT_COLUMNS if self.checkpoint_at.get(n) is not None]
        self._present_names = tuple(present)
        self._present_of = _getter([self.checkpoint_at[n] for n in present])
        self._absent: dict[str, Any] = {
            n: None for n in CHECKPOINT_COLUMNS if n not in self.checkpoint_at
        }
        value_at = self.value_at
        # (in C: a tuple of a row's values in the order of codec.StoredWrite/StoredBlob)
        self.write_of: Callable[[Sequence[Any]], StoredWrite] = operator.itemgetter(
            *(value_at[name] for name in WRITE_VALUE_COLUMNS)
        )
        self.blob_of: Callable[[Sequence[Any]], StoredBlob] = operator.itemgetter(
            value_at["channel"], value_at["type"], value_at["blob"]
        )
        # (keyless: a checkpoint row's document, metadata, id and parent's id, in C)
        self.checkpoint_of: Callable[[Sequence[Any]], tuple[Any, Any, str, str | None]] = (
            operator.itemgetter(*(self.checkpoint_at[n] for n in _ONE_CHECKPOINT_COLUMNS))
            if not keyed
            else _keyed_record
        )
        self.key_of: Callable[[Sequence[Any]], PageKey] = (
            operator.itemgetter(
                value_at["checkpoint_id"], value_at["thread_id"], value_at["checkpoint_ns_hash"]
            )
            if keyed
            else _keyless
        )

    def unpack(self, rows: Sequence[Sequence[Any]]) -> Sequence[Sequence[Any]]:
        """The rows of a statement in this layout, one value per slot (a packed
        layout's rows as the database sent them: the JSON array of the first
        ``packed`` values, then the others)."""
        if not self.packed:
            return rows
        loads = orjson.loads
        return [[*loads(row[0]), *row[1:]] for row in rows]

    def record(self, row: Sequence[Any], q: PageQuery) -> dict[str, Any]:
        """A checkpoint row's values by name (``CHECKPOINT_COLUMNS``); keyless, its
        thread and namespace are the query's (``q``: the page's)."""
        found = dict(self._absent)
        found.update(zip(self._present_names, self._present_of(row), strict=True))
        if not self.keyed:
            found["thread_id"], found["checkpoint_ns"] = q.thread_id, q.namespace
        return found


def _getter(positions: Sequence[int]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A row's values at ``positions``, as a tuple (itemgetter's, even for one)."""
    if len(positions) == 1:
        return lambda row: (row[positions[0]],)
    return operator.itemgetter(*positions)


def _keyed_record(row: Sequence[Any]) -> Any:
    raise TypeError("a keyed page's checkpoint rows are read by LoadLayout.record")


def _keyless(row: Sequence[Any]) -> PageKey:
    return cast(PageKey, _KEYLESS)


def _layout(shared: str, *, keyed: bool, lean: bool = False, unpacked: int = 0) -> LoadLayout:
    """A :class:`LoadLayout` from its columns after the ones every layout begins with
    (kind, state_revision unless ``lean``; keyed, the three keys): ``"checkpoint
    column/value column"`` pairs, ``-`` where that kind of row leaves the column NULL.
    ``unpacked``: packed (``LoadLayout.packed``) but for the last that many slots."""
    first = ["kind/kind"] if lean else ["kind/kind", "state_revision/state_revision"]
    if keyed:
        first += ["thread_id/thread_id", "checkpoint_ns_hash/checkpoint_ns_hash"]
        first += ["checkpoint_id/checkpoint_id"]
    slots: list[Slot] = []
    for pair in [*first, *shared.split()]:
        checkpoint_column, value_column = (None if n == "-" else n for n in pair.split("/"))
        slots.append((checkpoint_column, value_column))
    packed = len(slots) - unpacked if unpacked else 0
    return LoadLayout(slots, keyed=keyed, lean=lean, packed=packed)


# Checkpoint rows and blob/write rows share the key and string columns of the same
# type on every database (checkpoint_id/channel, parent_checkpoint_id/task_id: key
# strings; checkpoint_ns/task_path: long text), as MySQL refuses a UNION column of
# two collations. Where a column may hold any type (SQLite), the JSON documents also
# share with a write's idx, type or blob; on MariaDB, the checkpoint with the blob
# (DialectOps.union_sharing).
# Keyless (get_tuple): the checkpoint row carries no thread_id or checkpoint_ns either,
# which the query names (PageQuery.namespace).
# By DialectOps.union_sharing: the keyless columns, the keyed ones.
_COLUMNS = {
    "none": (
        "checkpoint_id/channel parent_checkpoint_id/task_id -/task_path -/type -/idx -/blob"
        " checkpoint/- metadata/-",
        "parent_checkpoint_id/channel -/task_id checkpoint_ns/task_path -/type -/idx -/blob"
        " checkpoint/- metadata/-",
    ),
    # PostgreSQL: the documents read as text (DialectOps.document_text) share text columns.
    "documents_as_text": (
        "checkpoint_id/channel parent_checkpoint_id/task_id checkpoint/task_path"
        " metadata/type -/idx -/blob",
        "checkpoint_ns/channel parent_checkpoint_id/task_id checkpoint/task_path"
        " metadata/type -/idx -/blob",
    ),
    # MariaDB: the checkpoint shares the blob's column (binary), the metadata a long text's.
    "json_with_binary": (
        "checkpoint_id/channel parent_checkpoint_id/task_id metadata/task_path -/type -/idx"
        " checkpoint/blob",
        "parent_checkpoint_id/channel -/task_id checkpoint_ns/task_path -/type -/idx"
        " checkpoint/blob metadata/-",
    ),
    "any": (
        "checkpoint_id/channel parent_checkpoint_id/task_id checkpoint/task_path"
        " metadata/idx -/type -/blob",
        "checkpoint_ns/channel parent_checkpoint_id/task_id checkpoint/task_path"
        " metadata/idx -/type -/blob",
    ),
}
# DialectOps.union_sharing -> (keyless, keyed) layouts.
_LAYOUTS = {
    sharing: (_layout(keyless, keyed=False), _layout(keyed, keyed=True))
    for sharing, (keyless, keyed) in _COLUMNS.items()
}
# get_tuple's keyless layouts without the state_revision column (LoadLayout.lean): a
# column costs every row (PyMySQL parses a field descriptor in Python per column of
# each result: 47k instructions of MariaDB's 821k get_tuple). By union_sharing.
_LEAN_KEYLESS = {
    sharing: _layout(keyless, keyed=False, lean=True) for sharing, (keyless, _) in _COLUMNS.items()
}
# get_tuple's keyless layouts where the dialect packs a row's short values into one
# column (DialectOps.packs_load_rows: MariaDB's JSON_ARRAY): the kind, the key
# strings, type and idx; the long text (metadata, task_path: a JSON array of them,
# escaped, could pass max_allowed_packet) and the binary column stay columns of their
# own. 3 columns instead of 7.
_PACKED_COLUMNS = {
    "json_with_binary": "checkpoint_id/channel parent_checkpoint_id/task_id -/type -/idx"
    " metadata/task_path checkpoint/blob",
}
# By union_sharing: (the lean layout, the full one).
_PACKED_KEYLESS = {
    sharing: (
        _layout(columns, keyed=False, lean=True, unpacked=2),
        _layout(columns, keyed=False, unpacked=2),
    )
    for sharing, columns in _PACKED_COLUMNS.items()
}


def load_layout(dialect_ops: DialectOps, one_checkpoint: bool) -> LoadLayout:
    """The columns of ``select_load``'s rows on this database, for a page of one
    checkpoint of a thread and namespace the query names (``get_tuple``: no keys on
    its rows) or of several."""
    keyless, keyed = _LAYOUTS[dialect_ops.union_sharing()]
    return keyless if one_checkpoint else keyed


def layout_of(dialect_ops: DialectOps, q: PageQuery) -> LoadLayout:
    """``load_layout`` of the page ``q`` asks for: keyless where it is one checkpoint of
    a thread and namespace it names (``PageQuery.namespace``)."""
    one = q.namespace is not None
    if one and (q.limit != _LITERAL_LIMIT or q.thread_id is None or q.ns_hash is None):
        raise ValueError("a page query names its namespace for one checkpoint of a thread")
    keyless, keyed = _LAYOUTS[dialect_ops.union_sharing()]  # (load_layout, without a call)
    return keyless if one else keyed


def page_key(row: Record) -> PageKey:
    """A checkpoint row's (by name) place in ``list``'s order."""
    return (row["checkpoint_id"], row["thread_id"], row["checkpoint_ns_hash"])


def claim_keyless(owner: PageKey, *grouped: dict[PageKey, Any]) -> None:
    """Give the keyless rows of a page of one to its checkpoint, ``owner``: all are its own."""
    for found in grouped:
        if _KEYLESS in found:
            found[owner] = found.pop(_KEYLESS)


@dataclass(frozen=True)
class PageQuery:
    """Which checkpoints a page holds, newest first."""

    thread_id: str | None = None
    ns_hash: str | None = None
    checkpoint_id: str | None = None
    before_id: str | None = None
    filter: Mapping[str, Any] | None = None
    after: PageKey | None = None
    limit: int | None = None
    # The namespace ns_hash is the hash of, where the query is for one checkpoint of
    # a thread (get_tuple): its rows then need not carry the thread or namespace.
    namespace: str | None = None


def _param(name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name)


# get_tuple's page of one is written `LIMIT 1` in the SQL, not as a bound value: with
# a bound LIMIT, PostgreSQL's generic plan (psycopg prepares a statement from its
# fifth run) cannot count on one row: at 1M checkpoints it cost 3x the custom plan,
# so the server planned every call again (0.6 ms of planning each; docs/scaling.md).
_LITERAL_LIMIT = 1


def _run_id_equals(value: Any) -> ColumnElement[bool] | None:
    """The ``run_id`` column's condition implied by ``metadata["run_id"] == value``
    (the column holds ``str(metadata["run_id"])``, indexed): a filter on a run then
    reads that run's checkpoints, not every checkpoint's metadata. None where the
    value is not a string (the metadata condition alone decides)."""
    if not isinstance(value, str):
        return None
    return C.c.run_id == value


def _keyset_after(q: PageQuery) -> ColumnElement[bool]:
    """Rows strictly after the cursor in (checkpoint_id, thread_id, ns_hash) DESC order."""
    cid, tid, nsh = _param("after_cid"), _param("after_tid"), _param("after_nsh")
    if q.thread_id is not None and q.ns_hash is not None:
        return C.c.checkpoint_id < cid
    return sa.and_(
        # Implied by the OR below, but a bound on the index's first column: the page
        # starts where the cursor is in the index (list-order index, revision 0005),
        # instead of reading every newer row again to filter it out.
        C.c.checkpoint_id <= cid,
        sa.or_(
            C.c.checkpoint_id < cid,
            sa.and_(
                C.c.checkpoint_id == cid,
                sa.or_(
                    C.c.thread_id < tid,
                    sa.and_(C.c.thread_id == tid, C.c.checkpoint_ns_hash < nsh),
                ),
            ),
        ),
    )


def page_params(q: PageQuery) -> dict[str, Any]:
    """Values for the bound parameters of ``select_page(q)`` (filters carry their own)."""
    # (the values set, one by one: a comprehension is a call, and this is get_tuple's path)
    params: dict[str, Any] = {}
    if q.thread_id is not None:
        params["thread_id"] = q.thread_id
    if q.ns_hash is not None:
        params["ns_hash"] = q.ns_hash
    if q.checkpoint_id is not None:
        params["checkpoint_id"] = q.checkpoint_id
    if q.before_id is not None:
        params["before_id"] = q.before_id
    if q.limit is not None and q.limit != _LITERAL_LIMIT:
        params["limit"] = q.limit
    if q.after is not None:
        for name, value in zip(("after_cid", "after_tid", "after_nsh"), q.after, strict=True):
            if value is not None:
                params[name] = value
    return params


def _shape(q: PageQuery) -> tuple[bool, ...]:
    return (
        q.thread_id is not None,
        q.ns_hash is not None,
        q.checkpoint_id is not None,
        q.before_id is not None,
        q.after is not None,
        q.limit is not None,
        q.limit == _LITERAL_LIMIT,
    )


def select_page(dialect_ops: DialectOps, q: PageQuery) -> sa.Select[Any]:
    """The page's checkpoint rows; values are bound parameters (see ``page_params``)."""
    stmt: sa.Select[Any] = sa.select(
        C.c.thread_id,
        C.c.checkpoint_ns_hash,
        C.c.checkpoint_id,
        C.c.checkpoint_ns,
        C.c.parent_checkpoint_id,
        C.c.checkpoint,
        C.c.metadata,
        C.c.state_revision,
    )
    if q.thread_id is not None:
        stmt = stmt.where(C.c.thread_id == _param("thread_id"))
    if q.ns_hash is not None:
        stmt = stmt.where(C.c.checkpoint_ns_hash == _param("ns_hash"))
    if q.checkpoint_id is not None:
        stmt = stmt.where(C.c.checkpoint_id == _param("checkpoint_id"))
    if q.before_id is not None:
        stmt = stmt.where(C.c.checkpoint_id < _param("before_id"))
    for key, value in (q.filter or {}).items():
        if key == "run_id" and (by_column := _run_id_equals(value)) is not None:
            stmt = stmt.where(by_column)
        stmt = stmt.where(dialect_ops.metadata_equals(C.c.metadata, key, value))
    if q.after is not None:
        stmt = stmt.where(_keyset_after(q))
    if q.thread_id is not None and q.ns_hash is not None:
        # Same order, but MySQL/MariaDB only walk the primary key backwards
        # (instead of sorting) when the ORDER BY names no constant column.
        stmt = stmt.order_by(C.c.checkpoint_id.desc())
    else:
        stmt = stmt.order_by(
            C.c.checkpoint_id.desc(), C.c.thread_id.desc(), C.c.checkpoint_ns_hash.desc()
        )
    if q.limit == _LITERAL_LIMIT:
        stmt = dialect_ops.one_row(stmt)
    elif q.limit is not None:
        stmt = stmt.limit(sa.bindparam("limit", type_=sa.Integer))
    return stmt


def load_statement(dialect_ops: DialectOps, q: PageQuery, layout: LoadLayout) -> Executable:
    """``select_load`` of the page in the columns of ``layout`` (``load_layout``: its
    reader's, which may depend on what the engine learned when it connected), built
    once per query shape, layout and dialect.

    Building a UNION of this size costs about as much as running it on SQLite,
    so statements without metadata filters (get_tuple, history paging) are kept
    and reused with new parameters; SQLAlchemy then also reuses its compiled SQL.
    """

    # A thread's page names its thread on every table it reads (the same bound value),
    # so a table partitioned by thread_id is pruned to one partition when planned,
    # and a distributed planner can route the whole statement to one shard.
    def build() -> Executable:
        thread = _param("thread_id") if q.thread_id is not None else None
        return select_load(
            dialect_ops,
            select_page(dialect_ops, q),
            thread,
            one_checkpoint=not layout.keyed,
            layout=layout,
        )

    if q.filter:
        return build()
    return dialect_ops.cached(("load", layout, *_shape(q)), build)


def one_checkpoint_load(
    dialect_ops: DialectOps, by_id: bool, lean: bool
) -> tuple[Executable, LoadLayout]:
    """``get_tuple``'s statement (``load_statement`` of a page of one checkpoint of a
    thread and namespace: by id, or the latest) and its layout, looked up once per
    call. Its parameters: thread_id, ns_hash and (by id) checkpoint_id. ``lean``: in
    the lean layout, whose kinds say only whether a row is at a state revision."""
    sharing = dialect_ops.union_sharing()

    def build() -> tuple[Executable, LoadLayout]:
        q = PageQuery("", "", "" if by_id else None, limit=_LITERAL_LIMIT, namespace="")
        packed = _PACKED_KEYLESS.get(sharing) if dialect_ops.packs_load_rows() else None
        if packed is not None:
            layout = packed[0] if lean else packed[1]
        else:
            layout = _LEAN_KEYLESS[sharing] if lean else layout_of(dialect_ops, q)
        return load_statement(dialect_ops, q, layout), layout

    return dialect_ops.cached(("get_tuple", sharing, by_id, lean), build)


def _null() -> ColumnElement[Any]:
    return sa.null()


def _kind(n: int) -> ColumnElement[int]:
    return sa.literal_column(str(n), sa.Integer).label("kind")


def _kind_of(layout: LoadLayout, n: int, revision: ColumnElement[Any]) -> ColumnElement[Any]:
    """A row's kind column: ``n``; lean, plus ``REVISED`` where ``revision`` is set."""
    if not layout.lean:
        return sa.literal_column(str(n), sa.Integer)
    revised = sa.literal_column(str(n + REVISED), sa.Integer)
    return sa.case((revision.is_(None), sa.literal_column(str(n), sa.Integer)), else_=revised)


@dataclass(frozen=True)
class VersionedBlobs:
    """The blobs a set of checkpoint rows name through their ``channel_versions``:
    ``joined`` is the FROM (the rows, their (channel, version) pairs, then each pair's
    blob by primary key, in that order on every dialect), ``channel`` and ``version``
    the pair's columns, ``blob`` the blob row's."""

    joined: FromClause
    channel: ColumnElement[Any]
    version: ColumnElement[Any]
    blob: FromClause


def versioned_blobs(
    dialect_ops: DialectOps,
    rows: FromClause,
    thread: ColumnElement[Any] | None = None,
    loaded: bool = False,
) -> VersionedBlobs:
    """:class:`VersionedBlobs` of ``rows`` (``checkpoints`` rows) of ``thread`` (bound) if
    known; ``loaded``: a load's, skipping documents naming no blob (ALL_INLINE_KEY)."""
    document: ColumnElement[Any] = rows.c.checkpoint
    document = dialect_ops.unless_all_inline(document, ALL_INLINE_KEY) if loaded else document
    pairs, channel, version = dialect_ops.channel_versions(document)
    blob, blob_on = dialect_ops.keyed_lookup(
        B,
        sa.and_(
            B.c.thread_id == (rows.c.thread_id if thread is None else thread),
            B.c.checkpoint_ns_hash == rows.c.checkpoint_ns_hash,
            B.c.channel == channel,
            B.c.version == version,
        ),
        one_thread=thread is not None,
    )
    joined = ordered_join(ordered_join(rows, pairs, sa.true()), blob, blob_on)
    return VersionedBlobs(joined, channel, version, blob)


def select_load(
    dialect_ops: DialectOps,
    page_stmt: sa.Select[Any],
    thread: ColumnElement[Any] | None = None,
    *,
    one_checkpoint: bool = False,
    layout: LoadLayout | None = None,
) -> sa.CompoundSelect[Any]:
    """One statement: the page's checkpoint rows, their blobs, writes and parent sends
    (``thread``: the page's one thread, as a bound value, where it has one), in the
    columns of ``layout`` (by default ``load_layout(dialect_ops, one_checkpoint)``).

    ``one_checkpoint``: the page holds one checkpoint at most (``get_tuple``), so every
    other row is its own: those rows carry no checkpoint keys, which would only
    repeat its three key strings on each of its blobs and writes.
    """
    if layout is None:
        layout = load_layout(dialect_ops, one_checkpoint)
    assert layout.keyed != one_checkpoint
    if (
        one_checkpoint
        and thread is not None
        and dialect_ops.scalar_page_lookups
        and _bound_names(page_stmt) <= set(_PAGE_OF_ONE)
    ):
        return _one_by_scalars(dialect_ops, layout, page_stmt)
    page = dialect_ops.page_cte(page_stmt)
    owner_keys: dict[str, ColumnElement[Any]] = (
        {name: page.c[name] for name in ("thread_id", "checkpoint_ns_hash", "checkpoint_id")}
        if layout.keyed
        else {}
    )
    checkpoints = _loaded_checkpoints(dialect_ops, layout, page)
    found = versioned_blobs(dialect_ops, page, thread, True)
    blob = found.blob
    blob_values = {
        **owner_keys,
        "state_revision": blob.c.state_revision,
        **{name: blob.c[name] for name in ("channel", "type", "blob")},
    }
    blobs = sa.select(*_value_columns(dialect_ops, layout, KIND_BLOB, blob_values)).select_from(
        found.joined
    )
    writes = _LoadedWrites(dialect_ops, layout, page, thread, owner_keys)
    own_writes = writes.select(KIND_WRITE, page.c.checkpoint_id)
    # Checkpoints before format v4 kept pending sends as the parent's TASKS writes.
    parent_sends = writes.select(
        KIND_PARENT_SEND,
        page.c.parent_checkpoint_id,
        W.c.channel == sql_constant(TASKS),
        dialect_ops.format_below(page.c.checkpoint, 4, ALL_INLINE_KEY),
    )
    return sa.union_all(checkpoints, blobs, own_writes, parent_sends)


# The parameters of a page of one checkpoint (``select_page``: bound in this order).
_PAGE_OF_ONE = ("thread_id", "ns_hash", "checkpoint_id")


def _bound_names(statement: sa.Select[Any]) -> set[str]:
    return {node.key for node in visitors.iterate(statement) if isinstance(node, sa.BindParameter)}


def _one_by_scalars(
    dialect_ops: DialectOps, layout: LoadLayout, page_stmt: sa.Select[Any]
) -> sa.CompoundSelect[Any]:
    """``select_load`` of one checkpoint of a thread and namespace (bound values) where
    the database runs an uncorrelated scalar subquery once per statement
    (``DialectOps.scalar_page_lookups``): each branch takes the one value of the page
    it needs (the document, the id, the parent's id) and looks its rows up by that
    key, rather than joining the page, whose lookup each join would run again (the
    id alone is read from the index). By id, the writes are looked up by the id given.

    The page (the first branch, ``page_stmt``) binds the thread, the namespace and
    the id, in that order (``page_params``): every later use of them is that
    parameter again (``DialectOps.bound_again``).
    """
    names = [name for name in _PAGE_OF_ONE if name in _bound_names(page_stmt)]
    # The page (the first branch alone reads it) selects just the columns that branch
    # sends: each more is read from the row and copied out of the co-routine (SQLite:
    # 2.6k instructions of a get_tuple's statement).
    sent = {name for name, _ in layout.slots if name is not None} | {"state_revision"}
    page = dialect_ops.page_cte(
        page_stmt.with_only_columns(*(c for c in page_stmt.selected_columns if c.key in sent))
    )
    again = {name: dialect_ops.bound_again(_param(name), n) for n, name in enumerate(names, 1)}
    thread, ns_hash = again["thread_id"], again["ns_hash"]
    by_id = again.get("checkpoint_id")
    lookup = sa.select(C.c.checkpoint_id).where(
        C.c.thread_id == thread, C.c.checkpoint_ns_hash == ns_hash
    )
    if by_id is not None:
        lookup = lookup.where(C.c.checkpoint_id == by_id)
    lookup = dialect_ops.one_row(lookup.order_by(C.c.checkpoint_id.desc()))

    def of_page(value: ColumnElement[Any]) -> ColumnElement[Any]:
        return lookup.with_only_columns(value).scalar_subquery()

    document = dialect_ops.unless_all_inline(C.c.checkpoint, ALL_INLINE_KEY)
    blobs = _blobs_named_by(dialect_ops, layout, of_page(document), thread, ns_hash)
    write_values = {name: W.c[name] for name in ("state_revision", *WRITE_VALUE_COLUMNS)}

    def writes_of(kind: int, checkpoint_id: ColumnElement[Any], *extra: Any) -> Any:
        return sa.select(*_value_columns(dialect_ops, layout, kind, write_values)).where(
            W.c.thread_id == thread,
            W.c.checkpoint_ns_hash == ns_hash,
            W.c.checkpoint_id == checkpoint_id,
            *extra,
        )

    # Checkpoints before format v4 kept pending sends as the parent's TASKS writes
    # (the document read only where there is a parent: the database's AND stops first).
    below_v4 = dialect_ops.format_below(C.c.checkpoint, 4, ALL_INLINE_KEY)
    sends_of = sa.case(
        (sa.and_(C.c.parent_checkpoint_id.is_not(None), below_v4), C.c.parent_checkpoint_id)
    )
    return sa.union_all(
        _loaded_checkpoints(dialect_ops, layout, page),
        blobs,
        writes_of(KIND_WRITE, of_page(C.c.checkpoint_id) if by_id is None else by_id),
        writes_of(KIND_PARENT_SEND, of_page(sends_of), W.c.channel == sql_constant(TASKS)),
    )


def _blobs_named_by(
    dialect_ops: DialectOps,
    layout: LoadLayout,
    document: ColumnElement[Any],
    thread: ColumnElement[Any],
    ns_hash: ColumnElement[Any],
) -> sa.Select[Any]:
    """The blob rows of one checkpoint ``document`` (of ``thread`` and ``ns_hash``)."""
    pairs, channel, version = dialect_ops.channel_versions(document)
    blob, blob_on = dialect_ops.keyed_lookup(
        B,
        sa.and_(
            B.c.thread_id == thread,
            B.c.checkpoint_ns_hash == ns_hash,
            B.c.channel == channel,
            B.c.version == version,
        ),
    )
    blob_values = {name: blob.c[name] for name in ("state_revision", "channel", "type", "blob")}
    return sa.select(*_value_columns(dialect_ops, layout, KIND_BLOB, blob_values)).select_from(
        ordered_join(pairs, blob, blob_on)
    )


def _untyped(column: ColumnElement[Any]) -> ColumnElement[Any]:
    # A column of the load is read as the driver returns it, on Core as on the direct
    # path (no result processor: a shared column holds values of several types).
    return sa.type_coerce(column, sa.types.NullType())


def _loaded_checkpoints(dialect_ops: DialectOps, layout: LoadLayout, page: Any) -> sa.Select[Any]:
    """``select_load``'s checkpoint rows: their columns where ``layout`` puts them. The
    first branch of the UNION: its NULLs carry the type of the column they stand in for
    (PostgreSQL types a UNION's columns from its first branch)."""
    columns = []
    for at, (name, value_name) in enumerate(layout.slots):
        if at == AT_KIND:
            column: ColumnElement[Any] = _kind_of(layout, KIND_CHECKPOINT, page.c.state_revision)
        elif name in ("checkpoint", "metadata"):
            column = dialect_ops.document_text(page.c[name])
        elif name is not None:
            column = page.c[name]
        else:
            assert value_name is not None
            column = dialect_ops.typed_null(_VALUE_TYPES[value_name])
        columns.append(column)
    packed = _packed(dialect_ops, layout, columns)
    return sa.select(*(_untyped(column).label(f"c{at}") for at, column in enumerate(packed)))


def _packed(
    dialect_ops: DialectOps, layout: LoadLayout, columns: list[ColumnElement[Any]]
) -> list[ColumnElement[Any]]:
    """A branch's ``columns`` (one per slot of ``layout``) as it sends them: where the
    layout is packed, its first ``packed`` values as one column."""
    if not layout.packed:
        return columns
    return [dialect_ops.packed_values(columns[: layout.packed]), *columns[layout.packed :]]


# The type of each value a blob or write row carries (for the checkpoint branch's NULLs).
_VALUE_TYPES = {name: W.c[name].type for name in WRITE_VALUE_COLUMNS}


def _value_columns(
    dialect_ops: DialectOps,
    layout: LoadLayout,
    kind: int,
    values: Mapping[str, ColumnElement[Any]],
) -> list[ColumnElement[Any]]:
    """A blob or write branch's columns: ``values`` where ``layout`` puts them, NULL elsewhere."""
    columns = [
        (_kind(kind) if not layout.lean else _kind_of(layout, kind, values["state_revision"]))
        if at == AT_KIND
        else _null()
        if name is None
        else values.get(name, _null())
        for at, (_, name) in enumerate(layout.slots)
    ]
    return _packed(dialect_ops, layout, columns)


@dataclass(frozen=True)
class _LoadedWrites:
    """``select_load``'s write rows of a page (``thread``: its one thread, bound)."""

    dialect_ops: DialectOps
    layout: LoadLayout
    page: Any
    thread: ColumnElement[Any] | None
    owner_keys: Mapping[str, ColumnElement[Any]]

    def select(self, kind: int, checkpoint_id: ColumnElement[Any], *extra: Any) -> Any:
        """The writes of ``checkpoint_id`` (and ``extra``'s conditions), as ``kind``."""
        page = self.page
        write, write_on = self.dialect_ops.keyed_lookup(
            W,
            sa.and_(
                W.c.thread_id == (page.c.thread_id if self.thread is None else self.thread),
                W.c.checkpoint_ns_hash == page.c.checkpoint_ns_hash,
                W.c.checkpoint_id == checkpoint_id,
                *extra,
            ),
            one_thread=self.thread is not None,
        )
        values = {
            **self.owner_keys,
            "state_revision": write.c.state_revision,
            **{name: write.c[name] for name in WRITE_VALUE_COLUMNS},
        }
        return sa.select(*_value_columns(self.dialect_ops, self.layout, kind, values)).select_from(
            ordered_join(page, write, write_on)
        )


# --- the portable fallback: three batched statements per page ---------------


def blob_keys(wanted: Sequence[tuple[str, str, str, str]]) -> ColumnElement[bool]:
    """Blobs with one of these exact (thread_id, ns_hash, channel, version) keys."""
    return sa.or_(
        *(
            sa.and_(
                B.c.thread_id == t,
                B.c.checkpoint_ns_hash == h,
                B.c.channel == ch,
                B.c.version == v,
            )
            for t, h, ch, v in wanted
        )
    )


def select_blobs_for(wanted: Sequence[tuple[str, str, str, str]]) -> sa.Select[Any]:
    return sa.select(
        B.c.thread_id,
        B.c.checkpoint_ns_hash,
        B.c.channel,
        B.c.version,
        B.c.type,
        B.c.blob,
        B.c.state_revision,
    ).where(blob_keys(wanted))


def select_writes_for(checkpoints: Sequence[tuple[str, str, str]]) -> sa.Select[Any]:
    """Writes of the given (thread_id, ns_hash, checkpoint_id) checkpoints."""
    return sa.select(
        W.c.thread_id,
        W.c.checkpoint_ns_hash,
        W.c.checkpoint_id,
        W.c.channel,
        W.c.task_id,
        W.c.task_path,
        W.c.idx,
        W.c.type,
        W.c.blob,
        W.c.state_revision,
    ).where(
        sa.or_(
            *(
                sa.and_(W.c.thread_id == t, W.c.checkpoint_ns_hash == h, W.c.checkpoint_id == c)
                for t, h, c in checkpoints
            )
        )
    )
