# mypy: disable-error-code="no-untyped-call"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Statements compile for each first-class dialect, with values bound, never spliced."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect

from lg_sqla.checkpoint.statements import (
    WRITE_VALUE_COLUMNS,
    PageQuery,
    layout_of,
    load_layout,
    load_statement,
    one_checkpoint_load,
    select_load,
    select_page,
)
from lg_sqla.dialects import GenericOps, MySQLOps, PostgresOps, SQLiteOps, ops_for
from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints

HOSTILE = "x') OR 1=1; DROP TABLE checkpoints; --"


def _mariadb() -> Dialect:
    dialect = mysql.dialect()
    dialect.is_mariadb = True
    return dialect


DIALECTS = {
    "postgresql": postgresql.dialect(),
    "sqlite": sqlite.dialect(),
    "mysql": mysql.dialect(),
    "mariadb": _mariadb(),
}


@pytest.mark.parametrize("name", list(DIALECTS))
def test_load_statement_compiles_with_bound_values(name: str) -> None:
    dialect = DIALECTS[name]
    ops = ops_for(dialect)
    q = PageQuery(thread_id=HOSTILE, ns_hash="h", filter={HOSTILE: HOSTILE, "step": 1}, limit=5)
    compiled = select_load(ops, select_page(ops, q)).compile(dialect=dialect)
    sql = str(compiled)
    assert "DROP TABLE" not in sql
    assert HOSTILE in compiled.params.values() or any(
        HOSTILE in str(v) for v in compiled.params.values()
    )
    assert sql.count("UNION ALL") == 3


@pytest.mark.parametrize("by_id", [False, True])
def test_sqlite_get_tuple_binds_each_value_once(by_id: bool) -> None:
    # Its page binds the thread, namespace and id, in that order; every later use in
    # the statement names that parameter's number (``?1``): pysqlite binds each once.
    ops = SQLiteOps()
    q = PageQuery("t", "h", "c" if by_id else None, limit=1, namespace="")
    statement = load_statement(ops, q, layout_of(ops, q))
    assert isinstance(statement, sa.CompoundSelect)
    compiled = statement.compile(dialect=sqlite.dialect())
    names = ["thread_id", "ns_hash", "checkpoint_id"][: 3 if by_id else 2]
    assert compiled.positiontup == names
    assert set(re.findall(r"\?(\d+)", compiled.string)) == {
        str(n) for n in range(1, len(names) + 1)
    }
    assert "OFFSET ?" not in compiled.string
    # Under another paramstyle, each use is the parameter itself.
    named = str(statement.compile(dialect=sqlite.dialect(paramstyle="named")))
    assert "?" not in named and named.count(":thread_id") > 1


def test_channel_versions_expansion_per_dialect() -> None:
    sql = {
        name: str(
            select_load(ops_for(d), select_page(ops_for(d), PageQuery(limit=1))).compile(dialect=d)
        )
        for name, d in DIALECTS.items()
    }
    assert "jsonb_each_text" in sql["postgresql"]
    assert "json_each" in sql["sqlite"]
    assert "JSON_TABLE(JSON_KEYS" in sql["mysql"] and "utf8mb4_0900_bin" in sql["mysql"]
    assert "utf8mb4_nopad_bin" in sql["mariadb"]


def test_ops_chosen_from_the_dialect() -> None:
    assert isinstance(ops_for(postgresql.dialect()), PostgresOps)
    assert isinstance(ops_for(sqlite.dialect()), SQLiteOps)
    assert isinstance(ops_for(mysql.dialect()), MySQLOps)
    assert isinstance(ops_for(_mariadb()), MySQLOps)
    from sqlalchemy.dialects import mssql

    assert isinstance(ops_for(mssql.dialect()), GenericOps)


@pytest.mark.parametrize("name", ["postgresql", "sqlite", "mysql"])
def test_insert_ignore_never_uses_insert_ignore(name: str) -> None:
    """MySQL's INSERT IGNORE would also hide truncation errors; we only absorb key conflicts."""
    dialect = DIALECTS[name]
    sql = str(ops_for(dialect).insert_ignore(checkpoint_blobs).compile(dialect=dialect))
    assert "IGNORE" not in sql.upper().replace("ON CONFLICT DO NOTHING", "")
    upsert = str(ops_for(dialect).upsert(checkpoints, ["checkpoint"]).compile(dialect=dialect))
    # On a key conflict the row's `checkpoint` column (and nothing else) takes the new value.
    _, _, on_conflict = upsert.partition(") ON ")
    assert on_conflict in {
        "CONFLICT (thread_id, checkpoint_ns_hash, checkpoint_id) "
        "DO UPDATE SET checkpoint = excluded.checkpoint",
        "DUPLICATE KEY UPDATE checkpoint = VALUES(checkpoint)",
    }, upsert


def test_column_types_per_dialect() -> None:
    def ddl(dialect: Dialect) -> str:
        return str(sa.schema.CreateTable(checkpoint_blobs).compile(dialect=dialect))

    assert "LONGBLOB" in ddl(mysql.dialect())
    assert "BYTEA" in ddl(postgresql.dialect())
    assert "JSONB" in str(sa.schema.CreateTable(checkpoints).compile(dialect=postgresql.dialect()))


def test_blob_lookup_join_order_is_fixed_where_planners_get_it_wrong() -> None:
    """SQLite, MariaDB and PostgreSQL otherwise read every blob of the thread (see
    dialects.OrderedJoin, PostgresOps.keyed_lookup; measured on the servers by
    tests/integration/checkpoint/test_query_plans.py)."""

    def load_sql(name: str) -> str:
        d = DIALECTS[name]
        ops = ops_for(d)
        return str(select_load(ops, select_page(ops, PageQuery(limit=1))).compile(dialect=d))

    assert "CROSS JOIN checkpoint_blobs" in load_sql("sqlite")
    assert "STRAIGHT_JOIN checkpoint_blobs" in load_sql("mysql")
    assert "STRAIGHT_JOIN checkpoint_blobs" in load_sql("mariadb")
    postgresql_sql = load_sql("postgresql")
    assert "JOIN LATERAL (SELECT checkpoint_blobs." in postgresql_sql
    assert "OFFSET" in postgresql_sql  # (what keeps the planner from merging it back)


def _sql_type(column: sa.Column[Any], dialect: Dialect) -> str:
    """The column's type as the database declares it, lengths aside."""
    return re.sub(r"\(\d+\)", "", str(column.type.compile(dialect)))


# Types a UNION column may mix beyond one type (DialectOps.union_sharing): PostgreSQL
# reads the JSON documents as text; MariaDB's JSON is utf8mb4_bin LONGTEXT, binary
# with a LONGBLOB.
_MIXABLE = {
    "documents_as_text": [{"JSONB", "TEXT", "VARCHAR"}],
    "json_with_binary": [
        {"JSON", "LONGBLOB"},
        {"JSON", "MEDIUMTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"},
    ],
}


@pytest.mark.parametrize("one_checkpoint", [True, False])
@pytest.mark.parametrize("name", list(DIALECTS))
def test_load_rows_share_columns_the_database_can_union(name: str, one_checkpoint: bool) -> None:
    """A column two kinds of rows share holds values of one type and collation (MySQL
    refuses a UNION of two collations; PostgreSQL of two types), but where the dialect
    says a mix is read back as it was (SQLite's dynamic types, ``_MIXABLE``); and every
    value a reader takes has a column."""
    dialect = DIALECTS[name]
    ops = ops_for(dialect)
    layout = load_layout(ops, one_checkpoint)
    keys = {"thread_id", "checkpoint_ns_hash", "checkpoint_id"}
    assert set(layout.value_at) == {"kind", "state_revision", *WRITE_VALUE_COLUMNS} | (
        set() if one_checkpoint else keys
    )
    carried = {"kind", "checkpoint_id", "parent_checkpoint_id", "checkpoint", "metadata"}
    expected = (
        carried | {"state_revision"} | (set() if one_checkpoint else keys | {"checkpoint_ns"})
    )
    assert set(layout.checkpoint_at) == expected
    sharing = ops.union_sharing()
    for checkpoint_name, value_name in layout.slots:
        if checkpoint_name is None or value_name is None or checkpoint_name == value_name:
            continue
        if sharing == "any":
            continue
        types = {
            _sql_type(checkpoints.c[checkpoint_name], dialect),
            _sql_type(checkpoint_writes.c[value_name], dialect),
        }
        assert len(types) == 1 or any(types <= mix for mix in _MIXABLE.get(sharing, ())), (
            checkpoint_name,
            value_name,
            types,
        )
    # The statement has the layout's columns (every branch: a UNION requires it).
    statement = select_load(ops, select_page(ops, PageQuery(limit=1)), one_checkpoint=False)
    assert len(statement.selected_columns) == len(load_layout(ops, False).slots)


@pytest.mark.parametrize("lean", [True, False])
@pytest.mark.parametrize("by_id", [False, True])
def test_mariadb_get_tuple_packs_only_key_strings_and_integers(by_id: bool, lean: bool) -> None:
    """MariaDB's get_tuple sends each row's short values as one JSON array (a column
    fewer is a field descriptor fewer for PyMySQL to parse): only integers and key
    strings, which share one collation (JSON_ARRAY refuses a mix, as a UNION does) and
    a bounded length (a long text, escaped, could pass max_allowed_packet); the
    statement's columns are that array and the slots after it."""
    dialect = DIALECTS["mariadb"]
    statement, layout = one_checkpoint_load(ops_for(dialect), by_id, lean)
    assert isinstance(statement, sa.CompoundSelect)
    assert layout.packed == len(layout.slots) - 2
    key_type = _sql_type(checkpoints.c.checkpoint_id, dialect)
    for checkpoint_name, value_name in layout.slots[1 : layout.packed]:
        for table, name in ((checkpoints, checkpoint_name), (checkpoint_writes, value_name)):
            if name is not None:
                assert _sql_type(table.c[name], dialect) in {key_type, "INTEGER"}, name
    assert len(statement.selected_columns) == 3
    assert str(statement.compile(dialect=dialect)).count("json_array(") == 4
    # A row as sent reads as one value per slot.
    values = [6, *(f'v"{at}\\' for at in range(1, layout.packed - 1)), -1]
    row = (json.dumps(values), "a/b", b"blob")
    assert layout.unpack([row]) == [[*values, "a/b", b"blob"]]


@pytest.mark.parametrize("name", ["postgresql", "sqlite", "mysql"])
def test_other_dialects_get_tuple_rows_are_unpacked(name: str) -> None:
    ops = ops_for(DIALECTS[name])
    for by_id in (False, True):
        for lean in (True, False):
            statement, layout = one_checkpoint_load(ops, by_id, lean)
            assert isinstance(statement, sa.CompoundSelect)
            assert layout.packed == 0
            assert len(statement.selected_columns) == len(layout.slots)
