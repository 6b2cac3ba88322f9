"""Every dialect difference of lg_sqla, in one place.

A :class:`DialectOps` is chosen once per engine from SQLAlchemy's dialect
(``dialect.name``; MariaDB is ``"mysql"`` or, with ``mariadb+`` URLs, ``"mariadb"``)
and answers the only questions
on which the SQL differs:

* how to insert rows while ignoring (or overwriting) existing keys;
* how to turn a checkpoint's ``channel_versions`` JSON object into rows of
  ``(channel, version)`` to JOIN blobs in the same statement;
* how to compare one top-level metadata key with a JSON value;
* how to serialize concurrent schema migrations.

Any other dialect gets :class:`GenericOps`: portable SQL only (an
existence check before inserting; blobs loaded by a second, batched query).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import os
import re
import struct
import threading
import zlib
from collections.abc import Callable, Hashable, Iterator, Sequence
from functools import partial
from operator import eq as operator_eq
from typing import Any, ClassVar, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import ClauseElement, ColumnElement
from sqlalchemy.sql.expression import FunctionElement
from sqlalchemy.sql.selectable import FromClause, Join, TableValuedAlias

from lg_sqla import limits
from lg_sqla.errors import InvalidInputError, UnsupportedDriverError

T = TypeVar("T")
logger = logging.getLogger(__name__)

# A row of the (channel, version) pairs of a checkpoint's channel_versions.
ChannelVersionsSource = tuple[FromClause, ColumnElement[str], ColumnElement[str]]

# Name of the advisory lock that serializes concurrent `setup()` calls.
MIGRATION_LOCK_NAME = "lg_sqla_migrate"
MIGRATION_LOCK_TIMEOUT_S = 300
# Recursion limit we set where the server caps recursive CTEs (parent-chain walks).
MAX_RECURSION = 10_000_000


MYSQL_FAMILY = ("mysql", "mariadb")


def is_mysql_family(dialect: Dialect) -> bool:
    """MySQL or MariaDB, whichever URL scheme (``mysql+`` or ``mariadb+``) was used."""
    return dialect.name in MYSQL_FAMILY


def mysql_key_collation(dialect: Dialect) -> str:
    """Binary, NO PAD utf8mb4 collation: "a" != "A" != "a " (utf8mb4_bin pads spaces).

    MySQL 8.0.17+ calls it utf8mb4_0900_bin; MariaDB (10.2+) utf8mb4_nopad_bin.
    """
    return "utf8mb4_nopad_bin" if getattr(dialect, "is_mariadb", False) else "utf8mb4_0900_bin"


# A JSON string token in json.dumps output.
_MYSQL_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
# Inside a JSON string: an escape sequence (kept as it is), a quote's escape, or
# a "-" right after the opening quote. Used by `mysql_json_text`.
_MYSQL_UNSAFE_IN_STRING = re.compile(r'\\\\|\\"|(?<=")-|\\.')
_MYSQL_SAFE_ESCAPES = {'\\"': "\\u0022", "-": "\\u002d"}


def _mysql_safe_escape(match: re.Match[str]) -> str:
    return _MYSQL_SAFE_ESCAPES.get(match.group(), match.group())


def mysql_json_text(value: Any) -> str:
    """JSON text that MariaDB's JSON functions read the same way MySQL 8 does.

    MariaDB keeps JSON as text and compares a path's member names and the
    document's keys byte for byte, escapes included: ``$."ñ"`` misses a key
    stored as ``"\\u00f1"``. Its path parser refuses a quoted name that starts
    with "-", and JSON_KEYS loses keys after one holding an escaped quote (its
    duplicate check stops at the first ``"``). So documents and paths are both
    written in one canonical form: ASCII only (``\\uXXXX`` escapes), a quote as
    ``\\u0022``, a leading "-" as ``\\u002d``. Any JSON parser (MySQL 8, Python)
    reads the same values back.
    """
    text = json.dumps(value, ensure_ascii=True)
    if '\\"' not in text and '"-' not in text:
        return text
    return _MYSQL_STRING.sub(
        lambda s: _MYSQL_UNSAFE_IN_STRING.sub(_mysql_safe_escape, s.group()), text
    )


def mysql_member_path(*keys: str) -> str:
    """``$."k1"."k2"`` in the canonical form of `mysql_json_text` (bound, never spliced)."""
    return "$" + "".join("." + mysql_json_text(key) for key in keys)


class DialectOps:
    """Portable behaviour; subclasses override what their dialect does better."""

    name = "generic"
    # True when `channel_versions` can be expanded into rows inside a statement,
    # so a checkpoint and its blobs come back in one round trip.
    joins_channel_versions = False
    # False: insert-ignore and upsert are emulated (existence check / delete + insert).
    native_upsert = True
    # False: `list(filter=...)` filters metadata in Python, page by page
    # (see operations.Pages), where the dialect has no JSON functions we know.
    filters_metadata_in_sql = True
    # True: a put (blobs + checkpoint) can be one statement (see one_statement).
    writes_in_one_statement = False
    # True: a plan of one statement runs without BEGIN/COMMIT (fewer round trips).
    autocommit_single_statements = False
    # True: hot plans (cached statements) may run on the DBAPI cursor (lg_sqla.direct);
    # only for the drivers the test suite runs them on.
    runs_plans_directly = False
    # True: lg_sqla's tables can live in a named schema (``schema=``): a PostgreSQL
    # schema, a MySQL/MariaDB database. SQLite's only other schemas are attached files.
    supports_schemas = False

    def __init__(self) -> None:
        self._statements: dict[Hashable, Any] = {}
        self._cached_ids: set[int] = set()
        self._writer_locks: dict[int, threading.Lock] = {}

    def cached(self, key: Hashable, build: Callable[[], T]) -> T:
        """Build a statement once per key; statements without values are reusable."""
        try:
            return cast(T, self._statements[key])
        except KeyError:
            statement = self._statements[key] = build()
            self._cached_ids.add(id(statement))
            return statement

    def is_cached(self, statement: object) -> bool:
        """Whether ``statement`` came from :meth:`cached` (kept for the ops' lifetime)."""
        return id(statement) in self._cached_ids

    def insert_ignore(self, table: sa.Table) -> sa.Insert:
        """INSERT that leaves an existing row with the same key untouched."""
        raise NotImplementedError

    def upsert(self, table: sa.Table, update: Sequence[str]) -> sa.Insert:
        """INSERT that overwrites ``update`` columns of an existing row with the same key."""
        raise NotImplementedError

    def upsert_where(
        self, table: sa.Table, update: Sequence[str], replace: ColumnElement[bool]
    ) -> sa.Insert:
        """INSERT that overwrites ``update`` columns of an existing row with the same key
        only where ``replace`` (a condition on the existing row's key columns) holds,
        and otherwise leaves it untouched: insert-or-ignore and upsert decided per row."""
        raise NotImplementedError

    def channel_versions(self, doc: ColumnElement[Any]) -> ChannelVersionsSource:
        """Rows of (channel, version) from ``doc["channel_versions"]``, correlated to ``doc``."""
        raise NotImplementedError

    def keyed_lookup(
        self, table: sa.Table, on: ColumnElement[bool]
    ) -> tuple[FromClause, ColumnElement[bool]]:
        """``table``'s rows matching ``on``, looked up once per row of what comes before
        it in an ``ordered_join`` (``on`` binds the table's key to those rows): the
        FROM item to join and its join condition. Here the table and ``on`` themselves,
        whose order ``ordered_join`` keeps."""
        return table, on

    def channel_version(self, doc: ColumnElement[Any], channel: str) -> ColumnElement[Any]:
        """``doc["channel_versions"][channel]`` as a string comparable with a key column."""
        return self.as_key(doc[("channel_versions", channel)].as_string())

    def metadata_equals(
        self, column: ColumnElement[Any], key: str, value: Any
    ) -> ColumnElement[bool]:
        """``metadata[key] == value`` with JSON semantics (None also matches a missing key)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def migration_lock(self, connection: Connection) -> Iterator[None]:
        """Hold a lock that serializes schema migrations across processes."""
        yield

    def configure_direct_cursor(self, cursor: Any) -> None:
        """Adjust a DBAPI cursor of the direct path (lg_sqla.direct) before it runs."""

    def direct_autocommit(self, dialect: Dialect, dbapi_connection: Any) -> Callable[[], None]:
        """Put a DBAPI connection of the direct path in autocommit for one plan;
        returns what restores its previous state."""
        dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")
        return partial(dialect.reset_isolation_level, dbapi_connection)

    def writer_lock(self, engine: sa.Engine) -> threading.Lock | None:
        """A lock the writing calls of this process take first, where the database
        lets one writer in at a time (None: the database queues writers well)."""
        return None

    def typed_null(self, type_: sa.types.TypeEngine[Any]) -> ColumnElement[Any]:
        """A NULL that fixes a UNION column's type (result processing follows it)."""
        return sa.type_coerce(sa.null(), type_)

    def before_deep_recursion(self) -> sa.Executable | None:
        """A statement lifting the server's recursive-CTE depth limit, if it has one."""
        return None

    def as_key(self, expression: ColumnElement[Any]) -> ColumnElement[Any]:
        """A string computed in SQL, made comparable with a key column."""
        return expression

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
        """Many rows in one cacheable statement (``writes_in_one_statement`` dialects);
        ``rows``: built for that many rows (``bulk_rows_shape``), 0 for any number.

        Existing keys are left alone, unless ``update`` names columns to overwrite;
        ``replace`` then limits the overwrite to existing rows where it holds.
        """
        raise NotImplementedError

    def one_statement(self, inserts: Sequence[sa.Insert]) -> sa.Insert:
        """Several INSERTs as one statement (``writes_in_one_statement`` dialects)."""
        raise NotImplementedError

    def byte_length(self, binary: ColumnElement[Any]) -> ColumnElement[int]:
        """Size in bytes of a binary value (``length`` counts bytes of a BLOB/bytea everywhere)."""
        return sa.func.length(binary, type_=sa.BigInteger)

    def json_byte_length(self, document: ColumnElement[Any]) -> ColumnElement[int]:
        """Size in bytes of a JSON document as the database stores it, about."""
        return sa.func.length(sa.cast(document, sa.Text), type_=sa.BigInteger)

    def delete_unreferenced(
        self, table: sa.Table, thread_ids: Sequence[str], referenced: sa.Select[Any]
    ) -> sa.Executable:
        """DELETE the rows of ``table`` (of these threads) whose
        (thread_id, checkpoint_ns_hash, channel, version) ``referenced`` does not return."""
        key = (table.c.thread_id, table.c.checkpoint_ns_hash, table.c.channel, table.c.version)
        return sa.delete(table).where(
            table.c.thread_id.in_(list(thread_ids)), sa.tuple_(*key).not_in(referenced)
        )


class _OnConflictOps(DialectOps):
    """Dialects with ``INSERT ... ON CONFLICT`` (PostgreSQL 9.5+, SQLite 3.24+)."""

    @staticmethod
    def _insert(table: sa.Table) -> Any:
        raise NotImplementedError

    def insert_ignore(self, table: sa.Table) -> sa.Insert:
        return self._insert(table).on_conflict_do_nothing()  # type: ignore[no-any-return]

    def upsert(self, table: sa.Table, update: Sequence[str]) -> sa.Insert:
        stmt = self._insert(table)
        return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
            index_elements=list(table.primary_key.columns),
            set_={name: stmt.excluded[name] for name in update},
        )

    def upsert_where(
        self, table: sa.Table, update: Sequence[str], replace: ColumnElement[bool]
    ) -> sa.Insert:
        # ON CONFLICT ... DO UPDATE ... WHERE: a conflicting row failing the
        # condition is left as it is, like DO NOTHING (PostgreSQL 9.5+, SQLite 3.24+).
        stmt = self._insert(table)
        return stmt.on_conflict_do_update(  # type: ignore[no-any-return]
            index_elements=list(table.primary_key.columns),
            set_={name: stmt.excluded[name] for name in update},
            where=replace,
        )


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


def bulk_params(
    table: sa.Table, shared: Sequence[str], varying: Sequence[str], rows: Sequence[Any]
) -> dict[str, Any]:
    """Parameters of ``PostgresOps.bulk_insert(..., rows=bulk_rows_shape(rows))``."""
    params = {f"{table.name}_{c}": rows[0][c] for c in shared}
    if bulk_rows_shape(rows):
        for n, row in enumerate(rows):
            params.update({f"{table.name}__{c}_{n}": row[c] for c in varying})
    else:
        params.update({f"{table.name}__{c}": [row[c] for row in rows] for c in varying})
    return params


@functools.cache
def psycopg_binary_format() -> Any:
    from psycopg import pq  # only reached with psycopg connections

    return pq.Format.BINARY


def _nothing_to_restore() -> None:
    pass


class PostgresOps(_OnConflictOps):
    name = "postgresql"
    runs_plans_directly = True

    def configure_direct_cursor(self, cursor: Any) -> None:
        # Results in binary: bytea arrives as raw bytes, not hex text for psycopg to
        # decode (15% of a get_tuple's client time on a chat thread), jsonb and
        # integers likewise. SQLAlchemy's async adapter wraps psycopg's cursor.
        driver_cursor = getattr(cursor, "_cursor", cursor)
        driver_cursor.format = psycopg_binary_format()

    def direct_autocommit(self, dialect: Dialect, dbapi_connection: Any) -> Callable[[], None]:
        if dialect.driver not in ("psycopg", "psycopg_async"):
            return super().direct_autocommit(dialect, dbapi_connection)
        # psycopg's autocommit flag alone, set and restored: SQLAlchemy's isolation
        # level API also sets and resets `isolation_level`, two more driver calls per
        # plan (with the async driver, each one a greenlet switch to the event loop).
        if dbapi_connection.autocommit:
            return _nothing_to_restore
        dbapi_connection.autocommit = True
        return partial(setattr, dbapi_connection, "autocommit", False)

    supports_schemas = True
    joins_channel_versions = True
    # psycopg sends BEGIN and COMMIT as round trips of their own; the official
    # saver's autocommit + pipeline does a put in one. A single statement with
    # data-modifying CTEs is atomic on its own, so we do too.
    writes_in_one_statement = True
    autocommit_single_statements = True

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
        pairs: TableValuedAlias = sa.func.jsonb_each_text(doc["channel_versions"]).table_valued(
            "key", "value"
        )
        return pairs, pairs.c.key, pairs.c.value

    def keyed_lookup(
        self, table: sa.Table, on: ColumnElement[bool]
    ) -> tuple[FromClause, ColumnElement[bool]]:
        # PostgreSQL orders joins by its cost estimates, which cannot see through a
        # JSON expansion: it joined page x checkpoint_blobs on the thread first (every
        # blob of the thread), then expanded channel_versions once per blob, so a
        # get_tuple read the whole thread: 0.40 ms at 50 checkpoints, 4.6 ms at 2,000
        # (the official saver: 0.33 and 0.41). A LATERAL subquery with OFFSET 0 is
        # not merged into the join: it runs once per preceding row, one primary-key
        # probe each, whatever the thread's length.
        found = sa.select(table).where(on).offset(0).lateral(f"{table.name}_found")
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

    def json_byte_length(self, document: ColumnElement[Any]) -> ColumnElement[int]:
        # JSONB is binary; its text form is what a client would transfer.
        return sa.func.octet_length(sa.cast(document, sa.Text), type_=sa.BigInteger)

    def typed_null(self, type_: sa.types.TypeEngine[Any]) -> ColumnElement[Any]:
        # PostgreSQL types UNION columns pairwise from the left: an untyped NULL
        # becomes text and then clashes with integer columns of later branches.
        return sa.cast(sa.null(), type_)

    @contextlib.contextmanager
    def migration_lock(self, connection: Connection) -> Iterator[None]:
        # Transaction-scoped advisory lock: released by the migration's commit.
        key = zlib.crc32(MIGRATION_LOCK_NAME.encode())
        connection.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))
        yield


# One lock per SQLite database file in this process (see SQLiteOps.writer_lock).
_SQLITE_WRITER_LOCKS: dict[str, threading.Lock] = {}
_SQLITE_WRITER_LOCKS_GUARD = threading.Lock()


class SQLiteOps(_OnConflictOps):
    name = "sqlite"
    runs_plans_directly = True
    joins_channel_versions = True

    _insert = staticmethod(sqlite_dialect.insert)

    def channel_versions(self, doc: ColumnElement[Any]) -> ChannelVersionsSource:
        pairs: TableValuedAlias = sa.func.json_each(doc, "$.channel_versions").table_valued(
            "key", "value"
        )
        return pairs, pairs.c.key, pairs.c.value

    def json_byte_length(self, document: ColumnElement[Any]) -> ColumnElement[int]:
        # JSON is TEXT in SQLite, and length(text) counts characters: count bytes.
        return sa.func.length(sa.cast(document, sa.LargeBinary), type_=sa.BigInteger)

    def channel_version(self, doc: ColumnElement[Any], channel: str) -> ColumnElement[Any]:
        pairs = sa.func.json_each(doc, "$.channel_versions").table_valued("key", "value")
        return sa.select(pairs.c.value).where(pairs.c.key == channel).scalar_subquery()

    def metadata_equals(
        self, column: ColumnElement[Any], key: str, value: Any
    ) -> ColumnElement[bool]:
        # json_each and key equality, not a path: SQLite's quoted path labels have
        # no escapes, so `$."say \"hi\""` cannot name the key `say "hi"`.
        member = sa.func.json_each(column).table_valued("key", "type", "atom", "value")

        def member_where(*conditions: ColumnElement[bool]) -> ColumnElement[bool]:
            return sa.exists().where(member.c.key == key, *conditions)

        if value is None:
            return sa.or_(~member_where(), member_where(member.c.type == "null"))
        if isinstance(value, bool):
            return member_where(member.c.type == ("true" if value else "false"))
        if isinstance(value, (int, float)):
            return member_where(member.c.type.in_(("integer", "real")), member.c.atom == value)
        if isinstance(value, str):
            return member_where(member.c.type == "text", member.c.atom == value)
        # Objects and arrays: compared as minified JSON text (key order matters).
        return member_where(
            member.c.type.in_(("object", "array")),
            member.c.value == sa.func.json(json.dumps(value, separators=(",", ":"))),
        )

    def writer_lock(self, engine: sa.Engine) -> threading.Lock | None:
        # SQLite lets one writer in at a time, and a writer that finds the lock taken
        # sleeps in SQLite's busy handler (1, 2, 5, 10, ... 100 ms steps) before it
        # tries again. LangGraph writes from two threads at once (the next step's
        # writes while the last checkpoint is stored), so with durable commits
        # (an fsync each) a turn often waited on that sleep: 1.8x the official
        # saver's latency, which queues its callers on one Python lock. Writers of
        # this process queue here instead and are handed the database at once;
        # other processes still meet at SQLite's lock (busy_timeout).
        try:
            return self._writer_locks[id(engine)]
        except KeyError:
            pass
        database = engine.url.database
        if database in (None, "", ":memory:") or engine.url.query.get("mode") == "memory":
            key = f"memory:{id(engine.pool)}"
        else:
            key = os.path.realpath(database)
        with _SQLITE_WRITER_LOCKS_GUARD:
            lock = _SQLITE_WRITER_LOCKS.setdefault(key, threading.Lock())
        # Per engine (a saver has one or two): realpath costs syscalls on every call.
        self._writer_locks[id(engine)] = lock
        return lock

    @contextlib.contextmanager
    def migration_lock(self, connection: Connection) -> Iterator[None]:
        # SQLite has one writer at a time: take the write lock up front so a
        # second process waits (busy_timeout) instead of racing on CREATE TABLE.
        if connection.in_transaction():
            connection.commit()
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        yield


class OrderedJoin(Join):
    """An inner JOIN whose left side the planner must loop over first.

    Blobs are looked up by their full key, (thread, namespace, channel,
    version), from the pairs a JSON function expands. SQLite and MariaDB
    instead joined ``checkpoint_blobs`` first, on (thread, namespace) alone,
    reading every value of the thread: on a 600-checkpoint thread SQLite
    spent 0.9 ms of a 1.1 ms get_tuple there; MariaDB 7 ms instead of 2 ms
    on a 50-step chat thread. SQLite's ``CROSS JOIN`` and MySQL/MariaDB's
    ``STRAIGHT_JOIN`` fix the order; PostgreSQL plans it well as it is.
    """

    inherit_cache = True


def _ordered_join(join: OrderedJoin, compiler: Any, keyword: str, **kw: Any) -> str:
    from_linter = kw.get("from_linter")
    if from_linter is not None:  # tell SQLAlchemy's cartesian-product linter about the edge
        from_linter.edges.update(
            itertools.product(join.left._from_objects, join.right._from_objects)
        )
    kw["asfrom"] = True
    left = join.left._compiler_dispatch(compiler, **kw)
    right = join.right._compiler_dispatch(compiler, **kw)
    assert join.onclause is not None
    on = join.onclause._compiler_dispatch(compiler, **kw)
    return f"{left} {keyword} {right} ON {on}"


@compiles(OrderedJoin)
def _compile_join(join: OrderedJoin, compiler: Any, **kw: Any) -> str:
    return str(compiler.visit_join(join, **kw))


@compiles(OrderedJoin, "sqlite")
def _compile_sqlite_join(join: OrderedJoin, compiler: Any, **kw: Any) -> str:
    return _ordered_join(join, compiler, "CROSS JOIN", **kw)


@compiles(OrderedJoin, "mysql")
@compiles(OrderedJoin, "mariadb")
def _compile_mysql_join(join: OrderedJoin, compiler: Any, **kw: Any) -> str:
    return _ordered_join(join, compiler, "STRAIGHT_JOIN", **kw)


def ordered_join(left: FromClause, right: FromClause, on: ColumnElement[bool]) -> OrderedJoin:
    """``left JOIN right ON on``, looping over ``left`` first on every dialect."""
    return OrderedJoin(left, right, on)


class _MySQLChannelKeys(FunctionElement[Any]):
    """JSON_TABLE over the keys of ``doc->'$.channel_versions'`` (MySQL 8.0.4+, MariaDB 10.6+)."""

    name = "lg_sqla_channel_keys"
    inherit_cache = True


@compiles(_MySQLChannelKeys)
def _compile_mysql_channel_keys(element: _MySQLChannelKeys, compiler: Any, **kw: Any) -> str:
    (doc,) = list(element.clauses)
    # Only the syntax both servers document (`name type PATH path`); the collation
    # the join needs is applied in the comparison (MySQLOps.as_key). The column's
    # charset is explicit: it would otherwise be the database's default (latin1
    # on a MariaDB database created with the server's defaults), losing names.
    return (
        f"JSON_TABLE(JSON_KEYS({compiler.process(doc, **kw)}, '$.channel_versions'), '$[*]' "
        f"COLUMNS (channel_n FOR ORDINALITY, "
        f"channel_key VARCHAR({limits.CHANNEL_MAX}) CHARACTER SET utf8mb4 PATH '$'))"
    )


class _Utf8mb4(FunctionElement[str]):
    """``CONVERT(expression USING utf8mb4)`` (MySQL and MariaDB)."""

    name = "lg_sqla_utf8mb4"
    inherit_cache = True
    type = sa.String()


@compiles(_Utf8mb4)
def _compile_utf8mb4(element: _Utf8mb4, compiler: Any, **kw: Any) -> str:
    (expression,) = list(element.clauses)
    return f"CONVERT({compiler.process(expression, **kw)} USING utf8mb4)"


class _MySQLAntiJoinDelete(Executable, ClauseElement):
    """``DELETE t FROM t LEFT JOIN (referenced) r ON <key> WHERE <threads> AND r IS NULL``."""

    inherit_cache = False

    def __init__(self, table: sa.Table, thread_ids: list[str], referenced: sa.Select[Any]) -> None:
        self.table = table
        self.thread_ids = thread_ids
        self.referenced = referenced


@compiles(_MySQLAntiJoinDelete, "mysql")
@compiles(_MySQLAntiJoinDelete, "mariadb")
def _compile_mysql_anti_join_delete(element: _MySQLAntiJoinDelete, compiler: Any, **kw: Any) -> str:
    t = element.table
    name = compiler.preparer.format_table(t)
    referenced = element.referenced.subquery("referenced")
    r = referenced.c
    on = sa.and_(
        *(
            mine == theirs
            for mine, theirs in zip(
                (t.c.thread_id, t.c.checkpoint_ns_hash, t.c.channel, t.c.version),
                r,
                strict=True,
            )
        )
    )
    threads = t.c.thread_id.in_(element.thread_ids)
    first = next(iter(r))
    return (
        f"DELETE {name} FROM {name} LEFT OUTER JOIN "
        f"{compiler.process(referenced, asfrom=True, **kw)} ON {compiler.process(on, **kw)} "
        f"WHERE {compiler.process(threads, **kw)} AND {compiler.process(first.is_(None), **kw)}"
    )


class MySQLOps(DialectOps):
    """MySQL 8.0.4+ and MariaDB 10.6+ (JSON_TABLE)."""

    name = "mysql"
    joins_channel_versions = True
    runs_plans_directly = True
    supports_schemas = True
    # Not autocommit_single_statements: MySQL switches autocommit with statements of
    # their own (SET autocommit, and back), which cost more than the COMMIT they save.
    # Connections kept in autocommit mode, with BEGIN sent before plans of several
    # statements, were measured (chat workload replayed, PyMySQL, 10 interleaved
    # repeats): put_writes 14% and get_tuple 3% faster, put 5% slower, writes as a
    # whole no faster; and every Core plan would need that BEGIN to stay atomic.

    def __init__(self, dialect: Dialect) -> None:
        super().__init__()
        # Whether the server is MariaDB is only known once the engine has
        # connected, so the collation is looked up when statements are built.
        self._dialect = dialect

    def insert_ignore(self, table: sa.Table) -> sa.Insert:
        # Not INSERT IGNORE: that also turns truncation and other errors into
        # warnings. A no-op ON DUPLICATE KEY UPDATE only absorbs key conflicts.
        stmt = mysql_dialect.insert(table)
        first_key = next(iter(table.primary_key.columns)).name
        return stmt.on_duplicate_key_update({first_key: table.c[first_key]})

    def upsert(self, table: sa.Table, update: Sequence[str]) -> sa.Insert:
        stmt = mysql_dialect.insert(table)
        return stmt.on_duplicate_key_update({name: stmt.inserted[name] for name in update})

    def upsert_where(
        self, table: sa.Table, update: Sequence[str], replace: ColumnElement[bool]
    ) -> sa.Insert:
        # ON DUPLICATE KEY UPDATE has no WHERE: each column keeps its value unless
        # the condition holds. The condition must read key columns only (never in
        # `update`): MySQL applies the assignments left to right, so a later one
        # would see an earlier one's new value.
        stmt = mysql_dialect.insert(table)
        return stmt.on_duplicate_key_update(
            {name: sa.case((replace, stmt.inserted[name]), else_=table.c[name]) for name in update}
        )

    def channel_versions(self, doc: ColumnElement[Any]) -> ChannelVersionsSource:
        keys = _MySQLChannelKeys(doc).table_valued(
            sa.column("channel_n", sa.Integer), sa.column("channel_key", sa.String)
        )
        # The path to a channel's version names the key exactly as the document
        # spells it: the n-th element of JSON_KEYS (which MariaDB copies from the
        # document byte for byte), not the decoded name re-quoted, which MariaDB
        # would compare with the stored escapes and miss (see mysql_json_text).
        spelled = sa.func.json_extract(
            sa.func.json_keys(doc, "$.channel_versions"),
            sa.func.concat("$[", keys.c.channel_n - 1, "]"),
        )
        path = sa.func.concat("$.channel_versions.", spelled)
        version = sa.func.json_unquote(sa.func.json_extract(doc, path))
        return keys, self.as_key(keys.c.channel_key), self.as_key(version)

    def channel_version(self, doc: ColumnElement[Any], channel: str) -> ColumnElement[Any]:
        path = sa.bindparam(None, mysql_member_path("channel_versions", channel), sa.String)
        return self.as_key(sa.func.json_unquote(sa.func.json_extract(doc, path)))

    def json_byte_length(self, document: ColumnElement[Any]) -> ColumnElement[int]:
        # LENGTH() counts bytes (MariaDB's JSON is LONGTEXT; MySQL's its utf8mb4 text).
        return sa.func.length(document, type_=sa.BigInteger)

    def as_key(self, expression: ColumnElement[Any]) -> ColumnElement[Any]:
        # Strings from JSON functions are utf8mb4_bin; compared with a key column
        # (binary NO PAD) MySQL 8 may refuse the mix of collations. An explicit
        # COLLATE wins and keeps the key column's index usable. Literals and some
        # JSON results take the connection's charset (latin1 or utf8mb3 when the
        # URL asks for it), where a utf8mb4 collation is an error: convert first.
        return sa.collate(_Utf8mb4(expression), mysql_key_collation(self._dialect))

    def before_deep_recursion(self) -> sa.Executable | None:
        # Both stop recursive CTEs after 1000 iterations by default, and a
        # DeltaChannel chain may be 5000 supersteps deep between snapshots.
        variable = (
            "max_recursive_iterations"  # MariaDB
            if getattr(self._dialect, "is_mariadb", False)
            else "cte_max_recursion_depth"  # MySQL 8.0.3+
        )
        return sa.text(f"SET SESSION {variable} = {MAX_RECURSION}")

    def delete_unreferenced(
        self, table: sa.Table, thread_ids: Sequence[str], referenced: sa.Select[Any]
    ) -> sa.Executable:
        # MariaDB re-evaluates a NOT IN (subquery over JSON_TABLE) per row: 51 s
        # to collect 20k blobs of a pruned 10k-checkpoint thread. A multi-table
        # DELETE with a LEFT JOIN anti-join does it in well under a second.
        return _MySQLAntiJoinDelete(table, list(thread_ids), referenced)

    def metadata_equals(
        self, column: ColumnElement[Any], key: str, value: Any
    ) -> ColumnElement[bool]:
        extracted = sa.func.json_extract(column, mysql_member_path(key))
        json_type = sa.func.json_type(extracted)
        if value is None:
            return sa.or_(extracted.is_(None), json_type == "NULL")
        if isinstance(value, bool):
            return sa.and_(
                json_type == "BOOLEAN", sa.func.json_unquote(extracted) == json.dumps(value)
            )
        if isinstance(value, (int, float)):
            return sa.and_(
                json_type.in_(("INTEGER", "UNSIGNED INTEGER", "DOUBLE", "DECIMAL")),
                extracted == value,
            )
        if isinstance(value, str):
            return sa.and_(
                json_type == "STRING",
                sa.func.json_unquote(extracted) == self.as_key(sa.literal(value)),
            )
        # Objects and arrays: mutual containment (arrays compare as sets: [1, 2] == [2, 1, 1]).
        candidate = mysql_json_text(value)
        return sa.and_(
            json_type.in_(("OBJECT", "ARRAY")),
            sa.func.json_contains(extracted, candidate),
            sa.func.json_contains(candidate, extracted),
        )

    @contextlib.contextmanager
    def migration_lock(self, connection: Connection) -> Iterator[None]:
        # MySQL DDL commits implicitly, so a transaction-scoped lock is useless:
        # take a session lock and release it whatever happens.
        got = connection.execute(
            sa.select(sa.func.get_lock(MIGRATION_LOCK_NAME, MIGRATION_LOCK_TIMEOUT_S))
        ).scalar()
        if got != 1:
            raise TimeoutError(
                f"could not take the MySQL lock {MIGRATION_LOCK_NAME!r} "
                f"within {MIGRATION_LOCK_TIMEOUT_S}s; is another migration stuck?"
            )
        try:
            yield
            # The version table's last UPDATE is still in this transaction (Alembic
            # leaves the commit to us: see alembic/env.py). Committed only after the
            # release, it let the next process read the old revision under the lock and
            # apply the last revision again ("Duplicate column name 'prefix_head'").
            if connection.in_transaction():
                connection.commit()
        finally:
            connection.execute(sa.select(sa.func.release_lock(MIGRATION_LOCK_NAME)))


class GenericOps(DialectOps):
    """Any other SQLAlchemy dialect: portable SQL, a few more round trips."""

    native_upsert = False
    filters_metadata_in_sql = False

    def insert_ignore(self, table: sa.Table) -> sa.Insert:
        # Callers filter out existing keys first (see operations._insert_ignore).
        return sa.insert(table)

    def upsert(self, table: sa.Table, update: Sequence[str]) -> sa.Insert:
        raise NotImplementedError("GenericOps upserts by delete + insert in operations")

    def upsert_where(
        self, table: sa.Table, update: Sequence[str], replace: ColumnElement[bool]
    ) -> sa.Insert:
        raise NotImplementedError("GenericOps upserts by delete + insert in operations")

    def metadata_equals(
        self, column: ColumnElement[Any], key: str, value: Any
    ) -> ColumnElement[bool]:
        raise NotImplementedError(
            "metadata filters need JSON support of the dialect; "
            "use SQLite, PostgreSQL or MySQL/MariaDB, or list without `filter`"
        )


_OPS: dict[str, type[DialectOps]] = {
    "postgresql": PostgresOps,
    "sqlite": SQLiteOps,
}


# Drivers that cannot run lg_sqla: (dialect family, driver) -> (why, the driver to use).
_UNUSABLE_DRIVERS = {
    ("mysql", "aiomysql"): (
        "aiomysql cannot send bytes parameters with PyMySQL 1.2.3 or later (it calls "
        "PyMySQL's escape_bytes_prefixed, no longer a function there: "
        "aio-libs/aiomysql#1080), and checkpoints, writes and cached values are bytes",
        "asyncmy",
    ),
}


def check_driver(dialect: Dialect) -> None:
    """Refuse an engine whose driver cannot run lg_sqla, naming the one to use instead.

    Called where an engine is accepted (savers, store, node cache: through
    :func:`ops_for`), so the error comes at construction, not as a ``TypeError``
    deep inside the first call that binds bytes.
    """
    family = "mysql" if is_mysql_family(dialect) else dialect.name
    unusable = _UNUSABLE_DRIVERS.get((family, dialect.driver))
    if unusable is not None:
        reason, instead = unusable
        raise UnsupportedDriverError(
            f"lg_sqla cannot use the {dialect.driver} driver ({dialect.name}+{dialect.driver}): "
            f'{reason}. Use {dialect.name}+{instead}:// URLs (pip install "lg_sqla[async]").'
        )


def ops_for(dialect: Dialect) -> DialectOps:
    """The :class:`DialectOps` for a SQLAlchemy dialect (generic when unknown); refuses
    drivers that cannot run lg_sqla (:func:`check_driver`)."""
    check_driver(dialect)
    if is_mysql_family(dialect):
        return MySQLOps(dialect)
    return _OPS.get(dialect.name, GenericOps)()


@compiles(sa.PrimaryKeyConstraint, "mysql")
@compiles(sa.PrimaryKeyConstraint, "mariadb")
def _primary_key_without_name(constraint: sa.PrimaryKeyConstraint, compiler: Any, **kw: Any) -> str:
    """MySQL/MariaDB: ``PRIMARY KEY (...)`` without ``CONSTRAINT name``.

    The server always calls a primary key ``PRIMARY`` and answers a named one with a
    warning ("Name 'pk_checkpoints' ignored for PRIMARY key") that asyncmy logs on
    every ``setup()`` (our tables', and Alembic's version table's ``..._pkc``). The
    name has no effect there, so it is not sent: the DDL is otherwise the same.
    """
    name = constraint.name
    constraint.name = None
    try:
        return cast(str, compiler.visit_primary_key_constraint(constraint, **kw))
    finally:
        constraint.name = name


# --- The store (lg_sqla.store): JSON filters and namespace labels in SQL ---------------
#
# Kept apart from the checkpoint parts above. ``store_sql_for(ops)`` gives the store
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


class StoreSQL:
    """Dialects without JSON functions we know: the store filters in Python."""

    in_sql = False
    # Bound parameters one statement may hold; the store splits longer key lists.
    # 999: SQLite before 3.32, the lowest limit among the databases we know.
    max_bound_parameters = 999

    @property
    def keys_per_statement(self) -> int:
        """How many (prefix_hash, key_hash) pairs one :meth:`in_keys` list may hold."""
        return (self.max_bound_parameters - 16) // 2

    def in_keys(self, prefix_hash: ColumnElement[str], key_hash: ColumnElement[str]) -> Any:
        """``(prefix_hash, key_hash) IN`` the pairs of :meth:`keys_params`."""
        return sa.tuple_(prefix_hash, key_hash).in_(sa.bindparam("keys", expanding=True))

    def keys_params(self, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
        return {"keys": list(pairs)}

    def kind_in(
        self, doc: ColumnElement[Any], path: JsonPath, kinds: frozenset[str]
    ) -> ColumnElement[bool]:
        """The value at ``path`` exists and is of one of ``kinds`` (see JSON_KINDS)."""
        raise NotImplementedError

    def missing(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[bool]:
        """Nothing at ``path`` (a JSON null is something)."""
        raise NotImplementedError

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
        raise NotImplementedError

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
        raise NotImplementedError

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
        return text == _as_text(value)

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

    def native_vectors(self, engine: Engine) -> bool | None:
        """Whether this engine ranks by cosine similarity in SQL: known from the driver
        (True, False; may prepare the engine, e.g. load an extension on each connection
        it hands out), or None: ask the server (:meth:`vector_probe`)."""
        return False

    def vector_probe(self) -> Executable:
        """A query whose first row's first column, given to :meth:`vectors_found`,
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
        self, embedding: ColumnElement[Any], query: ColumnElement[Any]
    ) -> ColumnElement[float]:
        """Cosine similarity of a stored vector and the query; 0 where either is all
        zeros (as the portable path, where the cosine is undefined)."""
        raise NotImplementedError

    def vector_has_dims(self, embedding: ColumnElement[Any], dims: int) -> ColumnElement[bool]:
        """The stored vector has ``dims`` dimensions."""
        return sa.func.length(embedding) == 4 * dims


def _as_text(value: str | ColumnElement[str]) -> ColumnElement[str]:
    return sa.literal(value, sa.String) if isinstance(value, str) else value


def _decimal(number: Any) -> Any:
    import decimal

    # repr: the shortest text that reads back as the same float.
    return decimal.Decimal(number if isinstance(number, int) else repr(number))


class PostgresStoreSQL(StoreSQL):
    """jsonb path operators with a text[] path (PostgreSQL 9.4+; numeric strings by regex)."""

    in_sql = True
    max_bound_parameters = 65535  # the wire protocol counts them in 16 bits
    # Two array parameters whatever the count (a 30k-pair IN list overflows the
    # server's max_stack_depth in the parser); the cap only bounds memory.
    keys_per_statement = 100_000

    def in_keys(self, prefix_hash: ColumnElement[str], key_hash: ColumnElement[str]) -> Any:
        pairs = (
            sa.func.unnest(
                sa.bindparam("key_prefixes", type_=pg_dialect.ARRAY(sa.Text)),
                sa.bindparam("key_hashes", type_=pg_dialect.ARRAY(sa.Text)),
            )
            .table_valued("p", "k")
            .render_derived()
        )
        return sa.tuple_(prefix_hash, key_hash).in_(sa.select(pairs.c.p, pairs.c.k))

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

    def kind_in(
        self, doc: ColumnElement[Any], path: JsonPath, kinds: frozenset[str]
    ) -> ColumnElement[bool]:
        return sa.func.coalesce(self._kind(doc, path).in_(sorted(kinds)), sa.false())

    def missing(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[bool]:
        return self._node(doc, path).is_(None)

    def number_compare(
        self,
        doc: ColumnElement[Any],
        path: JsonPath,
        operator: Callable[[Any, Any], ColumnElement[bool]],
        number: ColumnElement[Any],
        strings: bool,
    ) -> ColumnElement[bool]:
        kind, text = self._kind(doc, path), self._text(doc, path)
        # numeric, not float8: jsonb numbers are numeric and may exceed a double.
        # CASE guarantees the cast only sees what is a number.
        whens = [
            (kind == "number", sa.cast(text, sa.Numeric)),
            (kind == "boolean", sa.case((text == "true", 1), else_=0)),
        ]
        if strings:
            whens.append(
                (
                    sa.and_(kind == "string", text.regexp_match(NUMERIC_STRING)),
                    sa.cast(text, sa.Numeric),
                )
            )
        value = sa.case(*whens, else_=sa.null())
        return sa.func.coalesce(operator(value, number), sa.false())

    def number_param(self, name: str) -> sa.BindParameter[Any]:
        return sa.bindparam(name, type_=sa.Numeric(asdecimal=True))

    def number_value(self, number: float | int) -> Any:
        return _decimal(number)

    def string_equals(
        self, doc: ColumnElement[Any], path: JsonPath, text: ColumnElement[str]
    ) -> ColumnElement[bool]:
        return sa.func.coalesce(
            sa.and_(self._kind(doc, path) == "string", self._text(doc, path) == text),
            sa.false(),
        )

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

    def vector_value(self, vector: Sequence[float]) -> Any:
        return [float(x) for x in vector]

    def vector_of(self, stored: Any) -> list[float]:
        return list(stored)

    def native_vectors(self, engine: Engine) -> bool | None:
        return None  # the extension is per database: probed on the first ranked search

    def vector_probe(self) -> Executable:
        return sa.text(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'vector'"
        )

    def vectors_found(self, answer: Any) -> bool:
        self._vector_schema = answer
        return answer is not None

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

    def _as_vector(self, array: ColumnElement[Any]) -> ColumnElement[Any]:
        return sa.cast(array, _PgVector(self._vector_schema or "public"))

    def vector_similarity(
        self, embedding: ColumnElement[Any], query: ColumnElement[Any]
    ) -> ColumnElement[float]:
        schema = self._vector_schema or "public"
        distance = getattr(sa.func, schema).cosine_distance(
            self._as_vector(embedding), self._as_vector(query), type_=sa.Double
        )
        # pgvector's cosine distance is NaN when a vector is all zeros, and NaN sorts
        # above every number in PostgreSQL: similarity 0 instead, as the portable path.
        # NULLIF evaluates the distance once (a CASE would compute it twice).
        nan = sa.literal_column("'NaN'::float8", sa.Double)
        return 1.0 - sa.func.coalesce(sa.func.nullif(distance, nan), 1.0)

    def vector_has_dims(self, embedding: ColumnElement[Any], dims: int) -> ColumnElement[bool]:
        return sa.func.coalesce(sa.func.cardinality(embedding) == dims, sa.false())


class _PgVector(sa.types.UserDefinedType[Any]):
    """pgvector's ``vector`` type, qualified by the schema the extension is in."""

    cache_ok = True

    def __init__(self, schema: str) -> None:
        self.schema = schema

    def get_col_spec(self, **kw: Any) -> str:
        return f'"{self.schema.replace(chr(34), chr(34) * 2)}".vector'


class _SQLiteNode:
    """The value at a path as SQLite sees it: its json type, its SQL value (``atom``),
    its JSON text (containers), and how to turn a condition on them into a predicate."""

    def __init__(
        self, type_: Any, atom: Any, value: Any, test: Callable[[Any], Any], present: Any
    ) -> None:
        self.type, self.atom, self.value, self.test = type_, atom, value, test
        self.present = present


def _sqlite_plain_key(step: str | int) -> bool:
    """Whether a path label can name this member: SQLite 3.40's quoted labels have no
    escapes, and our documents spell non-ASCII, quotes, backslashes and control
    characters as escapes, which a label never matches."""
    return isinstance(step, int) or (
        step != "" and all(" " <= c <= "~" and c not in '"\\' for c in step)
    )


class SQLiteStoreSQL(StoreSQL):
    """json_type/json_extract with a bound path where every member name can be a path
    label (the common case), else json_each, member by member."""

    in_sql = True
    # SQLITE_MAX_VARIABLE_NUMBER's default since SQLite 3.32.
    max_bound_parameters = 32766
    _TYPES: ClassVar[dict[str, tuple[str, ...]]] = {
        "object": ("object",),
        "array": ("array",),
        "string": ("text",),
        "number": ("integer", "real"),
        "boolean": ("true", "false"),
        "null": ("null",),
    }

    @staticmethod
    def _node(doc: ColumnElement[Any], path: JsonPath) -> _SQLiteNode:
        if all(_sqlite_plain_key(step) for step in path):
            label = "$" + "".join(f"[{p}]" if isinstance(p, int) else f'."{p}"' for p in path)
            bound = sa.literal(label, sa.String)
            type_ = sa.func.json_type(doc, bound, type_=sa.String)
            atom = sa.func.json_extract(doc, bound)
            return _SQLiteNode(
                type_, atom, atom, lambda c: sa.func.coalesce(c, 0), type_.is_not(None)
            )
        # json_each rows, one per step, each chosen by its key.
        member = sa.func.json_each(doc).table_valued("key", "value", "type", "atom")
        source: Any = member
        condition = member.c.key == path[0]
        for step in path[1:]:
            parent = member
            member = sa.func.json_each(parent.c.value).table_valued("key", "value", "type", "atom")
            # JOIN, not a comma: the argument refers to the previous row (SQLite allows it).
            # json_each of a scalar's text would fail: descend into containers only.
            source = source.join(
                member, sa.and_(parent.c.type.in_(("object", "array")), member.c.key == step)
            )
        return _SQLiteNode(
            member.c.type,
            member.c.atom,
            member.c.value,
            lambda c: sa.exists().select_from(source).where(condition, c),
            sa.exists().select_from(source).where(condition),
        )

    def _exists(
        self, doc: ColumnElement[Any], path: JsonPath, test: Callable[[Any], ColumnElement[bool]]
    ) -> ColumnElement[bool]:
        node = self._node(doc, path)
        return node.test(test(node))  # type: ignore[no-any-return]

    def kind_in(
        self, doc: ColumnElement[Any], path: JsonPath, kinds: frozenset[str]
    ) -> ColumnElement[bool]:
        types = sorted(t for kind in kinds for t in self._TYPES[kind])
        return self._exists(doc, path, lambda m: m.type.in_(types))

    def missing(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[bool]:
        return ~self._node(doc, path).present  # type: ignore[no-any-return]

    def number_compare(
        self,
        doc: ColumnElement[Any],
        path: JsonPath,
        operator: Callable[[Any, Any], ColumnElement[bool]],
        number: ColumnElement[Any],
        strings: bool,
    ) -> ColumnElement[bool]:
        if operator is operator_eq and not strings and all(map(_sqlite_plain_key, path)):
            # Equality needs no type: json_extract gives JSON numbers as numbers, true
            # and false as 1 and 0 (Python: True == 1), and strings, objects and arrays
            # as TEXT, which never equals a number (no affinity: storage classes
            # differ). One JSON parse per row instead of two (json_type, json_extract).
            node = self._node(doc, path)
            return node.test(node.atom == number)  # type: ignore[no-any-return]

        def test(m: Any) -> ColumnElement[bool]:
            # CASE type WHEN ...: the type is computed once (a JSON parse each time).
            whens: dict[str, Any] = {"integer": m.atom, "real": m.atom, "true": 1, "false": 0}
            if strings:
                # SQLite has no regular expressions: json_valid/json_type check the
                # JSON number syntax (whitespace allowed around it), GLOB the exponent.
                atom = m.atom
                looks_numeric = sa.and_(
                    sa.case(
                        (sa.func.json_valid(atom) == 1, sa.func.json_type(atom)),
                        else_=sa.null(),
                    ).in_(("integer", "real")),
                    ~sa.func.lower(atom).op("GLOB")("*e*[0-9][0-9][0-9][0-9][0-9]*"),
                )
                whens["text"] = sa.case((looks_numeric, sa.cast(atom, sa.Float)), else_=sa.null())
            return operator(sa.case(whens, value=m.type, else_=sa.null()), number)

        return self._exists(doc, path, test)

    def number_param(self, name: str) -> sa.BindParameter[Any]:
        # No type: an int stays an INTEGER for SQLite, compared exactly with integers.
        return sa.bindparam(name)

    def string_equals(
        self, doc: ColumnElement[Any], path: JsonPath, text: ColumnElement[str]
    ) -> ColumnElement[bool]:
        # The value first: most rows fail there, and AND stops.
        return self._exists(doc, path, lambda m: sa.and_(m.atom == text, m.type == "text"))

    def length_equals(self, doc: ColumnElement[Any], path: JsonPath, n: int) -> ColumnElement[bool]:
        def test(m: Any) -> ColumnElement[bool]:
            members = sa.func.json_each(m.value).table_valued("key")
            count = sa.select(sa.func.count()).select_from(members).scalar_subquery()
            return sa.and_(m.type.in_(("object", "array")), count == n)

        return self._exists(doc, path, test)

    @staticmethod
    def _labels(prefix: ColumnElement[str]) -> ColumnElement[str]:
        # The labels as a JSON array: json_quote escapes what JSON needs, and no
        # escape sequence holds a ".", so splitting the quoted text at "." is exact.
        quoted = sa.func.json_quote(prefix, type_=sa.Text)
        return sa.literal("[") + sa.func.replace(quoted, ".", '","') + sa.literal("]")

    def namespace_depth(self, prefix: ColumnElement[str]) -> ColumnElement[int]:
        return sa.func.json_array_length(self._labels(prefix), type_=sa.Integer)

    def namespace_label(self, prefix: ColumnElement[str], index: int) -> ColumnElement[str]:
        path = f"$[{index}]" if index >= 0 else f"$[#{index}]"
        return sa.func.json_extract(self._labels(prefix), path, type_=sa.Text)

    def namespace_head(self, prefix: ColumnElement[str], depth: int) -> ColumnElement[str]:
        labels = sa.func.json_each(self._labels(prefix)).table_valued("key", "value")
        # length() counts characters, as substr() does.
        width = (
            sa.select(sa.func.sum(sa.func.length(labels.c.value)) + sa.func.count() - 1)
            .where(labels.c.key < depth)
            .scalar_subquery()
        )
        return sa.func.substr(prefix, 1, width, type_=sa.Text)

    def namespace_sort_key(self, joined: ColumnElement[str]) -> ColumnElement[str]:
        return sa.func.replace(joined, ".", NAMESPACE_SORT_SEPARATOR, type_=sa.Text)

    def native_vectors(self, engine: Engine) -> bool:
        # sqlite-vec is a loadable extension: it needs its package (`sqlite_vec`) and a
        # driver whose connections can load extensions. CPython's sqlite3 may be built
        # without (this project's is), pysqlite3 has it; aiosqlite drives whichever
        # sqlite module its SQLAlchemy adapter was given (see sqlite_vec_engine_options).
        path = sqlite_vec_path()
        driver = getattr(engine.dialect.dbapi, "sqlite", engine.dialect.dbapi)
        if path is None or not hasattr(
            getattr(driver, "Connection", None), "enable_load_extension"
        ):
            return False
        if not sa.event.contains(engine.pool, "checkout", _load_sqlite_vec):
            # checkout, not connect: connections pooled before the store existed too.
            sa.event.listen(engine.pool, "checkout", _load_sqlite_vec)
        return True

    def vector_similarity(
        self, embedding: ColumnElement[Any], query: ColumnElement[Any]
    ) -> ColumnElement[float]:
        # vec_distance_cosine is 1 - cosine, NULL when a vector is all zeros.
        distance = sa.func.vec_distance_cosine(embedding, query, type_=sa.Double)
        return sa.func.coalesce(1.0 - distance, 0.0)


_SQLITE_VEC_LOADED = "lg_sqla.sqlite_vec"


def sqlite_vec_path() -> str | None:
    """The sqlite-vec extension's file (PyPI ``sqlite-vec``), None when not installed."""
    try:
        import sqlite_vec  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    return cast(str, sqlite_vec.loadable_path())


def _load_sqlite_vec(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """Pool checkout hook: load sqlite-vec once per DBAPI connection."""
    if record.info.get(_SQLITE_VEC_LOADED):
        return
    path = sqlite_vec_path()
    driver = getattr(dbapi_connection, "driver_connection", None)
    try:
        if driver is not None and driver is not dbapi_connection:
            # aiosqlite: its methods are coroutines run on its own thread; a pool hook of
            # an async engine runs where SQLAlchemy can await them (await_only).
            from sqlalchemy.util import await_only

            await_only(driver.enable_load_extension(True))
            try:
                await_only(driver.load_extension(path))
            finally:
                await_only(driver.enable_load_extension(False))
        else:
            dbapi_connection.enable_load_extension(True)
            try:
                dbapi_connection.load_extension(path)
            finally:
                # Loading stays off otherwise: SQL could load any library with it on.
                dbapi_connection.enable_load_extension(False)
    except AttributeError as error:
        raise InvalidInputError(
            "this SQLite connection cannot load extensions, so not sqlite-vec: an aiosqlite "
            "engine must open pysqlite3 connections (lg_sqla.dialects.sqlite_vec_engine_options)"
        ) from error
    record.info[_SQLITE_VEC_LOADED] = True


def sqlite_vec_engine_options(url: str, options: dict[str, Any]) -> dict[str, Any]:
    """Engine options under which a SQLite URL's connections can load sqlite-vec.

    Unchanged when sqlite-vec is not installed, the URL is not SQLite, the caller chose
    a driver module, or Python's sqlite3 can load extensions itself. Otherwise the
    driver's SQLite module becomes pysqlite3 (PyPI ``pysqlite3-binary``, in the
    ``lg_sqla[sqlite-vec]`` extra): ``module=`` for pysqlite, and for aiosqlite also a
    connection factory, since aiosqlite always opens ``sqlite3`` connections itself.
    """
    import sqlite3

    parsed = sa.make_url(url)
    if (
        parsed.get_backend_name() != "sqlite"
        or "module" in options
        or sqlite_vec_path() is None
        or hasattr(sqlite3.Connection, "enable_load_extension")
    ):
        return options
    try:
        from pysqlite3 import dbapi2  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return options
    driver = parsed.get_driver_name()
    if driver == "pysqlite":
        return {"module": dbapi2, **options}
    if driver != "aiosqlite" or "async_creator" in options:
        return options
    import functools

    import aiosqlite
    from sqlalchemy.dialects.sqlite.aiosqlite import (
        AsyncAdapt_aiosqlite_dbapi,
        SQLiteDialect_aiosqlite,
    )

    args, kwargs = SQLiteDialect_aiosqlite().create_connect_args(parsed)
    kwargs.update(options.get("connect_args", {}))
    connector = functools.partial(dbapi2.connect, *args, **kwargs)

    def connect() -> Any:
        return aiosqlite.Connection(connector, iter_chunk_size=64)

    # The adapter takes its exception classes from the module: pysqlite3's, as raised.
    module = AsyncAdapt_aiosqlite_dbapi(aiosqlite, dbapi2)
    return {"module": module, "async_creator": connect, **options}


def mysql_json_path(path: JsonPath) -> str:
    """``$."k"[0]`` with member names in the canonical form of `mysql_json_text`."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else "." + mysql_json_text(p) for p in path)


class MySQLStoreSQL(StoreSQL):
    """JSON_EXTRACT with a bound path (MySQL 8.0.17+, MariaDB 10.6+)."""

    in_sql = True
    max_bound_parameters = 65535  # prepared statements count them in 16 bits
    _TYPES: ClassVar[dict[str, tuple[str, ...]]] = {
        "object": ("OBJECT",),
        "array": ("ARRAY",),
        "string": ("STRING",),
        "number": ("INTEGER", "UNSIGNED INTEGER", "DOUBLE", "DECIMAL"),
        "boolean": ("BOOLEAN",),
        "null": ("NULL",),
    }

    def __init__(self, ops: MySQLOps) -> None:
        self.ops = ops

    @staticmethod
    def _node(doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[Any]:
        return sa.func.json_extract(doc, sa.literal(mysql_json_path(path), sa.String))

    def _kind(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[str]:
        return sa.func.json_type(self._node(doc, path), type_=sa.String)

    def _text(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[str]:
        return sa.func.json_unquote(self._node(doc, path), type_=sa.String)

    def kind_in(
        self, doc: ColumnElement[Any], path: JsonPath, kinds: frozenset[str]
    ) -> ColumnElement[bool]:
        types = sorted(t for kind in kinds for t in self._TYPES[kind])
        return sa.func.coalesce(self._kind(doc, path).in_(types), sa.false())

    def missing(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[bool]:
        return self._node(doc, path).is_(None)

    def number_compare(
        self,
        doc: ColumnElement[Any],
        path: JsonPath,
        operator: Callable[[Any, Any], ColumnElement[bool]],
        number: ColumnElement[Any],
        strings: bool,
    ) -> ColumnElement[bool]:
        kind, text = self._kind(doc, path), self._text(doc, path)
        # Arithmetic converts text to a double: SQLAlchemy renders no CAST(... AS DOUBLE)
        # for MySQL, and a DECIMAL would overflow on 1e300.
        as_double = sa.type_coerce(text, sa.Double) + sa.literal_column("0e0", sa.Double)
        whens = [
            (kind.in_(self._TYPES["number"]), as_double),
            (kind == "BOOLEAN", sa.case((text == "true", 1), else_=0)),
        ]
        if strings:
            whens.append((sa.and_(kind == "STRING", text.regexp_match(NUMERIC_STRING)), as_double))
        value = sa.case(*whens, else_=sa.null())
        return sa.func.coalesce(operator(value, number), sa.false())

    def number_param(self, name: str) -> sa.BindParameter[Any]:
        return sa.bindparam(name, type_=sa.Double)

    def string_equals(
        self, doc: ColumnElement[Any], path: JsonPath, text: ColumnElement[str]
    ) -> ColumnElement[bool]:
        return sa.func.coalesce(
            sa.and_(
                self._kind(doc, path) == "STRING",
                self.text_equals(self._text(doc, path), text),
            ),
            sa.false(),
        )

    def length_equals(self, doc: ColumnElement[Any], path: JsonPath, n: int) -> ColumnElement[bool]:
        length = sa.func.json_length(doc, sa.literal(mysql_json_path(path), sa.String))
        kind = self._kind(doc, path)
        return sa.func.coalesce(sa.and_(kind.in_(("OBJECT", "ARRAY")), length == n), sa.false())

    def text_equals(
        self, text: ColumnElement[str], value: str | ColumnElement[str]
    ) -> ColumnElement[bool]:
        # Binary NO PAD on both sides: "a" != "a " != "A" (see MySQLOps.as_key).
        return self.ops.as_key(text) == self.ops.as_key(_as_text(value))

    def namespace_depth(self, prefix: ColumnElement[str]) -> ColumnElement[int]:
        dots = sa.func.char_length(prefix) - sa.func.char_length(sa.func.replace(prefix, ".", ""))
        return dots + 1

    def namespace_label(self, prefix: ColumnElement[str], index: int) -> ColumnElement[str]:
        if index >= 0:
            head = sa.func.substring_index(prefix, ".", index + 1)
            return sa.func.substring_index(head, ".", -1, type_=sa.String)
        tail = sa.func.substring_index(prefix, ".", index)
        return sa.func.substring_index(tail, ".", 1, type_=sa.String)

    def namespace_head(self, prefix: ColumnElement[str], depth: int) -> ColumnElement[str]:
        return sa.func.substring_index(prefix, ".", depth, type_=sa.String)

    def namespace_sort_key(self, joined: ColumnElement[str]) -> ColumnElement[str]:
        return self.ops.as_key(sa.func.replace(joined, ".", NAMESPACE_SORT_SEPARATOR))


def store_sql_for(ops: DialectOps) -> StoreSQL:
    """The store's SQL primitives for a dialect (``in_sql`` False: filter in Python)."""
    if isinstance(ops, MySQLOps):
        return MySQLStoreSQL(ops)
    if isinstance(ops, PostgresOps):
        return PostgresStoreSQL()
    if isinstance(ops, SQLiteOps):
        return SQLiteStoreSQL()
    return StoreSQL()
