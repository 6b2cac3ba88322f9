"""Sessions the server ends (``pg_terminate_backend``, ``KILL CONNECTION``, a
restart) leave the checkpointer and the store usable, on every server driver.

Each test builds the engine as a user does, on one driver of test_drivers.py, and
runs the store's batches (several puts: executemany, which psycopg runs in pipeline
mode) beside the checkpointer's puts, writes and reads on it:

* sessions killed *between* calls: the next calls all work (the dead connection is
  invalidated and the call retried once on a new one);
* sessions killed *during* calls, over and over from another thread: calls may fail
  while it goes on; once it stops, 50 of 50 rounds work;
* psycopg's libpq left in pipeline mode on a connection whose session died mid-send
  (the reported ``cannot exit pipeline mode while busy``, after which every BEGIN
  failed on the client): invalidated at its first failure, never handed out again.

SQLite has no server to end a session: its drivers are not here (cancellation of
aiosqlite calls: test_cancellation.py).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from faults import kill_sessions
from helpers import checkpoint, config, new_thread
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import GetOp, PutOp, SearchOp
from modes import Either, saver_on, store_on, sync_engine
from sqlalchemy.ext.asyncio import create_async_engine
from test_drivers import DRIVERS, Driver

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

SERVER_DRIVERS = [
    pytest.param(driver.dialect, driver, id=driver.name)
    for driver in DRIVERS
    if driver.dialect != "sqlite"
]
AFTER = 50  # rounds that must all work once the kills stopped
ROUNDS_DURING = 40
POOL = 3


class Calls:
    """A store and a saver on one engine, and the rounds of calls the test makes."""

    def __init__(self, engine: Any, *, search: bool = True) -> None:
        self.saver: Either[SQLAlchemySaver | AsyncSQLAlchemySaver] = saver_on(engine)
        self.store: Either[SQLAlchemyStore | AsyncSQLAlchemyStore] = store_on(engine)
        self.thread_id = new_thread()
        self.namespace = ("killed", new_thread())
        self.latest: RunnableConfig = config(self.thread_id)
        self.step = 0
        self.errors: Counter[str] = Counter()
        # A store batch with a search runs on Core; without, on the direct path.
        self.search = search

    async def round(self) -> int:
        """A store batch, a put, its writes and a read; how many of the 4 calls failed."""
        self.step += 1
        step = self.step
        ops = [PutOp(self.namespace, f"k{i}", {"step": step, "i": i}) for i in range(5)]
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: self.store.batch(
                [*ops, GetOp(self.namespace, "k1")]
                + ([SearchOp(self.namespace, limit=3)] if self.search else [])
            ),
            self._put,
            lambda: self.saver.put_writes(self.latest, [("a", step), ("b", step)], f"t{step}"),
            lambda: self.saver.get_tuple(config(self.thread_id)),
        ]
        failed = 0
        for name, call in zip(
            ("store.batch", "put", "put_writes", "get_tuple"), calls, strict=True
        ):
            try:
                await call()
            except Exception as error:
                failed += 1
                self.errors[
                    f"{name}: {type(error).__name__}: {str(error).splitlines()[0][:80]}"
                ] += 1
        return failed

    async def _put(self) -> None:
        step = self.step
        versions = {"a": step, "b": step}
        values = {"a": [step] * 3, "b": {"step": step}}
        self.latest = await self.saver.put(
            self.latest, checkpoint(values, versions), {"step": step}, versions
        )

    async def assert_complete(self) -> None:
        """Every checkpoint kept has each of its channels (nothing half written)."""
        tuples = await self.saver.list(config(self.thread_id))
        assert tuples
        for tup in tuples:
            step = tup.metadata["step"]
            assert tup.checkpoint["channel_values"] == {"a": [step] * 3, "b": {"step": step}}


def _user_engine(make_engine: EngineFactory, driver: Driver, backend: Backend) -> Any:
    url = driver.url(backend)
    engine = (
        create_async_engine(url, pool_size=POOL, pool_timeout=5)
        if driver.is_async
        else sa.create_engine(url, pool_size=POOL, pool_timeout=5)
    )
    return make_engine.track(engine)


@asynccontextmanager
async def _calls(
    make_engine: EngineFactory, driver: Driver, backend: Backend
) -> AsyncIterator[Calls]:
    engine = _user_engine(make_engine, driver, backend)
    calls = Calls(engine)
    await calls.saver.setup()
    await calls.store.setup()
    yield calls


@pytest.mark.parametrize(("backend", "driver"), SERVER_DRIVERS, indirect=["backend"])
async def test_sessions_killed_between_calls(
    make_engine: EngineFactory, fresh_database: Backend, driver: Driver
) -> None:
    async with _calls(make_engine, driver, fresh_database) as calls:
        failed = 0
        for _ in range(10):
            await calls.round()  # the pool's connections opened, then all killed
            assert kill_sessions(fresh_database) >= 1
            failed += await calls.round()
        assert failed == 0, dict(calls.errors)
        await calls.assert_complete()


class Killer:
    """Ends every session of the database, again and again, from a thread of its own."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._stop = threading.Event()
        self.kills = 0
        self._thread = threading.Thread(target=self._run, name="killer")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.kills += kill_sessions(self._backend)

    def __enter__(self) -> Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.parametrize(("backend", "driver"), SERVER_DRIVERS, indirect=["backend"])
async def test_sessions_killed_during_calls(
    make_engine: EngineFactory, fresh_database: Backend, driver: Driver
) -> None:
    async with _calls(make_engine, driver, fresh_database) as calls:
        pool = sync_engine(calls.saver.target.engine).pool
        with Killer(fresh_database) as killer:
            for _ in range(ROUNDS_DURING):
                await calls.round()
                # (the calls run one at a time: none may hold a connection after it)
                assert pool.checkedout() == 0, (pool.status(), dict(calls.errors))  # type: ignore[attr-defined]
        assert killer.kills > 0
        during = sum(calls.errors.values())
        calls.errors.clear()
        failed = [await calls.round() for _ in range(AFTER)]
        assert sum(failed) == 0, (
            f"{sum(1 for f in failed if f)} of {AFTER} rounds failed after the kills "
            f"({during} failures during them): {calls.errors.most_common(4)}"
        )
        await calls.assert_complete()
        assert pool.checkedout() == 0  # type: ignore[attr-defined]


def _stuck_in_pipeline_mode(engine: sa.Engine, backend: Backend) -> None:
    """Leave one pooled psycopg connection as a session killed mid-pipeline leaves it:
    libpq in pipeline mode with a query sent, its session ended by the server, and
    psycopg outside any pipeline with the connection's status still OK (it has not
    read the closed socket); then back in the pool. From there every BEGIN and
    ROLLBACK fails on the client: "PQsendQuery not allowed in pipeline mode"."""
    pooled = engine.raw_connection()
    try:
        psycopg_connection: Any = pooled.dbapi_connection
        pid = psycopg_connection.info.backend_pid
        pgconn = psycopg_connection.pgconn
        pgconn.enter_pipeline_mode()
        pgconn.send_query_params(b"SELECT 1", None)
        _terminate(backend, pid)
        assert psycopg_connection._pipeline is None and not psycopg_connection.broken
    finally:
        pooled.close()


def _terminate(backend: Backend, pid: int) -> None:
    """pg_terminate_backend, then wait until the server has ended the session."""
    admin = backend.engine(poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as conn:
            assert conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
            alive = sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p")
            while conn.execute(alive, {"p": pid}).scalar():
                conn.rollback()  # (a new snapshot of pg_stat_activity)
    finally:
        admin.dispose()


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
@pytest.mark.parametrize("reset", ["rollback", None], ids=["user-engine", "no-reset"])
async def test_a_psycopg_connection_stuck_in_pipeline_mode_is_dropped(
    make_engine: EngineFactory, backend: Backend, reset: str | None
) -> None:
    """``reset``: the pool's reset on check-in, SQLAlchemy's default (a rollback) or
    none (``from_conn_string``'s engines)."""
    engine = make_engine(backend, pool_size=1, max_overflow=0, pool_reset_on_return=reset)
    calls = Calls(engine, search=False)  # (every call on the direct path)
    await calls.round()
    _stuck_in_pipeline_mode(engine, backend)
    failed = [await calls.round() for _ in range(AFTER)]
    assert sum(failed) == 0, (
        f"{sum(1 for f in failed if f)} of {AFTER} rounds failed: {calls.errors.most_common(4)}"
    )
    await calls.assert_complete()
