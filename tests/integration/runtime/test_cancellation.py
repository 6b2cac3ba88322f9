"""A cancelled call leaves the saver, the store and the node cache usable.

An async web server cancels a request's task when its client goes away, and
``asyncio.wait_for`` cancels on a timeout: the call's driver may then be anywhere,
before its first statement, midway through one (a query half sent, its results half
read) or inside the COMMIT. Whatever the point, on every async driver (aiosqlite,
psycopg, asyncpg, asyncmy) and on both paths (SQLAlchemy Core and the direct path):

* the cancelled call ends with ``CancelledError`` (or its result, had it finished);
* the next call works: the cancelled connection is invalidated, never handed out
  again as it is (asyncmy's closed socket answered every later call with
  ``InterfaceError: Cancelled during execution`` on main);
* nothing is half written: every stored checkpoint has each of its channels;
* no connection stays checked out (``EngineFactory`` checks again at teardown).

The cancellation points are random: the test cancels after a random number of event
loop iterations, spread over the whole call (each call's length in iterations is
measured first), and, deterministically, as the task enters its n-th driver call
(``faults.Cancels``). What is asserted does not depend on where the cancellation
fell.
"""

from __future__ import annotations

import asyncio
import gc
import random
import sqlite3
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from faults import Cancels
from helpers import DirectRuns, checkpoint, config, new_thread
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import GetOp, PutOp, SearchOp
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from lg_sqla import AsyncSQLAlchemySaver
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.engines import configure_engine, engine_options
from lg_sqla.runtime.drivers import direct_driver
from lg_sqla.store import AsyncSQLAlchemyStore

# (backend, async driver's SQLAlchemy scheme), one per async driver lg_sqla supports.
DRIVERS = [
    pytest.param("sqlite", "sqlite+aiosqlite", id="aiosqlite"),
    pytest.param("postgres", "postgresql+psycopg", id="psycopg"),
    pytest.param("postgres", "postgresql+asyncpg", id="asyncpg"),
    pytest.param("mysql", "mysql+asyncmy", id="asyncmy"),
]
# "user": the engine as a user builds it (the pool rolls back on check-in);
# "lg_sqla": as from_conn_string builds it (no rollback on check-in: a poisoned
# connection goes back to the pool untouched, as in the asyncmy report).
ENGINE_KINDS = ["user", "lg_sqla"]
ROUNDS = 150  # random cancellations per test (x 2 engine kinds x 2 paths per driver)
THREADS = 4
KEYS = 6


def _url(backend: Backend, scheme: str) -> str:
    url = sa.make_url(backend.async_url).set(drivername=scheme)
    return url.render_as_string(hide_password=False)


def _engine(make_engine: EngineFactory, url: str, kind: str, path: str) -> AsyncEngine:
    options = engine_options(url, {}) if kind == "lg_sqla" else {}
    engine = create_async_engine(url, **options)
    if kind == "lg_sqla":
        engine = configure_engine(engine)
    if path == "core":
        engine = engine.execution_options(lg_sqla_direct_path=False)
    return make_engine.track(engine)


def _values(step: int) -> dict[str, Any]:
    """A checkpoint's values, told by its step: two channels stored as blobs."""
    return {"a": [step] * 3, "b": {"step": step, "text": "é" * (step % 7)}}


@dataclass
class World:
    """The saver, store and cache of one engine, and what the test wrote with them."""

    saver: AsyncSQLAlchemySaver
    store: AsyncSQLAlchemyStore
    cache: SQLAlchemyCache[Any]
    rng: random.Random
    threads: list[str] = field(default_factory=lambda: [new_thread() for _ in range(THREADS)])
    latest: dict[str, RunnableConfig] = field(default_factory=dict)
    step: int = 0
    namespace: tuple[str, ...] = field(default_factory=lambda: ("cancel", new_thread()))

    def next_step(self) -> int:
        self.step += 1
        return self.step

    def ops(self) -> dict[str, Callable[[], Awaitable[Any]]]:
        return {
            "aput": self.put,
            "aput_writes": self.put_writes,
            "aget_tuple": lambda: self.saver.aget_tuple(config(self.thread())),
            "alist": self.list,
            "adelete_thread": lambda: self.saver.adelete_thread(self.threads[0]),
            "store.aput": lambda: self.store.aput(self.namespace, self.key(), self.item()),
            "store.aget": lambda: self.store.aget(self.namespace, self.key()),
            "store.asearch": lambda: self.store.asearch(self.namespace[:1], limit=5),
            "store.abatch": self.store_batch,
            "cache.aset": lambda: self.cache.aset({self.cache_key(): (self.item(), None)}),
            "cache.aget": lambda: self.cache.aget([self.cache_key()]),
        }

    def thread(self) -> str:
        return self.rng.choice(self.threads)

    def key(self) -> str:
        return f"k{self.rng.randrange(KEYS)}"

    def item(self) -> dict[str, Any]:
        step = self.next_step()
        return {"step": step, "copy": step}

    def cache_key(self) -> tuple[tuple[str, ...], str]:
        return (("node",), self.key())

    async def put(self) -> None:
        thread_id = self.thread()
        step = self.next_step()
        versions: dict[str, str | int | float] = {"a": step, "b": step}
        parent = self.latest.get(thread_id, config(thread_id))
        stored = await self.saver.aput(
            parent, checkpoint(_values(step), versions), {"step": step}, versions
        )
        self.latest[thread_id] = stored

    async def put_writes(self) -> None:
        thread_id = self.thread()
        target = self.latest.get(thread_id)
        if target is None:
            await self.put()
            return
        step = self.next_step()
        await self.saver.aput_writes(target, [("a", step), ("b", step)], task_id=f"t{step}")

    async def list(self) -> None:
        [t async for t in self.saver.alist(config(self.thread()), limit=5)]

    async def store_batch(self) -> None:
        await self.store.abatch(
            [
                PutOp(self.namespace, self.key(), self.item()),
                PutOp(self.namespace, self.key(), self.item()),
                GetOp(self.namespace, self.key()),
                SearchOp(self.namespace[:1], limit=3),
            ]
        )


async def _loop_iterations(call: Callable[[], Awaitable[Any]]) -> int:
    """How many event loop iterations one uncancelled call takes."""
    task = asyncio.ensure_future(call())
    iterations = 0
    while not task.done():
        await asyncio.sleep(0)
        iterations += 1
    await task
    return iterations


@dataclass
class Tally:
    """What the cancelled calls and the calls after them did."""

    cancelled: int = 0
    finished: int = 0
    # The call after each cancellation, and anything but CancelledError from a
    # cancelled call: each one an error by (op, type), never expected.
    errors: Counter[str] = field(default_factory=Counter)

    def failed(self, op: str, error: BaseException) -> None:
        self.errors[f"{op}: {type(error).__name__}: {str(error).splitlines()[0][:90]}"] += 1


async def _settle(task: asyncio.Future[Any], op: str, tally: Tally) -> None:
    try:
        await task
        tally.finished += 1
    except asyncio.CancelledError:
        tally.cancelled += 1
    except Exception as error:
        tally.failed(f"{op} (cancelled)", error)


async def _then_works(op: str, call: Callable[[], Awaitable[Any]], tally: Tally) -> None:
    try:
        await call()
    except Exception as error:
        tally.failed(op, error)


async def _cancel_randomly(world: World, rounds: int) -> Tally:
    ops = world.ops()
    for call in ops.values():  # the tables and pool warmed up: spans measured hot
        await call()
    spans = {
        name: max([await _loop_iterations(call) for _ in range(3)]) for name, call in ops.items()
    }
    tally = Tally()
    # At least `rounds` rounds, and on until a third of that many calls were really
    # cancelled (bounded): whether a call ends within its random number of loop
    # iterations depends on how fast the server answers, not on the code under test.
    done = 0
    while done < rounds or (tally.cancelled < rounds // 3 and done < 4 * rounds):
        done += 1
        name = world.rng.choice(sorted(ops))
        task = asyncio.ensure_future(ops[name]())
        for _ in range(world.rng.randint(0, spans[name])):
            await asyncio.sleep(0)
        task.cancel()
        await _settle(task, name, tally)
        await _then_works(name, ops[name], tally)
    return tally


async def _cancel_at_each_driver_call(world: World, cancels: Cancels) -> Tally:
    """Each op cancelled as it enters its 1st, 2nd, ... driver call, until one runs
    through without meeting the cancellation."""
    tally = Tally()
    for name, call in world.ops().items():
        for n in range(1, 30):
            cancels.arm(n)
            task = asyncio.ensure_future(call())
            await _settle(task, name, tally)
            reached = cancels.calls >= n
            cancels.arm(0)
            await _then_works(name, call, tally)
            if not reached:
                break
    return tally


async def _assert_complete(world: World) -> None:
    """Every stored checkpoint has each channel of its step, every write its value;
    every store item and the cache hold whole values."""
    checked = 0
    for thread_id in world.threads:
        async for tup in world.saver.alist(config(thread_id)):
            step = tup.metadata["step"]
            assert tup.checkpoint["channel_values"] == _values(step), (thread_id, step)
            for _task, channel, value in tup.pending_writes or []:
                assert channel in ("a", "b") and isinstance(value, int)
            checked += 1
    assert checked > 0, "no checkpoint left to check"
    for item in await world.store.asearch(world.namespace, limit=100):
        assert item.value["step"] == item.value["copy"]


def _checked_out(engine: AsyncEngine) -> int:
    return int(getattr(engine.sync_engine.pool, "checkedout", lambda: 0)())


def _world(engine: AsyncEngine, seed: int) -> World:
    return World(
        AsyncSQLAlchemySaver(engine),
        AsyncSQLAlchemyStore(engine),
        SQLAlchemyCache(engine),
        random.Random(seed),
    )


def _report(tally: Tally) -> str:
    return (
        f"{sum(tally.errors.values())} failed call(s) after {tally.cancelled} cancellations: "
        f"{tally.errors.most_common(5)}"
    )


@pytest.mark.parametrize("path", ["core", "direct"])
@pytest.mark.parametrize("kind", ENGINE_KINDS)
@pytest.mark.parametrize(("backend", "scheme"), DRIVERS, indirect=["backend"])
async def test_random_cancellations_leave_everything_usable(
    make_engine: EngineFactory,
    backend: Backend,
    scheme: str,
    kind: str,
    path: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = _engine(make_engine, _url(backend, scheme), kind, path)
    on_direct = path == "direct" and direct_driver(engine.sync_engine.dialect) is not None
    if path == "direct" and not on_direct:
        pytest.skip(f"{scheme} runs every plan through Core (runtime.drivers)")
    direct_runs = DirectRuns(monkeypatch)
    world = _world(engine, seed=zlib.crc32(f"{scheme} {kind} {path}".encode()))
    tally = await _cancel_randomly(world, ROUNDS)
    assert not tally.errors, _report(tally)
    assert tally.cancelled >= ROUNDS // 3, f"only {tally.cancelled} calls were cancelled"
    assert (direct_runs.count > 0) is on_direct, "not the path under test"
    assert _checked_out(engine) == 0
    await _assert_complete(world)


@pytest.mark.parametrize("path", ["core", "direct"])
@pytest.mark.parametrize(("backend", "scheme"), DRIVERS, indirect=["backend"])
async def test_a_cancellation_at_each_driver_call(
    make_engine: EngineFactory, backend: Backend, scheme: str, path: str
) -> None:
    """Before each statement, inside it, at the COMMIT: the task is cancelled as it
    enters that driver call, and meets the cancellation at the driver's first await."""
    url = _url(backend, scheme)
    engine = _engine(make_engine, url, "lg_sqla", path)
    if path == "direct" and direct_driver(engine.sync_engine.dialect) is None:
        pytest.skip(f"{scheme} runs every plan through Core (runtime.drivers)")
    cancels = Cancels()
    cancels.install(engine.sync_engine)
    world = _world(engine, seed=7)
    tally = await _cancel_at_each_driver_call(world, cancels)
    assert not tally.errors, _report(tally)
    assert tally.cancelled >= len(world.ops())
    assert _checked_out(engine) == 0
    await _assert_complete(world)


def _held_by_a_call(owner: AsyncSQLAlchemySaver | AsyncSQLAlchemyStore) -> int:
    """Connections of the owner's worker-thread engine checked out, other than the
    one it keeps between calls (``runtime.kept``, private)."""
    engine = owner._threaded
    assert engine is not None, "from_conn_string on a SQLite file runs calls in threads"
    kept = sum(k._pooled is not None for k in owner._runtime._kept.values())
    return int(engine.pool.checkedout()) - kept  # type: ignore[attr-defined]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_cancelled_call_in_a_worker_thread_ends_before_it_returns(
    backend: Backend,
) -> None:
    """A SQLite file opened by from_conn_string runs each call in a worker thread,
    which cannot be interrupted: the cancelled caller waits for it, so when the
    CancelledError arrives the call's transaction is over and its connection back."""
    async with (
        AsyncSQLAlchemySaver.from_conn_string(backend.async_url) as saver,
        AsyncSQLAlchemyStore.from_conn_string(backend.async_url) as store,
    ):
        world = World(saver, store, SQLAlchemyCache(saver.engine), random.Random(3))
        ops = world.ops()
        tally = Tally()
        rng = random.Random(11)
        for _ in range(ROUNDS):
            name = rng.choice(sorted(ops))
            task = asyncio.ensure_future(ops[name]())
            for _ in range(rng.randint(0, 8)):
                await asyncio.sleep(0)
            task.cancel()
            await _settle(task, name, tally)
            held = [_held_by_a_call(saver), _held_by_a_call(store)]
            assert held == [0, 0], f"{name}: a cancelled call still holds a connection"
            await _then_works(name, ops[name], tally)
        assert not tally.errors, _report(tally)
        assert tally.cancelled >= ROUNDS // 3
        await _assert_complete(world)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
async def test_a_cancelled_aiosqlite_call_leaves_no_write_lock(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """Cancelled at each driver call of a writer, on Core, the call's connection holds
    no write lock once the CancelledError arrives: another connection takes it at
    once (BEGIN IMMEDIATE, no busy wait). On main, sqlite3 kept the closed connection
    open (sqlite3_close_v2: a statement of it was never finalized) with its write
    transaction, until the garbage collector freed the cursor; collections are off
    here so the check does not depend on when one runs."""
    engine = _engine(make_engine, _url(backend, "sqlite+aiosqlite"), "lg_sqla", "core")
    cancels = Cancels()
    cancels.install(engine.sync_engine)
    world = _world(engine, seed=5)
    ops = world.ops()
    writers = ["aput", "aput_writes", "store.aput", "store.abatch", "cache.aset"]
    for name in writers:
        await ops[name]()  # (tables warmed up; aput_writes has a checkpoint)
    database = sa.make_url(backend.async_url).database
    assert database, "the SQLite backend is a file"
    cancelled = 0
    gc.disable()
    try:
        for name in writers:
            for n in range(1, 30):
                cancels.arm(n)
                task = asyncio.ensure_future(ops[name]())
                try:
                    await task
                except asyncio.CancelledError:
                    cancelled += 1
                reached = cancels.calls >= n
                cancels.arm(0)
                _take_write_lock_at_once(database, f"{name} cancelled at driver call {n}")
                if not reached:
                    break
    finally:
        gc.enable()
    assert cancelled >= len(writers)
    assert _checked_out(engine) == 0


def _take_write_lock_at_once(database: str, when: str) -> None:
    other = sqlite3.connect(database, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    except sqlite3.OperationalError as error:
        raise AssertionError(f"{when}: the write lock is still held ({error})") from error
    finally:
        other.close()
