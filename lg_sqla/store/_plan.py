"""The store's batch as one I/O-free plan (see ``lg_sqla.plans``), shared by the sync
and async stores.

A batch of any size runs in a constant number of statements, grouped by kind,
in one transaction: reads first (as LangGraph's ``InMemoryStore``: reads in a
batch see the state before its puts), then writes.

=====================  =====================================================
statement              when
=====================  =====================================================
SELECT items           the batch has ``GetOp`` s (all of them, one ``IN``)
SELECT items           the batch has ``SearchOp`` s (a page each, UNION ALL)
SELECT vectors         a ``SearchOp`` has a ``query`` and the store an index
SELECT namespaces      the batch has ``ListNamespacesOp`` s (a page each, UNION ALL)
UPDATE expires_at      a read returned items whose TTL is refreshed (executemany)
DELETE items, vectors  the batch deletes (``PutOp`` with ``value=None``) or re-puts
INSERT items (upsert)  the batch puts (executemany)
INSERT vectors         a put was embedded (executemany)
=====================  =====================================================

Search filters (``_sql.py``), ordering and pages, namespace match conditions,
``max_depth`` and pages of namespaces are SQL on SQLite, PostgreSQL and
MySQL/MariaDB, so a search reads only its page. The similarity ranking runs in
Python over the filtered candidates; dialects without JSON functions we know
(``StoreSQL.in_sql`` False) filter and page in Python.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar, cast

import sqlalchemy as sa
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from lg_sqla import limits
from lg_sqla.dialects import NUMERIC_STRING, DialectOps, StoreSQL
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import store_items, store_vectors
from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash
from lg_sqla.store._sql import (
    filter_condition,
    filter_params,
    flatten_filter,
    namespace_condition,
    ordering_operand,
)

T = TypeVar("T")
FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def join_namespace(namespace: tuple[str, ...]) -> str:
    # LangGraph forbids "." in labels (validate_op_namespace), so the join is reversible.
    return ".".join(namespace)


def split_namespace(prefix: str) -> tuple[str, ...]:
    return tuple(prefix.split("."))


def namespace_head(prefix: str) -> str:
    """What ``store_items.prefix_head`` holds for a joined namespace."""
    return prefix[: limits.NS_HEAD_LEN]


def subtree_bounds(prefix: str) -> tuple[str, str | None]:
    """``(low, high)``: every item in the joined namespace ``prefix`` or below it has
    ``low <= prefix_head < high`` (code point order), or ``prefix_head == low`` where
    ``high`` is None (``prefix`` longer than a head). A superset: the exact condition
    on the full prefix still applies; the range only lets the index find the subtree."""
    if len(prefix) + 1 <= limits.NS_HEAD_LEN:
        # Descendants continue with ".", and "/" is the code point after ".".
        return prefix, prefix + "/"
    return namespace_head(prefix), None


def _head_in(low: Any, high: Any | None) -> sa.ColumnElement[bool]:
    head: sa.ColumnElement[str] = store_items.c.prefix_head
    if high is None:
        return cast(sa.ColumnElement[bool], head == low)
    return sa.and_(head >= low, head < high)


def _check_text(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInputError(f"{field} contains a NUL character (U+0000): {value!r}")
    return value


def check_json_value(where: str, value: Any) -> None:
    """Refuse what would not round-trip as JSON on every dialect (PostgreSQL's JSONB
    holds no U+0000 and no NaN), naming the culprit."""
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, str):
        _check_text(where, value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{where} is {value!r}, which JSON cannot store")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _check_text(f"{where} key {k!r}", k)
            check_json_value(f"{where}[{k!r}]", v)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_json_value(f"{where}[{i}]", v)
    else:
        raise InvalidInputError(
            f"{where} is a {type(value).__name__}; store values must be JSON "
            "(str, int, float, bool, None, list, dict)"
        )


def check_op(op: Op) -> None:
    """Validate one op before anything is written (a bad op fails the whole batch)."""
    try:
        validate_op_namespace(op)
    except ValueError as error:
        raise InvalidInputError(f"namespace: {error}") from error
    if isinstance(op, (GetOp, PutOp)):
        _check_text("key", op.key)
        for label in op.namespace:
            _check_text("namespace label", label)
    if isinstance(op, PutOp):
        if not op.namespace:
            raise InvalidInputError("namespace of a put must not be empty")
        if op.value is not None:
            if not isinstance(op.value, Mapping):
                raise InvalidInputError(f"value must be a dict, got {type(op.value).__name__}")
            check_json_value("value", op.value)
        if op.ttl is not None and (
            not isinstance(op.ttl, (int, float)) or not math.isfinite(op.ttl) or op.ttl <= 0
        ):
            raise InvalidInputError(f"ttl must be a positive number of minutes, got {op.ttl!r}")
        if op.index not in (None, False):
            for path in op.index or ():
                _check_text("index field", path)
    elif isinstance(op, SearchOp):
        for name, value in (("limit", op.limit), ("offset", op.offset)):
            if not isinstance(value, int) or value < 0:
                raise InvalidInputError(f"search {name} must be an int >= 0, got {value!r}")
        for key, wanted in (op.filter or {}).items():
            _check_text("filter key", key)
            if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
                for operator, operand in wanted.items():
                    if operator not in FILTER_OPERATORS:
                        raise InvalidInputError(
                            f"filter operator {operator!r} on {key!r} is not one of "
                            f"{sorted(FILTER_OPERATORS)}"
                        )
                    check_json_value(f"filter[{key!r}][{operator!r}]", operand)
                    if operator not in ("$eq", "$ne") and ordering_operand(operand) is None:
                        raise InvalidInputError(
                            f"filter[{key!r}][{operator!r}] compares numbers: "
                            f"{operand!r} is not one"
                        )
            else:
                check_json_value(f"filter[{key!r}]", wanted)
        if op.query is not None:
            _check_text("query", op.query)
    elif isinstance(op, ListNamespacesOp):
        for name, value in (("limit", op.limit), ("offset", op.offset)):
            if not isinstance(value, int) or value < 0:
                raise InvalidInputError(
                    f"list_namespaces {name} must be an int >= 0, got {value!r}"
                )
        if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 1):
            raise InvalidInputError(f"max_depth must be an int >= 1, got {op.max_depth!r}")
        for condition in op.match_conditions or ():
            if condition.match_type not in ("prefix", "suffix"):
                raise InvalidInputError(
                    f"match_type must be 'prefix' or 'suffix', got {condition.match_type!r}"
                )
    elif not isinstance(op, (GetOp, PutOp)):
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")


# --- filters and matching (the semantics of LangGraph's InMemoryStore) -------------


def _compare(item_value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_apply(item_value, op, operand) for op, operand in wanted.items())
        if not isinstance(item_value, Mapping):
            return False
        return all(_compare(item_value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(item_value, wanted, strict=True))
        )
    return bool(item_value == wanted)


def _number(value: Any) -> float | None:
    """An item's value as ordering filters read it in SQL (dialects.NUMERIC_STRING)."""
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str) and re.match(NUMERIC_STRING, value):
        return float(value)
    return None


def _apply(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    # Ordering compares numbers (booleans and JSON-number strings included, as in SQL);
    # a missing or non-numeric value matches no ordering condition.
    left, right = _number(value), ordering_operand(operand)
    if left is None or right is None:
        return False
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right


def matches_filter(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    return all(_compare(value.get(k), v) for k, v in (wanted or {}).items())


def matches_condition(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    if not path:
        return True
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


# --- vectors -----------------------------------------------------------------------


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


# --- the plan ----------------------------------------------------------------------


@dataclass
class Embedded:
    """What the shell computed before the plan runs: embeddings need I/O of their own."""

    # (namespace, key) -> [(field path, vector)] for the batch's effective puts.
    documents: dict[tuple[tuple[str, ...], str], list[tuple[str, list[float]]]] = field(
        default_factory=dict
    )
    # query text -> vector
    queries: dict[str, list[float]] = field(default_factory=dict)


class Statements:
    """A store's statements built by shape, thread-safe; past ``size`` shapes, the
    least recently used is dropped (filters with ever new member names stay bounded)."""

    def __init__(self, size: int = 512) -> None:
        self._size = size
        self._built: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            found = self._built.get(key)
            if found is not None:
                self._built.move_to_end(key)
                return cast(T, found)
        statement = build()  # outside the lock: two threads may build the same; harmless
        with self._lock:
            self._built[key] = statement
            while len(self._built) > self._size:
                self._built.popitem(last=False)
        return statement


@dataclass
class NativeVectors:
    """Whether searches rank by similarity in SQL: known from the driver, or None until
    the first ranking search asks the database (``StoreSQL.vector_probe``)."""

    known: bool | None


@dataclass(frozen=True)
class Settings:
    ops: DialectOps
    sql: StoreSQL  # the dialect's JSON and namespace primitives
    indexed: bool  # the store has an IndexConfig
    omit_expired: bool = True
    # Ranking by similarity in SQL (sqlite-vec, pgvector; see StoreSQL.native_vectors).
    native_vectors: NativeVectors = field(default_factory=lambda: NativeVectors(False))
    dims: int = 0  # the IndexConfig's: stored vectors of another length are refused
    statements: Statements = field(default_factory=Statements, compare=False)


def effective_puts(ops: Sequence[Op]) -> dict[tuple[tuple[str, ...], str], PutOp]:
    """The last put of each (namespace, key): earlier ones in the batch are overwritten."""
    puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
    for op in ops:
        if isinstance(op, PutOp):
            puts[(op.namespace, op.key)] = op
    return puts


def _alive(now: dt.datetime, omit_expired: bool) -> sa.ColumnElement[bool]:
    if not omit_expired:
        return sa.true()
    t = store_items.c
    return sa.or_(t.expires_at.is_(None), t.expires_at > now)


def _prefix_condition(namespace: tuple[str, ...]) -> sa.ColumnElement[bool]:
    if not namespace:
        return sa.true()
    text = join_namespace(namespace)
    t = store_items.c
    # substr, not LIKE: SQLite's LIKE ignores ASCII case, and labels may hold % or _.
    return sa.and_(
        _head_in(*subtree_bounds(text)),
        sa.or_(
            t.prefix_hash == key_hash(text),
            sa.func.substr(t.prefix, 1, len(text) + 1) == text + ".",
        ),
    )


class _GotRow(NamedTuple):
    """A fetched item, from SQLAlchemy's processed rows or the raw DBAPI rows of the
    direct path (lg_sqla.runtime.direct): JSON text parsed, timestamps as aware UTC."""

    prefix: str
    key: str
    value: dict[str, Any]
    created_at: dt.datetime
    updated_at: dt.datetime
    ttl_minutes: float | None
    prefix_hash: str
    key_hash: str

    @classmethod
    def of(cls, row: Any) -> _GotRow:
        m = row._mapping
        value = m["value"]
        if isinstance(value, (str, bytes)):  # SQLite's and MySQL's JSON is text
            value = json.loads(value)
        return cls(
            m["prefix"],
            m["key"],
            value,
            _utc(m["created_at"]),
            _utc(m["updated_at"]),
            m["ttl_minutes"],
            m["prefix_hash"],
            m["key_hash"],
        )


def _utc(value: Any) -> dt.datetime:
    # SQLite's timestamps are text, MySQL's naive UTC (see types.UTCDateTime).
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)  # type: ignore[no-any-return]
    return value.astimezone(dt.timezone.utc)  # type: ignore[no-any-return]


def _item(row: Any, cls: type[Item] = Item, score: float | None = None) -> Item:
    namespace = split_namespace(row.prefix)
    if cls is SearchItem:
        return SearchItem(
            namespace, row.key, row.value, row.created_at, row.updated_at, score=score
        )
    return Item(
        value=row.value,
        key=row.key,
        namespace=namespace,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _chunks(settings: Settings, pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Parameters of ``_in_keys`` for ``pairs``, split where one statement would exceed
    the dialect's bound-parameter limit: more statements only past that size."""
    size = settings.sql.keys_per_statement
    return [settings.sql.keys_params(pairs[n : n + size]) for n in range(0, len(pairs), size)] or [
        settings.sql.keys_params(pairs)
    ]


def _in_keys(settings: Settings, table: sa.Table) -> Any:
    """(prefix_hash, key_hash) IN the pairs of a ``_chunks`` parameter set."""
    return settings.sql.in_keys(table.c.prefix_hash, table.c.key_hash)


def _get_statement(settings: Settings, many: bool) -> sa.Select[Any]:
    """The items of one key (``prefix_hash``, ``key_hash``) or of many (``keys``),
    alive at ``now``; built once per store (a get is the hottest path)."""

    def build() -> sa.Select[Any]:
        t = store_items.c
        if many:
            where = _in_keys(settings, store_items)
        else:
            where = sa.and_(
                t.prefix_hash == sa.bindparam("prefix_hash"), t.key_hash == sa.bindparam("key_hash")
            )
        alive: sa.ColumnElement[bool] = sa.true()
        if settings.omit_expired:
            now = sa.bindparam("now", type_=t.expires_at.type)
            alive = sa.or_(t.expires_at.is_(None), t.expires_at > now)
        columns = (t.prefix, t.key, t.value, t.created_at, t.updated_at, t.ttl_minutes)
        return sa.select(*columns, t.prefix_hash, t.key_hash).where(where, alive)

    return settings.ops.cached(("store.get", many, settings.omit_expired), build)


def _union(selects: Sequence[sa.Select[Any]]) -> sa.Select[Any] | sa.CompoundSelect[Any]:
    """One statement for every op of a kind: each op's own query (with its own ORDER BY
    and LIMIT) as a subquery, tagged with the op's index in a column ``op``."""
    if len(selects) == 1:
        return selects[0]
    return sa.union_all(*(sa.select(s.subquery()) for s in selects))


def _op_tag(i: int) -> sa.ColumnElement[int]:
    # Inline: a bound parameter would be untyped text in a PostgreSQL UNION.
    return sa.literal_column(str(int(i)), sa.Integer).label("op")


def _search_rows(
    settings: Settings,
    searches: Sequence[tuple[int, SearchOp]],
    now: dt.datetime,
    step: Callable[..., Step],
) -> Plan[list[Any]]:
    """The rows of every search of the batch, each tagged with its op's index: a page
    per search, filtered, ordered and cut in SQL (all filtered candidates of a
    search that ranks by similarity, which happens in Python)."""
    selects = []
    params: dict[str, Any] = {"now": now}
    for j, (i, sop) in enumerate(searches):
        statement, own = _search_select(settings, j, i, sop)
        selects.append(statement)
        params.update(own)
    outcome = yield step(_union(selects), params, fetch=True)
    return list(outcome.rows)


class _RankedRow(NamedTuple):
    op: int
    row: _GotRow
    score: float | None


def _refuse_dims(settings: Settings, found: int | None) -> None:
    length = "another number of" if found is None else str(found)
    raise InvalidInputError(
        f"a stored vector has {length} dimensions, but index dims is {settings.dims}: "
        "re-put the items of this namespace after changing dims"
    )


def _ranked_rows(
    settings: Settings,
    searches: Sequence[tuple[int, SearchOp]],
    embedded: Embedded,
    now: dt.datetime,
    step: Callable[..., Step],
) -> Plan[list[_RankedRow]]:
    """The page of every ranking search of the batch, ranked in SQL (native vectors):
    one statement, each search its own ranked page. The order is the portable path's:
    by best cosine similarity over the item's vectors, highest first, items without a
    vector after them (as InMemoryStore fills a short page), ties by the order of a
    search without query (updated_at, then the key hashes)."""
    selects = []
    params: dict[str, Any] = {"now": now}
    for j, (i, sop) in enumerate(searches):
        candidates, own = _search_select(settings, j, i, sop)

        def build(j: int = j, candidates: sa.Select[Any] = candidates) -> sa.Select[Any]:
            t, v = store_items.c, store_vectors.c
            sql = settings.sql
            its_own = sa.and_(v.prefix_hash == t.prefix_hash, v.key_hash == t.key_hash)
            fits = sql.vector_has_dims(v.embedding, settings.dims)
            query = sql.vector_param(f"s{j}_query")
            best = sa.func.max(sql.vector_similarity(v.embedding, query))
            score = sa.select(best).where(its_own, fits).scalar_subquery().label("score")
            # Counted, not skipped: a vector of another length means dims changed, which
            # the portable path refuses too (_refuse_dims).
            misfits = sa.select(sa.func.count()).where(its_own, ~fits)
            return (
                candidates.add_columns(score, misfits.scalar_subquery().label("misfits"))
                .order_by(None)
                .order_by(
                    sa.desc(score).nulls_last(), t.updated_at.desc(), t.prefix_hash, t.key_hash
                )
                .limit(sa.bindparam(f"s{j}_limit", type_=sa.Integer))
                .offset(sa.bindparam(f"s{j}_offset", type_=sa.Integer))
            )

        # The candidates' statement is cached per shape: so is its ranked form.
        selects.append(settings.statements.get(("ranked", j, candidates), build))
        assert sop.query is not None
        params.update(own)
        params.update(
            {
                f"s{j}_query": settings.sql.vector_value(embedded.queries[sop.query]),
                f"s{j}_limit": sop.limit,
                f"s{j}_offset": sop.offset,
            }
        )
    outcome = yield step(_union(selects), params, fetch=True)
    ranked = []
    for row in outcome.rows:
        if row.misfits:
            _refuse_dims(settings, None)
        ranked.append(_RankedRow(row.op, _GotRow.of(row), row.score))
    return ranked


def _search_select(
    settings: Settings, j: int, i: int, sop: SearchOp
) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The query of the batch's ``j``-th search (op ``i``) and its parameters (named
    ``s<j>_...``). Built once per filter shape: building a filter's expression costs
    more than running it (~0.5 ms for one equality), values are parameters."""
    sql = settings.sql
    ranked = bool(sop.query and settings.indexed)
    shape, values = flatten_filter(sop.filter) if sql.in_sql else ((), [])
    paged = sql.in_sql and not ranked

    def name(n: int | str) -> str:
        return f"s{j}_{n}"

    text = join_namespace(sop.namespace_prefix)
    low, high = subtree_bounds(text)

    def build() -> sa.Select[Any]:
        t = store_items.c
        where = [_alive_at_now(settings)]
        if sop.namespace_prefix:
            # The index range of the subtree (prefix_head), then the exact condition.
            # substr, not LIKE: SQLite's LIKE ignores ASCII case, labels may hold % or _.
            where.append(
                _head_in(
                    sa.bindparam(name("low")), None if high is None else sa.bindparam(name("high"))
                )
            )
            where.append(
                sa.or_(
                    t.prefix_hash == sa.bindparam(name("hash")),
                    sa.func.substr(t.prefix, 1, sa.bindparam(name("width"), type_=sa.Integer))
                    == sa.bindparam(name("start"), type_=sa.String),
                )
            )
        if shape:
            where.append(filter_condition(sql, t.value, shape, name))
        columns = (t.prefix, t.key, t.value, t.created_at, t.updated_at, t.ttl_minutes)
        statement = (
            sa.select(_op_tag(i), *columns, t.prefix_hash, t.key_hash)
            .where(*where)
            # The official stores' order without a query: most recently updated first
            # (then the key, so that pages partition the results).
            .order_by(t.updated_at.desc(), t.prefix_hash, t.key_hash)
        )
        if paged:
            statement = statement.limit(sa.bindparam(name("limit"), type_=sa.Integer)).offset(
                sa.bindparam(name("offset"), type_=sa.Integer)
            )
        return statement

    key = (
        "search",
        j,
        i,
        bool(sop.namespace_prefix),
        high is None,
        shape,
        paged,
        settings.omit_expired,
    )
    params = filter_params(sql, values, name)
    if sop.namespace_prefix:
        params.update(
            {
                name("hash"): key_hash(text),
                name("width"): len(text) + 1,
                name("start"): text + ".",
                name("low"): low,
            }
        )
        if high is not None:
            params[name("high")] = high
    if paged:
        params.update({name("limit"): sop.limit, name("offset"): sop.offset})
    return settings.statements.get(key, build), params


def _alive_at_now(settings: Settings) -> sa.ColumnElement[bool]:
    """Not expired at the bound parameter ``now``."""
    if not settings.omit_expired:
        return sa.true()
    t = store_items.c
    return sa.or_(
        t.expires_at.is_(None), t.expires_at > sa.bindparam("now", type_=t.expires_at.type)
    )


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
    selects = []
    for i, lop in lists:
        where = [_alive_at_now(settings)]
        where += [
            namespace_condition(sql, t.prefix, c, _prefix_condition)
            for c in lop.match_conditions or ()
        ]
        # The distinct namespaces first, then their heads: a namespace holds many items,
        # and a head costs (SQLite splits the labels with json_each): computed per item,
        # it made a list_namespaces with max_depth over 600 items take 2.6 ms.
        namespaces = sa.select(t.prefix).distinct().where(*where).subquery("namespaces")
        prefix = namespaces.c.prefix
        ns = prefix if lop.max_depth is None else sql.namespace_head(prefix, lop.max_depth)
        sort_key = sql.namespace_sort_key(ns).label("sort_key")
        selects.append(
            sa.select(_op_tag(i), ns.label("ns"), sort_key)
            .distinct()
            .order_by(sort_key)
            .limit(lop.limit)
            .offset(lop.offset)
        )
    return _union(selects)


def batch_plan(
    settings: Settings, ops: Sequence[Op], embedded: Embedded, now: dt.datetime
) -> Plan[list[Result]]:
    """Run ``ops`` (already validated with :func:`check_op`) and return their results."""
    t = store_items.c
    results: list[Result] = [None] * len(ops)
    refresh: dict[tuple[str, str], float] = {}  # (prefix_hash, key_hash) -> ttl minutes

    # A plan whose statements need no common transaction runs without BEGIN/COMMIT
    # where the dialect gains from it (DialectOps.autocommit_single_statements,
    # PostgreSQL: 1 round trip instead of 3): a batch of reads (their TTL refresh,
    # if any, is an UPDATE atomic by itself), or a batch that is one write statement.
    # One pass over the ops, by kind.
    gets: list[tuple[int, GetOp]] = []
    searches: list[tuple[int, SearchOp]] = []
    lists: list[tuple[int, ListNamespacesOp]] = []
    puts: dict[tuple[tuple[str, ...], str], PutOp] = {}  # the last put of a key wins
    for i, op in enumerate(ops):
        if isinstance(op, GetOp):
            gets.append((i, op))
        elif isinstance(op, SearchOp):
            searches.append((i, op))
        elif isinstance(op, ListNamespacesOp):
            lists.append((i, op))
        elif isinstance(op, PutOp):
            puts[(op.namespace, op.key)] = op
    reads = bool(gets or searches or lists)
    one_write = (
        not reads
        and not settings.indexed
        and settings.ops.native_upsert
        and len({op.value is None for op in puts.values()}) == 1
    )
    autocommit = [not puts or one_write]

    def step(statement: Any, params: Any = None, fetch: bool = False) -> Step:
        first, autocommit[0] = autocommit[0], False
        return Step(statement, params, fetch=fetch, whole_plan=first)

    if gets:
        pairs = sorted(
            {(key_hash(join_namespace(op.namespace)), key_hash(op.key)) for _, op in gets}
        )
        rows: list[Any] = []
        if len(pairs) == 1:  # the common case, a lone get: the simplest statement
            ((prefix_hash, item_hash),) = pairs
            params = {"prefix_hash": prefix_hash, "key_hash": item_hash, "now": now}
            rows += (yield step(_get_statement(settings, False), params, fetch=True)).rows
        else:
            for chunk in _chunks(settings, pairs):
                statement = _get_statement(settings, True)
                rows += (yield step(statement, {**chunk, "now": now}, fetch=True)).rows
        rows = [_GotRow.of(row) for row in rows]
        found = {(row.prefix, row.key): row for row in rows}
        for i, op in gets:
            row = found.get((join_namespace(op.namespace), op.key))
            results[i] = _item(row) if row is not None else None
            if row is not None and op.refresh_ttl and row.ttl_minutes is not None:
                refresh[(row.prefix_hash, row.key_hash)] = row.ttl_minutes

    if searches:
        # Native ranking: each ranking search is one page of its own, scored in SQL.
        native: list[tuple[int, SearchOp]] = []
        if settings.indexed and any(sop.query for _, sop in searches):
            mode = settings.native_vectors
            if mode.known is None:  # asked once per store
                probe = yield step(settings.sql.vector_probe(), fetch=True)
                mode.known = settings.sql.vectors_found(probe.rows[0][0] if probe.rows else None)
            if mode.known:
                native = [(i, sop) for i, sop in searches if sop.query]
        ranked_rows: list[Any] = []
        if native:
            ranked_rows = yield from _ranked_rows(settings, native, embedded, now, step)
            searches = [(i, sop) for i, sop in searches if not (sop.query and settings.indexed)]
        rows = []
        if searches:
            rows = yield from _search_rows(settings, searches, now, step)
        ranked = [sop for _, sop in searches if sop.query and settings.indexed]
        vectors: dict[tuple[str, str], list[list[float]]] = {}
        if ranked and rows:
            wanted = sorted({(r.prefix_hash, r.key_hash) for r in rows})
            v = store_vectors.c
            select_vectors = settings.ops.cached(
                "store.select_vectors",
                lambda: sa.select(v.prefix_hash, v.key_hash, v.embedding).where(
                    _in_keys(settings, store_vectors)
                ),
            )
            for chunk in _chunks(settings, wanted):
                vector_rows = yield Step(select_vectors, chunk, fetch=True)
                for vr in vector_rows.rows:
                    vector = settings.sql.vector_of(vr.embedding)
                    if len(vector) != settings.dims:
                        _refuse_dims(settings, len(vector))
                    vectors.setdefault((vr.prefix_hash, vr.key_hash), []).append(vector)
        for i, sop in searches:
            candidates = [r for r in rows if r.op == i]
            if not settings.sql.in_sql:
                candidates = [
                    r
                    for r in candidates
                    if split_namespace(r.prefix)[: len(sop.namespace_prefix)]
                    == sop.namespace_prefix
                    and matches_filter(r.value, sop.filter)
                ]
            if sop.query and settings.indexed:
                # Ties (and items without vectors) keep the order of a search without
                # query. Sorted here: MySQL/MariaDB drop the ORDER BY of an unlimited
                # query inside a UNION, which a batch of several searches sends.
                candidates.sort(key=lambda r: (r.prefix_hash, r.key_hash))
                candidates.sort(key=lambda r: _utc(r.updated_at), reverse=True)
                query = embedded.queries[sop.query]
                scored, scoreless = [], []
                for r in candidates:
                    own = vectors.get((r.prefix_hash, r.key_hash))
                    if own:
                        scored.append((max(cosine(query, vec) for vec in own), r))
                    else:
                        scoreless.append(r)
                scored.sort(key=lambda pair: -pair[0])  # stable: ties keep updated_at order
                page: list[tuple[float | None, Any]] = list(
                    scored[sop.offset : sop.offset + sop.limit]
                )
                # As InMemoryStore: items without an embedding fill a short page.
                if len(page) < sop.limit:
                    skip = max(0, sop.offset - len(scored))
                    page += [(None, r) for r in scoreless[skip : skip + sop.limit - len(page)]]
            elif settings.sql.in_sql:
                page = [(None, r) for r in candidates]  # the database's page
            else:
                page = [(None, r) for r in candidates[sop.offset : sop.offset + sop.limit]]
            results[i] = [_item(r, SearchItem, score) for score, r in page]
            if sop.refresh_ttl:
                for _, r in page:
                    if r.ttl_minutes is not None:
                        refresh[(r.prefix_hash, r.key_hash)] = r.ttl_minutes
        for i, sop in native:
            ranked_page = [r for r in ranked_rows if r.op == i]
            results[i] = [_item(r.row, SearchItem, r.score) for r in ranked_page]
            if sop.refresh_ttl:
                for r in ranked_page:
                    if r.row.ttl_minutes is not None:
                        refresh[(r.row.prefix_hash, r.row.key_hash)] = r.row.ttl_minutes

    if lists:
        if settings.sql.in_sql:
            outcome = yield step(_list_statement(settings, lists), {"now": now}, fetch=True)
            for i, _ in lists:
                results[i] = [split_namespace(row.ns) for row in outcome.rows if row.op == i]
        else:
            outcome = yield step(
                sa.select(t.prefix).distinct().where(_alive(now, settings.omit_expired)),
                fetch=True,
            )
            namespaces = [split_namespace(row.prefix) for row in outcome.rows]
            for i, lop in lists:
                kept = [
                    ns
                    for ns in namespaces
                    if all(matches_condition(c, ns) for c in lop.match_conditions or ())
                ]
                if lop.max_depth is not None:
                    kept = list({ns[: lop.max_depth] for ns in kept})
                results[i] = sorted(kept)[lop.offset : lop.offset + lop.limit]

    if refresh:
        refresh_statement = settings.ops.cached(
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
        yield Step(
            refresh_statement,
            [
                {
                    "b_prefix_hash": p,
                    "b_key_hash": k,
                    "b_expires_at": now + dt.timedelta(minutes=ttl),
                }
                for (p, k), ttl in sorted(refresh.items())
            ],
        )

    yield from _write_plan(settings, puts, embedded, now, step)
    return results


def _write_plan(
    settings: Settings,
    puts: Mapping[tuple[tuple[str, ...], str], PutOp],
    embedded: Embedded,
    now: dt.datetime,
    step: Callable[..., Step] = Step,
) -> Plan[None]:
    if not puts:
        return
    keys = sorted((key_hash(join_namespace(ns)), key_hash(key)) for ns, key in puts)
    ops = settings.ops
    # Vectors of every put item go: a put re-indexes (or un-indexes) its item.
    if settings.indexed:
        delete_vectors = ops.cached(
            "store.delete_vectors",
            lambda: sa.delete(store_vectors).where(_in_keys(settings, store_vectors)),
        )
        for chunk in _chunks(settings, keys):
            yield step(delete_vectors, chunk)
    written = [op for op in puts.values() if op.value is not None]
    deleted = [
        (key_hash(join_namespace(op.namespace)), key_hash(op.key))
        for op in puts.values()
        if op.value is None
    ]
    if not settings.ops.native_upsert:
        # No portable upsert: delete every key, then insert (created_at restarts).
        deleted = keys
    if deleted:
        delete_items = ops.cached(
            "store.delete_items",
            lambda: sa.delete(store_items).where(_in_keys(settings, store_items)),
        )
        for chunk in _chunks(settings, sorted(deleted)):
            yield step(delete_items, chunk)
    if written:
        rows = [
            {
                "prefix_hash": key_hash(join_namespace(op.namespace)),
                "key_hash": key_hash(op.key),
                "prefix": join_namespace(op.namespace),
                "prefix_head": namespace_head(join_namespace(op.namespace)),
                "key": op.key,
                "value": dict(op.value or {}),
                "created_at": now,
                "updated_at": now,
                "expires_at": None if op.ttl is None else now + dt.timedelta(minutes=op.ttl),
                "ttl_minutes": op.ttl,
            }
            for op in written
        ]
        update = ("value", "updated_at", "expires_at", "ttl_minutes")
        statement = ops.cached(
            "store.upsert",
            lambda: (
                ops.upsert(store_items, update) if ops.native_upsert else sa.insert(store_items)
            ),
        )
        # One row: a plain execute, not the executemany machinery.
        yield step(statement, rows[0] if len(rows) == 1 else rows)
    vector_rows = [
        {
            "prefix_hash": key_hash(join_namespace(ns)),
            "key_hash": key_hash(key),
            "field": path,
            "embedding": settings.sql.vector_value(vector),
            "created_at": now,
        }
        for (ns, key), fields in embedded.documents.items()
        for path, vector in fields
    ]
    if settings.indexed and vector_rows:
        yield Step(sa.insert(store_vectors), vector_rows)


def sweep_plan(now: dt.datetime) -> Plan[int]:
    """Delete expired items and their vectors; returns how many items went."""
    t, v = store_items.c, store_vectors.c
    expired = sa.select(t.prefix_hash, t.key_hash).where(t.expires_at <= now)
    yield Step(sa.delete(store_vectors).where(sa.tuple_(v.prefix_hash, v.key_hash).in_(expired)))
    outcome = yield Step(sa.delete(store_items).where(t.expires_at <= now))
    return outcome.rowcount


def texts_to_embed(
    puts: Iterable[PutOp], default_fields: Sequence[str] | None
) -> list[tuple[tuple[str, ...], str, str, str]]:
    """(namespace, key, field path, text) for each text to embed, in put order."""
    from langgraph.store.base.embed import get_text_at_path

    found = []
    for op in puts:
        if op.value is None or op.index is False:
            continue
        paths = list(op.index) if op.index else list(default_fields or ["$"])
        for path in paths:
            texts = get_text_at_path(op.value, path)
            for n, text in enumerate(texts):
                where = path if len(texts) == 1 else f"{path}.{n}"
                if len(where) > limits.FIELD_PATH_MAX:
                    raise InvalidInputError(
                        f"index field {where!r} is longer than {limits.FIELD_PATH_MAX}"
                    )
                found.append((op.namespace, op.key, where, text))
    return found
