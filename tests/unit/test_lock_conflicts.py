"""Which driver errors are lock conflicts, code by code, decided per database
(``DialectOps.is_lock_conflict``; the errors a real server raises are in
tests/integration/runtime/test_retries.py)."""

from __future__ import annotations

import sqlite3

import asyncmy.errors
import MySQLdb
import pg8000.dbapi
import psycopg
import pymysql
import pytest
from sqlalchemy.dialects import mysql

from lg_sqla.dialects import GenericOps, MySQLOps, PostgresOps, SQLiteOps

POSTGRES = PostgresOps()
MYSQL = MySQLOps(mysql.dialect())
SQLITE = SQLiteOps()


@pytest.mark.parametrize(
    ("sqlstate", "conflict"),
    [
        ("40001", True),  # serialization_failure
        ("40P01", True),  # deadlock_detected
        ("23505", False),  # unique_violation
        ("55P03", False),  # lock_not_available (NOWAIT): not a rollback of the transaction
        ("25006", False),  # read_only_sql_transaction
    ],
)
def test_postgresql_decides_by_sqlstate(sqlstate: str, conflict: bool) -> None:
    assert POSTGRES.is_lock_conflict(psycopg.errors.lookup(sqlstate)("x")) is conflict
    # pg8000 carries the server's fields, "C" being the SQLSTATE.
    error = pg8000.dbapi.DatabaseError({"C": sqlstate, "M": "x", "S": "ERROR"})
    assert POSTGRES.is_lock_conflict(error) is conflict


@pytest.mark.parametrize(
    ("number", "sqlstate", "conflict"),
    [
        (1213, "40001", True),  # deadlock found (also Galera's certification failure)
        (1205, "HY000", True),  # lock wait timeout: its SQLSTATE says nothing
        (1062, "23000", False),  # duplicate entry
        (2013, "HY000", False),  # lost connection (a disconnect, retried as such)
    ],
)
def test_mysql_decides_by_error_number_on_every_driver(
    number: int, sqlstate: str, conflict: bool
) -> None:
    for error_class in (
        pymysql.err.OperationalError,
        MySQLdb.OperationalError,
        asyncmy.errors.OperationalError,
    ):
        error = error_class(number, "x")
        # PyMySQL and asyncmy set a SQLSTATE too: it must not decide.
        error.sqlstate = sqlstate
        assert MYSQL.is_lock_conflict(error) is conflict, error_class


def test_mysql_reads_mariadb_connectors_errno() -> None:
    import mariadb

    error = mariadb.OperationalError("Lock wait timeout exceeded")
    error.errno = 1205
    assert MYSQL.is_lock_conflict(error)
    error.errno = 1062
    assert not MYSQL.is_lock_conflict(error)


def test_sqlite_decides_by_result_code() -> None:
    busy = sqlite3.OperationalError("database is locked")
    locked = sqlite3.OperationalError("database table is locked")
    assert SQLITE.is_lock_conflict(busy) and SQLITE.is_lock_conflict(locked)
    assert not SQLITE.is_lock_conflict(sqlite3.OperationalError("no such table: x"))
    assert not SQLITE.is_lock_conflict(sqlite3.IntegrityError("UNIQUE constraint failed"))


def test_a_database_lg_sqla_does_not_know_never_retries() -> None:
    generic = GenericOps()
    for error in (
        sqlite3.OperationalError("database is locked"),
        psycopg.errors.lookup("40001")("x"),
        pymysql.err.OperationalError(1213, "x"),
    ):
        assert not generic.is_lock_conflict(error)
