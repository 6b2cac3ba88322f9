"""Engines whose sessions are in autocommit: a call of several statements is still one
transaction, on every dialect and driver, on both paths, sync and async; and the
session goes back to the pool as the user configured it (``dialects.autocommit``).

An engine made with ``isolation_level="AUTOCOMMIT"`` (or that option set on the engine
with ``execution_options``, or a driver connected in autocommit) commits each statement
alone. A call injected with a fault (faults.py: below SQLAlchemy, so both paths see it)
after its first writes must leave nothing of itself, as it does on any other engine:
``copy_thread`` (Core), a put with blobs (the direct path where the driver is on its
allowlist: SQLite, MySQL/MariaDB; PostgreSQL writes a put in one statement) and a
store batch of several writes (its DELETE, then its INSERT).
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from faults import INJECTED_SQL_FAULT, Faults, InjectedFault
from helpers import DirectRuns, checkpoint, config, new_thread, table_counts
from langgraph.checkpoint.base import ChannelVersions
from langgraph.store.base import PutOp
from modes import saver_on, store_on, sync_engine
from sqlalchemy.ext.asyncio import AsyncEngine

from lg_sqla.runtime.drivers import direct_driver

# (backend, mode, the URL's drivername for a driver other than the backend's own)
_DEFAULT_DRIVERS = [
    pytest.param("sqlite", "sync", None, id="pysqlite"),
    pytest.param("sqlite", "async", None, id="aiosqlite"),
    pytest.param("postgres", "sync", None, id="psycopg"),
    pytest.param("postgres", "async", None, id="psycopg-async"),
    pytest.param("mysql", "sync", None, id="pymysql"),
    pytest.param("mysql", "async", None, id="asyncmy"),
]
# Drivers off the direct path's allowlist (test_drivers.py's): every call runs on Core.
# (aiomysql is refused by lg_sqla: UnsupportedDriverError.)
_OTHER_DRIVERS = [
    pytest.param("postgres", "sync", "postgresql+psycopg2", id="psycopg2"),
    pytest.param("postgres", "sync", "postgresql+pg8000", id="pg8000"),
    pytest.param("postgres", "async", "postgresql+asyncpg", id="asyncpg"),
    pytest.param("mysql", "sync", "mysql+mysqldb", id="mysqlclient"),
    pytest.param("mysql", "sync", "mariadb+mariadbconnector", id="mariadbconnector"),
]
every_driver = pytest.mark.parametrize(
    ("backend", "mode", "drivername"), _DEFAULT_DRIVERS + _OTHER_DRIVERS, indirect=["backend"]
)
default_drivers = pytest.mark.parametrize(
    ("backend", "mode", "drivername"), _DEFAULT_DRIVERS, indirect=["backend"]
)

_EMPTY = {"checkpoints": 0, "checkpoint_writes": 0, "checkpoint_blobs": 0}


def _on_driver(backend: Backend, drivername: str | None) -> Backend:
    """``backend``'s database through another driver (the same URL otherwise)."""
    if drivername is None:
        return backend
    url = sa.make_url(backend.sync_url).set(drivername=drivername)
    if drivername.startswith("mariadb+"):  # (MariaDB Connector/Python: utf8mb4 always)
        url = url.set(query={})
    text = url.render_as_string(hide_password=False)
    return Backend(backend.name, text, text)


def _autocommit_engine(
    make_engine: EngineFactory,
    backend: Backend,
    mode: str,
    drivername: str | None,
    **kwargs: Any,
) -> tuple[sa.Engine | AsyncEngine, Faults]:
    """An engine made with ``isolation_level="AUTOCOMMIT"`` (unless ``kwargs`` says how
    else), its connections open to injected faults."""
    options = kwargs or {"isolation_level": "AUTOCOMMIT"}
    engine = make_engine.for_mode(mode, _on_driver(backend, drivername), **options)
    faults = Faults()
    if drivername is None:
        faults.install(sync_engine(engine))
    else:  # (a driver off the direct path's allowlist: Core's anyway)
        faults.install_on_core(sync_engine(engine))
    return engine, faults


def _injected() -> Any:
    """``pytest.raises`` of the injected fault: ``InjectedFault``, or (``install_on_core``)
    the server's refusal of the statement it was appended to."""
    return pytest.raises(
        (InjectedFault, sa.exc.DBAPIError), match=rf"statement \d+: |{INJECTED_SQL_FAULT}"
    )


def _plain_engine(backend: Backend) -> sa.Engine:
    return backend.engine(poolclass=sa.pool.NullPool)


def _new_checkpoint(step: int) -> tuple[Any, dict[str, Any], ChannelVersions]:
    """A checkpoint of two channels (``b``, a list, stored as a blob) at ``step``."""
    versions: ChannelVersions = {"a": f"{step:032}.0", "b": f"{step:032}.0"}
    return checkpoint({"a": step, "b": [step]}, versions), {"step": step}, versions


def _runs_direct(engine: sa.Engine | AsyncEngine) -> bool:
    return direct_driver(sync_engine(engine).dialect) is not None


async def _copy_fails_midway(saver: Any, faults: Faults, source: str, target: str) -> None:
    """``copy_thread`` failing at its second INSERT, after it copied the checkpoints."""
    with faults.at(2, containing="INSERT INTO") as seen, _injected():
        await saver.copy_thread(source, target)
    inserts = [s for s in seen if "INSERT INTO" in s]
    assert len(inserts) == 2 and "checkpoints" in inserts[0].split("SELECT")[0], seen


async def _seeded(saver: Any) -> tuple[str, Any]:
    """A thread of one checkpoint (a blob among its values) and one pending write."""
    thread_id = new_thread()
    stored = await saver.put(config(thread_id), *_new_checkpoint(1))
    await saver.put_writes(stored, [("a", 2)], "t1")
    return thread_id, stored


@every_driver
async def test_copy_thread_failing_midway_leaves_nothing(
    make_engine: EngineFactory, backend: Backend, mode: str, drivername: str | None
) -> None:
    engine, faults = _autocommit_engine(make_engine, backend, mode, drivername)
    saver = saver_on(engine)
    source, _ = await _seeded(saver)
    target = new_thread()
    await _copy_fails_midway(saver, faults, source, target)
    assert table_counts(_plain_engine(backend), target) == _EMPTY
    await saver.copy_thread(source, target)  # (nothing in the way of a retry)
    copied = await saver.get_tuple(config(target))
    assert copied is not None and copied.pending_writes == [("t1", "a", 2)]
    assert copied.checkpoint["channel_values"] == {"a": 1, "b": [1]}


@every_driver
async def test_a_put_failing_at_its_second_statement_leaves_nothing(
    make_engine: EngineFactory,
    backend: Backend,
    mode: str,
    drivername: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its blobs sent, the checkpoint's INSERT fails: no blob stays. (PostgreSQL writes a
    put in one statement: there, the one statement fails, atomic by itself.)"""
    engine, faults = _autocommit_engine(make_engine, backend, mode, drivername)
    saver = saver_on(engine)
    await _seeded(saver)  # (the first calls: schema check, server learnt)
    thread_id = new_thread()
    runs = DirectRuns(monkeypatch)
    with faults.at(1, containing="INSERT INTO checkpoints ") as seen, _injected():
        await saver.put(config(thread_id), *_new_checkpoint(1))
    if backend.name != "postgres":
        assert any("INSERT INTO checkpoint_blobs" in s for s in seen), seen
    # (the path it was proven on: the direct one wherever the driver allows it)
    assert runs.count == (1 if _runs_direct(engine) else 0)
    assert table_counts(_plain_engine(backend), thread_id) == _EMPTY
    stored = await saver.put(config(thread_id), *_new_checkpoint(1))
    found = await saver.get_tuple(stored)
    assert found is not None and found.checkpoint["channel_values"] == {"a": 1, "b": [1]}


@every_driver
async def test_a_store_batch_failing_midway_leaves_nothing(
    make_engine: EngineFactory,
    backend: Backend,
    mode: str,
    drivername: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch that deletes an item and puts two: its DELETE sent, its INSERT fails; the
    item is still there and neither new one is."""
    engine, faults = _autocommit_engine(make_engine, backend, mode, drivername)
    store = store_on(engine)
    namespace = ("autocommit", new_thread())
    await store.put(namespace, "old", {"v": 0})
    ops = [
        PutOp(namespace, "old", None),
        PutOp(namespace, "k1", {"v": 1}),
        PutOp(namespace, "k2", {"v": 2}),
    ]
    runs = DirectRuns(monkeypatch)
    with faults.at(1, containing="INSERT INTO store_items") as seen, _injected():
        await store.batch(ops)
    # (the paths it was proven on: direct through psycopg, Core elsewhere)
    assert runs.count == (1 if backend.name == "postgres" and _runs_direct(engine) else 0)
    assert any(s.lstrip().startswith("DELETE FROM store_items") for s in seen), seen
    check = store_on(_plain_engine(backend))
    assert [item.key for item in await check.search(namespace)] == ["old"]
    await store.batch(ops)
    assert sorted(item.key for item in await check.search(namespace)) == ["k1", "k2"]


async def _delete_stands_after_rollback(
    engine: sa.Engine | AsyncEngine, backend: Backend, thread_id: str
) -> None:
    """The user's own connection of the engine is in autocommit: a DELETE stands
    though the connection rolls back."""
    delete = sa.text("DELETE FROM checkpoint_writes WHERE thread_id = :t")
    if isinstance(engine, AsyncEngine):
        async with engine.connect() as connection:
            assert (await connection.execute(delete, {"t": thread_id})).rowcount == 1
            await connection.rollback()
    else:
        with engine.connect() as sync_connection:
            assert sync_connection.execute(delete, {"t": thread_id}).rowcount == 1
            sync_connection.rollback()
    assert table_counts(_plain_engine(backend), thread_id)["checkpoint_writes"] == 0


@every_driver
async def test_the_session_goes_back_to_the_pool_in_autocommit(
    make_engine: EngineFactory, backend: Backend, mode: str, drivername: str | None
) -> None:
    """After a call of several statements that committed and one that failed, on the
    pool's only connection, the user's next transaction on it is not one."""
    engine, faults = _autocommit_engine(
        make_engine,
        backend,
        mode,
        drivername,
        isolation_level="AUTOCOMMIT",
        pool_size=1,
        max_overflow=0,
    )
    saver = saver_on(engine)
    source, _ = await _seeded(saver)  # (a put with a blob: several statements)
    await _copy_fails_midway(saver, faults, source, new_thread())
    copy = new_thread()
    await saver.copy_thread(source, copy)
    await _delete_stands_after_rollback(engine, backend, copy)


# How else a user puts the sessions in autocommit: the engine option set afterwards,
# or the driver's own (sqlite3's isolation_level=None, autocommit=True of the others).
_DRIVER_AUTOCOMMIT: dict[str, dict[str, Any]] = {
    "sqlite": {"isolation_level": None},
    "postgres": {"autocommit": True},
    "mysql": {"autocommit": True},
}


@default_drivers
@pytest.mark.parametrize("how", ["execution_options", "connect_args"])
async def test_other_ways_to_autocommit(
    make_engine: EngineFactory,
    backend: Backend,
    mode: str,
    drivername: str | None,
    how: str,
) -> None:
    if how == "connect_args":
        engine, faults = _autocommit_engine(
            make_engine,
            backend,
            mode,
            drivername,
            connect_args=_DRIVER_AUTOCOMMIT[backend.name],
            pool_size=1,
            max_overflow=0,
        )
    else:
        made, faults = _autocommit_engine(
            make_engine, backend, mode, drivername, pool_size=1, max_overflow=0
        )
        engine = made.execution_options(isolation_level="AUTOCOMMIT")
    saver = saver_on(engine)
    source, _ = await _seeded(saver)
    target = new_thread()
    await _copy_fails_midway(saver, faults, source, target)
    assert table_counts(_plain_engine(backend), target) == _EMPTY
    await saver.copy_thread(source, target)
    await _delete_stands_after_rollback(engine, backend, target)


# A row of an executemany that the database refuses: a trigger raising on one channel's
# write (the faults of faults.py cut statements, not the rows of one).
_FAILING_CHANNEL = "refused-by-trigger"
_ROW_FAULT: dict[str, tuple[str, ...]] = {
    "sqlite": (
        "CREATE TRIGGER lg_sqla_test_row_fault BEFORE INSERT ON checkpoint_writes "
        f"WHEN NEW.channel = '{_FAILING_CHANNEL}' "
        "BEGIN SELECT RAISE(ABORT, 'injected row fault'); END",
    ),
    "postgres": (
        "CREATE OR REPLACE FUNCTION lg_sqla_test_row_fault() RETURNS trigger AS $$ BEGIN "
        f"IF NEW.channel = '{_FAILING_CHANNEL}' THEN RAISE EXCEPTION 'injected row fault'; "
        "END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER lg_sqla_test_row_fault BEFORE INSERT ON checkpoint_writes "
        "FOR EACH ROW EXECUTE FUNCTION lg_sqla_test_row_fault()",
    ),
    "mysql": (
        "CREATE TRIGGER lg_sqla_test_row_fault BEFORE INSERT ON checkpoint_writes "
        f"FOR EACH ROW BEGIN IF NEW.channel = '{_FAILING_CHANNEL}' THEN "
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected row fault'; END IF; END",
    ),
}


@every_driver
async def test_put_writes_failing_at_its_second_row_leaves_nothing(
    make_engine: EngineFactory, backend: Backend, mode: str, drivername: str | None
) -> None:
    """One statement of several rows (an executemany: sqlite3, psycopg2 and others send
    one statement a row, each committed alone in autocommit), its second row refused:
    none of its writes stays."""
    engine, _ = _autocommit_engine(make_engine, backend, mode, drivername)
    saver = saver_on(engine)
    _, stored = await _seeded(saver)
    plain = _plain_engine(backend)
    with plain.begin() as connection:
        for statement in _ROW_FAULT[backend.name]:
            connection.execute(sa.text(statement))
    try:
        writes = [("a", 1), (_FAILING_CHANNEL, 2), ("c", 3)]
        with pytest.raises(sa.exc.DBAPIError, match="injected row fault"):
            await saver.put_writes(stored, writes, "t2")
    finally:
        with plain.begin() as connection:
            connection.execute(
                sa.text(
                    "DROP TRIGGER lg_sqla_test_row_fault"
                    + (" ON checkpoint_writes" if backend.name == "postgres" else "")
                )
            )
    found = await saver.get_tuple(stored)
    assert found is not None and found.pending_writes == [("t1", "a", 2)]
    await saver.put_writes(stored, [("a", 1), ("b", 2)], "t2")  # (nothing in the way)
    found = await saver.get_tuple(stored)
    assert found is not None and len(found.pending_writes) == 3
