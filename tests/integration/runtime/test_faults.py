"""Faults a busy or restarted database produces, which callers must never see:
deadlocks between maintenance and a live writer, dead pooled connections."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory, fresh_async_saver, fresh_saver
from faults import kill_sessions
from helpers import checkpoint, config, new_thread
from langchain_core.runnables import RunnableConfig
from modes import Either, cache_on, either, saver_on, sync_engine
from sqlalchemy.ext.asyncio import AsyncEngine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.runtime import direct

PUTS = 120


@pytest.fixture
def migrated(fresh_database: Backend) -> Iterator[Backend]:
    """A database of its own: sweep visits every thread, so none of other tests'."""
    with fresh_saver(fresh_database) as saver:
        saver.setup()
    yield fresh_database


def _put(saver: SQLAlchemySaver, parent: RunnableConfig, i: int) -> RunnableConfig:
    stored = saver.put(parent, checkpoint({"a": i}, {"a": i}), {"step": i}, {"a": i})
    saver.put_writes(stored, [("a", i + 1)], task_id=f"task-{i}")
    return stored


async def _aput(saver: AsyncSQLAlchemySaver, parent: RunnableConfig, i: int) -> RunnableConfig:
    stored = await saver.aput(parent, checkpoint({"a": i}, {"a": i}), {"step": i}, {"a": i})
    await saver.aput_writes(stored, [("a", i + 1)], task_id=f"task-{i}")
    return stored


def _assert_consistent(tuples: list, last: RunnableConfig) -> None:  # type: ignore[type-arg]
    """The latest checkpoint is the writer's last one, and every kept checkpoint
    still has the blob of each channel it names (prune took nothing in use)."""
    assert tuples, "the writer's thread lost every checkpoint"
    assert (
        tuples[0].config["configurable"]["checkpoint_id"] == (last["configurable"]["checkpoint_id"])
    )
    assert tuples[0].checkpoint["channel_values"] == {"a": PUTS - 1}
    for tup in tuples:
        step = tup.metadata["step"]
        assert tup.checkpoint["channel_values"] == {"a": step}
        assert tup.pending_writes == [(f"task-{step}", "a", step + 1)]


# The writer waits, a third and two thirds of the way in, for the maintainer's first
# and second round: however the scheduler runs the two, at least two rounds of prune
# and sweep overlap the writer's puts (an event, not a hope that the writer is slow).
PAUSES = (PUTS // 3, 2 * PUTS // 3)


def test_maintenance_beside_a_live_writer_sync(migrated: Backend) -> None:
    """prune and sweep of the thread being written: the writer sees no deadlock."""
    thread_id = new_thread()
    errors: list[BaseException] = []
    last: list[RunnableConfig] = []
    rounds_done = [threading.Event() for _ in PAUSES]
    with fresh_saver(migrated) as writer_saver, fresh_saver(migrated) as maintainer:

        def write() -> None:
            parent = config(thread_id)
            try:
                for i in range(PUTS):
                    if i in PAUSES:
                        rounds_done[PAUSES.index(i)].wait()
                    parent = _put(writer_saver, parent, i)
                last.append(parent)
            except BaseException as error:  # the assertion below reports it
                errors.append(error)

        writer = threading.Thread(target=write)
        writer.start()
        rounds = 0
        try:
            while writer.is_alive():
                maintainer.prune([thread_id], keep_last=2)
                maintainer.sweep(dt.timedelta(0), strategy="keep_latest", keep_last=2)
                if rounds < len(rounds_done):
                    rounds_done[rounds].set()
                rounds += 1
        finally:  # a failed round must not leave the writer waiting for ever
            for done in rounds_done:
                done.set()
            writer.join()
        assert errors == []
        assert rounds >= len(PAUSES)
        tuples = list(writer_saver.list(config(thread_id)))
        _assert_consistent(tuples, last[0])
        assert len(tuples) >= 2


async def test_maintenance_beside_a_live_writer_async(migrated: Backend) -> None:
    thread_id = new_thread()
    rounds_done = [asyncio.Event() for _ in PAUSES]
    async with (
        fresh_async_saver(migrated) as writer_saver,
        fresh_async_saver(migrated) as maintainer,
    ):

        async def write() -> RunnableConfig:
            parent = config(thread_id)
            for i in range(PUTS):
                if i in PAUSES:
                    await rounds_done[PAUSES.index(i)].wait()
                parent = await _aput(writer_saver, parent, i)
            return parent

        writer = asyncio.create_task(write())
        rounds = 0
        try:
            while not writer.done():
                await maintainer.aprune([thread_id], keep_last=2)
                await maintainer.asweep(dt.timedelta(0), strategy="keep_latest", keep_last=2)
                if rounds < len(rounds_done):
                    rounds_done[rounds].set()
                rounds += 1
        finally:
            for done in rounds_done:
                done.set()
        last = await writer  # raises what the writer saw
        assert rounds >= len(PAUSES)
        tuples = [t async for t in writer_saver.alist(config(thread_id))]
        _assert_consistent(tuples, last)


# --- dead pooled connections ----------------------------------------------------------
# What a server restart does to a pool, done the cheap way: the server ends every
# session of the database (PostgreSQL pg_terminate_backend -> AdminShutdown, MariaDB
# KILL -> 2013 Lost connection), exactly the errors a restart gives the next query.
# SQLite has no server and no connection to lose: these tests do not run there.

POOL = 4
SERVERS = pytest.mark.parametrize("backend", ["postgres", "mysql"], indirect=True)


def _count_disconnects(engine: sa.Engine) -> list[int]:
    seen: list[int] = []

    def handle_error(context: sa.engine.ExceptionContext) -> None:
        if context.is_disconnect:
            seen.append(1)

    sa.event.listen(engine, "handle_error", handle_error)
    return seen


def _count_invalidations(engine: sa.Engine) -> list[int]:
    """Dead connections the pool dropped, seen by a pool listener: unlike a
    ``handle_error`` listener, it leaves the savers on their direct path."""
    seen: list[int] = []
    sa.event.listen(engine, "invalidate", lambda *_: seen.append(1))
    return seen


def _count_direct_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    runs: list[int] = []
    real = direct.run

    def spy(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(direct, "run", spy)
    return runs


# Both ways a call runs: through SQLAlchemy Core (a `handle_error` listener counts the
# dead connections, and any connection listener keeps calls on Core), and on the
# pooled DBAPI connection without a Core Connection (lg_sqla.runtime.direct; a pool listener
# counts them, and the test checks the calls did take that path).
PATHS = pytest.mark.parametrize("path", ["core", "direct"])


def _watch(
    engine: sa.Engine, path: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[int], list[int]]:
    """What a path's calls meet: (dead connections seen, direct runs)."""
    if path == "core":
        return _count_disconnects(engine), []
    return _count_invalidations(engine), _count_direct_runs(monkeypatch)


async def _fill_the_pool(engine: sa.Engine | AsyncEngine, mode: str) -> None:
    """POOL connections checked out at once, then returned."""
    connections = [await either(engine, mode).connect() for _ in range(POOL)]
    for connection in connections:
        await either(connection, mode).close()


@SERVERS
@PATHS
async def test_calls_survive_dead_pooled_connections(
    make_engine: EngineFactory,
    backend: Backend,
    mode: str,
    path: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = make_engine.for_mode(mode, backend, pool_size=POOL)
    saver = saver_on(engine)
    thread_id = new_thread()
    stored = await saver.put(config(thread_id), checkpoint({"a": 0}), {}, {"a": 1})
    await _fill_the_pool(engine, mode)
    assert sync_engine(engine).pool.checkedin() == POOL  # type: ignore[attr-defined]
    assert kill_sessions(backend) >= POOL
    disconnects, direct_runs = _watch(sync_engine(engine), path, monkeypatch)
    for i in range(2 * POOL):
        assert await saver.get_tuple(stored) is not None
        stored = await saver.put(stored, checkpoint({"a": i}, {"a": i + 2}), {}, {"a": i + 2})
        await saver.put_writes(stored, [("a", i)], "task-1")
    assert disconnects, "no call met a dead connection: the test proved nothing"
    assert (len(direct_runs) >= 3 * 2 * POOL) is (path == "direct"), "not the path tested"
    latest = await saver.get_tuple(config(thread_id))
    assert latest is not None
    assert latest.checkpoint["channel_values"] == {"a": 2 * POOL - 1}
    assert latest.pending_writes == [("task-1", "a", 2 * POOL - 1)]


@SERVERS
async def test_the_node_cache_survives_dead_pooled_connections(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    engine = make_engine.for_mode(mode, backend, pool_size=POOL)
    cache = cache_on(engine)
    key = (("nœud",), new_thread())
    await cache.set({key: ({"v": 0}, None)})
    await _fill_the_pool(engine, mode)
    assert kill_sessions(backend) >= POOL
    disconnects = _count_disconnects(sync_engine(engine))
    for i in range(2 * POOL):
        assert await cache.get([key]) == {key: {"v": i}}
        await cache.set({key: ({"v": i + 1}, None)})
    assert disconnects, "no call met a dead connection: the test proved nothing"


# --- setup() is quiet -------------------------------------------------------------------


def _noise(records: list[logging.LogRecord], caught: list[warnings.WarningMessage]) -> list[str]:
    messages = [r.getMessage() for r in records] + [str(w.message) for w in caught]
    return [m for m in messages if "ignored for PRIMARY key" in m]


async def test_setup_logs_no_primary_key_name_warning(
    make_engine: EngineFactory,
    fresh_database: Backend,
    mode: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """MariaDB answers a named PRIMARY KEY with "Name 'pk_…' ignored" (a warning
    drivers log or raise as Python warnings); setup() renders no name there."""
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await saver_on(make_engine.for_mode(mode, fresh_database)).setup()
    assert _noise(caplog.records, caught) == []


# --- a retry never re-runs what was committed ------------------------------------------


def _session_id(dbapi_connection: Any) -> int:
    raw = getattr(dbapi_connection, "driver_connection", dbapi_connection)
    info = getattr(raw, "info", None)
    if info is not None and hasattr(info, "backend_pid"):  # psycopg, sync or async
        return int(info.backend_pid)
    return int(raw.thread_id())  # PyMySQL / asyncmy


def _kill(backend: Backend, session: int) -> None:
    engine = backend.engine(poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            if backend.name == "postgres":
                conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": session})
            else:
                conn.exec_driver_sql(f"KILL {session}")
    finally:
        engine.dispose()


def _kill_at(backend: Backend, engine: sa.Engine, after_commit: bool) -> list[str]:
    """End the session under the call at its first statement (``after_commit``: at the
    first statement after its first COMMIT): a real disconnect, as in a restart."""
    state = {"committed": False, "done": False}
    killed: list[str] = []

    def on_commit(conn: Any) -> None:
        state["committed"] = True

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if state["done"] or (after_commit and not state["committed"]):
            return
        state["done"] = True
        _kill(backend, _session_id(conn.connection.dbapi_connection))
        killed.append(statement)

    sa.event.listen(engine, "commit", on_commit)
    sa.event.listen(engine, "before_cursor_execute", before)
    return killed


async def _two_threads(saver: Either[SQLAlchemySaver | AsyncSQLAlchemySaver]) -> list[str]:
    threads = [new_thread(), new_thread()]
    for thread_id in threads:
        parent = config(thread_id)
        for i in range(3):
            parent = await saver.put(parent, checkpoint({"a": i}, {"a": i + 1}), {}, {"a": i + 1})
    return threads


@SERVERS
@pytest.mark.parametrize("after_commit", [False, True], ids=["first-unit", "after-commit"])
async def test_retry_only_before_a_commit(
    make_engine: EngineFactory, backend: Backend, mode: str, after_commit: bool
) -> None:
    """prune([t1, t2]) commits per thread: a dead connection in t1's transaction is
    retried; one in t2's, after t1 was committed, reaches the caller."""
    engine = make_engine.for_mode(mode, backend)
    saver = saver_on(engine)
    threads = await _two_threads(saver)
    killed = _kill_at(backend, sync_engine(engine), after_commit)
    if after_commit:
        with pytest.raises(sa.exc.OperationalError):
            await saver.prune(threads)
    else:
        await saver.prune(threads)
    assert killed
    remaining = [len(await saver.list(config(t))) for t in threads]
    assert remaining == ([1, 3] if after_commit else [1, 1])
