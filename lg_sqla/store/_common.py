"""What the parts of the store's batch plan share: its settings, the joined form of
namespaces, the conditions and rows every read uses, and the batch's own state."""

from __future__ import annotations

import datetime as dt
import json
import operator
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar, cast

import orjson
import sqlalchemy as sa
from langgraph.store.base import Item, Result, SearchItem

from lg_sqla import limits
from lg_sqla.dialects import AnnIndex, DialectOps, StoreSQL
from lg_sqla.dialects.store_base import NAMESPACE_SORT_SEPARATOR
from lg_sqla.models import store_items
from lg_sqla.plans import Step
from lg_sqla.shared import key_hash

T = TypeVar("T")


def join_namespace(namespace: tuple[str, ...]) -> str:
    # LangGraph forbids "." in labels (validate_op_namespace), so the join is reversible.
    return ".".join(namespace)


def split_namespace(prefix: str) -> tuple[str, ...]:
    return tuple(prefix.split("."))


def namespace_head(prefix: str) -> str:
    """What ``store_items.prefix_head`` holds for a joined namespace: its first
    characters with the dots as ``NAMESPACE_SORT_SEPARATOR`` (revision 0007), so the
    index is in the order ``list_namespaces`` pages in (Python's tuple order: U+0001 is
    below every character a label may hold but itself)."""
    return prefix[: limits.NS_HEAD_LEN].replace(".", NAMESPACE_SORT_SEPARATOR)


# The code point after the separator: every descendant's head continues with it.
_AFTER_SEPARATOR = chr(ord(NAMESPACE_SORT_SEPARATOR) + 1)


def subtree_bounds(prefix: str) -> tuple[str, str | None]:
    """``(low, high)``: every item in the joined namespace ``prefix`` or below it has
    ``low <= prefix_head < high`` (code point order), or ``prefix_head == low`` where
    ``high`` is None (``prefix`` longer than a head). A superset (a label may hold
    U+0001; namespaces may share a head): the exact condition on the full prefix still
    applies; the range only lets the index find the subtree."""
    head = namespace_head(prefix)
    if len(prefix) + 1 <= limits.NS_HEAD_LEN:
        # Descendants continue with the separator, and _AFTER_SEPARATOR follows it.
        return head, head + _AFTER_SEPARATOR
    return head, None


def head_in(low: Any, high: Any | None) -> sa.ColumnElement[bool]:
    head: sa.ColumnElement[str] = store_items.c.prefix_head
    if high is None:
        return cast(sa.ColumnElement[bool], head == low)
    return sa.and_(head >= low, head < high)


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
    least recently used is dropped (filters with ever new member names stay bounded).
    ``kept(statement, True)`` is called for each statement built, ``kept(statement,
    False)`` for each dropped."""

    def __init__(self, size: int = 512, kept: Callable[[Any, bool], None] | None = None) -> None:
        self._size = size
        self._built: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._kept = kept

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            found = self._built.get(key)
            if found is not None:
                self._built.move_to_end(key)
                return cast(T, found)
        statement = build()  # outside the lock: two threads may build the same; harmless
        dropped = []
        with self._lock:
            replaced = self._built.get(key)
            if replaced is not None:
                dropped.append(replaced)
            self._built[key] = statement
            while len(self._built) > self._size:
                dropped.append(self._built.popitem(last=False)[1])
        if self._kept is not None:
            self._kept(statement, True)
            for old in dropped:
                self._kept(old, False)
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
    distance: str = "cosine"  # the IndexConfig's distance_type (_match.SIMILARITY)
    ann: AnnIndex | None = None  # an approximate index (ann_index_config), PostgreSQL
    fields: int = 1  # how many fields the IndexConfig embeds (vectors an item may have)
    statements: Statements = field(default_factory=Statements, compare=False)
    # The namespaces a lone put (``put_named``) or get (``get_named``) found valid by
    # LangGraph's own check, with what their rows hold (``lane.named``); bounded.
    put_named: dict[tuple[str, ...], Named] = field(default_factory=dict, compare=False)
    get_named: dict[tuple[str, ...], Named] = field(default_factory=dict, compare=False)
    # The lean lanes' statements (``DialectOps.cached``'s), by key: one dict lookup per
    # call, not a key tuple and a builder closure.
    lane_statements: dict[Hashable, Any] = field(default_factory=dict, compare=False)


class Named(NamedTuple):
    """What a namespace is in a row: its joined form, that form's key hash, and its head
    (``store_items.prefix``, ``prefix_hash``, ``prefix_head``)."""

    prefix: str
    prefix_hash: str
    head: str

    @classmethod
    def of(cls, namespace: tuple[str, ...]) -> Named:
        prefix = join_namespace(namespace)
        return cls(prefix, key_hash(prefix), namespace_head(prefix))


@dataclass
class Batch:
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

    def step(
        self, statement: Any, params: Any = None, fetch: bool = False, positional: bool = False
    ) -> Step:
        """A step, marked ``whole_plan`` if it is the batch's first and needs no
        transaction."""
        first, self.autocommit = self.autocommit, False
        return Step(statement, params, fetch=fetch, whole_plan=first, positional=positional)

    def refresh_ttl_of(self, rows: Iterable[Any]) -> None:
        """Note the items of ``rows`` that have a TTL: their expiry restarts."""
        for row in rows:
            if row.ttl_minutes is not None:
                self.refresh[(row.prefix_hash, row.key_hash)] = row.ttl_minutes


def alive(now: dt.datetime, omit_expired: bool) -> sa.ColumnElement[bool]:
    if not omit_expired:
        return sa.true()
    t = store_items.c
    return sa.or_(t.expires_at.is_(None), t.expires_at > now)


def alive_at_now(settings: Settings) -> sa.ColumnElement[bool]:
    """Not expired at the bound parameter ``now``."""
    if not settings.omit_expired:
        return sa.true()
    t = store_items.c
    return sa.or_(
        t.expires_at.is_(None), t.expires_at > sa.bindparam("now", type_=t.expires_at.type)
    )


def prefix_condition(namespace: tuple[str, ...], by_head: bool = True) -> sa.ColumnElement[bool]:
    """The items in ``namespace`` or below it: the index range of their heads (unless
    ``by_head`` is False: a statement that finds them by head otherwise), then the
    exact condition on the full prefix."""
    if not namespace:
        return sa.true()
    text = join_namespace(namespace)
    t = store_items.c
    # substr, not LIKE: SQLite's LIKE ignores ASCII case, and labels may hold % or _.
    return sa.and_(
        head_in(*subtree_bounds(text)) if by_head else sa.true(),
        sa.or_(
            t.prefix_hash == key_hash(text),
            sa.func.substr(t.prefix, 1, len(text) + 1) == text + ".",
        ),
    )


def row_times(created_at: Any, updated_at: Any) -> tuple[dt.datetime, dt.datetime]:
    """An item row's two timestamps as aware UTC datetimes; SQLite's naive UTC text
    (``utc``'s first case) parsed inline, both in one frame (a search reads 20 rows)."""
    if type(created_at) is str:
        try:
            return from_text(created_at + "+00:00"), from_text(updated_at + "+00:00")
        except ValueError:  # (text with an offset of its own)
            pass
    return utc(created_at), utc(updated_at)


class GotRow(NamedTuple):
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
    def of(cls, row: Any) -> GotRow:
        """A row with GotRow's columns by name (the ranking statements')."""
        return cls._made(*_GOT_COLUMNS(row._mapping))

    @classmethod
    def at(cls, row: Sequence[Any], start: int = 0) -> GotRow:
        """A row of GotRow's columns in order from ``start``, read by position (a step
        fetched with ``positional``: the driver's rows as they are on the direct path,
        no mapping per row; a search reads ten rows or more)."""
        return cls._made(*row[start : start + 8])

    @classmethod
    def _made(
        cls,
        prefix: str,
        key: str,
        value: Any,
        created_at: Any,
        updated_at: Any,
        ttl: float | None,
        prefix_hash: str,
        item_hash: str,
    ) -> GotRow:
        if isinstance(value, (str, bytes)):  # SQLite's and MySQL's JSON is text
            value = parse_json(value)
        return cls(
            prefix, key, value, utc(created_at), utc(updated_at), ttl, prefix_hash, item_hash
        )

    @classmethod
    def of_lone(cls, row: Sequence[Any], prefix_hash: str, item_hash: str) -> GotRow:
        """A row of ``_read.get_statement`` (no key-hash columns), read by position,
        whose hashes the caller knows."""
        prefix, key, value, created_at, updated_at, ttl = row
        if isinstance(value, (str, bytes)):
            value = parse_json(value)
        created_at, updated_at = row_times(created_at, updated_at)
        return cls(prefix, key, value, created_at, updated_at, ttl, prefix_hash, item_hash)


# GotRow's columns of a row's mapping, in one C call.
_GOT_COLUMNS = operator.itemgetter(*GotRow._fields)


def parse_json(text: str | bytes) -> Any:
    """A stored JSON value, as ``json.loads`` reads it. orjson parses a small item's
    value several times faster (0.5 against 4.5 µs of thread CPU), so it does where
    it reads the same value: not where it refuses the text (lone surrogates, NaN)
    nor where the text may hold an integer beyond 64 bits, which orjson reads as a
    float (json.loads: an int): then the value holds a float of such a magnitude.

    (Looked for in the parsed value, not in the text: a regular expression finding
    twenty digits in a row cost twice orjson's parse, ~7k instructions a small item,
    140k a search of twenty.)"""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
    kind = type(value)
    if kind is dict or kind is list:
        if _holds_wide_float(value):
            return json.loads(text)
    elif kind is float and not -_WIDE < value < _WIDE:
        return json.loads(text)
    return value


# The magnitude from which orjson's float may be an integer beyond 64 bits it read
# (it reads integers up to 2**64 - 1 and down to -2**63 as ints).
_WIDE = 2.0**63


def _holds_wide_float(value: Any) -> bool:
    """Whether a parsed dict or list holds, at any depth, a float of at least
    ``_WIDE``'s magnitude."""
    members: Iterable[Any] = value.values() if type(value) is dict else value
    for member in members:
        kind = type(member)
        if kind is float:
            if not -_WIDE < member < _WIDE:
                return True
        elif (kind is dict or kind is list) and _holds_wide_float(member):
            return True
    return False


_UTC = dt.timezone.utc
# (what ``utc`` parses text with, for the readers that inline its first case)
from_text = dt.datetime.fromisoformat


def utc(value: Any) -> dt.datetime:
    # SQLite's timestamps are text, MySQL's naive UTC (see types.UTCDateTime).
    if isinstance(value, str):
        # lg_sqla writes naive UTC text: parsed with its offset appended, not parsed
        # then .replace(tzinfo=...)d (measured 5-10x slower on the benchmark's
        # CPython 3.11; two timestamps per item read).
        try:
            return dt.datetime.fromisoformat(value + "+00:00")
        except ValueError:  # text with an offset of its own
            value = dt.datetime.fromisoformat(value)
    zone = value.tzinfo
    if zone is _UTC:
        return value  # type: ignore[no-any-return]
    if zone is None:
        return value.replace(tzinfo=dt.timezone.utc)  # type: ignore[no-any-return]
    if _is_utc_zone(zone):
        # Already UTC, as the database's session zone gives it (psycopg: the server's
        # TimeZone, e.g. ZoneInfo("Etc/UTC")), as the official stores return it:
        # astimezone cost ~4.6k instructions a value, two a row.
        return value  # type: ignore[no-any-return]
    return value.astimezone(dt.timezone.utc)  # type: ignore[no-any-return]


# The IANA names of UTC itself (ZoneInfo.key): a zone of these is UTC at every instant.
_UTC_KEYS = frozenset(
    {"UTC", "Etc/UTC", "Etc/UCT", "Etc/Universal", "Etc/Zulu", "UCT", "Universal", "Zulu"}
)
# Each time zone object seen (a session's, one per database zone name): whether it
# is UTC. Bounded: past its size, zones are asked each time.
_ZONES_SEEN: dict[dt.tzinfo, bool] = {}
_ZONES_SEEN_MAX = 64


def _is_utc_zone(zone: dt.tzinfo) -> bool:
    known = _ZONES_SEEN.get(zone)
    if known is None:
        known = getattr(zone, "key", None) in _UTC_KEYS
        if len(_ZONES_SEEN) < _ZONES_SEEN_MAX:
            _ZONES_SEEN[zone] = known
    return known


def as_item(row: Any, cls: type[Item] = Item, score: float | None = None) -> Item:
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


def key_chunks(settings: Settings, pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Parameters of ``in_keys`` for ``pairs``, split where one statement would exceed
    the dialect's bound-parameter limit: more statements only past that size."""
    size = settings.sql.keys_per_statement
    return [settings.sql.keys_params(pairs[n : n + size]) for n in range(0, len(pairs), size)] or [
        settings.sql.keys_params(pairs)
    ]


def in_keys(settings: Settings, table: sa.Table) -> Any:
    """(prefix_hash, key_hash) IN the pairs of a ``key_chunks`` parameter set."""
    return settings.sql.in_keys(table.c.prefix_hash, table.c.key_hash)


def union_of(selects: Sequence[sa.Select[Any]]) -> sa.Select[Any] | sa.CompoundSelect[Any]:
    """One statement for every op of a kind: each op's own query (with its own ORDER BY
    and LIMIT) as a subquery, tagged with the op's index in a column ``op``."""
    if len(selects) == 1:
        return selects[0]
    return sa.union_all(*(sa.select(s.subquery()) for s in selects))


def op_tag(i: int) -> sa.ColumnElement[int]:
    # Inline: a bound parameter would be untyped text in a PostgreSQL UNION.
    return sa.literal_column(str(int(i)), sa.Integer).label("op")
