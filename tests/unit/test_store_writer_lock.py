"""The async store's hold on SQLite's in-process writer lock (a thread lock shared
with the sync savers and stores): waiting never blocks the event loop, and a task
cancelled while it waits does not keep the lock."""

from __future__ import annotations

import asyncio
import threading

import pytest

from lg_sqla.runtime.locks import holding as _writer_lock_held


async def test_waiting_for_the_lock_leaves_the_loop_running() -> None:
    lock = threading.Lock()
    lock.acquire()  # a sync writer of another thread holds it
    order: list[str] = []

    async def writer() -> None:
        async with _writer_lock_held(lock):
            order.append("writer")

    async def other_task() -> None:
        order.append("other task")  # runs while the writer waits
        await asyncio.to_thread(lock.release)

    await asyncio.gather(writer(), other_task())
    assert order == ["other task", "writer"]
    assert not lock.locked()  # released after the block


async def test_a_cancelled_waiter_gives_the_lock_back() -> None:
    lock = threading.Lock()
    lock.acquire()
    entered = False

    async def writer() -> None:
        nonlocal entered
        async with _writer_lock_held(lock):
            entered = True

    task = asyncio.create_task(writer())
    await asyncio.sleep(0)  # the task starts waiting (in a worker thread)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    lock.release()
    # The worker thread may take the lock after the cancellation: it hands it back.
    assert await asyncio.to_thread(lock.acquire, True, 30)
    assert not entered
    lock.release()


async def test_an_error_in_the_block_releases_the_lock() -> None:
    lock = threading.Lock()
    with pytest.raises(RuntimeError):
        async with _writer_lock_held(lock):
            assert lock.locked()
            raise RuntimeError("boom")
    assert not lock.locked()
