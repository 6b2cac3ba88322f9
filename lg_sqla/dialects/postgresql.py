"""PostgreSQL: everything lg_sqla does differently on it (checkpoint SQL, store SQL)."""

from __future__ import annotations

import contextlib
import functools
import logging
import warnings
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import FromClause, TableValuedAlias

from lg_sqla.dialects.base import (
    BLOBS_LAYOUT,
    MIGRATION_LOCK_NAME,
    ChannelVersionsSource,
    OfficialSchema,
    OnConflictOps,
    sql_constant,
)
from lg_sqla.dialects.citus import (
    coordinator_address,
    distribute_new_tables,
    has_citus,
    has_citus_uncached,
    sequential_mode,
)
from lg_sqla.dialects.store_base import (
    NAMESPACE_SORT_SEPARATOR,
    AnnIndex,
    JsonAt,
    JsonPath,
    StoreSQL,
    decimal_param,
)
from lg_sqla.errors import ExactSearchWarning

logger = logging.getLogger(__name__)


def _array_item(table: sa.Table, column: str) -> sa.types.TypeEngine[Any]:
    """The plain type of a column, for a PostgreSQL array of it."""
    type_ = table.c[column].type
    if isinstance(type_, sa.LargeBinary):
        return sa.LargeBinary()
    if isinstance(type_, sa.Integer):
        return sa.Integer()
    return sa.String()


class _BinaryParam(sa.BindParameter[Any]):
    """A bound parameter psycopg sends in binary format (the ``%(name)b`` placeholder).

    psycopg sends a Python list in text format by default: every ``bytea``
    element is hex-encoded and escaped with regular expressions, doubling the
    bytes on the wire and the server then parses the text back. In binary
    format a blob array travels as raw bytes: a put of the benchmark's chat
    workload went from 590 to 730 calls/s on PostgreSQL. Other drivers (and
    other placeholders) are left as SQLAlchemy renders them.
    """

    inherit_cache = True


@compiles(_BinaryParam, "postgresql")
def _compile_binary_param(element: _BinaryParam, compiler: Any, **kw: Any) -> str:
    text = str(compiler.visit_bindparam(element, **kw))
    if compiler.dialect.driver != "psycopg":
        return text
    name = compiler.bind_names[element]
    return text.replace(f"%({name})s", f"%({name})b", 1)


# Up to this many rows, a bulk insert is a VALUES list (one statement per row
# count, each prepared once per connection); beyond it, arrays expanded by unnest.
VALUES_ROWS_MAX = 32


def bulk_rows_shape(rows: Sequence[Any]) -> int:
    """The row count a ``PostgresOps.bulk_insert`` statement is built for (0: arrays)."""
    return len(rows) if len(rows) <= VALUES_ROWS_MAX else 0


@functools.lru_cache(maxsize=512)
def _bulk_param_names(
    table: str, shared: tuple[str, ...], varying: tuple[str, ...], rows: int
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[tuple[str, str], ...], ...]]:
    """(parameter, column) pairs of the shared columns, and of each row's (a statement's
    names, formatted once rather than at every call)."""
    return (
        tuple((f"{table}_{c}", c) for c in shared),
        tuple(tuple((f"{table}__{c}_{n}", c) for c in varying) for n in range(rows)),
    )


def bulk_params(
    table: sa.Table, shared: Sequence[str], varying: Sequence[str], rows: Sequence[Any]
) -> dict[str, Any]:
    """Parameters of ``PostgresOps.bulk_insert(..., rows=bulk_rows_shape(rows))``."""
    count = bulk_rows_shape(rows)
    shared_names, row_names = _bulk_param_names(table.name, tuple(shared), tuple(varying), count)
    first = rows[0]
    params = {name: first[c] for name, c in shared_names}
    if count:
        for names, row in zip(row_names, rows, strict=True):
            for name, c in names:
                params[name] = row[c]
    else:
        params.update({f"{table.name}__{c}": [row[c] for row in rows] for c in varying})
    return params


# Serialization failure, deadlock detected: PostgreSQL rolled the transaction back.
_LOCK_CONFLICT_SQLSTATES = frozenset({"40001", "40P01"})


def _sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of a driver's error: ``sqlstate`` on psycopg 3 and SQLAlchemy's
    asyncpg adapter, ``pgcode`` on psycopg2, the server's "C" field on pg8000."""
    code = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    if code is None and error.args and isinstance(error.args[0], dict):
        code = error.args[0].get("C")
    return code if isinstance(code, str) else None


class PostgresOps(OnConflictOps):
    name = "postgresql"

    supports_schemas = True
    partitions_by_thread = True
    joins_channel_versions = True
    official_writes_table = "checkpoint_writes"  # langgraph-checkpoint-postgres
    official_schema = OfficialSchema(
        "LangGraph's PostgresSaver (langgraph-checkpoint-postgres)", BLOBS_LAYOUT
    )
    # psycopg sends BEGIN and COMMIT as round trips of their own; the official
    # saver's autocommit + pipeline does a put in one. A single statement with
    # data-modifying CTEs is atomic on its own, so we do too.
    writes_in_one_statement = True
    locks_rows = True
    autocommit_single_statements = True

    def table_disk_usage(self, tables: Sequence[str], schema: str | None) -> Any | None:
        # pg_total_relation_size: heap, TOAST and indexes; summed over the partitions
        # of a hash-partitioned table (whose own size is 0).
        return sa.text(
            "SELECT t.name, CASE WHEN c.relkind = 'p' THEN (SELECT "
            "COALESCE(SUM(pg_total_relation_size(p.relid)), 0) FROM pg_partition_tree(c.oid) "
            "AS p) ELSE pg_total_relation_size(c.oid) END AS bytes "
            "FROM unnest(CAST(:tables AS text[])) AS t(name) "
            "JOIN pg_class AS c ON c.relname = t.name "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "AND n.nspname = COALESCE(CAST(:schema AS text), current_schema())"
        ).bindparams(tables=list(tables), schema=schema)

    def bulk_insert(
        self,
        table: sa.Table,
        shared: Sequence[str],
        varying: Sequence[str],
        update: Sequence[str] | None = None,
        replace: ColumnElement[bool] | None = None,
        *,
        rows: int = 0,
    ) -> sa.Insert:
        """INSERT of many rows as ONE cacheable statement; columns equal in every row
        are single parameters.

        ``rows`` > 0: a VALUES list of that many rows, scalar parameters. Else the
        varying columns are arrays expanded by ``unnest`` (any number of rows, one
        statement). psycopg dumps arrays element by element in Python: measured on
        loopback, 1 row cost 78 µs of client CPU as arrays and 34 as VALUES, 3 rows
        127 and 40; so VALUES up to ``VALUES_ROWS_MAX`` rows (a statement per row
        count, each compiled once and prepared once per connection).
        """
        if rows:
            source: Any = [
                {
                    **{c: sa.bindparam(f"{table.name}_{c}", type_=table.c[c].type) for c in shared},
                    **{
                        c: sa.bindparam(f"{table.name}__{c}_{n}", type_=table.c[c].type)
                        for c in varying
                    },
                }
                for n in range(rows)
            ]
            stmt = pg_dialect.insert(table).values(source)
        else:
            unnested = (
                sa.func.unnest(
                    *(
                        _BinaryParam(
                            f"{table.name}__{c}", type_=pg_dialect.ARRAY(_array_item(table, c))
                        )
                        for c in varying
                    )
                )
                .table_valued(*varying)
                .render_derived()
            )
            select = sa.select(
                *(sa.bindparam(f"{table.name}_{c}", type_=table.c[c].type) for c in shared),
                *(unnested.c[c] for c in varying),
            )
            stmt = pg_dialect.insert(table).from_select([*shared, *varying], select)
        if update is None:
            return stmt.on_conflict_do_nothing()
        return stmt.on_conflict_do_update(
            index_elements=list(table.primary_key.columns),
            set_={name: stmt.excluded[name] for name in update},
            where=replace,
        )

    def one_statement(self, inserts: Sequence[sa.Insert]) -> sa.Insert:
        *before, last = inserts
        for n, insert in enumerate(before):
            last = last.add_cte(insert.cte(f"write_{n}"))
        return last

    _insert = staticmethod(pg_dialect.insert)

    def channel_versions(self, doc: ColumnElement[Any]) -> ChannelVersionsSource:
        versions = doc.op("->", return_type=pg_dialect.JSONB)(sql_constant("channel_versions"))
        pairs: TableValuedAlias = sa.func.jsonb_each_text(versions).table_valued("key", "value")
        return pairs, pairs.c.key, pairs.c.value

    def union_sharing(self) -> str:
        return "documents_as_text"

    def document_text(self, doc: ColumnElement[Any]) -> ColumnElement[Any]:
        # jsonb as its text: parsed by orjson (json_values.json_loads) rather than by the
        # driver's json.loads, and sharing a text column of the load statement.
        return sa.cast(doc, sa.Text)

    def document_integer(self, doc: ColumnElement[Any], key: str) -> ColumnElement[int]:
        return sa.cast(doc.op("->>", return_type=sa.Text)(sql_constant(key)), sa.Integer)

    def json_member(self, doc: ColumnElement[Any], *keys: str) -> ColumnElement[Any]:
        # One `->` per key, each a bound text value. A path (`#>>`) is bound as a text[]
        # literal that SQLAlchemy does not quote: a key with a quote, comma, brace or
        # space made it malformed ('{inline_values, say "hi"}').
        member = doc
        for key in keys[:-1]:
            member = member[key]
        text: ColumnElement[Any] = member[keys[-1]].as_string()
        return text

    def channel_version(self, doc: ColumnElement[Any], channel: str) -> ColumnElement[Any]:
        return self.as_key(self.json_member(doc, "channel_versions", channel))

    # Citus (dialects/citus.py): learned from the first connection of the owner's engine.
    distributed = False
    learns_server = True

    def learn_server(self, connection: Connection) -> None:
        self.distributed = has_citus(connection)

    def keyed_lookup(
        self, table: sa.Table, on: ColumnElement[bool], *, one_thread: bool = True
    ) -> tuple[FromClause, ColumnElement[bool]]:
        if self.distributed and not one_thread:
            # Citus cannot push the fence below down when the page spans threads
            # (a LIMIT in a lateral subquery over jsonb_each_text): a plain join there.
            return table, on
        # PostgreSQL orders joins by its cost estimates, which cannot see through a
        # JSON expansion: it joined page x checkpoint_blobs on the thread first (every
        # blob of the thread), then expanded channel_versions once per blob, so a
        # get_tuple read the whole thread: 0.40 ms at 50 checkpoints, 4.6 ms at 2,000
        # (the official saver: 0.33 and 0.41). A LATERAL subquery with OFFSET 0 is
        # not merged into the join: it runs once per preceding row, one primary-key
        # probe each, whatever the thread's length.
        found = sa.select(table).where(on).offset(sql_constant(0)).lateral(f"{table.name}_found")
        return found, sa.true()

    def metadata_equals(
        self, column: ColumnElement[Any], key: str, value: Any
    ) -> ColumnElement[bool]:
        # jsonb equality is exact JSON equality (types, nesting, key order ignored).
        element = column[key]
        match = element == sa.type_coerce(value, pg_dialect.JSONB)
        if value is None:
            return sa.or_(match, element.is_(None))
        return match

    def metadata_path_equals(
        self, column: ColumnElement[Any], keys: tuple[str, ...], value: Any
    ) -> ColumnElement[bool]:
        # One `->` per key (bound values), as json_member; the last key as above.
        element = column
        for key in keys[:-1]:
            element = element[key]
        return self.metadata_equals(element, keys[-1], value)

    def json_byte_length(self, document: ColumnElement[Any]) -> ColumnElement[int]:
        # JSONB is binary; its text form is what a client would transfer.
        return sa.func.octet_length(sa.cast(document, sa.Text), type_=sa.BigInteger)

    def typed_null(self, type_: sa.types.TypeEngine[Any]) -> ColumnElement[Any]:
        # PostgreSQL types UNION columns pairwise from the left: an untyped NULL
        # becomes text and then clashes with integer columns of later branches.
        return sa.cast(sa.null(), type_)

    def is_read_only(self, connection: Connection) -> bool:
        # "on" in a hot standby (recovery), and under default_transaction_read_only.
        return connection.exec_driver_sql("SHOW transaction_read_only").scalar() == "on"

    def is_lock_conflict(self, error: BaseException) -> bool:
        return _sqlstate(error) in _LOCK_CONFLICT_SQLSTATES

    @contextlib.contextmanager
    def migration_lock(self, connection: Connection) -> Iterator[None]:
        # Transaction-scoped advisory lock: released by the migration's commit.
        key = zlib.crc32(MIGRATION_LOCK_NAME.encode())
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))
        if has_citus_uncached(connection):
            # Revisions run DDL and functions after statements on many shards.
            sequential_mode(connection)
        yield

    def migrations_refused(self, connection: Connection) -> str | None:
        # A Citus worker: distributed DDL runs on the coordinator.
        if not has_citus(connection):
            return None
        coordinator = coordinator_address(connection)
        if coordinator is None:
            return None
        return (
            "this database is on a Citus worker node: run setup() / `lg-sqla upgrade` / "
            f"`lg-sqla distribute` against the coordinator ({coordinator}); savers and "
            "stores may then run on any node"
        )

    def after_migrations(
        self, connection: Connection, tables: list[str], version_table: str
    ) -> None:
        # Citus: a table a revision created joins the others' distribution.
        if has_citus_uncached(connection):
            schema = connection.get_execution_options().get("schema_translate_map", {}) or {}
            distribute_new_tables(connection, schema.get(None), tables, version_table)

    @contextlib.contextmanager
    def official_saver(self, url: URL) -> Iterator[Any]:
        from langgraph.checkpoint.postgres import PostgresSaver

        # psycopg takes a libpq conninfo: the URL without SQLAlchemy's "+driver".
        conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        with PostgresSaver.from_conn_string(conninfo) as saver:
            yield saver


class PostgresStoreSQL(StoreSQL):
    """jsonb path operators with a text[] path (PostgreSQL 9.4+; numeric strings by regex)."""

    in_sql = True
    max_bound_parameters = 65535  # the wire protocol counts them in 16 bits
    # Two array parameters whatever the count (a 30k-pair IN list overflows the
    # server's max_stack_depth in the parser); the cap only bounds memory.
    keys_per_statement = 100_000

    def __init__(self, dialect_ops: PostgresOps | None = None) -> None:
        self._dialect_ops = dialect_ops

    def in_keys(self, prefix_hash: ColumnElement[str], key_hash: ColumnElement[str]) -> Any:
        pairs = (
            sa.func.unnest(
                sa.bindparam("key_prefixes", type_=pg_dialect.ARRAY(sa.Text)),
                sa.bindparam("key_hashes", type_=pg_dialect.ARRAY(sa.Text)),
            )
            .table_valued("p", "k")
            .render_derived()
        )
        in_pairs = sa.tuple_(prefix_hash, key_hash).in_(sa.select(pairs.c.p, pairs.c.k))
        if self._dialect_ops is None or not self._dialect_ops.distributed:
            return in_pairs
        # Citus prunes shards by the distribution column compared with constants, not
        # through the pairs' subquery: the namespaces named again (a one-namespace
        # write is then one shard, without a two-phase commit over every shard).
        prefixes = sa.bindparam("key_prefixes", type_=pg_dialect.ARRAY(sa.Text))
        return sa.and_(prefix_hash == sa.func.any(prefixes), in_pairs)

    def keys_params(self, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
        return {"key_prefixes": [p for p, _ in pairs], "key_hashes": [k for _, k in pairs]}

    @staticmethod
    def _path(path: JsonPath) -> sa.BindParameter[Any]:
        return sa.bindparam(None, [str(p) for p in path], type_=pg_dialect.ARRAY(sa.Text))

    def _node(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[Any]:
        return doc.op("#>", return_type=pg_dialect.JSONB)(self._path(path))

    def _text(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[str]:
        return doc.op("#>>", return_type=sa.Text)(self._path(path))

    def _kind(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[str]:
        return sa.func.jsonb_typeof(self._node(doc, path), type_=sa.Text)

    def _at(self, doc: ColumnElement[Any], path: JsonPath) -> JsonAt:
        return JsonAt(self._node(doc, path), self._kind(doc, path), self._text(doc, path))

    def _as_number(self, text: ColumnElement[str]) -> ColumnElement[Any]:
        # numeric, not float8: jsonb numbers are numeric and may exceed a double.
        return sa.cast(text, sa.Numeric)

    def number_param(self, name: str) -> sa.BindParameter[Any]:
        return sa.bindparam(name, type_=sa.Numeric(asdecimal=True))

    def number_value(self, number: float | int) -> Any:
        return decimal_param(number)

    def length_equals(self, doc: ColumnElement[Any], path: JsonPath, n: int) -> ColumnElement[bool]:
        node = self._node(doc, path)
        kind = sa.func.jsonb_typeof(node)
        length = sa.case(
            (kind == "array", sa.func.jsonb_array_length(node)),
            (
                kind == "object",
                sa.select(sa.func.count())
                .select_from(sa.func.jsonb_object_keys(node).alias())
                .scalar_subquery(),
            ),
        )
        return sa.func.coalesce(length == n, sa.false())

    @staticmethod
    def _labels(prefix: ColumnElement[str]) -> Any:
        return sa.func.string_to_array(prefix, ".", type_=pg_dialect.ARRAY(sa.Text))

    def namespace_depth(self, prefix: ColumnElement[str]) -> ColumnElement[int]:
        return sa.func.cardinality(self._labels(prefix), type_=sa.Integer)

    def namespace_label(self, prefix: ColumnElement[str], index: int) -> ColumnElement[str]:
        labels = self._labels(prefix)
        position = index + 1 if index >= 0 else self.namespace_depth(prefix) + (index + 1)
        return labels[position]  # type: ignore[no-any-return]

    def namespace_head(self, prefix: ColumnElement[str], depth: int) -> ColumnElement[str]:
        return sa.func.array_to_string(self._labels(prefix)[1:depth], ".", type_=sa.Text)

    def namespace_sort_key(self, joined: ColumnElement[str]) -> ColumnElement[str]:
        # "C": byte order, which is code point order in UTF-8, whatever the database's
        # default collation (en_US sorts by linguistic rules).
        return sa.func.replace(joined, ".", NAMESPACE_SORT_SEPARATOR, type_=sa.Text).collate("C")

    # Vectors are real[] here (revision 0003): pgvector, where the database has it,
    # casts them to its own type, and the schema stays the same with or without it.
    # The extension's schema is found by the probe and named in the SQL, so it need
    # not be on the search_path.
    _vector_schema: str | None = None
    _pgvector_version: str | None = None  # None: no pgvector (or not asked yet)
    _ann_warned = False
    native_distances = frozenset({"cosine", "l2", "inner_product"})
    ann_indexes = True

    def vector_value(self, vector: Sequence[float]) -> Any:
        return [float(x) for x in vector]

    def vector_of(self, stored: Any) -> list[float]:
        return list(stored)

    def native_vectors(self, engine: Engine) -> bool | None:
        return None  # the extension is per database: probed on the first ranked search

    def vector_probe(self) -> Executable:
        return sa.text(_PGVECTOR_FOUND)

    def vectors_found(self, answer: Any) -> bool:
        self._vector_schema, self._pgvector_version = (None, None) if answer is None else answer
        return answer is not None

    def ann_in_force(self, ann: AnnIndex) -> AnnIndex | None:
        # Known once the probe (or setup()) asked for pgvector. What it cannot build
        # is searched the nearest way it can, with one warning per store: no pgvector,
        # exact ranking (in Python); halfvec before pgvector 0.7, full-precision vectors.
        version = self._pgvector_version
        if version is not None and (ann.vector_type != "halfvec" or _version(version) >= (0, 7)):
            return ann
        if version is None:
            in_force, instead = None, "no pgvector in this database: the store searches exactly"
        else:
            in_force = replace(ann, vector_type="vector")
            instead = (
                f"halfvec needs pgvector >= 0.7, this database has {version}: "
                "full-precision vectors"
            )
        if not self._ann_warned:
            self._ann_warned = True
            warnings.warn(
                f"ann_index_config {ann.kind!r} ({ann.vector_type}): {instead}",
                ExactSearchWarning,
                stacklevel=2,
            )
        return in_force

    def vector_setup(self, connection: Connection) -> None:
        # As LangGraph's PostgresStore with an index: create pgvector where the server
        # has it (pg_available_extensions). Not being allowed to (it is not a trusted
        # extension: it takes a superuser or the database owner with the right grants)
        # leaves the portable path, which needs nothing.
        available = connection.execute(
            sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        ).first()
        if available is None:
            return
        try:
            with connection.begin_nested():
                connection.execute(sa.text("CREATE EXTENSION IF NOT EXISTS vector"))
        except sa.exc.DBAPIError as error:
            logger.warning("pgvector is available but not created (%s): portable ranking", error)

    def vector_param(self, name: str) -> sa.BindParameter[Any]:
        return sa.bindparam(name, type_=pg_dialect.ARRAY(pg_dialect.REAL))

    def _as_vector(
        self, array: ColumnElement[Any], vector_type: str = "vector", dims: int | None = None
    ) -> ColumnElement[Any]:
        return sa.cast(array, _PgVector(self._vector_schema or "public", vector_type, dims))

    def vector_similarity(
        self, embedding: ColumnElement[Any], query: ColumnElement[Any], distance: str
    ) -> ColumnElement[float]:
        functions = getattr(sa.func, self._vector_schema or "public")
        stored, wanted = self._as_vector(embedding), self._as_vector(query)
        if distance == "l2":
            l2: ColumnElement[float] = functions.l2_distance(stored, wanted, type_=sa.Double)
            return -l2
        if distance == "inner_product":
            product: ColumnElement[float] = functions.inner_product(stored, wanted, type_=sa.Double)
            return product
        distance_value = functions.cosine_distance(stored, wanted, type_=sa.Double)
        # pgvector's cosine distance is NaN when a vector is all zeros, and NaN sorts
        # above every number in PostgreSQL: similarity 0 instead, as the portable path.
        # NULLIF evaluates the distance once (a CASE would compute it twice).
        nan = sa.literal_column("'NaN'::float8", sa.Double)
        return 1.0 - sa.func.coalesce(sa.func.nullif(distance_value, nan), 1.0)

    def vector_has_dims(self, embedding: ColumnElement[Any], dims: int) -> ColumnElement[bool]:
        return sa.func.coalesce(sa.func.cardinality(embedding) == dims, sa.false())

    def vector_byte_length(self, embedding: ColumnElement[Any]) -> ColumnElement[int]:
        # real[]: 4 bytes a dimension, as the float32 bytes of the other dialects.
        return 4 * sa.func.cardinality(embedding, type_=sa.BigInteger)

    # Approximate indexes: an expression index over the real[] column cast to pgvector's
    # type of index dims (vector or halfvec), partial on vectors of that length (a cast
    # of another length fails). Searches order by the same expression, with pgvector's
    # operator, ascending, and the same predicate: what the planner needs to use it.

    def ann_setup(self, connection: Connection, ann: AnnIndex, distance: str, dims: int) -> None:
        self.vectors_found(connection.execute(sa.text(_PGVECTOR_FOUND)).first())
        in_force = self.ann_in_force(ann)
        if in_force is None:
            return
        ann = in_force
        # A table of its own for the DDL: an Index on the model's would join its metadata.
        vectors = sa.Table(
            "store_vectors",
            sa.MetaData(),
            sa.Column("embedding", pg_dialect.ARRAY(pg_dialect.REAL)),
        )
        column = vectors.c.embedding
        operator_class = f"{ann.vector_type}_{_OPERATOR_CLASS[distance]}"
        index = sa.Index(
            ann.name(distance, dims),
            self._as_vector(column, ann.vector_type, dims).label("indexed"),
            postgresql_using=ann.kind,
            postgresql_ops={"indexed": operator_class},
            postgresql_with=dict(ann.options),
            postgresql_where=self.ann_fits(column, dims),
        )
        connection.execute(sa.schema.CreateIndex(index, if_not_exists=True))

    def ann_distance(
        self,
        embedding: ColumnElement[Any],
        query: ColumnElement[Any],
        ann: AnnIndex,
        distance: str,
        dims: int,
    ) -> ColumnElement[float]:
        schema = (self._vector_schema or "public").replace('"', '""')
        operator = f'OPERATOR("{schema}".{_OPERATOR[distance]})'
        stored = self._as_vector(embedding, ann.vector_type, dims)
        wanted = self._as_vector(query, ann.vector_type, dims)
        return stored.op(operator, return_type=sa.Double)(wanted)

    def ann_session(self, ann: AnnIndex, fetched: int) -> tuple[Executable, dict[str, Any]] | None:
        # Custom plans: drivers prepare a statement run often (psycopg from its 5th run),
        # and the generic plan PostgreSQL then settles on for a filtered search sorts
        # every filtered vector instead of scanning the index (measured: exact pages,
        # at exact-search cost).
        settings = {"plan_cache_mode": "force_custom_plan"}
        options = dict(ann.search)
        if ann.kind == "hnsw":
            # An HNSW scan returns at most ef_search rows (before pgvector 0.8's iterative
            # scans): at least as many as the search fetches.
            ef_search = max(options.get("ef_search", _HNSW_EF_SEARCH), fetched)
            if ef_search != _HNSW_EF_SEARCH:
                settings["hnsw.ef_search"] = str(ef_search)
        elif "probes" in options:
            settings["ivfflat.probes"] = str(options["probes"])
        # Local: for this transaction only, the connection goes back to the pool as it was.
        calls = ", ".join(f"set_config(:name{n}, :value{n}, true)" for n in range(len(settings)))
        params: dict[str, Any] = {}
        for n, (name, value) in enumerate(settings.items()):
            params[f"name{n}"], params[f"value{n}"] = name, value
        return sa.text(f"SELECT {calls}"), params

    def ann_fits(self, embedding: ColumnElement[Any], dims: int) -> ColumnElement[bool]:
        # dims inline: the index's predicate must be provable from the query's.
        return sa.func.cardinality(embedding) == sa.literal_column(str(int(dims)), sa.Integer)

    def ann_score(self, distance_value: float | None, distance: str) -> float:
        if distance_value is None or distance_value != distance_value:  # NaN: a zero vector
            return 0.0
        if distance == "cosine":
            return 1.0 - distance_value
        return -distance_value  # l2: minus the distance; <#> is minus the inner product


_PGVECTOR_FOUND = (
    "SELECT n.nspname, e.extversion FROM pg_extension e"
    " JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
)
# pgvector's distance operators (ascending: closer first) and operator classes.
_OPERATOR = {"cosine": "<=>", "l2": "<->", "inner_product": "<#>"}
_HNSW_EF_SEARCH = 40  # pgvector's default hnsw.ef_search
_OPERATOR_CLASS = {"cosine": "cosine_ops", "l2": "l2_ops", "inner_product": "ip_ops"}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2] if part.isdigit())


class _PgVector(sa.types.UserDefinedType[Any]):
    """pgvector's ``vector`` (or ``halfvec``) type, qualified by the schema the
    extension is in, of ``dims`` dimensions if given."""

    cache_ok = True

    def __init__(self, schema: str, name: str = "vector", dims: int | None = None) -> None:
        self.schema = schema
        self.name = name
        self.dims = dims

    def get_col_spec(self, **kw: Any) -> str:
        schema = self.schema.replace(chr(34), chr(34) * 2)
        size = "" if self.dims is None else f"({int(self.dims)})"
        return f'"{schema}".{self.name}{size}'
