"""PyMySQL on the direct path: the plan's cursor writes each parameter's SQL literal
itself (``runtime.drivers.mysql_literals``, str by ``dialects.mysql_string_literal``)
instead of PyMySQL's per-character ``str.translate``. The statement must be the very
text PyMySQL would send, and hostile values must come back exactly, in either
escaping mode of the server (NO_BACKSLASH_ESCAPES: PyMySQL's own escaping).
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
import sqlalchemy as sa
from backends import assert_no_leaked_connections
from helpers import checkpoint, config, new_thread
from servers import create_database, drop_database, sqlalchemy_url

from lg_sqla import SQLAlchemySaver, internals
from lg_sqla.runtime.drivers import _pymysql_multi_row, direct_driver, mysql_literals

pytestmark = pytest.mark.mysql

HOSTILE_TEXT = "it's \"quoted\" \\ back\\slash\n\r\x1a\x00 ñ 中 🎉 '' \\' 100% %(x)s %s end"
# (keys refuse NUL, metadata drops it: PostgreSQL text cannot hold it)
KEY_TEXT = HOSTILE_TEXT.replace("\x00", "")


@pytest.fixture(scope="module")
def database(mysql_admin_url: str) -> Iterator[str]:
    name = f"lg_sqla_literals_{uuid.uuid4().hex[:8]}"
    create_database(mysql_admin_url, name)
    try:
        yield sqlalchemy_url(mysql_admin_url, "pymysql", name) + "?charset=utf8mb4"
    finally:
        drop_database(mysql_admin_url, name)


def _engine(url: str, sql_mode: str | None) -> sa.Engine:
    engine = sa.create_engine(url)
    if sql_mode is not None:

        @sa.event.listens_for(engine, "connect")
        def _mode(dbapi_connection: Any, _record: Any) -> None:
            with dbapi_connection.cursor() as cursor:
                cursor.execute(f"SET SESSION sql_mode = '{sql_mode}'")

    return engine


def test_the_statement_is_what_pymysql_sends(database: str) -> None:
    """Every kind of value a plan binds: the same SQL text as PyMySQL's ``mogrify``."""
    engine = sa.create_engine(database)
    params: dict[str, Any] = {
        "text": HOSTILE_TEXT,
        "empty": "",
        "backslashes": "\\" * 5,
        "quotes": "'\"" * 3,
        "none": None,
        "int": -(2**70),
        "bool": True,
        "float": 1.5e300,
        "bytes": b"\x00'\\\xff",
        "when": dt.datetime(2026, 11, 29, 4, 5, 6, 7),
        "decimal": decimal.Decimal("1.10"),
    }
    query = "SELECT " + ", ".join(f"%({name})s" for name in params) + ", '100%%'"
    try:
        raw = engine.raw_connection()
        try:
            connection = raw.dbapi_connection
            assert isinstance(connection, pymysql.Connection)
            expected = connection.cursor().mogrify(query, params)
            assert query % mysql_literals(params, connection.escape) == expected
        finally:
            raw.close()
    finally:
        engine.dispose()


def test_the_multi_row_insert_is_what_pymysql_sends(database: str) -> None:
    """An executemany of an ``INSERT ... VALUES``: PyMySQL's one statement of every row,
    with the same literals; past PyMySQL's statement length, PyMySQL's own (it cuts)."""
    engine = sa.create_engine(database)
    query = "INSERT INTO t (a, b) VALUES (%(a)s, %(b)s) ON DUPLICATE KEY UPDATE b = '%%'"
    rows = [{"a": HOSTILE_TEXT, "b": None}, {"a": 1, "b": b"\x00'"}, {"a": "x", "b": 2.5}]
    try:
        raw = engine.raw_connection()
        try:
            connection = raw.dbapi_connection
            assert isinstance(connection, pymysql.Connection)
            parts = internals.pymysql_insert_parts(query)
            assert parts is not None
            prefix, values, postfix = parts
            mogrify = connection.cursor().mogrify
            expected = prefix + ",".join(mogrify(values, row) for row in rows) + postfix
            sent = _pymysql_multi_row(query, rows, connection, 10**6)
            assert sent == expected.encode(connection.encoding)
            assert _pymysql_multi_row(query, rows, connection, len(sent)) is None
        finally:
            raw.close()
    finally:
        engine.dispose()


def test_a_statement_its_parameters_do_not_fit_fails_as_on_pymysql(database: str) -> None:
    """The plan's cursor raises what PyMySQL raises for SQL its parameters do not fit."""
    engine = sa.create_engine(database)
    try:
        raw = engine.raw_connection()
        try:
            driver = direct_driver(engine.dialect)
            assert driver is not None
            cursor, _native = driver.open_cursor(raw.dbapi_connection)
            with pytest.raises(pymysql.err.ProgrammingError):
                cursor.execute("SELECT %(a)s, %s", {"a": 1})
            with pytest.raises(pymysql.err.ProgrammingError):
                cursor.executemany("INSERT INTO t (a) VALUES (%(a)s, %s)", [{"a": 1}])
        finally:
            raw.close()
    finally:
        engine.dispose()


@pytest.mark.parametrize("sql_mode", [None, "NO_BACKSLASH_ESCAPES"])
def test_hostile_values_round_trip(database: str, sql_mode: str | None) -> None:
    """Through a saver on the direct path (the plan's cursor is lg_sqla's), checkpoint
    values, metadata and keys come back exactly; in NO_BACKSLASH_ESCAPES mode (a
    backslash escaped as ``\\\\`` would be stored twice) PyMySQL escapes them itself."""
    engine = _engine(database, sql_mode)
    try:
        with engine.connect() as connection:
            mode = connection.exec_driver_sql("SELECT @@SESSION.sql_mode").scalar_one()
            assert ("NO_BACKSLASH_ESCAPES" in mode) == (sql_mode is not None)
        saver = SQLAlchemySaver(engine)
        saver.setup()
        assert direct_driver(engine.dialect) is not None  # (the direct path's drivers)
        thread = new_thread() + KEY_TEXT[:40]
        values = {"text": HOSTILE_TEXT, "list": [HOSTILE_TEXT, 1], "n": 7}
        metadata: Any = {"source": "input", "step": 1, "note": KEY_TEXT}
        stored = saver.put(
            config(thread, checkpoint_ns="ns " + KEY_TEXT),
            checkpoint(values),
            metadata,
            {k: 1 for k in values},
        )
        saver.put_writes(stored, [("text", HOSTILE_TEXT), ("list", [HOSTILE_TEXT])], "task")
        loaded = saver.get_tuple(stored)
        assert loaded is not None
        assert loaded.config["configurable"]["thread_id"] == thread
        assert loaded.checkpoint["channel_values"] == values
        assert dict(loaded.metadata)["note"] == KEY_TEXT
        assert [w[1:] for w in loaded.pending_writes or []] == [
            ("text", HOSTILE_TEXT),
            ("list", [HOSTILE_TEXT]),
        ]
        assert_no_leaked_connections(engine)
    finally:
        engine.dispose()
