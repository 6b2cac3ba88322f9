"""The store's batch as one I/O-free plan (see ``lg_sqla.runtime.plans``), shared by the sync
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
from lg_sqla.runtime.plans import Plan, Step
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
    if isinstance(op, GetOp):
        _check_item_address(op)
    elif isinstance(op, PutOp):
        _check_put(op)
    elif isinstance(op, SearchOp):
        _check_search(op)
    elif isinstance(op, ListNamespacesOp):
        _check_list_namespaces(op)
    else:
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")


def _check_item_address(op: GetOp | PutOp) -> None:
    """A get's or put's key and namespace labels: text without NUL."""
    _check_text("key", op.key)
    for label in op.namespace:
        _check_text("namespace label", label)


def _check_put(op: PutOp) -> None:
    """A put: its address, a non-empty namespace, a JSON dict value (or None: a delete),
    a positive TTL, index fields as text."""
    _check_item_address(op)
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


def _check_page(kind: str, limit: Any, offset: Any) -> None:
    """A search's or list_namespaces' ``limit`` and ``offset``: ints >= 0."""
    for name, value in (("limit", limit), ("offset", offset)):
        if not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{kind} {name} must be an int >= 0, got {value!r}")


def _check_search(op: SearchOp) -> None:
    """A search: its page, its filter, its query as text."""
    _check_page("search", op.limit, op.offset)
    for key, wanted in (op.filter or {}).items():
        _check_text("filter key", key)
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            _check_filter_operators(key, wanted)
        else:
            check_json_value(f"filter[{key!r}]", wanted)
    if op.query is not None:
        _check_text("query", op.query)


def _check_filter_operators(key: str, wanted: Mapping[str, Any]) -> None:
    """A filter member's operator conditions: known operators, JSON operands, numbers
    where the operator orders."""
    for operator, operand in wanted.items():
        if operator not in FILTER_OPERATORS:
            raise InvalidInputError(
                f"filter operator {operator!r} on {key!r} is not one of {sorted(FILTER_OPERATORS)}"
            )
        check_json_value(f"filter[{key!r}][{operator!r}]", operand)
        if operator not in ("$eq", "$ne") and ordering_operand(operand) is None:
            raise InvalidInputError(
                f"filter[{key!r}][{operator!r}] compares numbers: {operand!r} is not one"
            )


def _check_list_namespaces(op: ListNamespacesOp) -> None:
    """A list_namespaces: its page, ``max_depth``, match types."""
    _check_page("list_namespaces", op.limit, op.offset)
    if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 1):
        raise InvalidInputError(f"max_depth must be an int >= 1, got {op.max_depth!r}")
    for condition in op.match_conditions or ():
        if condition.match_type not in ("prefix", "suffix"):
            raise InvalidInputError(
                f"match_type must be 'prefix' or 'suffix', got {condition.match_type!r}"
            )


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
    dialect_ops: DialectOps  # lg_sqla's dialect object, not a batch's ops
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

    return settings.dialect_ops.cached(("store.get", many, settings.omit_expired), build)


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


class _ByKind(NamedTuple):
    """A batch's ops by kind, each read with its index in the batch."""

    gets: list[tuple[int, GetOp]]
    searches: list[tuple[int, SearchOp]]
    lists: list[tuple[int, ListNamespacesOp]]
    puts: dict[tuple[tuple[str, ...], str], PutOp]  # the last put of a key wins

    @classmethod
    def of(cls, ops: Sequence[Op]) -> _ByKind:
        """One pass over the ops."""
        by_kind = cls([], [], [], {})
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                by_kind.gets.append((i, op))
            elif isinstance(op, SearchOp):
                by_kind.searches.append((i, op))
            elif isinstance(op, ListNamespacesOp):
                by_kind.lists.append((i, op))
            elif isinstance(op, PutOp):
                by_kind.puts[(op.namespace, op.key)] = op
        return by_kind

    def needs_no_transaction(self, settings: Settings) -> bool:
        """Whether the batch's statements need no common transaction, so that it may run
        without BEGIN/COMMIT where the dialect gains from it
        (DialectOps.autocommit_single_statements, PostgreSQL: 1 round trip instead of 3):
        a batch of reads (their TTL refresh, if any, is an UPDATE atomic by itself), or
        a batch that is one write statement."""
        reads = bool(self.gets or self.searches or self.lists)
        one_write = (
            not reads
            and not settings.indexed
            and settings.dialect_ops.native_upsert
            and len({op.value is None for op in self.puts.values()}) == 1
        )
        return not self.puts or one_write


@dataclass
class _Batch:
    """What the sub-plans of one batch share: the results by op index, the TTLs its
    reads refresh, and whether its next statement is the first of a plan that needs
    no transaction (``Step.whole_plan``)."""

    settings: Settings
    embedded: Embedded
    now: dt.datetime
    results: list[Result]
    autocommit: bool
    # (prefix_hash, key_hash) -> ttl minutes of the items read whose TTL is refreshed
    refresh: dict[tuple[str, str], float] = field(default_factory=dict)

    def step(self, statement: Any, params: Any = None, fetch: bool = False) -> Step:
        """A step, marked ``whole_plan`` if it is the batch's first and needs no
        transaction."""
        first, self.autocommit = self.autocommit, False
        return Step(statement, params, fetch=fetch, whole_plan=first)

    def refresh_ttl_of(self, rows: Iterable[Any]) -> None:
        """Note the items of ``rows`` that have a TTL: their expiry restarts."""
        for row in rows:
            if row.ttl_minutes is not None:
                self.refresh[(row.prefix_hash, row.key_hash)] = row.ttl_minutes


def batch_plan(
    settings: Settings, ops: Sequence[Op], embedded: Embedded, now: dt.datetime
) -> Plan[list[Result]]:
    """Run ``ops`` (already validated with :func:`check_op`) and return their results:
    the reads (gets, searches, namespace lists), the TTLs they refresh, then the writes."""
    by_kind = _ByKind.of(ops)
    batch = _Batch(
        settings, embedded, now, [None] * len(ops), by_kind.needs_no_transaction(settings)
    )
    yield from _get_plan(batch, by_kind.gets)
    yield from _search_plan(batch, by_kind.searches)
    yield from _list_namespaces_plan(batch, by_kind.lists)
    yield from _refresh_ttl_plan(batch)
    yield from _write_plan(settings, by_kind.puts, embedded, now, batch.step)
    return batch.results


def _get_plan(batch: _Batch, gets: Sequence[tuple[int, GetOp]]) -> Plan[None]:
    """The items of every GetOp of the batch: one SELECT of all their keys."""
    if not gets:
        return
    settings, now = batch.settings, batch.now
    pairs = sorted({(key_hash(join_namespace(op.namespace)), key_hash(op.key)) for _, op in gets})
    rows: list[Any] = []
    if len(pairs) == 1:  # the common case, a lone get: the simplest statement
        ((prefix_hash, item_hash),) = pairs
        params = {"prefix_hash": prefix_hash, "key_hash": item_hash, "now": now}
        rows += (yield batch.step(_get_statement(settings, False), params, fetch=True)).rows
    else:
        for chunk in _chunks(settings, pairs):
            statement = _get_statement(settings, True)
            rows += (yield batch.step(statement, {**chunk, "now": now}, fetch=True)).rows
    found = {(row.prefix, row.key): row for row in map(_GotRow.of, rows)}
    for i, op in gets:
        row = found.get((join_namespace(op.namespace), op.key))
        batch.results[i] = _item(row) if row is not None else None
        if row is not None and op.refresh_ttl:
            batch.refresh_ttl_of([row])


def _search_plan(batch: _Batch, searches: Sequence[tuple[int, SearchOp]]) -> Plan[None]:
    """The pages of every SearchOp of the batch: ranking searches ranked in SQL where the
    database has native vectors, the others' rows in one statement (ranked in Python)."""
    if not searches:
        return
    settings = batch.settings
    native = yield from _native_ranking_plan(batch, searches)
    ranked_rows: list[_RankedRow] = []
    if native:
        ranked_rows = yield from _ranked_rows(
            settings, native, batch.embedded, batch.now, batch.step
        )
        searches = [(i, sop) for i, sop in searches if not (sop.query and settings.indexed)]
    rows: list[Any] = []
    if searches:
        rows = yield from _search_rows(settings, searches, batch.now, batch.step)
    vectors = yield from _stored_vectors_plan(settings, searches, rows)
    for i, sop in searches:
        page = _search_page(settings, batch.embedded, i, sop, rows, vectors)
        batch.results[i] = [_item(r, SearchItem, score) for score, r in page]
        if sop.refresh_ttl:
            batch.refresh_ttl_of(r for _, r in page)
    for i, sop in native:
        ranked_page = [r for r in ranked_rows if r.op == i]
        batch.results[i] = [_item(r.row, SearchItem, r.score) for r in ranked_page]
        if sop.refresh_ttl:
            batch.refresh_ttl_of(r.row for r in ranked_page)


def _native_ranking_plan(
    batch: _Batch, searches: Sequence[tuple[int, SearchOp]]
) -> Plan[list[tuple[int, SearchOp]]]:
    """The searches that rank by similarity in SQL, each a page of its own: those with a
    query, if the store has an index and the database native vectors (asked once per
    store)."""
    settings = batch.settings
    if not (settings.indexed and any(sop.query for _, sop in searches)):
        return []
    mode = settings.native_vectors
    if mode.known is None:
        probe = yield batch.step(settings.sql.vector_probe(), fetch=True)
        mode.known = settings.sql.vectors_found(probe.rows[0][0] if probe.rows else None)
    if not mode.known:
        return []
    return [(i, sop) for i, sop in searches if sop.query]


def _stored_vectors_plan(
    settings: Settings, searches: Sequence[tuple[int, SearchOp]], rows: Sequence[Any]
) -> Plan[dict[tuple[str, str], list[list[float]]]]:
    """The stored vectors of ``rows``, by key, where a search ranks in Python; a vector
    of another length than the index's dims is refused."""
    vectors: dict[tuple[str, str], list[list[float]]] = {}
    ranked = [sop for _, sop in searches if sop.query and settings.indexed]
    if not (ranked and rows):
        return vectors
    wanted = sorted({(r.prefix_hash, r.key_hash) for r in rows})
    v = store_vectors.c
    select_vectors = settings.dialect_ops.cached(
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
    return vectors


def _search_page(
    settings: Settings,
    embedded: Embedded,
    i: int,
    sop: SearchOp,
    rows: Sequence[Any],
    vectors: Mapping[tuple[str, str], list[list[float]]],
) -> list[tuple[float | None, Any]]:
    """The page (score, row) of search ``i`` among the batch's search rows: ranked by
    similarity here, the database's page, or filtered and cut here (no JSON functions)."""
    candidates = [r for r in rows if r.op == i]
    if not settings.sql.in_sql:
        candidates = [
            r
            for r in candidates
            if split_namespace(r.prefix)[: len(sop.namespace_prefix)] == sop.namespace_prefix
            and matches_filter(r.value, sop.filter)
        ]
    if sop.query and settings.indexed:
        return _ranked_page(candidates, embedded.queries[sop.query], vectors, sop)
    if settings.sql.in_sql:
        return [(None, r) for r in candidates]  # the database's page
    return [(None, r) for r in candidates[sop.offset : sop.offset + sop.limit]]


def _ranked_page(
    candidates: list[Any],
    query: Sequence[float],
    vectors: Mapping[tuple[str, str], list[list[float]]],
    sop: SearchOp,
) -> list[tuple[float | None, Any]]:
    """A search's page ranked by similarity in Python: by best cosine over each item's
    vectors; items without vectors fill a short page (sorts ``candidates``)."""
    # Ties (and items without vectors) keep the order of a search without query.
    # Sorted here: MySQL/MariaDB drop the ORDER BY of an unlimited query inside a
    # UNION, which a batch of several searches sends.
    candidates.sort(key=lambda r: (r.prefix_hash, r.key_hash))
    candidates.sort(key=lambda r: _utc(r.updated_at), reverse=True)
    scored, scoreless = [], []
    for r in candidates:
        own = vectors.get((r.prefix_hash, r.key_hash))
        if own:
            scored.append((max(cosine(query, vec) for vec in own), r))
        else:
            scoreless.append(r)
    scored.sort(key=lambda pair: -pair[0])  # stable: ties keep updated_at order
    page: list[tuple[float | None, Any]] = list(scored[sop.offset : sop.offset + sop.limit])
    # As InMemoryStore: items without an embedding fill a short page.
    if len(page) < sop.limit:
        skip = max(0, sop.offset - len(scored))
        page += [(None, r) for r in scoreless[skip : skip + sop.limit - len(page)]]
    return page


def _list_namespaces_plan(
    batch: _Batch, lists: Sequence[tuple[int, ListNamespacesOp]]
) -> Plan[None]:
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
        sa.select(store_items.c.prefix).distinct().where(_alive(now, settings.omit_expired)),
        fetch=True,
    )
    namespaces = [split_namespace(row.prefix) for row in outcome.rows]
    for i, lop in lists:
        batch.results[i] = _namespaces_page(lop, namespaces)


def _namespaces_page(
    lop: ListNamespacesOp, namespaces: Sequence[tuple[str, ...]]
) -> list[tuple[str, ...]]:
    """A ListNamespacesOp's page of ``namespaces``, matched, cut and sorted in Python."""
    kept = [
        ns for ns in namespaces if all(matches_condition(c, ns) for c in lop.match_conditions or ())
    ]
    if lop.max_depth is not None:
        kept = list({ns[: lop.max_depth] for ns in kept})
    return sorted(kept)[lop.offset : lop.offset + lop.limit]


def _refresh_ttl_plan(batch: _Batch) -> Plan[None]:
    """Restart the expiry of the items the batch's reads refreshed: one UPDATE
    (executemany)."""
    if not batch.refresh:
        return
    t = store_items.c
    refresh_statement = batch.settings.dialect_ops.cached(
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
                "b_expires_at": batch.now + dt.timedelta(minutes=ttl),
            }
            for (p, k), ttl in sorted(batch.refresh.items())
        ],
    )


def _write_plan(
    settings: Settings,
    puts: Mapping[tuple[tuple[str, ...], str], PutOp],
    embedded: Embedded,
    now: dt.datetime,
    step: Callable[..., Step] = Step,
) -> Plan[None]:
    """Every effective put of the batch: the vectors of its keys and the items it deletes
    (without a native upsert: all its keys) go, then one upsert of the items it writes and
    one insert of their vectors."""
    if not puts:
        return
    keys = sorted((key_hash(join_namespace(ns)), key_hash(key)) for ns, key in puts)
    dialect_ops = settings.dialect_ops
    # Vectors of every put item go: a put re-indexes (or un-indexes) its item.
    if settings.indexed:
        delete_vectors = dialect_ops.cached(
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
    if not dialect_ops.native_upsert:
        # No portable upsert: delete every key, then insert (created_at restarts).
        deleted = keys
    if deleted:
        delete_items = dialect_ops.cached(
            "store.delete_items",
            lambda: sa.delete(store_items).where(_in_keys(settings, store_items)),
        )
        for chunk in _chunks(settings, sorted(deleted)):
            yield step(delete_items, chunk)
    if written:
        rows = _item_rows(written, now)
        update = ("value", "updated_at", "expires_at", "ttl_minutes")
        statement = dialect_ops.cached(
            "store.upsert",
            lambda: (
                dialect_ops.upsert(store_items, update)
                if dialect_ops.native_upsert
                else sa.insert(store_items)
            ),
        )
        # One row: a plain execute, not the executemany machinery.
        yield step(statement, rows[0] if len(rows) == 1 else rows)
    vector_rows = _vector_rows(settings, embedded, now)
    if settings.indexed and vector_rows:
        yield Step(sa.insert(store_vectors), vector_rows)


def _item_rows(written: Sequence[PutOp], now: dt.datetime) -> list[dict[str, Any]]:
    """The ``store_items`` rows of puts with a value."""
    return [
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


def _vector_rows(settings: Settings, embedded: Embedded, now: dt.datetime) -> list[dict[str, Any]]:
    """The ``store_vectors`` rows of the batch's embedded puts."""
    return [
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
