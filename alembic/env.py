"""Alembic environment of lg_sqla's schema.

Used by `alembic upgrade head` from a checkout and, shipped in the wheel, by
`saver.setup()` / `python -m lg_sqla upgrade`. The URL comes from
`-x url=...`, else $LG_SQLA_DATABASE_URL, else `sqlalchemy.url`, and is read
as the savers and the `lg-sqla` command read it (lg_sqla.engines.saver_url:
`postgres://`, and psycopg 3 / PyMySQL where the URL names no driver); an
already open connection may be passed in `config.attributes["connection"]`.

Offline (`--sql`) no server says whether a `mysql://` URL means MySQL or MariaDB:
the DDL then runs on both (lg_sqla.dialects.mysql_offline); a `mariadb://` URL
prints MariaDB's alone. The output's first line says which.

The tables (and the version table) go into the connection's default schema,
or into the schema named by the connection's ``schema_translate_map`` (the
savers' ``schema=``), `-x schema=...` or $LG_SQLA_SCHEMA: a PostgreSQL schema,
a MySQL/MariaDB database, created if missing.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig

from sqlalchemy import create_engine, pool
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.schema import CreateSchema

from alembic import context
from lg_sqla.dialects import ops_for, prepare_offline_ddl
from lg_sqla.engines import driver_hint, saver_url
from lg_sqla.migrate import VERSION_TABLE, ensure_alembic_impl, schema_of
from lg_sqla.models import metadata

config = context.config
if config.config_file_name is not None and "connection" not in config.attributes:
    # Run as the `alembic` CLI: log what it does, as alembic.ini says.
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url")
    url = url or os.environ.get("LG_SQLA_DATABASE_URL") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit(
            "no database URL: pass `alembic -x url=<url> upgrade head` or set LG_SQLA_DATABASE_URL"
        )
    # One reading of a URL for every entry point: the CLI, from_conn_string and this.
    return saver_url(url, is_async=False)


def _schema(connection: Connection | None = None) -> str | None:
    named = schema_of(connection) if connection is not None else None
    return (
        named
        or context.get_x_argument(as_dictionary=True).get("schema")
        or os.environ.get("LG_SQLA_SCHEMA")
        or None
    )


def _migrate(connection: Connection) -> None:
    schema = _schema(connection)
    if schema is not None:
        # Our revisions name no schema: the translate map puts every table in this one.
        connection.execution_options(schema_translate_map={None: schema})
    ensure_alembic_impl(connection.dialect)
    # One migrator at a time across processes; the others then see it done.
    # The lock is taken before configure() so that the connection is already in
    # a transaction: Alembic then leaves committing to us, and every revision runs
    # under the lock. Otherwise, on SQLite (whose Alembic impl is not marked
    # transactional-DDL), Alembic commits after each revision, which releases the
    # write lock mid-upgrade: a second process then applies the next revision too
    # and fails with "table ... already exists".
    with ops_for(connection.dialect).migration_lock(connection):
        context.configure(
            connection=connection,
            target_metadata=metadata,
            version_table=VERSION_TABLE,
            version_table_schema=schema,
            # SQLite cannot ALTER most things: batch mode recreates tables instead.
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
        )
        with context.begin_transaction():
            # Under the lock: two processes creating the same schema would collide.
            if schema is not None and not connection.dialect.has_schema(connection, schema):
                connection.execute(CreateSchema(schema, if_not_exists=True))
            context.run_migrations()
            # Citus: tables a revision created are distributed as the others are.
            ops_for(connection.dialect).after_migrations(
                connection, [t.name for t in metadata.sorted_tables], VERSION_TABLE
            )


def run_offline() -> None:
    url = _url()
    with driver_hint(url):
        dialect = make_url(url).get_dialect()()
    ensure_alembic_impl(dialect)
    context.configure(
        url=url,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
    )
    migration = context.get_context()
    # MySQL or MariaDB: no server to ask which (lg_sqla.dialects.mysql_offline).
    note = prepare_offline_ddl(migration.dialect)
    if note is not None:
        migration.impl.static_output(note)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _migrate(connection)
        return
    url = _url()
    # A missing driver or dialect: an error naming the extra to install, not a traceback.
    with driver_hint(url):
        is_async = make_url(url).get_dialect().is_async
        engine = None if is_async else create_engine(url, poolclass=pool.NullPool)
    if engine is None:
        asyncio.run(_run_async(url))
        return
    try:
        with engine.connect() as connection:
            _migrate(connection)
            connection.commit()
    finally:
        engine.dispose()


async def _run_async(url: str) -> None:
    with driver_hint(url):
        engine = create_async_engine(url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_migrate)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
