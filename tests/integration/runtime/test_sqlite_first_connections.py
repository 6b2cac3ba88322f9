"""Many first connections to one fresh SQLite file at once: every caller succeeds.

App workers that start together open the same new file at the same moment: each
saver's first connection switches the file to WAL, then ``setup()`` migrates it and
the caller writes. Before the fix about one round in twenty failed with
"database is locked", raised by ``PRAGMA journal_mode=WAL`` in the connect hook
(SQLite answers SQLITE_BUSY at once, without waiting, to a connection that holds a
read lock and asks for the write lock another one holds; see engines.py).

Each test runs ``ROUNDS`` rounds, each on a fresh file, with callers released
together (threads, asyncio tasks, processes), then checks that every caller's
data is in the file.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import threading
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from helpers import checkpoint, config
from sqlalchemy.ext.asyncio import create_async_engine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.engines import configure_engine
from lg_sqla.models import cache_entries, checkpoints, store_items
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

pytestmark = pytest.mark.sqlite

# Rounds per test; LG_SQLA_FIRST_CONNECTION_ROUNDS=200 for a longer hunt. Before the
# fix, a round failed 4-8% of the time with threads or processes (a few rounds in 40),
# about 1% with tasks.
ROUNDS = int(os.environ.get("LG_SQLA_FIRST_CONNECTION_ROUNDS", "40"))
TASK_ROUNDS = max(1, ROUNDS // 2)  # a round of tasks takes twice as long
# Callers per round in the thread and task tests; processes per round below.
CALLERS = 8
PROCESSES = 4
BARRIER_TIMEOUT_S = 120


def _expected(path: Path, threads: list[str], items: list[str], cache_keys: list[str]) -> None:
    """Every checkpoint, store item and cache entry the callers wrote is in the file."""
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:
            found_threads = connection.execute(sa.select(checkpoints.c.thread_id)).scalars().all()
            found_items = connection.execute(sa.select(store_items.c.key)).scalars().all()
            found_cache = connection.execute(sa.select(sa.func.count()).select_from(cache_entries))
            assert sorted(found_threads) == sorted(threads)
            assert sorted(found_items) == sorted(items)
            assert found_cache.scalar_one() == len(cache_keys)
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    finally:
        engine.dispose()


def _put_checkpoint_sync(saver: SQLAlchemySaver, thread_id: str) -> None:
    saver.setup()
    stored = saver.put(config(thread_id), checkpoint({"who": thread_id}), {"step": -1}, {})
    saver.put_writes(stored, [("who", thread_id)], "task-1")
    assert saver.get_tuple(config(thread_id)) is not None


async def _put_checkpoint_async(saver: AsyncSQLAlchemySaver, thread_id: str) -> None:
    await saver.setup()
    stored = await saver.aput(config(thread_id), checkpoint({"who": thread_id}), {"step": -1}, {})
    await saver.aput_writes(stored, [("who", thread_id)], "task-1")
    assert await saver.aget_tuple(config(thread_id)) is not None


# --- threads -------------------------------------------------------------------------


def _thread_round(path: Path) -> list[str]:
    """CALLERS threads: savers and a store by URL, a saver and a node cache on engines
    the caller built (one configured by lg_sqla, one left as SQLAlchemy makes it)."""
    url = f"sqlite:///{path}"
    threads: list[str] = []
    items: list[str] = []
    cache_keys: list[str] = []
    barrier = threading.Barrier(CALLERS, timeout=BARRIER_TIMEOUT_S)
    errors: list[BaseException] = []

    def saver_by_url(start: Callable[[], None]) -> None:
        thread_id = f"t-{uuid.uuid4()}"
        threads.append(thread_id)
        with SQLAlchemySaver.from_conn_string(url) as saver:
            start()
            _put_checkpoint_sync(saver, thread_id)

    def saver_on_plain_engine(start: Callable[[], None]) -> None:
        thread_id = f"t-{uuid.uuid4()}"
        threads.append(thread_id)
        engine = sa.create_engine(url)
        try:
            start()
            _put_checkpoint_sync(SQLAlchemySaver(engine), thread_id)
        finally:
            engine.dispose()

    def store_by_url(start: Callable[[], None]) -> None:
        key = f"k-{uuid.uuid4()}"
        items.append(key)
        with SQLAlchemyStore.from_conn_string(url) as store:
            start()
            store.setup()
            store.put(("first", "connections"), key, {"key": key})
            assert store.get(("first", "connections"), key) is not None

    def cache_on_configured_engine(start: Callable[[], None]) -> None:
        key = f"c-{uuid.uuid4()}"
        cache_keys.append(key)
        engine = configure_engine(sa.create_engine(url))
        try:
            start()
            SQLAlchemySaver(engine).setup()
            cache: SQLAlchemyCache[Any] = SQLAlchemyCache(engine)
            cache.set({(("node",), key): ({"key": key}, None)})
            assert cache.get([(("node",), key)]) == {(("node",), key): {"key": key}}
        finally:
            engine.dispose()

    kinds: list[Callable[[Callable[[], None]], None]] = [
        saver_by_url,
        store_by_url,
        saver_by_url,
        cache_on_configured_engine,
        saver_by_url,
        saver_on_plain_engine,
    ]

    def run(kind: Callable[[Callable[[], None]], None]) -> None:
        waited = False

        def start() -> None:
            nonlocal waited
            waited = True
            barrier.wait()

        try:
            kind(start)
        except BaseException as error:  # reported by the test
            errors.append(error)
        if not waited:  # failed before the start: do not leave the others waiting
            barrier.wait()

    workers = [threading.Thread(target=run, args=(kinds[i % len(kinds)],)) for i in range(CALLERS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        return [_describe(error) for error in errors]
    _expected(path, threads, items, cache_keys)
    return []


def _describe(error: BaseException) -> str:
    """The error's first line, and where in lg_sqla it was raised."""
    message = (str(error).splitlines() or [""])[0][:160]
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "lg_sqla" in f.filename]
    where = f" (in {frames[-1].name}: {frames[-1].line})" if frames else ""
    return f"{type(error).__name__}: {message}{where}"


def _assert_all_rounds_pass(failures: dict[int, list[str]], rounds: int = ROUNDS) -> None:
    assert failures == {}, (
        f"{len(failures)} of {rounds} rounds failed; first failures: "
        f"{dict(list(failures.items())[:3])}"
    )


def test_threads_open_one_fresh_file_at_once(tmp_path: Path) -> None:
    failures = {}
    for r in range(ROUNDS):
        errors = _thread_round(tmp_path / f"threads-{r}.sqlite")
        if errors:
            failures[r] = errors
    _assert_all_rounds_pass(failures)


# --- asyncio tasks -------------------------------------------------------------------


async def _task_round(path: Path) -> list[str]:
    """CALLERS tasks on one loop: async savers by URL (aiosqlite, their calls on a
    pysqlite engine), on user-built aiosqlite engines, and an async store by URL."""
    url = f"sqlite+aiosqlite:///{path}"
    threads: list[str] = []
    items: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        calls = []
        for i in range(CALLERS):
            kind = i % 4
            if kind == 3:
                store = await stack.enter_async_context(AsyncSQLAlchemyStore.from_conn_string(url))
                key = f"k-{uuid.uuid4()}"
                items.append(key)

                async def use_store(store: AsyncSQLAlchemyStore = store, key: str = key) -> None:
                    await store.setup()
                    await store.aput(("first", "connections"), key, {"key": key})
                    assert await store.aget(("first", "connections"), key) is not None

                calls.append(use_store())
                continue
            if kind == 1:
                engine = create_async_engine(url)
                stack.push_async_callback(engine.dispose)
                saver = AsyncSQLAlchemySaver(engine)
            else:
                saver = await stack.enter_async_context(AsyncSQLAlchemySaver.from_conn_string(url))
            thread_id = f"t-{uuid.uuid4()}"
            threads.append(thread_id)
            calls.append(_put_checkpoint_async(saver, thread_id))
        # No connection is open yet: the first ones are made by these calls, at once.
        results = await asyncio.gather(*calls, return_exceptions=True)
    errors = [_describe(r) for r in results if isinstance(r, BaseException)]
    if errors:
        return errors
    _expected(path, threads, items, [])
    return []


async def test_tasks_open_one_fresh_file_at_once(tmp_path: Path) -> None:
    failures = {}
    for r in range(TASK_ROUNDS):
        errors = await _task_round(tmp_path / f"tasks-{r}.sqlite")
        if errors:
            failures[r] = errors
    _assert_all_rounds_pass(failures, TASK_ROUNDS)


# --- processes -----------------------------------------------------------------------


def _process_worker(directory: str, rounds: int, worker: int, barrier: Any, results: Any) -> None:
    """``rounds`` rounds in one spawned process: open the round's file (a sync saver, an
    async saver or a sync store, by worker), wait for the others, then set up and write."""
    outcome: dict[int, tuple[str, str, str | None]] = {}
    for r in range(rounds):
        path = Path(directory) / f"processes-{r}.sqlite"
        ident = f"w{worker}-{uuid.uuid4()}"
        kind = ("saver", "async saver", "store")[worker % 3]
        waited = False

        def start() -> None:
            nonlocal waited
            waited = True
            barrier.wait()

        try:
            if kind == "saver":
                with SQLAlchemySaver.from_conn_string(f"sqlite:///{path}") as saver:
                    start()
                    _put_checkpoint_sync(saver, ident)
            elif kind == "async saver":

                async def use_async_saver(path: Path = path, ident: str = ident) -> None:
                    url = f"sqlite+aiosqlite:///{path}"
                    async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
                        start()  # blocks the loop, on which nothing else runs yet
                        await _put_checkpoint_async(saver, ident)

                asyncio.run(use_async_saver())
            else:
                with SQLAlchemyStore.from_conn_string(f"sqlite:///{path}") as store:
                    start()
                    store.setup()
                    store.put(("first", "connections"), ident, {"key": ident})
            outcome[r] = (kind, ident, None)
        except Exception as error:
            outcome[r] = (kind, ident, _describe(error))
        if not waited:  # failed before the start: do not leave the others waiting
            barrier.wait()
    results.put((worker, outcome))


def _process_rounds(directory: Path, rounds: int, processes: int) -> dict[int, list[str]]:
    """Run ``rounds`` rounds of ``processes`` spawned processes; the failed rounds' errors."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes, timeout=BARRIER_TIMEOUT_S)
    results = context.Queue()
    workers = [
        context.Process(target=_process_worker, args=(str(directory), rounds, w, barrier, results))
        for w in range(processes)
    ]
    for worker in workers:
        worker.start()
    outcomes = dict(results.get(timeout=600) for _ in workers)
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0] * processes
    failures: dict[int, list[str]] = {}
    for r in range(rounds):
        written = [outcome[r] for outcome in outcomes.values()]
        errors = [error for _, _, error in written if error is not None]
        if errors:
            failures[r] = errors
            continue
        _expected(
            directory / f"processes-{r}.sqlite",
            [ident for kind, ident, _ in written if kind != "store"],
            [ident for kind, ident, _ in written if kind == "store"],
            [],
        )
    return failures


def test_processes_open_one_fresh_file_at_once(tmp_path: Path) -> None:
    _assert_all_rounds_pass(_process_rounds(tmp_path, ROUNDS, PROCESSES))
