"""What every database shares, and the questions on which they differ.

:class:`DialectOps` answers, for one database, the only questions on which
lg_sqla's SQL differs (its subclasses live in this package, one module per
database); :class:`~lg_sqla.dialects.store_base.StoreSQL` does the same for the store. Code
outside this package asks them and never tests a dialect's name.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import CTE, FromClause, Join

from lg_sqla import internals
from lg_sqla.dialects.autocommit import switch_out_of_autocommit
from lg_sqla.errors import NoOfficialSaverError
from lg_sqla.plans import Plan, Step

T = TypeVar("T")
# A row of parameters (column name -> value).
Record = Mapping[Any, Any]
logger = logging.getLogger(__name__)

# A row of the (channel, version) pairs of a checkpoint's channel_versions.
ChannelVersionsSource = tuple[FromClause, ColumnElement[str], ColumnElement[str]]

# Name of the advisory lock that serializes concurrent `setup()` calls.
MIGRATION_LOCK_NAME = "lg_sqla_migrate"
MIGRATION_LOCK_TIMEOUT_S = 300
# Recursion limit we set where the server caps recursive CTEs (parent-chain walks).
MAX_RECURSION = 10_000_000


@dataclass(frozen=True)
class OfficialSchema:
    """The tables LangGraph's own saver for a database writes, with the columns reading
    them needs (``lg-sqla import`` checks a source against this before reading it)."""

    saver: str  # the saver, as its users know it
    tables: Mapping[str, frozenset[str]]


# The checkpoints table of every official saver (SqliteSaver's, PostgresSaver's, the
# community MySQL saver's), as their reads need it.
OFFICIAL_CHECKPOINTS = frozenset(
    [
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "type",
        "checkpoint",
        "metadata",
    ]
)
# langgraph-checkpoint-postgres's layout, which langgraph-checkpoint-mysql started from:
# channel values in a table of their own; writes' task_path came with a later migration.
BLOBS_LAYOUT: Mapping[str, frozenset[str]] = {
    "checkpoints": OFFICIAL_CHECKPOINTS,
    "checkpoint_blobs": frozenset(
        ["thread_id", "checkpoint_ns", "channel", "version", "type", "blob"]
    ),
    "checkpoint_writes": frozenset(
        [
            "thread_id",
            "checkpoint_ns",
            "checkpoint_id",
            "task_id",
            "task_path",
            "idx",
            "channel",
            "type",
            "blob",
        ]
    ),
}


class DialectOps:
    """Portable behaviour; subclasses override what their dialect does better."""

    name = "generic"
    # True when `channel_versions` can be expanded into rows inside a statement,
    # so a checkpoint and its blobs come back in one round trip.
    joins_channel_versions = False
    # True: the load statement of one checkpoint reads the page by uncorrelated scalar
    # subqueries, which the database runs once per statement (checkpoint.statements:
    # _one_by_scalars), rather than joining the page in each branch.
    scalar_page_lookups = False
    # True: a load skips the blobs of a document that records naming none
    # (unless_all_inline), so put records it (codec.ALL_INLINE_KEY); elsewhere neither.
    reads_all_inline = False
    # False: insert-ignore and upsert are emulated (existence check / delete + insert).
    native_upsert = True
    # False: `list(filter=...)` filters metadata in Python, page by page
    # (see operations.Pages), where the dialect has no JSON functions we know.
    filters_metadata_in_sql = True
    # True: a put (blobs + checkpoint) can be one statement (see one_statement).
    writes_in_one_statement = False
    # True: the database runs writers side by side and has row locks a deleter takes
    # (``SELECT ... FOR UPDATE``) before it decides what is unreferenced (maintenance).
    locks_rows = False
    # True: a plan of one statement runs without BEGIN/COMMIT (fewer round trips).
    autocommit_single_statements = False
    # A plan of several statements on a session in autocommit: one transaction all the same.
    out_of_autocommit = staticmethod(switch_out_of_autocommit)
    # True: the database lets one writer in at a time; this process's writers then
    # queue on an in-process lock (lg_sqla.runtime.locks) rather than in its busy handler.
    one_writer_at_a_time = False
    # True: lg_sqla's tables can live in a named schema (``schema=``): a PostgreSQL
    # schema, a MySQL/MariaDB database. SQLite's only other schemas are attached files.
    supports_schemas = False
    # True: the checkpoint tables can be hash-partitioned by thread_id
    # (lg_sqla.partitioning; PostgreSQL's declarative partitioning).
    partitions_by_thread = False
    # True: the tables are distributed over servers (Citus; known after `learn_server`):
    # cross-thread statements take the shapes a distributed planner can run.
    distributed = False
    # The writes table of LangGraph's own saver for this database ("checkpoints" is its
    # checkpoints table everywhere); None: LangGraph ships no saver for it.
    official_writes_table: str | None = None
    # The tables of that saver and the columns read from them; None: no such saver.
    official_schema: OfficialSchema | None = None
    # True: every timestamp column binds as the text it holds ("YYYY-MM-DD
    # HH:MM:SS.ffffff", ``types.naive_datetime_text``), so a write may stamp its rows
    # with that text, read from the clock once (``types.naive_utc_text_now``), rather
    # than a datetime each column's bind processor formats. The same rule as
    # ``types.UTCDateTime.bind_processor`` (``binds_timestamps_as_text``).
    stamps_text = False
    # The statement that gives a database file's freed pages back to the file system,
    # run outside a transaction; None where the server manages its own space.
    vacuum_statement: str | None = None

    def __init__(self) -> None:
        self._statements: dict[Hashable, Any] = {}
        # The statements of ``cached`` (for good) and those ``hold`` counts (while
        # held): the statements themselves, never their id() (an id is reused once its
        # statement dies, and the next statement would pass for cached).
        self._kept_statements: dict[object, int] = {}
        self._holding = threading.Lock()

    def cached(self, key: Hashable, build: Callable[[], T]) -> T:
        """Build a statement once per key; statements without values are reusable."""
        try:
            statement: T = self._statements[key]  # (no typing.cast: a call on every put)
            return statement
        except KeyError:
            statement = self._statements[key] = build()
            self._kept_statements[statement] = 1
            return statement

    def is_cached(self, statement: object) -> bool:
        """Whether ``statement`` came from :meth:`cached` (kept for the dialect_ops' lifetime)
        or is held by its builder's own cache (:meth:`hold`)."""
        return statement in self._kept_statements

    def hold(self, statement: object, held: bool = True) -> None:
        """Count a statement kept by its builder's own bounded cache (the store's
        statements by filter shape) as cached while ``held``: the direct path may take
        it (``runtime.routing``). The builder releases it (``held=False``) when it
        drops it. Counted: two threads that built the same shape at once may report
        one statement held by one and released by the other in either order."""
        with self._holding:
            count = self._kept_statements.get(statement, 0) + (1 if held else -1)
            if count:
                self._kept_statements[statement] = count
            else:
                self._kept_statements.pop(statement, None)

    def insert_ignore(self, table: sa.Table) -> sa.Insert:
        """INSERT that leaves an existing row with the same key untouched."""
        raise NotImplementedError

    def table_disk_usage(self, tables: Sequence[str], schema: str | None) -> Any | None:
        """A statement whose rows are ``(name, bytes)``: what each of ``tables`` (in
        ``schema``, None: the connection's) takes on disk, its indexes included; None
        where the database cannot tell."""
        return None

    def table_disk_usage_probe(self) -> Any | None:
        """A statement that returns a row when ``table_disk_usage`` can run on this
        connection (SQLite: a build with the dbstat table); None: it always can."""
        return None

    def file_usage(self) -> Any | None:
        """A statement whose one row is ``(bytes, free_bytes)`` of the database file
        (free: pages a VACUUM gives back); None for servers."""
        return None

    def database_file(self, url: URL) -> str | None:
        """The local file a URL names, which connecting creates when it is missing;
        None for servers (and in-memory databases)."""
        return None

    @contextlib.contextmanager
    def official_saver(self, url: URL) -> Iterator[Any]:
        """LangGraph's own sync saver on the database at ``url`` (a sync URL; the
        ``[import]`` extra installs its package), to read what it wrote."""
        raise NoOfficialSaverError(f"no official LangGraph saver for {self.name} databases")
        yield  # pragma: no cover (a generator, for contextmanager)

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

    def insert_ignore_rows(self, table: sa.Table, rows: Sequence[Record]) -> Plan[None]:
        """Plan steps that insert ``rows``, leaving rows whose key exists untouched."""
        if rows:
            yield Step(
                self.cached(("insert_ignore", table.name), lambda: self.insert_ignore(table)), rows
            )

    def upsert_rows(
        self, table: sa.Table, rows: Sequence[Record], update: Sequence[str]
    ) -> Plan[None]:
        """Plan steps that insert ``rows``, overwriting the ``update`` columns of rows
        whose key exists."""
        if rows:
            statement = self.cached(
                ("upsert", table.name, tuple(update)), lambda: self.upsert(table, update)
            )
            yield Step(statement, rows)

    def channel_versions(self, doc: ColumnElement[Any]) -> ChannelVersionsSource:
        """Rows of (channel, version) from ``doc["channel_versions"]``, correlated to ``doc``."""
        raise NotImplementedError

    def unless_all_inline(self, doc: ColumnElement[Any], key: str) -> ColumnElement[Any]:
        """``doc``, or NULL where its first member is ``key`` set to true (a document
        that names no blob: ``codec.ALL_INLINE_KEY``), told without parsing it: the
        document whose blobs a load reads (``channel_versions`` of NULL: none). Here
        ``doc``: this database reads every document's blobs."""
        return doc

    def keyed_lookup(
        self, table: sa.Table, on: ColumnElement[bool], *, one_thread: bool = True
    ) -> tuple[FromClause, ColumnElement[bool]]:
        """``table``'s rows matching ``on``, looked up once per row of what comes before
        it in an ``ordered_join`` (``on`` binds the table's key to those rows): the
        FROM item to join and its join condition. Here the table and ``on`` themselves,
        whose order ``ordered_join`` keeps. ``one_thread``: the rows before it are of
        one thread, named by a bound value."""
        return table, on

    def bound_again(self, bind: sa.BindParameter[Any], number: int) -> ColumnElement[Any]:
        """``bind`` used again in a statement whose ``number``-th parameter (from 1, in
        the order of the SQL text) is its first use: here a parameter once more."""
        return bind

    def one_row(self, select: sa.Select[Any]) -> sa.Select[Any]:
        """``select`` limited to its first row, the limit written into the SQL."""
        return select.limit(sa.literal_column("1", sa.Integer))

    def page_cte(self, page: sa.Select[Any]) -> CTE:
        """The ``page`` CTE that every branch of a load statement reads (statements.py).
        Here as the database plans a CTE named more than once (PostgreSQL computes it
        once; MySQL/MariaDB once per reference, each an index range of the page)."""
        return page.cte("page")

    def document_integer(self, doc: ColumnElement[Any], key: str) -> ColumnElement[int]:
        """``doc[key]`` as an integer (NULL where missing or null); ``key``, a plain
        name of lg_sqla's own (``sql_constant``), written into the SQL."""
        member: ColumnElement[int] = doc[key].as_integer()
        return member

    def format_below(
        self, doc: ColumnElement[Any], version: int, record: str
    ) -> ColumnElement[bool]:
        """Whether checkpoint document ``doc``'s format (its ``v``) is below ``version``;
        ``record``: a member a document may have first (``unless_all_inline``)."""
        return self.document_integer(doc, "v") < sql_constant(version)

    def channel_version(self, doc: ColumnElement[Any], channel: str) -> ColumnElement[Any]:
        """``doc["channel_versions"][channel]`` as a string comparable with a key column."""
        return self.as_key(doc[("channel_versions", channel)].as_string())

    def json_member(self, doc: ColumnElement[Any], *keys: str) -> ColumnElement[Any]:
        """``doc[keys[0]][keys[1]]...`` as JSON text; NULL when missing. (A JSON null
        member reads as NULL on some databases: test presence on non-null members.)"""
        member: ColumnElement[Any] = doc[keys].as_string()
        return member

    def metadata_equals(
        self, column: ColumnElement[Any], key: str, value: Any
    ) -> ColumnElement[bool]:
        """``metadata[key] == value`` with JSON semantics (None also matches a missing key):
        the one-key :meth:`metadata_path_equals`."""
        return self.metadata_path_equals(column, (key,), value)

    def metadata_path_equals(
        self, column: ColumnElement[Any], keys: tuple[str, ...], value: Any
    ) -> ColumnElement[bool]:
        """``metadata[keys[0]][keys[1]]... == value`` with ``metadata_equals``'s JSON
        semantics at the end of the path (None also matches a missing member)."""
        raise NotImplementedError

    def is_read_only(self, connection: Connection) -> bool:
        """Whether this session can only read (a replica, a read-only user or server).
        Unknown databases: assumed writable."""
        return False

    def is_lock_conflict(self, error: BaseException) -> bool:
        """Whether the driver's ``error`` says the database rolled the transaction back
        to resolve a conflict (deadlock, lock timeout, serialization failure, busy
        database), so the whole call may run again (``lg_sqla.runtime.retry``).
        Unknown databases: never."""
        return False

    @contextlib.contextmanager
    def migration_lock(self, connection: Connection) -> Iterator[None]:
        """Hold a lock that serializes schema migrations across processes."""
        yield

    def migrations_refused(self, connection: Connection) -> str | None:
        """Why migrations cannot run on this server, naming where they can (a Citus
        worker: the coordinator); None where they can."""
        return None

    def after_migrations(
        self, connection: Connection, tables: list[str], version_table: str
    ) -> None:
        """In the migration's transaction, after the revisions ran: ``tables`` are
        lg_sqla's (the models'), in dependency order. Here nothing."""

    # Whether `learn_server` asks the server something: the runtime then calls it on
    # the owner's first connection, even after its setup().
    learns_server = False

    def learn_server(self, connection: Connection) -> None:
        """What the dialect needs to know of the server before building statements
        (PostgreSQL: whether Citus distributes the tables), asked once per engine."""

    # Whether `prepare_session` does anything: the runtime calls it on each checkout
    # only where it does.
    def join_transaction(self, connection: Connection) -> None:
        """Before a bound call's SAVEPOINT (``runtime.bound``): make sure the database
        itself is in the transaction SQLAlchemy says ``connection`` is in."""

    prepares_sessions = False

    def prepare_session(self, pooled: PoolProxiedConnection, options: Mapping[str, Any]) -> None:
        """Settings lg_sqla needs on a DBAPI session before a call runs on it, made once
        per DBAPI connection (remembered in ``pooled.info``). ``options``: the engine's
        execution options. Raw DBAPI errors propagate (the runtime wraps them)."""

    def union_sharing(self) -> str:
        """Which values of different types one column of a UNION may hold in its
        branches (the load statement's rows share columns: checkpoint.statements.
        load_layout): "any" (dynamic typing), "json_with_binary" (a JSON document and
        a binary value: the column is binary, the documents come back as UTF-8 bytes),
        "documents_as_text" (``document_text`` is text, which shares a column with
        strings), or "none" (a column keeps one type, and strings one collation)."""
        return "none"

    def document_text(self, doc: ColumnElement[Any]) -> ColumnElement[Any]:
        """A JSON document column as the load statement reads it: as stored here."""
        return doc

    def typed_null(self, type_: sa.types.TypeEngine[Any]) -> ColumnElement[Any]:
        """A NULL that fixes a UNION column's type (result processing follows it)."""
        return sa.type_coerce(sa.null(), type_)

    def packs_load_rows(self) -> bool:
        """Whether ``get_tuple``'s load rows send their short values (kind, keys, type,
        idx) as one JSON array column (``packed_values``): a driver paying per column."""
        return False

    def packed_values(self, values: Sequence[ColumnElement[Any]]) -> ColumnElement[Any]:
        """``values`` (integers, key strings, NULLs) as one JSON array column."""
        raise NotImplementedError

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


class OnConflictOps(DialectOps):
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


def render_ordered_join(join: OrderedJoin, compiler: Any, keyword: str, **kw: Any) -> str:
    from_linter = kw.get("from_linter")
    if from_linter is not None:  # tell SQLAlchemy's cartesian-product linter about the edge
        from_linter.edges.update(
            itertools.product(internals.from_objects(join.left), internals.from_objects(join.right))
        )
    kw["asfrom"] = True
    left = compiler.process(join.left, **kw)
    right = compiler.process(join.right, **kw)
    assert join.onclause is not None
    on = compiler.process(join.onclause, **kw)
    return f"{left} {keyword} {right} ON {on}"


@compiles(OrderedJoin)
def _compile_join(join: OrderedJoin, compiler: Any, **kw: Any) -> str:
    return str(compiler.visit_join(join, **kw))


def rows_with_keys(table: sa.Table, rows: Sequence[Record]) -> ColumnElement[bool]:
    """Rows of ``table`` whose primary key equals one of ``rows``' keys (portable SQL)."""
    pk = list(table.primary_key.columns)
    return sa.or_(*(sa.and_(*(col == row[col.name] for col in pk)) for row in rows))


# What a constant written into a statement's SQL may hold: no quote, backslash or
# percent sign, so it reads the same in every dialect's string literal (a brace, colon,
# comma, star or dash for a pattern of a JSON text's start: SQLite's format_below).
_PLAIN_CONSTANT = re.compile(r'[A-Za-z0-9_$.\[\]" {:,*-]*')


def sql_constant(value: str | int) -> ColumnElement[Any]:
    """A constant of lg_sqla's own (a JSON path, a channel name, a format version)
    written into the SQL rather than bound: the drivers adapt every bound value on
    every execute (PyMySQL escapes each in Python), and these never change."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"not a SQL constant: {value!r}")
    if isinstance(value, int):
        return sa.literal_column(str(value), sa.Integer)
    if not _PLAIN_CONSTANT.fullmatch(value):
        raise ValueError(f"not a plain SQL constant: {value!r}")
    return sa.literal_column(f"'{value}'", sa.String)


def ordered_join(left: FromClause, right: FromClause, on: ColumnElement[bool]) -> OrderedJoin:
    """``left JOIN right ON on``, looping over ``left`` first on every dialect."""
    return OrderedJoin(left, right, on)
