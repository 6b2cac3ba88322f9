"""Which failures a call runs again: decided per database, from the driver's real errors,
at COMMIT as well as before it.

- Every driver's own deadlock error, raised by a real deadlock on the server, is a
  lock conflict for its database (``DialectOps.is_lock_conflict``): error numbers on
  MySQL/MariaDB (whose SQLSTATEs mislead), SQLSTATEs on PostgreSQL.
- A conflict the server reports in answer to COMMIT means it rolled the transaction
  back: the call runs again and succeeds. A lost connection during COMMIT leaves the
  outcome unknown: raised, never run again.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, new_database
from faults import Faults
from helpers import checkpoint, config, new_thread
from sqlalchemy.ext.asyncio import AsyncEngine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.dialects import GenericOps, ops_for

Saver = SQLAlchemySaver | AsyncSQLAlchemySaver


async def call(saver: Saver, name: str, *args: Any, **kwargs: Any) -> Any:
    if isinstance(saver, AsyncSQLAlchemySaver):
        return await getattr(saver, f"a{name}")(*args, **kwargs)
    return getattr(saver, name)(*args, **kwargs)


def _conflict(engine: sa.Engine) -> BaseException:
    """The error each database's driver raises when COMMIT is refused for a conflict."""
    dbapi = engine.dialect.loaded_dbapi
    if engine.dialect.name == "postgresql":
        import psycopg

        return psycopg.errors.lookup("40001")(
            "could not serialize access due to read/write dependencies among transactions"
        )
    if engine.dialect.name == "sqlite":
        return dbapi.OperationalError("database is locked")
    return dbapi.OperationalError(
        1213, "Deadlock found when trying to get lock; try restarting transaction"
    )


def _lost(engine: sa.Engine) -> BaseException:
    """The error a driver raises when the connection dies during COMMIT."""
    dbapi = engine.dialect.loaded_dbapi
    if engine.dialect.name == "postgresql":
        return dbapi.OperationalError("server closed the connection unexpectedly")
    if engine.dialect.name == "sqlite":
        return dbapi.OperationalError("disk I/O error")
    return dbapi.OperationalError(2013, "Lost connection to MySQL server during query")


async def _open(backend: Backend, mode: str, path: str) -> tuple[Any, Faults, Saver]:
    engine: Any = backend.engine() if mode == "sync" else backend.async_engine()
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    faults = Faults()
    faults.install(sync_engine)
    direct = path == "direct"
    saver: Saver = (
        AsyncSQLAlchemySaver(engine, direct_path=direct)
        if isinstance(engine, AsyncEngine)
        else SQLAlchemySaver(engine, direct_path=direct)
    )
    return engine, faults, saver


async def _close(engine: Any) -> None:
    if isinstance(engine, AsyncEngine):
        await engine.dispose()
    else:
        engine.dispose()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("path", ["core", "direct"])
async def test_a_conflict_reported_at_commit_is_retried(
    backend: Backend, mode: str, path: str
) -> None:
    engine, faults, saver = await _open(backend, mode, path)
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    try:
        source = new_thread()
        parent = await call(saver, "put", config(source), checkpoint({"a": 1}), {}, {"a": 1})
        await call(saver, "put_writes", parent, [("a", "ñ")], "task-1")

        # copy_thread: several statements, one transaction, one COMMIT.
        faults.commit_errors = [_conflict(sync_engine)]
        commits = faults.commits
        await call(saver, "copy_thread", source, source + "-copy")
        assert faults.commit_errors == [] and faults.commits == commits + 2
        copied = await call(saver, "get_tuple", config(source + "-copy"))
        assert copied is not None and copied.pending_writes == [("task-1", "a", "ñ")]

        # put: blobs and checkpoint row in one transaction (on PostgreSQL one statement
        # in autocommit, whose conflicts come from the statement: nothing to inject).
        if backend.name != "postgres":
            faults.commit_errors = [_conflict(sync_engine)]
        commits = faults.commits
        # (a list: a blob row; a put of a small int alone is one statement, in
        # autocommit on MariaDB too)
        values = {"a": [2]}
        stored = await call(saver, "put", parent, checkpoint(values, {"a": 2}), {}, {"a": 2})
        assert faults.commit_errors == []
        if backend.name != "postgres":
            assert faults.commits == commits + 2
        found = await call(saver, "get_tuple", stored)
        assert found is not None and found.checkpoint["channel_values"] == values
        history = [t async for t in _alist(saver, config(source))]
        assert len(history) == 2  # stored once, not twice
    finally:
        await _close(engine)


async def _alist(saver: Saver, cfg: Any) -> Any:
    if isinstance(saver, AsyncSQLAlchemySaver):
        async for item in saver.alist(cfg):
            yield item
    else:
        for item in saver.list(cfg):
            yield item


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_connection_lost_at_commit_is_not_run_again(backend: Backend, mode: str) -> None:
    """Whether the server committed is unknown: running the call again could apply it
    twice. (A dead connection before COMMIT is retried once, as test_faults.py shows.)"""
    engine, faults, saver = await _open(backend, mode, "core")
    sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    try:
        source = new_thread()
        await call(saver, "put", config(source), checkpoint({"a": 1}), {}, {"a": 1})
        faults.commit_errors = [_lost(sync_engine)]
        commits = faults.commits
        with pytest.raises(sa.exc.DBAPIError):
            await call(saver, "copy_thread", source, source + "-copy")
        assert faults.commits == commits + 1
    finally:
        await _close(engine)


# --- real deadlocks, every sync driver ------------------------------------------------

DEADLOCK_DRIVERS = {
    "postgres": ("postgresql+psycopg", "postgresql+psycopg2", "postgresql+pg8000"),
    "mysql": ("mysql+pymysql", "mysql+mysqldb", "mariadb+mariadbconnector"),
}


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ],
)
def server_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    yield from new_database(request, request.param, tmp_path_factory.mktemp("deadlock"))


def _deadlock(url: str) -> BaseException:
    """Two transactions that wait on each other's row; returns the driver error the
    server's deadlock detection raised in one of them."""
    engine = sa.create_engine(url)
    table = f"deadlock_{uuid.uuid4().hex[:8]}"
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"CREATE TABLE {table} (k INTEGER PRIMARY KEY, v INTEGER)"))
            conn.execute(sa.text(f"INSERT INTO {table} VALUES (1, 0), (2, 0)"))
        errors: list[BaseException] = []
        both_locked = threading.Barrier(2, timeout=30)

        def worker(first: int, second: int) -> None:
            with engine.connect() as conn:
                try:
                    conn.execute(sa.text(f"UPDATE {table} SET v = 1 WHERE k = {first}"))
                    both_locked.wait()
                    conn.execute(sa.text(f"UPDATE {table} SET v = 1 WHERE k = {second}"))
                    conn.commit()
                except sa.exc.DBAPIError as error:
                    errors.append(error.orig)  # type: ignore[arg-type]
                    conn.rollback()

        threads = [threading.Thread(target=worker, args=pair) for pair in ((1, 2), (2, 1))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(errors) == 1, errors
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE {table}"))
        return errors[0]
    finally:
        engine.dispose()


@pytest.mark.parametrize("position", [0, 1, 2])
def test_every_drivers_real_deadlock_is_a_lock_conflict(
    server_database: Backend, position: int
) -> None:
    backend = server_database.name
    scheme = DEADLOCK_DRIVERS[backend][position]
    base = sa.make_url(server_database.sync_url).set(drivername=scheme, query={})
    if scheme.startswith("mysql+"):
        base = base.update_query_dict({"charset": "utf8mb4"})
    url = base.render_as_string(hide_password=False)
    error = _deadlock(url)
    ops = ops_for(sa.create_engine(url).dialect)
    assert ops.is_lock_conflict(error), (scheme, type(error), error.args)
    # ... and not any error: a duplicate key is no conflict to retry.
    not_a_conflict = _duplicate_key(url)
    assert not ops.is_lock_conflict(not_a_conflict), (scheme, not_a_conflict)


def _duplicate_key(url: str) -> BaseException:
    engine = sa.create_engine(url)
    table = f"dup_{uuid.uuid4().hex[:8]}"
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f"CREATE TABLE {table} (k INTEGER PRIMARY KEY)"))
        with pytest.raises(sa.exc.IntegrityError) as raised, engine.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {table} VALUES (1), (1)"))
        with engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE {table}"))
        return raised.value.orig  # type: ignore[return-value]
    finally:
        engine.dispose()


@pytest.mark.sqlite
def test_sqlites_real_busy_error_is_a_lock_conflict(tmp_path: Any) -> None:
    """SQLITE_BUSY from the sqlite3 module itself: a second writer with no busy timeout."""
    path = tmp_path / "busy.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (k INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        with pytest.raises(sqlite3.OperationalError) as busy:
            other.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as missing:
            other.execute("SELECT * FROM no_such_table")
    finally:
        holder.close()
        other.close()
    ops = ops_for(sa.create_engine(f"sqlite:///{path}").dialect)
    assert ops.is_lock_conflict(busy.value)
    assert not ops.is_lock_conflict(missing.value)
    # An unknown database never retries: lg_sqla cannot know what its errors mean.
    assert not GenericOps().is_lock_conflict(busy.value)
