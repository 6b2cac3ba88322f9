"""Cross-mode calls, as LangGraph's own savers behave.

The async saver's sync methods work from another thread while its loop runs
and refuse (instead of deadlocking) on the loop's own thread; the sync
saver's async methods run in a worker thread and never block the loop.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver


async def test_async_saver_sync_methods_from_another_thread(
    make_engine: EngineFactory, backend: Backend
) -> None:
    engine = make_engine.aio(backend)
    saver = AsyncSQLAlchemySaver(engine)
    thread_id = new_thread()
    results: dict[str, object] = {}

    def worker() -> None:
        stored = saver.put(config(thread_id), checkpoint({"v": [1]}), {"step": 0}, {"v": 1})
        saver.put_writes(stored, [("v", 2)], task_id="t")
        results["tuple"] = saver.get_tuple(stored)
        results["listed"] = list(saver.list(config(thread_id)))
        saver.delete_thread(thread_id)
        results["after"] = saver.get_tuple(config(thread_id))

    t = threading.Thread(target=worker)
    t.start()
    while t.is_alive():  # keep the loop free to serve the worker's calls
        await asyncio.sleep(0.01)
    t.join()
    got = results["tuple"]
    assert got is not None and got.checkpoint["channel_values"] == {"v": [1]}  # type: ignore[attr-defined]
    assert len(results["listed"]) == 1  # type: ignore[arg-type]
    assert results["after"] is None

    with pytest.raises(asyncio.InvalidStateError, match="different thread"):
        saver.get_tuple(config(thread_id))


async def test_sync_saver_async_methods_do_not_block_the_loop(sync_saver: SQLAlchemySaver) -> None:
    thread_id = new_thread()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    try:
        parent = config(thread_id)
        for i in range(20):
            parent = await sync_saver.aput(
                parent, checkpoint({"v": [i]}, {"v": i + 1}), {}, {"v": i + 1}
            )
        listed = [t async for t in sync_saver.alist(config(thread_id))]
    finally:
        task.cancel()
    assert len(listed) == 20
    # The loop kept running while the puts went to the database in a worker thread.
    assert ticks > 5
    # A hang guard, not a speed assertion: a deadlocked worker thread fails here.
    assert await asyncio.wait_for(sync_saver.aget_tuple(config(thread_id)), timeout=60) is not None
