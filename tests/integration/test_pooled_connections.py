"""A pooled connection comes back clean after every call, even a failed one.

Engines made by ``from_conn_string`` skip the pool's rollback-on-return (each call
ends its own transaction). These tests hold what that must not break: on a pool of
ONE connection, after a call that failed inside its transaction (``copy_thread`` has
already read when it refuses a target), the next calls see what another engine
committed meanwhile, so no transaction (and no stale snapshot: MariaDB reads at
REPEATABLE READ, SQLite WAL readers keep theirs) was left open on the connection.
Every dialect, sync and async.
"""

from __future__ import annotations

import pytest
from backends import Backend
from helpers import checkpoint, config, new_thread

from lg_sqla import AsyncSQLAlchemySaver, InvalidInputError, SQLAlchemySaver


def _stored(backend: Backend, thread_id: str) -> None:
    engine = backend.engine()
    try:
        SQLAlchemySaver(engine).put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
    finally:
        engine.dispose()


def _deleted(backend: Backend, thread_id: str) -> None:
    engine = backend.engine()
    try:
        SQLAlchemySaver(engine).delete_thread(thread_id)
    finally:
        engine.dispose()


def test_failed_call_leaves_the_pooled_connection_clean_sync(backend: Backend) -> None:
    source, target = new_thread(), new_thread()
    with SQLAlchemySaver.from_conn_string(backend.sync_url, pool_size=1, max_overflow=0) as saver:
        saver.put(config(source), checkpoint({"v": 1}), {}, {"v": 1})
        saver.put(config(target), checkpoint({"v": 2}), {}, {"v": 1})
        assert saver.get_tuple(config(source)) is not None  # a read: a snapshot, if any
        with pytest.raises(InvalidInputError, match="already has"):
            saver.copy_thread(source, target)
        _deleted(backend, source)
        assert saver.get_tuple(config(source)) is None
        later = new_thread()
        _stored(backend, later)
        assert saver.get_tuple(config(later)) is not None


async def test_failed_call_leaves_the_pooled_connection_clean_async(backend: Backend) -> None:
    source, target = new_thread(), new_thread()
    async with AsyncSQLAlchemySaver.from_conn_string(
        backend.async_url, pool_size=1, max_overflow=0
    ) as saver:
        await saver.aput(config(source), checkpoint({"v": 1}), {}, {"v": 1})
        await saver.aput(config(target), checkpoint({"v": 2}), {}, {"v": 1})
        assert await saver.aget_tuple(config(source)) is not None
        with pytest.raises(InvalidInputError, match="already has"):
            await saver.acopy_thread(source, target)
        _deleted(backend, source)
        assert await saver.aget_tuple(config(source)) is None
        later = new_thread()
        _stored(backend, later)
        assert await saver.aget_tuple(config(later)) is not None
