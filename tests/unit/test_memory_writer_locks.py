"""The writer lock of an in-memory SQLite database belongs to its pool, and goes with it.

It was keyed by the pool's ``id()`` in a process-wide dict: never removed, so one
entry per in-memory engine ever made, and a new pool at a freed address got the old
pool's lock (a writer of one database could then wait on, or deadlock with, a writer
of an unrelated one)."""

from __future__ import annotations

import gc
import weakref

import sqlalchemy as sa

from lg_sqla.dialects import ops_for
from lg_sqla.runtime import locks


def test_each_in_memory_database_has_a_lock_of_its_own_that_goes_with_its_pool() -> None:
    gc.collect()
    known = len(locks._MEMORY_LOCKS)
    first, second = sa.create_engine("sqlite://"), sa.create_engine("sqlite://")
    ops = ops_for(first.dialect)
    lock = locks.writer_lock(ops, first)
    assert lock is not None
    assert locks.writer_lock(ops, first) is lock  # the same database: the same lock
    assert locks.writer_lock(ops, second) is not lock

    old_pool = weakref.ref(first.pool)
    first.dispose()  # a new pool: a new (empty) in-memory database
    assert locks.writer_lock(ops, first) is not lock
    gc.collect()
    assert old_pool() is None
    assert len(locks._MEMORY_LOCKS) == known + 2  # first's new pool, second's

    del first, second
    gc.collect()
    assert len(locks._MEMORY_LOCKS) == known
