"""MySQL 8.0.4+ and MariaDB 10.6+: everything lg_sqla does differently on them
(checkpoint SQL, store SQL, key collations, JSON text, DDL quirks); on a node of a
Galera cluster, ``galera.py`` adds causal reads and the migration lease."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, cast

import orjson
import sqlalchemy as sa
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.engine import URL, Connection, Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.elements import ClauseElement, ColumnElement
from sqlalchemy.sql.expression import FunctionElement

from lg_sqla import limits
from lg_sqla.dialects.autocommit import begin_in_autocommit
from lg_sqla.dialects.base import (
    BLOBS_LAYOUT,
    MAX_RECURSION,
    MIGRATION_LOCK_NAME,
    MIGRATION_LOCK_TIMEOUT_S,
    ChannelVersionsSource,
    DialectOps,
    OfficialSchema,
    OrderedJoin,
    render_ordered_join,
    sql_constant,
)
from lg_sqla.dialects.galera import (
    _DEFAULT,
    _PREPARED_KEY,
    _UNSET,
    SESSION_CHARSET_VARIABLES,
    WSREP_SYNC_WAIT_OPTION,
    galera_migration_lock,
    is_galera_node,
    mysql_error_number,
    prepare_galera_session,
    session_variables,
)
from lg_sqla.dialects.store_base import (
    NAMESPACE_SORT_SEPARATOR,
    JsonAt,
    JsonPath,
    StoreSQL,
    as_text,
    one_of,
)
from lg_sqla.errors import InvalidInputError

MYSQL_FAMILY = ("mysql", "mariadb")


def is_mysql_family(dialect: Dialect) -> bool:
    """MySQL or MariaDB, whichever URL scheme (``mysql+`` or ``mariadb+``) was used."""
    return dialect.name in MYSQL_FAMILY


# The MySQL drivers that put parameters into the SQL text as literals (no server-side
# prepared statements): a timestamp's literal is the same for its text and its datetime.
_LITERAL_DRIVERS = frozenset({"pymysql", "asyncmy", "mysqldb"})


def mysql_binds_literals(dialect: Dialect) -> bool:
    """MySQL/MariaDB through a driver that writes each parameter into the SQL as a
    literal it formats in Python (PyMySQL: a datetime by str.format of seven fields),
    so that a value bound as that literal's text is sent the same and costs less."""
    return is_mysql_family(dialect) and dialect.driver in _LITERAL_DRIVERS


def binds_timestamps_as_text(dialect: Dialect) -> bool:
    """Whether lg_sqla's timestamps bind as the naive UTC text their columns hold
    (``types.naive_datetime_text``): on SQLite, and on MySQL/MariaDB through a driver
    that sends that text as the literal of a datetime (:func:`mysql_binds_literals`).
    ``DialectOps.stamps_text`` of the dialect's ops."""
    return dialect.name == "sqlite" or mysql_binds_literals(dialect)


# ``SERVER_STATUS_NO_BACKSLASH_ESCAPES`` of the MySQL protocol's status flags: the
# session's sql_mode has NO_BACKSLASH_ESCAPES (a backslash is no escape in a literal).
NO_BACKSLASH_ESCAPES = 512


def mysql_string_literal(text: str) -> str:
    """``'text'`` with the backslash escapes PyMySQL and asyncmy write (``\\0 \\n \\r
    \\Z \\" \\' \\\\``): the very literal they send, for a session with backslash
    escapes (not ``NO_BACKSLASH_ESCAPES``: the caller checks).

    They escape with ``str.translate`` over a table (a list, a dict): CPython looks
    each character up as an object, 100-200 instructions a character, 12-27 µs for a
    300-character checkpoint document. A ``str.replace`` per escaped character that
    occurs (the backslash first, so the others' backslashes are not escaped again)
    gives the same text, and finding none is a scan at memory speed (2 µs).
    """
    for character, escaped in _MYSQL_STRING_ESCAPES:
        if character in text:
            text = text.replace(character, escaped)
    return "'" + text + "'"


# What PyMySQL's escape_string writes for each character it escapes, the backslash
# first (so the escapes added after it are not escaped again).
_MYSQL_STRING_ESCAPES = (
    ("\\", "\\\\"),
    ("'", "\\'"),
    ('"', '\\"'),
    ("\n", "\\n"),
    ("\r", "\\r"),
    ("\0", "\\0"),
    ("\x1a", "\\Z"),
)


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
# What orjson must not write its own way (as ``shared.json_text``): subclasses of str,
# int, dict, list, dataclasses and datetimes go to json.dumps (or its TypeError).
_ORJSON_STRICT = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


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

    Written by orjson where its text is plain ASCII without a single escape and each
    null in it is a None (orjson writes NaN and infinities as null, json.dumps as NaN,
    which the server refuses): then it is json.dumps' text less the spaces after
    separators (the same document; only member names and escapes must match byte for
    byte), at a fraction of the cost (a store put, a checkpoint). What orjson refuses,
    escapes or may have nulled goes to json.dumps, as before.
    """
    try:
        fast = orjson.dumps(value, option=_ORJSON_STRICT)
    except TypeError:
        pass
    else:
        if (
            fast.isascii()
            and b"\\" not in fast
            and b"\x7f" not in fast  # (DEL: json.dumps escapes it, orjson does not)
            and (b"null" not in fast or _nulls_are_none(fast, value))
        ):
            text = fast.decode()
            return text if '"-' not in text else _canonical_strings(text)
    return _canonical_strings(json.dumps(value, ensure_ascii=True))


def _nulls_are_none(text: bytes, value: Any) -> bool:
    """Whether orjson's ``text`` of ``value`` reads back as ``value``: then no null in it
    stands for a NaN or an infinity (None != nan; nor for anything else: a tuple, read
    back as a list, also sends ``value`` to json.dumps). Every checkpoint document has
    a null (``updated_channels``): read back and compared in C, it costs a fifth of
    json.dumps' text (callgrind: 6k against 32k instructions)."""
    return bool(orjson.loads(text) == value)


def _canonical_strings(text: str) -> str:
    """``mysql_json_text``'s canonical form of json.dumps' ASCII text."""
    if '\\"' not in text and '"-' not in text:
        return text
    return _MYSQL_STRING.sub(
        lambda s: _MYSQL_UNSAFE_IN_STRING.sub(_mysql_safe_escape, s.group()), text
    )


def mysql_member_path(*keys: str) -> str:
    """``$."k1"."k2"`` in the canonical form of `mysql_json_text` (bound, never spliced)."""
    return "$" + "".join("." + mysql_json_text(key) for key in keys)


@compiles(OrderedJoin, "mysql")
@compiles(OrderedJoin, "mariadb")
def _compile_mysql_join(join: OrderedJoin, compiler: Any, **kw: Any) -> str:
    return render_ordered_join(join, compiler, "STRAIGHT_JOIN", **kw)


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


# Deadlock found (InnoDB's victim, and Galera's certification failure), lock wait
# timeout: the server rolled the transaction (or, for 1205 by default, the
# statement; lg_sqla then rolls back the rest) back.
_LOCK_CONFLICT_ERRORS = frozenset({1213, 1205})


class MySQLOps(DialectOps):
    """MySQL 8.0.4+ and MariaDB 10.6+ (JSON_TABLE)."""

    name = "mysql"
    joins_channel_versions = True
    supports_schemas = True
    locks_rows = True
    # langgraph-checkpoint-mysql, the community saver LangGraph's docs list for MySQL.
    official_writes_table = "checkpoint_writes"
    # Its reads join on checkpoint_ns_hash, which its later migrations add to each table.
    official_schema = OfficialSchema(
        "the community MySQL saver (PyMySQLSaver, langgraph-checkpoint-mysql)",
        {table: columns | {"checkpoint_ns_hash"} for table, columns in BLOBS_LAYOUT.items()},
    )
    # Not autocommit_single_statements: MySQL switches autocommit with statements of
    # their own (SET autocommit, and back), which cost more than the COMMIT they save
    # on Core. The direct path's drivers (PyMySQL, asyncmy) instead leave a session in
    # autocommit once switched, send BEGIN before plans of several statements, and
    # the pool switches the session back for any other checkout
    # (``runtime.drivers.guard_sessions``): one-statement calls are one round trip.
    # A session in autocommit gets BEGIN before a plan of several statements on Core
    # too, whatever the driver (cheaper than switching autocommit off and on).
    out_of_autocommit = staticmethod(begin_in_autocommit)

    def __init__(self, dialect: Dialect) -> None:
        super().__init__()
        # Whether the server is MariaDB is only known once the engine has
        # connected, so the collation is looked up when statements are built.
        self._dialect = dialect
        self.stamps_text = binds_timestamps_as_text(dialect)

    def table_disk_usage(self, tables: Sequence[str], schema: str | None) -> Any | None:
        # InnoDB's own estimate (refreshed by ANALYZE TABLE): pages of data and indexes.
        return sa.text(
            "SELECT table_name AS name, data_length + index_length AS bytes "
            "FROM information_schema.tables "
            "WHERE table_schema = COALESCE(:schema, DATABASE()) AND table_name IN :tables"
        ).bindparams(
            sa.bindparam("tables", list(tables), expanding=True), sa.bindparam("schema", schema)
        )

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

    def union_sharing(self) -> str:
        # MariaDB's JSON is LONGTEXT: in a UNION with a LONGBLOB, the column is binary
        # (PyMySQL and asyncmy then parse no charset for it). MySQL's JSON is a type
        # of its own, and a key string and a text column have different collations
        # on both, which a UNION refuses to mix.
        return "json_with_binary" if getattr(self._dialect, "is_mariadb", False) else "none"

    def packs_load_rows(self) -> bool:
        # PyMySQL parses each result column's descriptor in Python (callgrind: ~50k
        # instructions a column of a MariaDB get_tuple); a JSON array of the short
        # values is one column, which orjson reads in C. MariaDB only: MySQL 8's
        # layout ("none") is another, and it is not among the servers tested.
        return bool(getattr(self._dialect, "is_mariadb", False))

    def packed_values(self, values: Sequence[ColumnElement[Any]]) -> ColumnElement[Any]:
        # (key strings of one collation, integers and NULLs: JSON_ARRAY refuses a mix
        # of collations, and a long text could pass max_allowed_packet once escaped)
        return sa.func.json_array(*values)

    def channel_versions(self, doc: ColumnElement[Any]) -> ChannelVersionsSource:
        keys = _MySQLChannelKeys(doc).table_valued(
            sa.column("channel_n", sa.Integer), sa.column("channel_key", sa.String)
        )
        # The path to a channel's version names the key exactly as the document
        # spells it: the n-th element of JSON_KEYS (which MariaDB copies from the
        # document byte for byte), not the decoded name re-quoted, which MariaDB
        # would compare with the stored escapes and miss (see mysql_json_text).
        spelled = sa.func.json_extract(
            sa.func.json_keys(doc, sql_constant("$.channel_versions")),
            sa.func.concat(
                sql_constant("$["), keys.c.channel_n - sql_constant(1), sql_constant("]")
            ),
        )
        path = sa.func.concat(sql_constant("$.channel_versions."), spelled)
        version = sa.func.json_unquote(sa.func.json_extract(doc, path))
        return keys, self.as_key(keys.c.channel_key), self.as_key(version)

    def document_integer(self, doc: ColumnElement[Any], key: str) -> ColumnElement[int]:
        # JSON null reads as NULL, as SQLAlchemy's as_integer() does here.
        member = sa.func.json_extract(doc, sql_constant(mysql_member_path(key)))
        return sa.case(
            (sql_constant("null"), sa.null()), value=member, else_=sa.cast(member, sa.Integer)
        )

    def channel_version(self, doc: ColumnElement[Any], channel: str) -> ColumnElement[Any]:
        path = sa.bindparam(None, mysql_member_path("channel_versions", channel), sa.String)
        return self.as_key(sa.func.json_unquote(sa.func.json_extract(doc, path)))

    def json_member(self, doc: ColumnElement[Any], *keys: str) -> ColumnElement[Any]:
        path = sa.bindparam(None, mysql_member_path(*keys), sa.String)
        return sa.func.json_extract(doc, path, type_=sa.Text)

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

    def metadata_path_equals(
        self, column: ColumnElement[Any], keys: tuple[str, ...], value: Any
    ) -> ColumnElement[bool]:
        extracted = sa.func.json_extract(column, mysql_member_path(*keys))
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

    def is_read_only(self, connection: Connection) -> bool:
        # A replica runs with read_only=ON (it refuses writes of users without SUPER /
        # READ ONLY ADMIN). (The session's flag is @@transaction_read_only on MySQL 8
        # and @@tx_read_only on MariaDB before 11.1: no name serves both.)
        return bool(connection.exec_driver_sql("SELECT @@read_only").scalar())

    def is_lock_conflict(self, error: BaseException) -> bool:
        # By error number, not SQLSTATE: PyMySQL and asyncmy set one too, but 1205's
        # is the catch-all HY000 and 1213's 40001 only by coincidence.
        return mysql_error_number(error) in _LOCK_CONFLICT_ERRORS

    @contextlib.contextmanager
    def migration_lock(self, connection: Connection) -> Iterator[None]:
        # A Galera node's GET_LOCK holds on that node only: there, a lease row
        # certified across the cluster (see `galera_migration_lock`).
        if is_galera_node(connection):
            with galera_migration_lock(connection):
                yield
            return
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

    @contextlib.contextmanager
    def official_saver(self, url: URL) -> Iterator[Any]:
        from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver

        # The saver parses a plain mysql:// URL itself and knows no SQLAlchemy query
        # options (charset=...), so neither "+driver" nor the query goes to it.
        plain = url.set(drivername="mysql", query={})
        with PyMySQLSaver.from_conn_string(plain.render_as_string(hide_password=False)) as saver:
            yield saver

    prepares_sessions = True

    def prepare_session(self, pooled: PoolProxiedConnection, options: Mapping[str, Any]) -> None:
        # Read-your-writes on a Galera node (see `prepare_galera_session`).
        wanted = options.get(WSREP_SYNC_WAIT_OPTION, _DEFAULT)
        if pooled.info.get(_PREPARED_KEY, _UNSET) is wanted:
            return  # the common case: one dict lookup per call
        check_session_charset(pooled)
        prepare_galera_session(pooled, wanted)
        pooled.info[_PREPARED_KEY] = wanted


# The connection charset lg_sqla's engines use (its tables' charset).
MYSQL_CONNECTION_CHARSET = "utf8mb4"


def check_session_charset(pooled: PoolProxiedConnection) -> None:
    """Refuse a session whose character sets are not utf8mb4 (once per DBAPI connection,
    in the question ``galera.session_variables`` asks anyway).

    lg_sqla's columns are utf8mb4 whatever the connection, but a latin1 session
    (``?charset=latin1``) makes the server send every stored character outside
    latin1 back as "?", and a utf8 (utf8mb3) session every emoji: thread ids, task
    ids, channel names, store namespaces and keys read back wrong, two thread ids
    as one, without an error or a warning (measured on MariaDB 10.11 with PyMySQL,
    mysqlclient and asyncmy). Writes of such text fail in the driver
    (UnicodeEncodeError) or in the server (1366), or, with a non-strict sql_mode,
    store "?" too. Nothing can be made exact on such a session, so no call runs.
    """
    found = session_variables(pooled)
    wrong = {
        name: found.get(name, "")
        for name in SESSION_CHARSET_VARIABLES
        if found.get(name) != MYSQL_CONNECTION_CHARSET
    }
    if wrong:
        described = ", ".join(f"{name}={value or 'NULL'}" for name, value in wrong.items())
        raise InvalidInputError(
            f"this engine's MySQL/MariaDB session is not utf8mb4 ({described}): the "
            "server would return text outside that character set as '?' (thread ids, "
            "channel names, store keys and values), and lg_sqla refuses to lose it. "
            "Create the engine with ?charset=utf8mb4 in its URL (or "
            "connect_args={'charset': 'utf8mb4'}); lg_sqla's own engines "
            "(from_conn_string) always connect with utf8mb4"
        )


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


def mysql_json_path(path: JsonPath) -> str:
    """``$."k"[0]`` with member names in the canonical form of `mysql_json_text`."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else "." + mysql_json_text(p) for p in path)


class MySQLStoreSQL(StoreSQL):
    """JSON_EXTRACT with a bound path (MySQL 8.0.17+, MariaDB 10.6+)."""

    in_sql = True
    max_bound_parameters = 65535  # prepared statements count them in 16 bits
    # PyMySQL parses each result column's descriptor (per execute) and value (per row)
    # in Python; a parameter it only escapes.
    lone_get_names_in_sql = True
    _TYPES: ClassVar[dict[str, tuple[str, ...]]] = {
        "object": ("OBJECT",),
        "array": ("ARRAY",),
        "string": ("STRING",),
        "number": ("INTEGER", "UNSIGNED INTEGER", "DOUBLE", "DECIMAL"),
        "boolean": ("BOOLEAN",),
        "null": ("NULL",),
    }

    def __init__(self, dialect_ops: MySQLOps) -> None:
        self.dialect_ops = dialect_ops

    @staticmethod
    def _node(doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[Any]:
        return sa.func.json_extract(doc, sa.literal(mysql_json_path(path), sa.String))

    def _kind(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[str]:
        return sa.func.json_type(self._node(doc, path), type_=sa.String)

    def _text(self, doc: ColumnElement[Any], path: JsonPath) -> ColumnElement[str]:
        return sa.func.json_unquote(self._node(doc, path), type_=sa.String)

    def _at(self, doc: ColumnElement[Any], path: JsonPath) -> JsonAt:
        return JsonAt(self._node(doc, path), self._kind(doc, path), self._text(doc, path))

    def _as_number(self, text: ColumnElement[str]) -> ColumnElement[Any]:
        # Arithmetic converts text to a double: SQLAlchemy renders no CAST(... AS DOUBLE)
        # for MySQL, and a DECIMAL would overflow on 1e300.
        return sa.type_coerce(text, sa.Double) + sa.literal_column("0e0", sa.Double)

    def number_param(self, name: str) -> sa.BindParameter[Any]:
        return sa.bindparam(name, type_=sa.Double)

    def length_equals(self, doc: ColumnElement[Any], path: JsonPath, n: int) -> ColumnElement[bool]:
        length = sa.func.json_length(doc, sa.literal(mysql_json_path(path), sa.String))
        kind = self._kind(doc, path)
        return sa.func.coalesce(sa.and_(one_of(kind, ("OBJECT", "ARRAY")), length == n), sa.false())

    def text_equals(
        self, text: ColumnElement[str], value: str | ColumnElement[str]
    ) -> ColumnElement[bool]:
        # Binary NO PAD on both sides: "a" != "a " != "A" (see MySQLOps.as_key).
        return self.dialect_ops.as_key(text) == self.dialect_ops.as_key(as_text(value))

    def read_timestamp(self, column: ColumnElement[Any]) -> ColumnElement[Any]:
        # As text ("YYYY-MM-DD HH:MM:SS.ffffff", naive UTC): PyMySQL turns a DATETIME
        # into a datetime in Python (a regular expression, a list, a constructor), then
        # the store attaches UTC; datetime.fromisoformat parses the text in C, zone and
        # all. Two timestamps per item read: ~0.25M instructions of a 20-item search.
        return sa.cast(column, sa.String).label(column.key)

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
        return self.dialect_ops.as_key(sa.func.replace(joined, ".", NAMESPACE_SORT_SEPARATOR))
