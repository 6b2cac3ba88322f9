"""Every dialect difference of lg_sqla, in this package: one module per database.

================ ==========================================================
base.py          ``DialectOps`` (the questions the checkpoint SQL asks of a
                 database), with the portable answers; shared SQL elements
                 (``ordered_join``)
store_base.py    ``StoreSQL`` (the questions the store's SQL asks: JSON
                 filters, namespace labels, vectors), the portable answers
autocommit.py    a plan of several statements on a session in autocommit:
                 one transaction all the same
postgresql.py    PostgreSQL: ON CONFLICT, jsonb, LATERAL lookups, bulk arrays,
                 advisory lock, pgvector
citus.py         Citus (distributed PostgreSQL): detection, table placement,
                 distribution, the coordinator (used by postgresql.py)
sqlite.py        SQLite: ON CONFLICT, json_each, CROSS JOIN, one writer at a
                 time, sqlite-vec
mysql.py         MySQL 8.0.4+ / MariaDB 10.6+: ON DUPLICATE KEY, JSON_TABLE,
                 STRAIGHT_JOIN, binary NO PAD collations, GET_LOCK
generic.py       any other dialect: portable SQL only (existence checks,
                 a second batched query for blobs)
mysql_offline.py MySQL and MariaDB offline (``--sql``) DDL, without a server:
                 the key collation named for each in an executable comment
poolers.py       a connection pooler (PgBouncer) in front of PostgreSQL:
                 nothing of one client left on a server session (psycopg,
                 asyncpg: no named statements; pg8000: no autocommit)
================ ==========================================================

A :class:`DialectOps` is chosen once per engine from SQLAlchemy's dialect
(``dialect.name``; MariaDB is ``"mysql"`` or, with ``mariadb+`` URLs, ``"mariadb"``)
by :func:`ops_for`; nothing outside this package tests a dialect's name. To add a
database: a module here with its ``DialectOps`` (and ``StoreSQL``) subclass, and a
line in ``ops_for`` / ``store_sql_for``.
"""

from __future__ import annotations

from sqlalchemy.engine import Dialect

from lg_sqla.dialects.base import (
    MIGRATION_LOCK_NAME,
    ChannelVersionsSource,
    DialectOps,
    OrderedJoin,
    ordered_join,
    sql_constant,
)
from lg_sqla.dialects.generic import GenericOps
from lg_sqla.dialects.mysql import (
    MYSQL_CONNECTION_CHARSET,
    NO_BACKSLASH_ESCAPES,
    MySQLOps,
    MySQLStoreSQL,
    binds_timestamps_as_text,
    is_mysql_family,
    mysql_binds_literals,
    mysql_json_text,
    mysql_key_collation,
    mysql_member_path,
    mysql_string_literal,
)
from lg_sqla.dialects.mysql_offline import prepare_offline_ddl
from lg_sqla.dialects.postgresql import PostgresOps, PostgresStoreSQL, bulk_params, bulk_rows_shape
from lg_sqla.dialects.sqlite import SQLiteOps, SQLiteStoreSQL, sqlite_vec_engine_options
from lg_sqla.dialects.store_base import NUMERIC_STRING, AnnIndex, JsonPath, StoreSQL
from lg_sqla.errors import UnsupportedDriverError

__all__ = [
    "MIGRATION_LOCK_NAME",
    "MYSQL_CONNECTION_CHARSET",
    "NO_BACKSLASH_ESCAPES",
    "NUMERIC_STRING",
    "AnnIndex",
    "ChannelVersionsSource",
    "DialectOps",
    "GenericOps",
    "JsonPath",
    "MySQLOps",
    "MySQLStoreSQL",
    "OrderedJoin",
    "PostgresOps",
    "PostgresStoreSQL",
    "SQLiteOps",
    "SQLiteStoreSQL",
    "StoreSQL",
    "binds_timestamps_as_text",
    "bulk_params",
    "bulk_rows_shape",
    "check_driver",
    "is_mysql_family",
    "mysql_binds_literals",
    "mysql_json_text",
    "mysql_key_collation",
    "mysql_member_path",
    "mysql_string_literal",
    "ops_for",
    "ordered_join",
    "prepare_offline_ddl",
    "sql_constant",
    "sqlite_vec_engine_options",
    "store_sql_for",
]

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


def store_sql_for(dialect_ops: DialectOps) -> StoreSQL:
    """The store's SQL primitives for a dialect (``in_sql`` False: filter in Python)."""
    if isinstance(dialect_ops, MySQLOps):
        return MySQLStoreSQL(dialect_ops)
    if isinstance(dialect_ops, PostgresOps):
        return PostgresStoreSQL(dialect_ops)
    if isinstance(dialect_ops, SQLiteOps):
        return SQLiteStoreSQL()
    return StoreSQL()
