"""The worker threads a SQLite file's async calls run in (``runtime.workers``).

What the async saver and store rely on: a call's result or exception comes back to
its caller, in the caller's context; concurrent calls run at once (one slow call
does not hold up the others); and a cancelled caller sees ``CancelledError`` only
once its call has ended, never while the call still holds a connection. Each wait
on a thread has a deadline that fails loudly: a hang guard, not a timing assertion.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from lg_sqla.runtime.workers import MOST_THREADS, in_worker_thread

DEADLINE = 60.0
_caller = contextvars.ContextVar("caller", default="none")


async def test_a_call_returns_its_result_in_the_callers_context() -> None:
    _caller.set("the test")
    assert await in_worker_thread(_caller.get) == "the test"
    assert await in_worker_thread(lambda: threading.current_thread().name) == "lg_sqla-worker"


async def test_a_calls_exception_is_raised_to_its_caller() -> None:
    def fails() -> None:
        raise LookupError("from the worker")

    with pytest.raises(LookupError, match="from the worker"):
        await in_worker_thread(fails)
    assert await in_worker_thread(lambda: 7) == 7  # the thread serves the next call


async def test_concurrent_calls_run_at_once() -> None:
    """Each call waits until all of them are running: one thread for all would never
    get past the first."""
    count = min(4, MOST_THREADS)
    all_running = threading.Barrier(count, timeout=DEADLINE)
    results = await asyncio.gather(*(in_worker_thread(all_running.wait) for _ in range(count)))
    assert sorted(results) == list(range(count))


async def test_a_cancelled_caller_waits_for_its_call_to_end() -> None:
    started, release = threading.Event(), threading.Event()
    ended: list[str] = []

    def blocking() -> str:
        started.set()
        assert release.wait(DEADLINE), "the test never let the call end"
        ended.append("ended")
        return "its result"

    async def caller() -> str:
        return await in_worker_thread(blocking)

    task = asyncio.ensure_future(caller())
    assert await asyncio.to_thread(started.wait, DEADLINE)
    task.cancel()
    for _ in range(20):  # loop iterations, not time: the task must stay pending
        await asyncio.sleep(0)
    assert not task.done(), "the caller returned while its call still ran"
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended == ["ended"]
    assert task.cancelled()


async def test_a_cancelled_caller_whose_call_failed_sees_the_cancellation() -> None:
    started, release = threading.Event(), threading.Event()

    def failing() -> None:
        started.set()
        assert release.wait(DEADLINE), "the test never let the call end"
        raise LookupError("outcome dropped: the caller was cancelled")

    async def caller() -> None:
        await in_worker_thread(failing)

    task = asyncio.ensure_future(caller())
    assert await asyncio.to_thread(started.wait, DEADLINE)
    task.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await in_worker_thread(lambda: "next") == "next"
