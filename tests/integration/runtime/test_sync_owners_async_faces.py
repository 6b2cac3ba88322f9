"""The sync saver's, store's and node cache's ``a*`` faces run their call in lg_sqla's worker
threads (``runtime.workers``), as the async owners on a SQLite file do: a cancelled
caller sees ``CancelledError`` only once the call ended, so nothing of it runs on
after the caller was told it was cancelled (``asyncio.to_thread`` told it at once,
while the thread went on and committed)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from helpers import checkpoint, config, new_thread
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from lg_sqla import SQLAlchemySaver
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.store import SQLAlchemyStore


class HeldSerializer(JsonPlusSerializer):
    """Holds the first call that serializes a list (in the worker thread) until
    released."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.release = threading.Event()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if not self.started.is_set() and isinstance(obj, list):
            self.started.set()
            self.release.wait()
        return super().dumps_typed(obj)


class HeldInsert:
    """An engine listener that holds the first INSERT run outside the main thread (a
    worker thread's) until released: the store serializes no value through a serde,
    so its call is held at its statement."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self._main = threading.main_thread()

    def __call__(self, _conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if (
            threading.current_thread() is not self._main
            and not self.started.is_set()
            and statement.lstrip().upper().startswith("INSERT")
        ):
            self.started.set()
            self.release.wait()


async def _cancel_while_held(serde: HeldSerializer | HeldInsert, task: asyncio.Future[Any]) -> bool:
    """Cancel ``task`` while its call is held in its thread, then release the call.
    Whether the task was still waiting for its call after the cancel (it must be)."""
    await asyncio.get_running_loop().run_in_executor(None, serde.started.wait)
    task.cancel()
    for _ in range(20):  # (more loop turns than a CancelledError needs to arrive)
        await asyncio.sleep(0)
    waiting = not task.done()
    serde.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    return waiting


async def test_a_cancelled_sync_saver_aput_ends_before_it_returns(backend: Backend) -> None:
    serde = HeldSerializer()
    engine = backend.engine()
    saver = SQLAlchemySaver(engine, serde=serde)
    try:
        thread = config(new_thread())
        stored = checkpoint({"messages": ["a list: serialized, not inline"]})
        task = asyncio.ensure_future(
            saver.aput(thread, stored, {"source": "input", "step": 0}, {"messages": 1})
        )
        assert await _cancel_while_held(serde, task), "the caller did not wait for its call"
        # The call ended before the caller saw CancelledError: its put is whole, now.
        found = saver.get_tuple(thread)
        assert found is not None and found.checkpoint["id"] == stored["id"]
        assert found.checkpoint["channel_values"] == stored["channel_values"]
        # And the saver serves the next call from the loop.
        again = await saver.aget_tuple(thread)
        assert again is not None and again.checkpoint["id"] == stored["id"]
    finally:
        engine.dispose()


async def test_a_cancelled_sync_cache_aset_ends_before_it_returns(backend: Backend) -> None:
    serde = HeldSerializer()
    engine = backend.engine()
    cache: SQLAlchemyCache[Any] = SQLAlchemyCache(engine, serde=serde)
    try:
        key = (("node",), new_thread())
        task = asyncio.ensure_future(cache.aset({key: (["a", "list"], None)}))
        assert await _cancel_while_held(serde, task), "the caller did not wait for its call"
        assert cache.get([key]) == {key: ["a", "list"]}
    finally:
        engine.dispose()


async def test_a_cancelled_sync_store_aput_ends_before_it_returns(backend: Backend) -> None:
    held = HeldInsert()
    engine = backend.engine()
    sa.event.listen(engine, "before_cursor_execute", held)
    store = SQLAlchemyStore(engine)
    try:
        namespace = ("faces", new_thread())
        task = asyncio.ensure_future(store.aput(namespace, "k", {"v": [1, 2]}))
        assert await _cancel_while_held(held, task), "the caller did not wait for its call"
        # The call ended before the caller saw CancelledError: the item is stored.
        item = store.get(namespace, "k")
        assert item is not None and item.value == {"v": [1, 2]}
        # And the store serves the next call from the loop.
        again = await store.aget(namespace, "k")
        assert again is not None and again.value == {"v": [1, 2]}
    finally:
        sa.event.remove(engine, "before_cursor_execute", held)
        engine.dispose()
