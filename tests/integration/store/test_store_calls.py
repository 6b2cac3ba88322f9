"""How the stores take their calls: many concurrent async calls gathered into few
batches (as LangGraph's async stores do) in call order, each call's error its own;
a sync method of the async store on its own event loop refused with LangGraph's
``asyncio.InvalidStateError``; non-finite numbers in filters as ``InMemoryStore``
reads them; sqlite-vec loaded on every new engine, whatever its pool's address."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, assert_no_leaked_connections
from langgraph.store.base import IndexConfig
from sqlalchemy.ext.asyncio import create_async_engine
from store_helpers import DIMS, fake_embed, open_store, root

from lg_sqla import InvalidInputError
from lg_sqla.dialects import sqlite_vec_engine_options
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

CONCURRENT_CALLS = 60_000


def _statements(engine: sa.Engine) -> list[str]:
    sent: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *args: sent.append(args[2]))
    return sent


async def test_sixty_thousand_concurrent_calls_share_one_connection(backend: Backend) -> None:
    """60,000 concurrent aput/aget calls on one async store, on a pool of ONE connection
    that times out after 5 s: they complete, in few batches (one connection per call
    exhausted the pool: TimeoutError after 30 s on PostgreSQL and MariaDB)."""
    engine = backend.async_engine(pool_size=1, max_overflow=0, pool_timeout=5)
    try:
        store = AsyncSQLAlchemyStore(engine)
        await store.setup()
        sent = _statements(engine.sync_engine)
        r = root()
        half = CONCURRENT_CALLS // 2
        # The gets come after the puts of their keys: each sees its put (call order).
        calls: list[Coroutine[Any, Any, Any]]
        calls = [store.aput((r, f"u{i % 100}"), f"k{i}", {"n": i}) for i in range(half)]
        calls += [store.aget((r, f"u{i % 100}"), f"k{i}") for i in range(half)]
        results = await asyncio.gather(*calls)
        got = results[half:]
        assert all(item is not None and item.value == {"n": i} for i, item in enumerate(got))
        # 1,000 ops per batch at most: ~60 batches of a few statements, not 60,000.
        assert len(sent) < 600, len(sent)
        assert_no_leaked_connections(engine)
    finally:
        await engine.dispose()


async def test_concurrent_calls_keep_call_order(backend: Backend, mode: str) -> None:
    """Calls made together run as if one after the other: a read sees the writes of the
    calls made before it, not of those made after (the async store, and the sync store's
    async methods, which gather too)."""
    async with open_store(backend, mode, setup=True) as s:
        store = s.store
        r = root()
        await store.aput((r,), "old", {"v": 0})
        results: list[Any] = await asyncio.gather(
            store.aget((r,), "k"),  # before the put: not there yet
            store.aput((r,), "k", {"v": 1}),
            store.aget((r,), "k"),  # after it: there
            store.aput((r,), "k", {"v": 2}),
            store.asearch((r,)),  # sees both items at their latest
            store.adelete((r,), "old"),
            store.aget((r,), "old"),
            store.abatch([]),
        )
        assert results[0] is None
        assert results[2] is not None and results[2].value == {"v": 1}
        assert sorted((i.key, i.value["v"]) for i in results[4]) == [("k", 2), ("old", 0)]
        assert results[6] is None
        assert results[7] == []
        last = await store.aget((r,), "k")
        assert last is not None and last.value == {"v": 2}


async def test_a_cancelled_waiting_call_leaves_the_others(backend: Backend, mode: str) -> None:
    """A call cancelled while it waits for the running batch is not run; the calls
    around it complete, and the store takes calls again afterwards."""
    async with open_store(backend, mode, setup=True) as s:
        store = s.store
        r = root()
        tasks = [asyncio.ensure_future(store.aput((r,), f"k{i}", {"n": i})) for i in range(20)]
        await asyncio.sleep(0)  # every call started: the first runs, the others wait
        tasks[5].cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert isinstance(outcomes[5], asyncio.CancelledError)
        assert all(o is None for i, o in enumerate(outcomes) if i != 5)
        keys = {i.key for i in await store.asearch((r,), limit=100)}
        assert keys == {f"k{i}" for i in range(20)} - {"k5"}


def _embed_refusing(texts: Sequence[str]) -> list[list[float]]:
    if any("refused" in t for t in texts):
        raise ValueError("the embedding service refused a text")
    return fake_embed(texts)


async def test_one_failing_call_fails_alone(backend: Backend, mode: str) -> None:
    """Of concurrent calls, only the one whose input is bad, or whose data fails the batch
    (here its embedding), gets an error; the others' results are as if it were not."""
    index: IndexConfig = {"dims": DIMS, "embed": _embed_refusing, "fields": ["text"]}
    async with open_store(backend, mode, index=index, setup=True) as s:
        store = s.store
        r = root()
        outcomes = await asyncio.gather(
            store.aput((r,), "a", {"text": "one"}),
            store.aput((r,), "b", {"text": "refused"}),  # fails in its batch
            store.aput((r,), "c", {"bad": float("nan")}),  # refused before it waits
            store.aput((r,), "d", {"text": "two"}),
            store.aget((r,), "a"),
            return_exceptions=True,
        )
        assert outcomes[0] is None and outcomes[3] is None
        assert isinstance(outcomes[1], ValueError) and "refused a text" in str(outcomes[1])
        assert isinstance(outcomes[2], InvalidInputError)
        assert outcomes[4] is not None and outcomes[4].value == {"text": "one"}  # type: ignore[union-attr]
        assert sorted(i.key for i in await store.asearch((r,))) == ["a", "d"]


async def test_sync_method_on_the_loop_raises_invalid_state_error(backend: Backend) -> None:
    """On its own event loop the async store's sync methods would block the loop that
    runs them: asyncio.InvalidStateError, as LangGraph's async stores; from a worker
    thread they work."""
    engine = backend.async_engine()
    try:
        store = AsyncSQLAlchemyStore(engine)
        await store.setup()
        r = root()
        await store.aput((r,), "k", {"v": 1})
        for call in (
            lambda: store.get((r,), "k"),
            lambda: store.put((r,), "k", {"v": 2}),
            lambda: store.search((r,)),
            lambda: store.batch([]),
        ):
            with pytest.raises(asyncio.InvalidStateError, match="aget"):
                call()
        item = await asyncio.to_thread(store.get, (r,), "k")
        assert item is not None and item.value == {"v": 1}
        assert_no_leaked_connections(engine)
    finally:
        await engine.dispose()


async def test_non_finite_filter_numbers_as_in_memory_store(backend: Backend, mode: str) -> None:
    """inf, -inf and NaN in a filter are compared as InMemoryStore compares them (Python's
    float), not refused: no stored number is infinite, NaN equals and orders nothing."""
    async with open_store(backend, mode, setup=True) as s:
        r = root()
        for key, score in (("low", -1e308), ("mid", 0.5), ("high", 1e308)):
            await s.put((r,), key, {"score": score})
        await s.put((r,), "text", {"score": "x"})
        inf, nan = math.inf, math.nan
        cases: list[tuple[dict[str, Any], list[str]]] = [
            ({"score": {"$lt": inf}}, ["high", "low", "mid"]),
            ({"score": {"$lte": inf}}, ["high", "low", "mid"]),
            ({"score": {"$gt": -inf}}, ["high", "low", "mid"]),
            ({"score": {"$gt": inf}}, []),
            ({"score": {"$lt": -inf}}, []),
            ({"score": {"$gt": nan}}, []),
            ({"score": {"$lt": nan}}, []),
            ({"score": inf}, []),
            ({"score": {"$eq": nan}}, []),
            ({"score": {"$ne": inf}}, ["high", "low", "mid", "text"]),
            ({"score": {"$ne": nan}}, ["high", "low", "mid", "text"]),
        ]
        for wanted, keys in cases:
            found = await s.search((r,), filter=wanted, limit=10)
            assert sorted(i.key for i in found) == keys, wanted


async def test_sqlite_vec_loads_on_every_new_engine(tmp_path: Path, mode: str) -> None:
    """Engines created and disposed in a loop each load sqlite-vec: whether a pool has the
    loading hook is asked of the pool itself, not of SQLAlchemy's event registry, which
    keys targets by id() and took a new pool at a freed pool's address for one that has
    it (semantic search then failed: no such function: vec_distance_cosine).

    sqlite-vec is SQLite's: a SQLite file of its own, not the backend fixture (whose
    server backends would only skip)."""
    index: IndexConfig = {"dims": DIMS, "embed": fake_embed}
    path = tmp_path / "vec.sqlite"
    url = f"sqlite+aiosqlite:///{path}" if mode == "async" else f"sqlite:///{path}"
    options = sqlite_vec_engine_options(url, {})
    # Before the fix ~1% of new engines were fooled: 500 failed every time (4 of 4).
    for _ in range(500 if mode == "sync" else 100):
        if mode == "sync":
            engine = sa.create_engine(url, **options)
            engine.dispose()  # its pool recreated: the pool the store sees is a new one
            assert SQLAlchemyStore(engine, index=index).native_vectors
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT vec_version()").scalar()
            engine.dispose()
        else:
            async_engine = create_async_engine(url, **options)
            await async_engine.dispose()
            assert AsyncSQLAlchemyStore(async_engine, index=index).native_vectors
            async with async_engine.connect() as aconn:
                assert (await aconn.exec_driver_sql("SELECT vec_version()")).scalar()
            await async_engine.dispose()
