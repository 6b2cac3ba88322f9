"""Schema migrations, run programmatically: ``saver.setup()``, ``python -m lg_sqla upgrade``.

The single copy of the migrations lives in the repository's ``alembic/``
directory and ships inside the wheel as ``lg_sqla/_migrations`` (see
pyproject.toml), so a pip-installed user migrates without the repository.
Our revisions record themselves in a version table of their own, so a host
application's ``alembic_version`` is never touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from lg_sqla.dialects import ops_for
from lg_sqla.errors import SchemaError

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic's modules are imported by the functions that use them: importing
# alembic.config imports alembic.command and most of Alembic, which an app that
# only imports lg_sqla (or lg_sqla.models into its own Alembic env) does not need.

__all__ = ["SchemaError", "check_schema", "upgrade"]

VERSION_TABLE = "lg_sqla_alembic_version"
# What an installed lg_sqla offers (the Alembic CLI needs a checkout of the repository).
FIX_HINT = (
    "run `saver.setup()` (or `store.setup()`), or `python -m lg_sqla upgrade --url "
    "<database url>` (the `lg-sqla` command)"
)


# Alembic keeps the running migration's context in module globals
# (``alembic.context``, ``alembic.op``), so two migrations in one process at the
# same time corrupt each other ("KeyError: 'config'", "table already exists",
# even a segfault with SQLite). The database's lock (dialects.migration_lock)
# serializes processes; this lock serializes the threads and tasks of one process.
# A plain Lock, not an RLock: async callers take it from the event loop's thread
# (see `holding_alembic_lock_async`), where reentrancy would let every task in.
_ALEMBIC_LOCK = threading.Lock()


@contextlib.contextmanager
def holding_alembic_lock() -> Iterator[None]:
    """Hold the process-wide migration lock (blocking: for sync callers)."""
    with _ALEMBIC_LOCK:
        yield


@contextlib.asynccontextmanager
async def holding_alembic_lock_async(poll_s: float = 0.005) -> AsyncIterator[None]:
    """Hold the process-wide migration lock without blocking the event loop.

    Polled rather than awaited in a worker thread: a task cancelled while
    waiting must not leave the lock taken by a thread nobody will release it from.
    """
    while not _ALEMBIC_LOCK.acquire(blocking=False):
        await asyncio.sleep(poll_s)
    try:
        yield
    finally:
        _ALEMBIC_LOCK.release()


def script_location() -> Path:
    """The migrations directory: inside the installed package, else the checkout's alembic/."""
    package_dir = Path(__file__).resolve().parent
    shipped = package_dir / "_migrations"
    if (shipped / "env.py").is_file():
        return shipped
    checkout = package_dir.parent / "alembic"
    if (checkout / "env.py").is_file():
        return checkout
    raise SchemaError(f"lg_sqla's migrations are missing: neither {shipped} nor {checkout} exist")


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic Config for our migrations, optionally bound to an open connection."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(script_location()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.cache
def head_revision() -> str:
    """The newest revision lg_sqla ships (read once: the installed files do not change)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "lg_sqla has no migrations"
    return head


def schema_of(connection: Connection) -> str | None:
    """The schema lg_sqla's tables live in on this connection (``schema=`` of the savers),
    None for the connection's default one."""
    translate = connection.get_execution_options().get("schema_translate_map") or {}
    schema = translate.get(None)
    return str(schema) if schema is not None else None


def ensure_alembic_impl(dialect: Dialect) -> None:
    """Let Alembic migrate a dialect it ships no implementation for.

    Alembic looks its DDL implementation up by dialect name and fails with
    ``KeyError: '<name>'`` for any other (DuckDB, ...). Our revisions use only
    portable DDL (create/drop table and index), so the generic implementation
    serves; registering is what Alembic documents for third-party dialects:
    a ``DefaultImpl`` subclass naming the dialect in ``__dialect__``.
    """
    from alembic.ddl.impl import DefaultImpl

    try:
        DefaultImpl.get_by_dialect(dialect)
    except KeyError:
        type(f"GenericImpl_{dialect.name}", (DefaultImpl,), {"__dialect__": dialect.name})


def current_revision(connection: Connection) -> str | None:
    ensure_alembic_impl(connection.dialect)
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(
        connection,
        opts={"version_table": VERSION_TABLE, "version_table_schema": schema_of(connection)},
    )
    return context.get_current_revision()


def is_at_head(connection: Connection) -> bool:
    """Whether the schema is at lg_sqla's newest revision (one small read)."""
    return current_revision(connection) == head_revision()


def upgrade_connection(connection: Connection, revision: str = "head") -> None:
    """Upgrade on an open sync connection: waits for other migrations of this
    process (threads), and the env takes the database's lock (other processes)."""
    with holding_alembic_lock():
        upgrade_connection_locked(connection, revision)


def upgrade_connection_locked(connection: Connection, revision: str = "head") -> None:
    """``upgrade_connection`` for a caller that already holds the process lock."""
    from alembic import command  # imported when a migration runs, not with the models

    if revision != "head" or not is_at_head(connection):
        refuse_read_only(connection)
    if connection.in_transaction():
        # End the check's transaction: on MySQL its snapshot would make the migration
        # read the version table as it was before another process's upgrade.
        connection.rollback()
    command.upgrade(alembic_config(connection), revision)
    if connection.in_transaction():
        connection.commit()


def downgrade_connection(connection: Connection, revision: str) -> None:
    with holding_alembic_lock():
        from alembic import command

        refuse_read_only(connection)
        if connection.in_transaction():
            connection.rollback()  # a fresh snapshot for the migration (see above)
        command.downgrade(alembic_config(connection), revision)
        if connection.in_transaction():
            connection.commit()


@functools.cache
def tables_at(revision: str | None) -> frozenset[str]:
    """The tables lg_sqla's migrations leave at ``revision`` (None: base), its version
    table aside: found by running them on a throwaway in-memory SQLite database, so
    what a downgrade drops comes from the migrations themselves, whichever they are."""
    if revision is None:
        return frozenset()
    from sqlalchemy import create_engine
    from sqlalchemy import inspect as reflect

    engine = create_engine("sqlite://")
    try:
        with engine.connect() as connection:
            upgrade_connection(connection, revision)
            names = reflect(connection).get_table_names()
    finally:
        engine.dispose()
    return frozenset(names) - {VERSION_TABLE}


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema of ``engine``'s database to ``revision`` (default: the latest).

    Safe to call from several threads and processes at once: one caller of
    this process at a time runs Alembic, and the migration environment holds the
    dialect's lock (PostgreSQL advisory lock, MySQL GET_LOCK, SQLite's write
    lock) so exactly one process applies each revision and the others find it
    done. A schema already at head costs one read and no lock.
    """
    with engine.connect() as connection:
        if revision == "head" and is_at_head(connection):
            return
        refuse_read_only(connection)
    with engine.connect() as connection:
        upgrade_connection(connection, revision)


def set_up(engine: Engine, *, read_only: bool = False) -> None:
    """The schema part of every owner's ``setup()`` (savers, stores): upgrade to head;
    for a read-only owner only check it (a replica follows its primary's schema)."""
    if not read_only:
        upgrade(engine)
        return
    with engine.connect() as connection:
        check_schema(connection)


async def aset_up(engine: AsyncEngine, *, read_only: bool = False) -> None:
    """:func:`set_up` on an ``AsyncEngine``."""
    async with engine.connect() as connection:
        if read_only:
            await connection.run_sync(check_schema)
            return
        if await connection.run_sync(is_at_head):
            return
        await connection.run_sync(refuse_read_only)
    # Alembic runs on this loop's thread (run_sync): the process lock is taken without
    # blocking the loop, or a second task waiting on it would stall the first one's I/O.
    async with holding_alembic_lock_async(), engine.connect() as connection:
        await connection.run_sync(upgrade_connection_locked)


def refuse_read_only(connection: Connection) -> None:
    """Raise :class:`SchemaError` on a server that only reads (a replica): migrations
    run on the primary, and a replica follows it."""
    dialect_ops = ops_for(connection.dialect)
    if dialect_ops.is_read_only(connection):
        raise SchemaError(
            "this database only reads (a replica, or a read-only server): run setup() / "
            "`lg-sqla upgrade` against the primary, and open savers on a replica with "
            "read_only=True"
        )
    refused = dialect_ops.migrations_refused(connection)
    if refused is not None:
        raise SchemaError(refused)


def check_schema(connection: Connection) -> None:
    """Raise :class:`SchemaError` naming the fix unless the schema is at our head."""
    head = head_revision()
    current = current_revision(connection)
    if current == head:
        return
    dialect_ops = ops_for(connection.dialect)
    refused = dialect_ops.migrations_refused(connection)
    if refused is not None:
        # A Citus worker: the schema is the coordinator's to set up.
        raise SchemaError(
            f"lg_sqla's schema here is at revision {current!r}, not {head!r}: {refused}"
        )
    if dialect_ops.is_read_only(connection):
        # setup() cannot run here: the schema comes from the primary (a replica
        # follows it), and a replica only lags if replication does.
        raise SchemaError(
            f"lg_sqla's schema here is at revision {current!r}, not {head!r}, and this "
            "database only reads (a replica?): run setup() / `lg-sqla upgrade` against "
            "the primary; a replica follows it"
        )
    if current is None:
        schema = schema_of(connection)
        where = f"in schema {schema!r} of this database" if schema else "in this database"
        hint = (
            FIX_HINT.replace("upgrade --url", "upgrade --schema {schema} --url")
            if schema
            else FIX_HINT
        )
        raise SchemaError(f"lg_sqla tables are not set up {where}: {hint.format(schema=schema)}")
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    known = {rev.revision for rev in script.walk_revisions()}
    if current not in known:
        raise SchemaError(
            f"the database schema is at revision {current!r}, newer than this lg_sqla "
            f"(head {head!r}): upgrade the lg_sqla package"
        )
    raise SchemaError(
        f"the database schema is at revision {current!r}, behind lg_sqla's {head!r}: {FIX_HINT}"
    )
