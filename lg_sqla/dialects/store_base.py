"""What the store's SQL shares on every database, and where databases differ.

:class:`StoreSQL` answers, for one database, the questions on which the store's JSON
filters, namespace listing and vector search differ (its subclasses live beside each
database's ``DialectOps``, one module per database); ``store_sql_for(dialect_ops)``
gives a store its dialect's. The checkpointer's questions are
``dialects.base.DialectOps``'.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import ColumnElement

# --- The store (lg_sqla.store): JSON filters and namespace labels in SQL ---------------
#
# Kept apart from the checkpoint parts above. ``store_sql_for(dialect_ops)`` gives the store
# the primitives its filter compiler (lg_sqla/store/_sql.py) combines. A JSON path is a
# tuple of member names (str) and array indices (int), always sent as a bound
# parameter. Every predicate is TRUE or FALSE, never NULL (a missing member is simply
# FALSE), so the compiler can negate and combine them freely.

JsonPath = tuple[str | int, ...]
# Kinds of JSON value, as the store's compiler names them (PostgreSQL's jsonb_typeof).
JSON_KINDS = frozenset({"object", "array", "string", "number", "boolean", "null"})
# A string that ordering filters read as a number: a JSON number (RFC 8259) with
# optional JSON whitespace around it and an exponent of at most 4 digits (PostgreSQL's
# numeric overflows beyond; the limit is the same on every dialect).
NUMERIC_STRING = r"^[ \t\n\r]*-?(0|[1-9][0-9]*)([.][0-9]+)?([eE][-+]?[0-9]{1,4})?[ \t\n\r]*$"
# The character namespace labels are sorted around: below every character a label
# may hold (NUL is refused), so ('a', 'b') sorts before ('a-',) as Python's tuples do.
NAMESPACE_SORT_SEPARATOR = "\x01"


class JsonAt(NamedTuple):
    """What stands at a JSON path: the value (NULL where nothing is), the name of its
    JSON type (see ``StoreSQL._TYPES``) and its text (a string's unquoted)."""

    node: ColumnElement[Any]
    kind: ColumnElement[str]
    text: ColumnElement[str]


class StoreSQL:
    """Dialects without JSON functions we know: the store filters in Python.

    Dialects that filter in SQL (``in_sql``) give what stands at a path (``_at``) and
    how a text reads as a number (``_as_number``): the predicates below are built from
    them, or overridden where the database wants another form (SQLite)."""

    in_sql = False
    # Whether a lone get compares the item's names in SQL (two parameters), rather than
    # selecting them to compare here (two columns): where a column costs the driver
    # more than a parameter (``_read.lone_get_statement``).
    lone_get_names_in_sql = False
    # Whether a lone put binds its timestamp as the text the column holds, read from
    # the clock as that (``types.naive_utc_text_now``; ``_write.lone_upsert_statement``),
    # rather than a datetime its bind processor formats: SQLite, whose timestamps are
    # that text.
    lone_put_stamps_text = False
    # Bound parameters one statement may hold; the store splits longer key lists.
    # 999: SQLite before 3.32, the lowest limit among the databases we know.
    max_bound_parameters = 999
    # The type names ``_kind`` gives for each of JSON_KINDS.
    _TYPES: ClassVar[dict[str, tuple[str, ...]]] = {kind: (kind,) for kind in JSON_KINDS}

    @property
    def keys_per_statement(self) -> int:
        """How many (prefix_hash, key_hash) pairs one :meth:`in_keys` list may hold."""
        return (self.max_bound_parameters - 16) // 2

    def in_keys(self, prefix_hash: ColumnElement[str], key_hash: ColumnElement[str]) -> Any:
        """``(prefix_hash, key_hash) IN`` the pairs of :meth:`keys_params`."""
        return sa.tuple_(prefix_hash, key_hash).in_(sa.bindparam("keys", expanding=True))

    def keys_params(self, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
        return {"keys": list(pairs)}

    def _at(self, doc: ColumnElement[Any], path: JsonPath) -> JsonAt:
        raise NotImplementedError

    def _as_number(self, text: ColumnElement[str]) -> ColumnElement[Any]:
        raise NotImplementedError

    def _is_kind(self, kind: ColumnElement[str], json_kind: str) -> ColumnElement[bool]:
        # One type name: an equality; several: IN the literal names (see one_of).
        names = self._TYPES[json_kind]
        return kind == names[0] if len(names) == 1 else one_of(kind, names)

    def kind_in(
        self, doc: ColumnElement[Any], path: JsonPath, kinds: frozenset[str]
    ) -> ColumnElement[bool]:
        """The value at ``path`` exists and is of one of ``kinds`` (see JSON_KINDS)."""
        names = sorted(name for kind in kinds for name in self._TYPES[kind])
        return sa.func.coalesce(one_of(self._at(doc, path).kind, names), sa.false())

    def missing(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[bool]:
        """Nothing at ``path`` (a JSON null is something)."""
        return self._at(doc, path).node.is_(None)

    def number_compare(
        self,
        doc: ColumnElement[Any],
        path: JsonPath,
        operator: Callable[[Any, Any], ColumnElement[bool]],
        number: ColumnElement[Any],
        strings: bool,
    ) -> ColumnElement[bool]:
        """``operator(value, number)`` where the value is a number or a boolean (as 1/0,
        Python's ``True == 1``), or with ``strings`` a NUMERIC_STRING; ``number`` is a
        :meth:`number_param`."""
        _, kind, text = self._at(doc, path)
        # CASE guarantees the conversion only sees what is a number.
        as_number = self._as_number(text)
        whens = [
            (self._is_kind(kind, "number"), as_number),
            (self._is_kind(kind, "boolean"), sa.case((text == "true", 1), else_=0)),
        ]
        if strings:
            numeric = text.regexp_match(NUMERIC_STRING)
            whens.append((sa.and_(self._is_kind(kind, "string"), numeric), as_number))
        value = sa.case(*whens, else_=sa.null())
        return sa.func.coalesce(operator(value, number), sa.false())

    def number_param(self, name: str) -> sa.BindParameter[Any]:
        """A bound parameter for the numbers of :meth:`number_compare`."""
        return sa.bindparam(name, type_=sa.Float)

    def number_value(self, number: float | int) -> Any:
        """The value of a :meth:`number_param`."""
        return number

    def string_equals(
        self, doc: ColumnElement[Any], path: JsonPath, text: ColumnElement[str]
    ) -> ColumnElement[bool]:
        """The value is a string equal to ``text``, code point for code point."""
        _, kind, value = self._at(doc, path)
        is_string = self._is_kind(kind, "string")
        return sa.func.coalesce(sa.and_(is_string, self.text_equals(value, text)), sa.false())

    def length_equals(self, doc: ColumnElement[Any], path: JsonPath, n: int) -> ColumnElement[bool]:
        """The value is an array of ``n`` elements or an object of ``n`` members."""
        raise NotImplementedError

    # Namespaces are stored joined with "." (labels never hold one).

    def namespace_depth(self, prefix: ColumnElement[str]) -> ColumnElement[int]:
        """How many labels."""
        raise NotImplementedError

    def namespace_label(self, prefix: ColumnElement[str], index: int) -> ColumnElement[str]:
        """The label at ``index`` (negative: from the end) of a deep enough namespace."""
        raise NotImplementedError

    def namespace_head(self, prefix: ColumnElement[str], depth: int) -> ColumnElement[str]:
        """The first ``depth`` labels, joined (the whole namespace when shallower)."""
        raise NotImplementedError

    def namespace_sort_key(self, joined: ColumnElement[str]) -> ColumnElement[str]:
        """Sorts namespaces in code point order label by label (Python's tuple order)."""
        raise NotImplementedError

    def text_equals(
        self, text: ColumnElement[str], value: str | ColumnElement[str]
    ) -> ColumnElement[bool]:
        """Computed text equal to ``value``, code point for code point."""
        return text == as_text(value)

    def read_timestamp(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        """A timestamp column as an item's read selects it (under the column's name):
        the column itself, or a form the driver hands over for less (naive UTC text,
        which the store parses: ``store._common.utc``)."""
        return column

    # Semantic search. ``store_vectors.embedding`` holds float32 little-endian bytes on
    # every dialect; where the database can rank them itself (an extension it has), the
    # store ranks in SQL, else in Python over the filtered candidates (the portable path).

    def vector_value(self, vector: Sequence[float]) -> Any:
        """A vector as ``store_vectors.embedding`` stores it (and as :meth:`vector_param`
        takes it): float32, little-endian, 4 bytes a dimension."""
        return struct.pack(f"<{len(vector)}f", *vector)

    def vector_of(self, stored: Any) -> list[float]:
        """The vector a ``store_vectors.embedding`` value holds."""
        return list(struct.unpack(f"<{len(stored) // 4}f", stored))

    # The distance types (IndexConfig's distance_type) this dialect ranks in SQL when it
    # has native vectors; the others rank in Python (the portable path).
    native_distances: frozenset[str] = frozenset()
    # Whether approximate indexes (ann_index_config) exist here: pgvector's only.
    ann_indexes = False

    def native_vectors(self, engine: Engine) -> bool | None:
        """Whether this engine ranks by similarity in SQL: known from the driver
        (True, False; may prepare the engine, e.g. load an extension on each connection
        it hands out), or None: ask the server (:meth:`vector_probe`)."""
        return False

    def vector_probe(self) -> Executable:
        """A query whose first row (None without rows), given to :meth:`vectors_found`,
        says whether the database has what native ranking needs."""
        raise NotImplementedError

    def vectors_found(self, answer: Any) -> bool:
        raise NotImplementedError

    def vector_setup(self, connection: Connection) -> None:
        """What ``setup()`` of a store with an index does for native ranking."""

    def vector_param(self, name: str) -> sa.BindParameter[Any]:
        """A query vector (a :meth:`vector_value`) as the similarity functions take it."""
        return sa.bindparam(name, type_=sa.LargeBinary)

    def vector_similarity(
        self, embedding: ColumnElement[Any], query: ColumnElement[Any], distance: str
    ) -> ColumnElement[float]:
        """The score of a stored vector for the query, higher is closer, for a distance
        type of :attr:`native_distances`: cosine similarity (0 where either vector is
        all zeros, as the portable path, where the cosine is undefined), minus the
        Euclidean distance (l2), the inner product."""
        raise NotImplementedError

    def ann_setup(self, connection: Connection, ann: AnnIndex, distance: str, dims: int) -> None:
        """``setup()`` of a store with an approximate index: create the one
        :meth:`ann_in_force` says this database can have (idempotent)."""
        raise NotImplementedError

    def ann_in_force(self, ann: AnnIndex) -> AnnIndex | None:
        """The index ``ann`` asks for as this database can have it, known after the
        vector probe: ``ann``, a nearest one (e.g. full-precision vectors), or None
        (exact search); anything but ``ann`` is said once, with an ExactSearchWarning."""
        return None

    def ann_distance(
        self,
        embedding: ColumnElement[Any],
        query: ColumnElement[Any],
        ann: AnnIndex,
        distance: str,
        dims: int,
    ) -> ColumnElement[float]:
        """The distance the approximate index orders by (lower is closer), in the form
        the index can serve; :meth:`ann_score` turns it into the search's score."""
        raise NotImplementedError

    def ann_session(self, ann: AnnIndex, fetched: int) -> tuple[Executable, dict[str, Any]] | None:
        """A statement that sets the index's search options for the transaction, for
        searches that fetch up to ``fetched`` rows from it; None: the defaults do."""
        return None

    def ann_fits(self, embedding: ColumnElement[Any], dims: int) -> ColumnElement[bool]:
        """The approximate index's predicate: a stored vector of ``dims`` dimensions."""
        raise NotImplementedError

    def ann_score(self, distance_value: float | None, distance: str) -> float:
        """The score (as :meth:`vector_similarity`) of an :meth:`ann_distance` value."""
        raise NotImplementedError

    def vector_has_dims(self, embedding: ColumnElement[Any], dims: int) -> ColumnElement[bool]:
        """The stored vector has ``dims`` dimensions."""
        return sa.func.length(embedding) == 4 * dims

    def vector_byte_length(self, embedding: ColumnElement[Any]) -> ColumnElement[int]:
        """Bytes of a stored vector (4 a dimension), for the storage report."""
        return sa.func.length(embedding, type_=sa.BigInteger)


def as_text(value: str | ColumnElement[str]) -> ColumnElement[str]:
    return sa.literal(value, sa.String) if isinstance(value, str) else value


def one_of(expression: ColumnElement[str], constants: Sequence[str]) -> ColumnElement[bool]:
    """``expression IN ('a', 'b')`` for a fixed set of plain words (JSON type names),
    written into the SQL: ``in_`` of a list makes one "expanding" parameter, rendered
    at execution time, which keeps the statement off the direct path
    (``runtime.direct``); and constants need no parameter for the driver to escape."""
    for constant in constants:
        if not constant.replace(" ", "").isalnum():
            raise ValueError(f"one_of takes plain words, got {constant!r}")
    return expression.in_([sa.literal_column(f"'{constant}'", sa.String) for constant in constants])


def decimal_param(number: Any) -> Any:
    import decimal

    # repr: the shortest text that reads back as the same float.
    return decimal.Decimal(number if isinstance(number, int) else repr(number))


@dataclass(frozen=True)
class AnnIndex:
    """An approximate nearest-neighbour index of the store's vectors (LangGraph's
    PostgresStore ``ann_index_config``): ``kind`` hnsw or ivfflat, the ``vector_type``
    it indexes (vector, or halfvec: half precision), the build options (hnsw: m,
    ef_construction; ivfflat: lists) and the search options (hnsw: ef_search;
    ivfflat: probes)."""

    kind: str
    vector_type: str
    options: tuple[tuple[str, int], ...]
    search: tuple[tuple[str, int], ...] = ()

    def name(self, distance: str, dims: int) -> str:
        """The index's name: one per kind, vector type, distance and dims."""
        return f"store_vectors_{self.kind}_{self.vector_type}_{distance}_{dims}"
