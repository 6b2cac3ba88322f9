"""SQLite: everything lg_sqla does differently on it (checkpoint SQL, store SQL,
sqlite-vec loading)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from operator import eq as operator_eq
from typing import Any, ClassVar, cast

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import CTE, TableValuedAlias
from sqlalchemy.sql.visitors import InternalTraversal

from lg_sqla.dialects.base import (
    OFFICIAL_CHECKPOINTS,
    ChannelVersionsSource,
    OfficialSchema,
    OnConflictOps,
    OrderedJoin,
    render_ordered_join,
    sql_constant,
)
from lg_sqla.dialects.store_base import NAMESPACE_SORT_SEPARATOR, JsonPath, StoreSQL, one_of
from lg_sqla.errors import InvalidInputError

_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


class SQLiteOps(OnConflictOps):
    name = "sqlite"
    stamps_text = True  # (binds_timestamps_as_text: every SQLite driver)
    one_writer_at_a_time = True
    joins_channel_versions = True
    # (each branch joining the NOT MATERIALIZED page ran its index lookup again)
    scalar_page_lookups = True
    reads_all_inline = True
    official_writes_table = "writes"  # langgraph-checkpoint-sqlite's SqliteSaver
    # Not writes.task_path: SqliteSaver adds that column itself when it opens a file
    # written by a version from before it.
    official_schema = OfficialSchema(
        "LangGraph's SqliteSaver (langgraph-checkpoint-sqlite)",
        {
            "checkpoints": OFFICIAL_CHECKPOINTS,
            "writes": frozenset(
                [
                    "thread_id",
                    "checkpoint_ns",
                    "checkpoint_id",
                    "task_id",
                    "idx",
                    "channel",
                    "type",
                    "value",
                ]
            ),
        },
    )
    vacuum_statement = "VACUUM"

    _insert = staticmethod(sqlite_dialect.insert)

    def table_disk_usage(self, tables: Sequence[str], schema: str | None) -> Any | None:
        # dbstat: the pages of each table and index (an index counts for its table).
        return sa.text(
            "SELECT m.tbl_name AS name, SUM(d.pgsize) AS bytes FROM dbstat AS d "
            "JOIN sqlite_master AS m ON m.name = d.name "
            "WHERE m.tbl_name IN :tables GROUP BY m.tbl_name"
        ).bindparams(sa.bindparam("tables", list(tables), expanding=True))

    def table_disk_usage_probe(self) -> Any | None:
        # (pysqlite3's and other builds may leave the dbstat table out)
        return sa.text("SELECT name FROM pragma_module_list WHERE name = 'dbstat'")

    def file_usage(self) -> Any | None:
        return sa.text(
            "SELECT p.page_count * s.page_size AS bytes, f.freelist_count * s.page_size "
            "AS free_bytes FROM pragma_page_count() AS p, pragma_page_size() AS s, "
            "pragma_freelist_count() AS f"
        )

    def database_file(self, url: URL) -> str | None:
        database = url.database or ""
        # In-memory databases, and URI filenames (file:...?mode=...), which say
        # themselves whether a missing file may be created.
        if database in ("", ":memory:") or database.startswith("file:"):
            return None
        return database

    @contextlib.contextmanager
    def official_saver(self, url: URL) -> Iterator[Any]:
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        connection = sqlite3.connect(url.database or "", check_same_thread=False)
        try:
            yield SqliteSaver(connection)
        finally:
            connection.close()

    def bound_again(self, bind: sa.BindParameter[Any], number: int) -> ColumnElement[Any]:
        # SQLite's numbered parameter (``?NNN``: a plain ``?`` takes the number after the
        # largest one before it): the value bound once, however often the SQL reads it.
        # get_tuple's statement reads its thread and namespace in every branch: bound
        # again each time, they cost 10k instructions of its 120k (pysqlite binds each).
        return _BoundAgain(bind, number)

    def one_row(self, select: sa.Select[Any]) -> sa.Select[Any]:
        # (SQLAlchemy writes ``OFFSET ?`` after any SQLite LIMIT, with 0 bound to it)
        return super().one_row(select).offset(sa.literal_column("0", sa.Integer))

    def page_cte(self, page: sa.Select[Any]) -> CTE:
        # Materialized, the page gets a Bloom filter on checkpoint_writes once the tables
        # have statistics (ANALYZE, PRAGMA optimize), built by reading every write of the
        # table: get_tuple did 6,300 VM steps at 1k threads, 60,000 at 10k (256 without
        # statistics). Not materialized, each branch runs the page's index lookup again:
        # 303 steps at any size. (NOT MATERIALIZED since SQLite 3.35.)
        cte = page.cte("page")
        if sqlite3.sqlite_version_info >= (3, 35):
            cte = cte.prefix_with("NOT MATERIALIZED")
        return cte

    def union_sharing(self) -> str:
        return "any"  # (a column's values have their own types)

    def document_integer(self, doc: ColumnElement[Any], key: str) -> ColumnElement[int]:
        return sa.cast(sa.func.json_extract(doc, sql_constant(f'$."{key}"')), sa.Integer)

    def channel_versions(self, doc: ColumnElement[Any]) -> ChannelVersionsSource:
        pairs: TableValuedAlias = sa.func.json_each(
            doc, sql_constant("$.channel_versions")
        ).table_valued("key", "value")
        return pairs, pairs.c.key, pairs.c.value

    def unless_all_inline(self, doc: ColumnElement[Any], key: str) -> ColumnElement[Any]:
        # The document's text as orjson wrote it (types.DocumentJSON): the member is
        # its first bytes. A prefix matched, not a JSON path read: json_extract
        # parses the whole document (8k instructions of a get_tuple), the
        # json_each and blob lookups it spares cost 10k. GLOB with a trailing *
        # stops there: 0.9k less than substr() and = (which copies the prefix).
        flagged = doc.op("GLOB")(sql_constant(f'{{"{key}":true,*'))
        return sa.case((flagged, sa.null()), else_=doc)

    def format_below(
        self, doc: ColumnElement[Any], version: int, record: str
    ) -> ColumnElement[bool]:
        # A document as put wrote it starts with its format, "v" being a checkpoint's
        # first member ('{"v":2,', or after the record '{"all_inline":true,"v":2,'):
        # told from its first bytes. Any other, by json_extract, which parses it whole
        # (a get_tuple of a checkpoint with a parent did: 8k instructions at 400 bytes).
        # (GLOB: a pattern ending in * stops at it; IN of substr() built a table)
        assert 0 < version <= 10
        below = f"[0-{version - 1}],*"
        return sa.or_(
            doc.op("GLOB")(sql_constant('{"v":' + below)),
            doc.op("GLOB")(sql_constant(f'{{"{record}":true,"v":' + below)),
            super().format_below(doc, version, record),
        )

    def json_byte_length(self, document: ColumnElement[Any]) -> ColumnElement[int]:
        # JSON is TEXT in SQLite, and length(text) counts characters: count bytes.
        return sa.func.length(sa.cast(document, sa.LargeBinary), type_=sa.BigInteger)

    def channel_version(self, doc: ColumnElement[Any], channel: str) -> ColumnElement[Any]:
        pairs = sa.func.json_each(doc, "$.channel_versions").table_valued("key", "value")
        return sa.select(pairs.c.value).where(pairs.c.key == channel).scalar_subquery()

    def metadata_path_equals(
        self, column: ColumnElement[Any], keys: tuple[str, ...], value: Any
    ) -> ColumnElement[bool]:
        # json_each and key equality, not a path: SQLite's quoted path labels have
        # no escapes, so `$."say \"hi\""` cannot name the key `say "hi"`. A nested
        # key: json_each over the object its parent's json_each found.
        steps: list[ColumnElement[bool]] = []
        document: ColumnElement[Any] = column
        joined: Any = None
        for depth, key in enumerate(keys):
            member = sa.func.json_each(document).table_valued("key", "type", "atom", "value")
            joined = member if joined is None else joined.join(member, sa.true())
            steps.append(member.c.key == key)
            if depth < len(keys) - 1:
                steps.append(member.c.type == "object")
            document = member.c.value

        def member_where(*conditions: ColumnElement[bool]) -> ColumnElement[bool]:
            return sa.exists(
                sa.select(sa.literal(1)).select_from(joined).where(*steps, *conditions)
            )

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

    def is_lock_conflict(self, error: BaseException) -> bool:
        # SQLITE_BUSY (5) and SQLITE_LOCKED (6), extended codes included (the low
        # byte); Python before 3.11 has no code on the exception: its message.
        code = getattr(error, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return True
        message = str(error)
        return "database is locked" in message or "database table is locked" in message

    def join_transaction(self, connection: Connection) -> None:
        # pysqlite (and aiosqlite on it) in its default, legacy mode sends BEGIN only
        # before an INSERT/UPDATE/DELETE: after the caller's begin() and only reads, or
        # nothing, the database is in no transaction, our SAVEPOINT would open one and
        # its RELEASE commit it, outside the caller's rollback. An explicit BEGIN joins
        # the transaction the caller began; the driver then commits or rolls it back
        # with the caller's. (An engine set up as SQLAlchemy's SQLite docs advise, with
        # a BEGIN of its own, is in a transaction already.)
        if not connection.connection.driver_connection.in_transaction:  # type: ignore[union-attr]
            connection.exec_driver_sql("BEGIN")

    @contextlib.contextmanager
    def migration_lock(self, connection: Connection) -> Iterator[None]:
        # SQLite has one writer at a time: take the write lock up front so a
        # second process waits (busy_timeout) instead of racing on CREATE TABLE.
        if connection.in_transaction():
            connection.commit()
        connection.exec_driver_sql("BEGIN IMMEDIATE")
        yield


class _BoundAgain(ColumnElement[Any]):
    """``SQLiteOps.bound_again``: a parameter's number, where the paramstyle is SQLite's
    own positional one (``qmark``); under any other, the parameter again."""

    inherit_cache = True
    _traverse_internals = [  # noqa: RUF012 (SQLAlchemy's own declaration)
        ("bind", InternalTraversal.dp_clauseelement),
        ("number", InternalTraversal.dp_plain_obj),
    ]

    def __init__(self, bind: sa.BindParameter[Any], number: int) -> None:
        self.bind, self.number, self.type = bind, number, bind.type


@compiles(_BoundAgain)
def _compile_bound_again(element: _BoundAgain, compiler: Any, **kw: Any) -> str:
    if compiler.dialect.paramstyle == "qmark":
        return f"?{element.number}"
    return cast(str, compiler.process(element.bind, **kw))


@compiles(OrderedJoin, "sqlite")
def _compile_sqlite_join(join: OrderedJoin, compiler: Any, **kw: Any) -> str:
    return render_ordered_join(join, compiler, "CROSS JOIN", **kw)


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
    lone_put_stamps_text = True
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
    def _member(doc: ColumnElement[Any], path: JsonPath) -> _SQLiteNode:
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
                member, sa.and_(one_of(parent.c.type, ("object", "array")), member.c.key == step)
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
        node = self._member(doc, path)
        return node.test(test(node))  # type: ignore[no-any-return]

    def kind_in(
        self, doc: ColumnElement[Any], path: JsonPath, kinds: frozenset[str]
    ) -> ColumnElement[bool]:
        types = sorted(t for kind in kinds for t in self._TYPES[kind])
        return self._exists(doc, path, lambda m: one_of(m.type, types))

    def missing(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[bool]:
        return ~self._member(doc, path).present  # type: ignore[no-any-return]

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
            node = self._member(doc, path)
            return node.test(node.atom == number)  # type: ignore[no-any-return]

        def test(m: Any) -> ColumnElement[bool]:
            # CASE type WHEN ...: the type is computed once (a JSON parse each time).
            whens: dict[str, Any] = {"integer": m.atom, "real": m.atom, "true": 1, "false": 0}
            if strings:
                # SQLite has no regular expressions: json_valid/json_type check the
                # JSON number syntax (whitespace allowed around it), GLOB the exponent.
                atom = m.atom
                looks_numeric = sa.and_(
                    one_of(
                        sa.case(
                            (sa.func.json_valid(atom) == 1, sa.func.json_type(atom)),
                            else_=sa.null(),
                        ),
                        ("integer", "real"),
                    ),
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
            return sa.and_(one_of(m.type, ("object", "array")), count == n)

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
        # Asked of the pool's own listeners, not sa.event.contains: that registry is keyed
        # by the target's id(), which a pool recreated by engine.dispose() keeps from the
        # old pool, and a new pool at a freed address may then look already listened to.
        if _load_sqlite_vec not in engine.pool.dispatch.checkout:
            # checkout, not connect: connections pooled before the store existed too.
            sa.event.listen(engine.pool, "checkout", _load_sqlite_vec)
        return True

    # sqlite-vec has cosine and Euclidean distances, no inner product: that one ranks
    # in Python.
    native_distances = frozenset({"cosine", "l2"})

    def vector_similarity(
        self, embedding: ColumnElement[Any], query: ColumnElement[Any], distance: str
    ) -> ColumnElement[float]:
        if distance == "l2":
            return -sa.func.vec_distance_l2(embedding, query, type_=sa.Double)
        # vec_distance_cosine is 1 - cosine, NULL when a vector is all zeros.
        cosine_distance = sa.func.vec_distance_cosine(embedding, query, type_=sa.Double)
        return sa.func.coalesce(1.0 - cosine_distance, 0.0)


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
