"""The in-process writer lock of databases that let one writer in at a time (SQLite).

SQLite lets one writer in at a time, and a writer that finds the lock taken sleeps
in SQLite's busy handler (1, 2, 5, 10, ... 100 ms steps) before it tries again.
LangGraph writes from two threads at once (the next step's writes while the last
checkpoint is stored), so with durable commits (an fsync each) a turn often waited
on that sleep: 1.8x the official saver's latency, which queues its callers on one
Python lock. Writers of this process queue here instead and are handed the
database at once; other processes still meet at SQLite's lock (busy_timeout).

One lock per database file, shared by every saver, store and node cache of the
process on that file (an in-memory database: one per pool, kept with the pool).
A forked child gets new locks (``runtime.forks``): one a thread of the parent held
at the fork would stay held in the child for good, and every writer would wait.

Writers take it *before* they check out a connection and give the connection back
before they release it, so that a queued writer holds no pooled connection, and the
next writer gets the same connection (and its page cache) back.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import threading
import weakref
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool

from lg_sqla.runtime import forks

if TYPE_CHECKING:
    from lg_sqla.dialects import DialectOps


_LOCKS: dict[str, threading.Lock] = {}
# In-memory databases' by pool (the database lives as long as its pool's connections):
# the pool itself is the key, weakly, so the lock goes with it (an id() would outlive
# it and hand its lock to the next pool at the same address).
_MEMORY_LOCKS: weakref.WeakKeyDictionary[Pool, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()
# Where async writers wait for a taken lock: threads of lg_sqla's own, not the event
# loop's default executor. A graph's sync nodes run there (LangGraph), and with as many
# nodes as it has threads (os.cpu_count() + 4) each waiting for a store call whose
# writer waited there too, nothing ran again. A waiter only waits for a holder, which
# needs no thread of this pool, so a bounded pool cannot deadlock.
_WAITERS = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="lg_sqla-writer-wait")


def writer_lock(dialect_ops: DialectOps, engine: Engine) -> threading.Lock | None:
    """The lock this process's writers of ``engine``'s database take first, or None
    where the database queues writers well (``DialectOps.one_writer_at_a_time``).

    It costs a realpath (syscalls): ``Runtime`` asks once per engine of its owner."""
    if not dialect_ops.one_writer_at_a_time:
        return None
    database = engine.url.database
    if database in (None, "", ":memory:") or engine.url.query.get("mode") == "memory":
        with _LOCKS_GUARD:
            return _MEMORY_LOCKS.setdefault(engine.pool, threading.Lock())
    key = os.path.realpath(database)
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(key, threading.Lock())


@contextlib.asynccontextmanager
async def holding(lock: threading.Lock | None) -> AsyncIterator[None]:
    """Hold a writer lock (a thread lock) from async code.

    The lock is shared with the sync savers and stores of the same file, so it must
    stay a thread lock; blocking on it on the event loop's thread would stall the
    task that holds it (its I/O runs on this loop), so a waiting task waits in a
    worker thread instead. Without the lock, an async writer would poll in SQLite's
    busy handler while the lock's holders hand the database to each other, and could
    starve until busy_timeout: "database is locked".
    """
    if lock is None:
        yield
        return
    if not lock.acquire(blocking=False):
        acquiring = asyncio.get_running_loop().run_in_executor(_WAITERS, lock.acquire)
        try:
            await asyncio.shield(acquiring)
        except asyncio.CancelledError:
            # The worker thread takes the lock anyway: give it back once it has.
            acquiring.add_done_callback(lambda _: lock.release())
            raise
    try:
        yield
    finally:
        lock.release()


def _new_locks_in_child() -> None:
    """A forked child's locks, all free; the parent's waiting threads are not its own."""
    global _LOCKS_GUARD, _WAITERS
    _LOCKS.clear()
    _MEMORY_LOCKS.clear()
    _LOCKS_GUARD = threading.Lock()
    _WAITERS = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="lg_sqla-writer-wait")


forks.on_fork_in_child(_new_locks_in_child)
