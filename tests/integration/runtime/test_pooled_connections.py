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
from backends import Backend, fresh_saver
from helpers import checkpoint, config, new_thread
from modes import saver_from_url

from lg_sqla import InvalidInputError


def _stored(backend: Backend, thread_id: str) -> None:
    with fresh_saver(backend) as saver:
        saver.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})


def _deleted(backend: Backend, thread_id: str) -> None:
    with fresh_saver(backend) as saver:
        saver.delete_thread(thread_id)


async def test_failed_call_leaves_the_pooled_connection_clean(backend: Backend, mode: str) -> None:
    source, target = new_thread(), new_thread()
    url = backend.async_url if mode == "async" else backend.sync_url
    async with saver_from_url(mode, url, pool_size=1, max_overflow=0) as saver:
        await saver.put(config(source), checkpoint({"v": 1}), {}, {"v": 1})
        await saver.put(config(target), checkpoint({"v": 2}), {}, {"v": 1})
        assert await saver.get_tuple(config(source)) is not None  # a read: a snapshot, if any
        with pytest.raises(InvalidInputError, match="already has"):
            await saver.copy_thread(source, target)
        _deleted(backend, source)
        assert await saver.get_tuple(config(source)) is None
        later = new_thread()
        _stored(backend, later)
        assert await saver.get_tuple(config(later)) is not None
