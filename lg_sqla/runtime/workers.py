"""The worker threads that a SQLite file's async calls run in, whole.

``from_conn_string`` on a SQLite file gives the async saver and store a pysqlite
engine of the same file, and each of their calls runs on it in a worker thread: one
thread hop per call, where aiosqlite makes one per DBAPI call. What a hop costs is
then most of what such a call costs over the sync one, and the event loop's default
executor (``asyncio.to_thread``, ``loop.run_in_executor``) made it dear: a
``concurrent.futures`` work item and future, a Python-level semaphore and condition
for its idle threads, and a second future chained to the first across threads
(about 205k instructions per hop, where a small SQLite ``put`` costs 275k; 70k here). A hop here is:

* on the event loop's thread, the call is put on a ``queue.SimpleQueue`` (C) with a
  future of the loop's (:class:`_Outcome`) and the caller's ``contextvars`` context
  (what ``asyncio.to_thread`` gives a call: telemetry's current call follows it);
* an idle thread of this pool takes it, runs it in that context and hands its
  result or exception to the loop with ``loop.call_soon_threadsafe``, which sets
  the future; a call that finds no idle thread starts one, up to as many threads as
  the default executor has (``min(32, os.cpu_count() + 4)``); past that, calls wait
  in the queue for the next free thread.

What does not change:

* **Cancellation**: a thread cannot be interrupted, and until its call ends (its
  transaction committed whole or rolled back) it holds a connection of the pool. So
  a cancelled caller still waits for the call to end before it sees the
  ``CancelledError`` (what ``asyncio.shield`` and a wait did before, without the two
  futures): :class:`_Outcome` refuses ``cancel()``, and asyncio's ``Task.cancel``
  then throws ``CancelledError`` into the task once the future completes, the
  call's own outcome (retrieved) dropped. When a cancelled call returns, nothing of
  it runs on.
* **Deadlocks**: the threads are lg_sqla's own, not the loop's default executor,
  where a graph's sync nodes run (LangGraph); a call never waits for another call
  of this pool (a writer waits for the writer lock's holder, which is running), so
  a bounded pool cannot deadlock.
* **Forks**: a forked child has none of its parent's threads; its pool starts empty
  (``runtime.forks``).

The threads are daemon threads, idle in ``SimpleQueue.get`` between calls: an idle
pool never holds up the interpreter's exit (the default executor's threads are
joined at exit, but every call here is awaited to its end, cancelled or not, so
none is in flight when a loop closes normally).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from lg_sqla.runtime import forks

T = TypeVar("T")

# As many threads as the loop's default executor would have (ThreadPoolExecutor's).
MOST_THREADS = min(32, (os.cpu_count() or 1) + 4)


class _Outcome(asyncio.Future[T]):
    """The outcome of a call in a worker thread, set on the loop when it ended.

    It refuses ``cancel()``: a task cancelled while it awaits one is marked by
    ``Task.cancel`` instead, and sees ``CancelledError`` once this completes, i.e.
    once the thread's call ended (see the module)."""

    def cancel(self, msg: Any = None) -> bool:
        return False


# What a worker thread takes from the queue: the caller's loop, the future it awaits,
# its context, the call.
_Job = tuple[asyncio.AbstractEventLoop, _Outcome[Any], contextvars.Context, Callable[[], Any]]


class _Pool:
    """Worker threads taking calls from one queue (see the module)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        # One entry per thread done with its last call and not given another yet:
        # a deque's append and pop are atomic, so a call takes one without a lock.
        # (Calls queued past the most threads take none, so entries then outnumber the
        # idle threads: harmless, as no thread is started past the most anyway.)
        self._idle: collections.deque[None] = collections.deque()
        self._guard = threading.Lock()  # (the count of threads, when one starts)
        self._threads = 0

    def submit(self, job: _Job) -> None:
        try:
            self._idle.pop()  # an idle thread takes it
        except IndexError:
            self._start_thread()
        self._jobs.put(job)

    def _start_thread(self) -> None:
        """A thread for a call that found none idle (past the most, the next thread
        done takes it). Started before the call is queued: a thread that fails to
        start leaves no call behind it."""
        with self._guard:
            if self._threads >= MOST_THREADS:
                return
            self._threads += 1
        try:
            threading.Thread(target=self._work, name="lg_sqla-worker", daemon=True).start()
        except BaseException:
            with self._guard:
                self._threads -= 1
            raise

    def _work(self) -> None:
        take = self._jobs.get
        while True:
            self._run(take())  # (its frame holds the call's objects: none while idle)

    def _run(self, job: _Job) -> None:
        loop, outcome, context, call = job
        setter: Callable[[Any], None]
        try:
            value = context.run(call)
            setter = outcome.set_result
        except BaseException as error:  # (the caller's to see, whatever it is)
            value, setter = error, outcome.set_exception
        # Idle from now on, before the caller hears of it: its next call, made as soon
        # as it does, finds this thread rather than starting another.
        self._idle.append(None)
        try:
            loop.call_soon_threadsafe(setter, value)
        except RuntimeError:  # the loop is closed: nobody awaits the outcome any more
            return


_POOL = _Pool()


def in_worker_thread(call: Callable[[], T]) -> asyncio.Future[T]:
    """Run ``call()`` in a worker thread of lg_sqla's pool, in the caller's context;
    await what this returns (on the running loop) for its result. A cancelled caller
    sees ``CancelledError`` only once ``call`` ended (see the module)."""
    loop = asyncio.get_running_loop()
    outcome: _Outcome[T] = _Outcome(loop=loop)
    _POOL.submit((loop, outcome, contextvars.copy_context(), call))
    return outcome


def _new_pool_in_child() -> None:
    """A forked child has none of the parent's threads, and the queue's or the guard's
    lock may have been held by one of them."""
    global _POOL
    _POOL = _Pool()


forks.on_fork_in_child(_new_pool_in_child)
