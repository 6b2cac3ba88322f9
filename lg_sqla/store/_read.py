"""The batch's gets and namespace lists, and the TTL refresh of what its reads found."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from langgraph.store.base import GetOp, Item, ListNamespacesOp

from lg_sqla.dialects import ordered_join
from lg_sqla.models import store_items
from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash
from lg_sqla.store._common import (
    Batch,
    GotRow,
    Settings,
    alive,
    alive_at_now,
    head_in,
    in_keys,
    join_namespace,
    key_chunks,
    op_tag,
    prefix_condition,
    split_namespace,
    subtree_bounds,
    union_of,
)
from lg_sqla.store._match import matches_condition
from lg_sqla.store._sql import namespace_condition


def get_statement(settings: Settings, many: bool) -> sa.Select[Any]:
    """The items of one key (``prefix_hash``, ``key_hash``) or of many (``keys``),
    alive at ``now``; built once per store (a get is the hottest path)."""

    def build() -> sa.Select[Any]:
        t = store_items.c
        if many:
            return _items_where(settings, in_keys(settings, store_items))
        return _items_where(
            settings,
            sa.and_(
                t.prefix_hash == sa.bindparam("prefix_hash"), t.key_hash == sa.bindparam("key_hash")
            ),
        )

    return settings.dialect_ops.cached(("store.get", many, settings.omit_expired), build)


def _items_where(settings: Settings, where: sa.ColumnElement[bool]) -> sa.Select[Any]:
    """GotRow's first six columns (not the key hashes: the reader knows them, and each
    column costs the driver per row) of the items ``where`` holds, alive at ``now``."""
    t = store_items.c
    alive: sa.ColumnElement[bool] = sa.true()
    if settings.omit_expired:
        now = sa.bindparam("now", type_=t.expires_at.type)
        alive = sa.or_(t.expires_at.is_(None), t.expires_at > now)
    stamp = settings.sql.read_timestamp
    columns = (t.prefix, t.key, t.value, stamp(t.created_at), stamp(t.updated_at), t.ttl_minutes)
    return sa.select(*columns).where(where, alive)


# Gets of up to this many keys in one batch take a statement of that many pairs of
# bound parameters (``keys_statement``), built once per count; more take the list of
# ``in_keys``. A batch a graph node sends reads a few keys.
FIXED_KEYS_MAX = 8


def keys_statement(settings: Settings, count: int) -> sa.Select[Any]:
    """:func:`get_statement` of ``count`` keys (2 to ``FIXED_KEYS_MAX``), bound as
    ``kp0, kh0, kp1, kh1...``: the items of ``in_keys``' list of that length, but
    compiled once, so that the direct path runs it as any other cached statement."""

    def build() -> sa.Select[Any]:
        t = store_items.c
        # An OR of key equalities, not a row-value IN of the pairs: SQLite (3.40) finds
        # no index for that IN and, with the expiry condition, scanned every item of
        # the table; each equality pair is a primary-key lookup on every database.
        # (Untyped: no cast on PostgreSQL, as the one-key statement's parameters.)
        pairs = [
            sa.and_(t.prefix_hash == sa.bindparam(f"kp{n}"), t.key_hash == sa.bindparam(f"kh{n}"))
            for n in range(count)
        ]
        return _items_where(settings, sa.or_(*pairs))

    return settings.dialect_ops.cached(("store.get.keys", count, settings.omit_expired), build)


def keys_statement_params(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    params: dict[str, str] = {}
    for (prefix_name, key_name), (prefix_hash, item_hash) in zip(
        _KEY_NAMES[: len(pairs)], pairs, strict=True
    ):
        params[prefix_name] = prefix_hash
        params[key_name] = item_hash
    return params


# keys_statement's parameter names, made once.
_KEY_NAMES = [(f"kp{n}", f"kh{n}") for n in range(FIXED_KEYS_MAX)]


def lone_get_statement(settings: Settings) -> sa.Select[Any]:
    """:func:`get_statement` of one key (columns as ``LONE_COLUMNS``); where the dialect
    compares the names in SQL (``StoreSQL.lone_get_names_in_sql``, the parameters
    ``prefix`` and ``key``), without the first two (the op's names)."""
    full = get_statement(settings, False)
    if not settings.sql.lone_get_names_in_sql:
        return full

    def build() -> sa.Select[Any]:
        t, exact = store_items.c, settings.sql.text_equals
        return full.with_only_columns(*(full.selected_columns[n] for n in LONE_COLUMNS[2:])).where(
            exact(t.prefix, sa.bindparam("prefix", type_=sa.String)),
            exact(t.key, sa.bindparam("key", type_=sa.String)),
        )

    return settings.dialect_ops.cached(("store.get.lone", settings.omit_expired), build)


# The columns of get_statement, in order: GotRow's, without the key hashes.
LONE_COLUMNS = GotRow._fields[:6]


def get_plan(batch: Batch, gets: Sequence[tuple[int, GetOp]]) -> Plan[None]:
    """The items of every GetOp of the batch: one SELECT of all their keys."""
    if not gets:
        return
    settings, now = batch.settings, batch.now
    # (names -> hashes: the rows hold the names, not the hashes)
    hashes: dict[tuple[str, str], tuple[str, str]] = {}
    for _, op in gets:
        prefix = join_namespace(op.namespace)
        hashes[(prefix, op.key)] = (key_hash(prefix), key_hash(op.key))
    pairs = sorted(set(hashes.values()))
    rows: list[Any] = []
    if len(pairs) == 1:  # the common case, a lone get: the simplest statement
        ((prefix_hash, item_hash),) = pairs
        params = {"prefix_hash": prefix_hash, "key_hash": item_hash, "now": now}
        statement = get_statement(settings, False)
        rows += (yield batch.step(statement, params, fetch=True, positional=True)).rows
    elif len(pairs) <= FIXED_KEYS_MAX:
        params = {**keys_statement_params(pairs), "now": now}
        statement = keys_statement(settings, len(pairs))
        rows += (yield batch.step(statement, params, fetch=True, positional=True)).rows
    else:
        for chunk in key_chunks(settings, pairs):
            statement = get_statement(settings, True)
            params = {**chunk, "now": now}
            rows += (yield batch.step(statement, params, fetch=True, positional=True)).rows
    # The rows of the ops' names (not another item of the same hashes), by name.
    found: dict[tuple[str, str], GotRow] = {}
    for fetched in rows:
        names = (fetched[0], fetched[1])
        known = hashes.get(names)
        if known is not None:
            found[names] = GotRow.of_lone(fetched, *known)
    for i, op in gets:
        row = found.get((join_namespace(op.namespace), op.key))
        # (the op's namespace: the same labels as the row's prefix, not split again)
        batch.results[i] = (
            Item(
                value=row.value,
                key=row.key,
                namespace=op.namespace,
                created_at=row.created_at,
                updated_at=row.updated_at,
            )
            if row is not None
            else None
        )
        if row is not None and op.refresh_ttl:
            batch.refresh_ttl_of([row])


def list_namespaces_plan(batch: Batch, lists: Sequence[tuple[int, ListNamespacesOp]]) -> Plan[None]:
    """The namespaces of every ListNamespacesOp of the batch: their pages in one
    statement, or (no JSON functions) every namespace, matched and paged here."""
    if not lists:
        return
    settings, now = batch.settings, batch.now
    if settings.sql.in_sql:
        outcome = yield batch.step(_list_statement(settings, lists), {"now": now}, fetch=True)
        for i, _ in lists:
            batch.results[i] = [split_namespace(row.ns) for row in outcome.rows if row.op == i]
        return
    outcome = yield batch.step(
        sa.select(store_items.c.prefix).distinct().where(alive(now, settings.omit_expired)),
        fetch=True,
    )
    namespaces = [split_namespace(row.prefix) for row in outcome.rows]
    for i, lop in lists:
        batch.results[i] = _namespaces_in_python(lop, namespaces)


def _list_statement(
    settings: Settings, lists: Sequence[tuple[int, ListNamespacesOp]]
) -> sa.Select[Any] | sa.CompoundSelect[Any]:
    """Every ListNamespacesOp of the batch in one statement: its namespaces (cut at
    ``max_depth``), distinct, in Python's tuple order, one page each; alive at the
    parameter ``now``. Built once per set of ops (building cost more than running it:
    ~0.3 ms), kept in the store's LRU of statements."""
    key = (
        "list",
        settings.omit_expired,
        tuple(
            (
                i,
                tuple((c.match_type, tuple(c.path)) for c in lop.match_conditions or ()),
                lop.max_depth,
                lop.limit,
                lop.offset,
            )
            for i, lop in lists
        ),
    )
    return settings.statements.get(key, lambda: _build_list_statement(settings, lists))


def _build_list_statement(
    settings: Settings, lists: Sequence[tuple[int, ListNamespacesOp]]
) -> sa.Select[Any] | sa.CompoundSelect[Any]:
    t = store_items.c
    sql = settings.sql
    selects: list[Any] = []
    for i, lop in lists:
        if lop.max_depth is None:
            selects.append(_namespaces_page(settings, i, lop))
            continue
        where = [alive_at_now(settings)]
        where += [
            namespace_condition(sql, t.prefix, c, prefix_condition)
            for c in lop.match_conditions or ()
        ]
        # The distinct namespaces first, then their heads: a namespace holds many items,
        # and a head costs (SQLite splits the labels with json_each): computed per item,
        # it made a list_namespaces with max_depth over 600 items take 2.6 ms.
        namespaces = sa.select(t.prefix).distinct().where(*where).subquery("namespaces")
        prefix = namespaces.c.prefix
        ns = sql.namespace_head(prefix, lop.max_depth)
        sort_key = sql.namespace_sort_key(ns).label("sort_key")
        # Heads of distinct namespaces may repeat: DISTINCT again.
        page = sa.select(op_tag(i), ns.label("ns"), sort_key).distinct()
        selects.append(page.order_by(sort_key).limit(lop.limit).offset(lop.offset))
    return union_of(selects)


def _namespaces_page(settings: Settings, i: int, lop: ListNamespacesOp) -> sa.Select[Any]:
    """The page of whole namespaces (no ``max_depth``) of op ``i``, reading only the
    namespaces up to it: ``prefix_head`` is the namespace's first characters in sort
    order (revision 0007), so the first ``offset + limit`` distinct heads of the items
    that match, an index walk that stops there, hold the page's namespaces (a namespace
    sorts by its head first; namespaces longer than a head that share it are sorted by
    the full key among themselves). Then the items of those heads give the namespaces,
    sorted and paged. Was: every namespace under the prefix, distinct and sorted, for a
    page (SQLite, 10,000 namespaces: 8.5 ms a page of 100; now 0.3 ms)."""
    t, sql = store_items.c, settings.sql
    conditions = lop.match_conditions or ()
    by_head = functools.partial(prefix_condition, by_head=False)
    exact = [
        alive_at_now(settings),
        *(namespace_condition(sql, t.prefix, c, by_head) for c in conditions),
    ]
    # The walk: the heads' index range of each prefix condition, the exact conditions
    # checked on each row walked, as one opaque CASE: PostgreSQL estimated them selective
    # (an OR of equalities; expiry through ix_store_items_expires_at) and read and sorted
    # every item of the range instead of walking it.
    ranges = [
        head_in(*subtree_bounds(join_namespace(tuple(c.path))))
        for c in conditions
        if c.match_type == "prefix" and c.path and "*" not in c.path
    ]
    checked = sa.case((sa.and_(*exact), sa.true()), else_=sa.false())
    heads = (
        sa.select(t.prefix_head.label("head"))
        .distinct()
        .where(*ranges, checked)
        .order_by(t.prefix_head)
        .limit(lop.offset + lop.limit)
        .subquery("heads")
    )
    sort_key = sql.namespace_sort_key(t.prefix).label("sort_key")
    # The items of those heads, found by head (the same opaque check: else PostgreSQL
    # read every live item through the expiry index and hash-joined them).
    return (
        sa.select(op_tag(i), t.prefix.label("ns"), sort_key)
        .distinct()
        # Heads first (MariaDB scanned the table and looked each row up in the heads).
        .select_from(ordered_join(heads, store_items, t.prefix_head == heads.c.head))
        .where(checked)
        .order_by(sort_key)
        .limit(lop.limit)
        .offset(lop.offset)
    )


def _namespaces_in_python(
    lop: ListNamespacesOp, namespaces: Sequence[tuple[str, ...]]
) -> list[tuple[str, ...]]:
    """A ListNamespacesOp's page of ``namespaces``, matched, cut and sorted in Python."""
    kept = [
        ns for ns in namespaces if all(matches_condition(c, ns) for c in lop.match_conditions or ())
    ]
    if lop.max_depth is not None:
        kept = list({ns[: lop.max_depth] for ns in kept})
    return sorted(kept)[lop.offset : lop.offset + lop.limit]


def refresh_ttl_plan(batch: Batch) -> Plan[None]:
    """Restart the expiry of the items the batch's reads refreshed: one UPDATE
    (executemany)."""
    if not batch.refresh:
        return
    yield Step(
        refresh_statement(batch.settings),
        [
            {
                "b_prefix_hash": p,
                "b_key_hash": k,
                "b_expires_at": batch.now + dt.timedelta(minutes=ttl),
            }
            for (p, k), ttl in sorted(batch.refresh.items())
        ],
    )


def refresh_statement(settings: Settings) -> sa.Update:
    """The UPDATE that restarts one item's expiry (``b_expires_at``), by its hashes."""
    t = store_items.c
    return settings.dialect_ops.cached(
        "store.refresh",
        lambda: (
            sa.update(store_items)
            .where(
                t.prefix_hash == sa.bindparam("b_prefix_hash"),
                t.key_hash == sa.bindparam("b_key_hash"),
            )
            .values(expires_at=sa.bindparam("b_expires_at"))
        ),
    )
