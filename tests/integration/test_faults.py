"""Faults a busy or restarted database produces, which callers must never see:
deadlocks between maintenance and a live writer, dead pooled connections."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Iterator

import pytest
from backends import Backend, fresh_async_saver, fresh_saver
from helpers import checkpoint, config, new_thread
from langchain_core.runnables import RunnableConfig

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver

PUTS = 120


@pytest.fixture
def migrated(fresh_database: Backend) -> Iterator[Backend]:
    """A database of its own: sweep visits every thread, so none of other tests'."""
    with fresh_saver(fresh_database) as saver:
        saver.setup()
    yield fresh_database


def _put(saver: SQLAlchemySaver, parent: RunnableConfig, i: int) -> RunnableConfig:
    stored = saver.put(parent, checkpoint({"a": i}, {"a": i}), {"step": i}, {"a": i})
    saver.put_writes(stored, [("a", i + 1)], task_id=f"task-{i}")
    return stored


async def _aput(saver: AsyncSQLAlchemySaver, parent: RunnableConfig, i: int) -> RunnableConfig:
    stored = await saver.aput(parent, checkpoint({"a": i}, {"a": i}), {"step": i}, {"a": i})
    await saver.aput_writes(stored, [("a", i + 1)], task_id=f"task-{i}")
    return stored


def _assert_consistent(tuples: list, last: RunnableConfig) -> None:  # type: ignore[type-arg]
    """The latest checkpoint is the writer's last one, and every kept checkpoint
    still has the blob of each channel it names (prune took nothing in use)."""
    assert tuples, "the writer's thread lost every checkpoint"
    assert (
        tuples[0].config["configurable"]["checkpoint_id"] == (last["configurable"]["checkpoint_id"])
    )
    assert tuples[0].checkpoint["channel_values"] == {"a": PUTS - 1}
    for tup in tuples:
        step = tup.metadata["step"]
        assert tup.checkpoint["channel_values"] == {"a": step}
        assert tup.pending_writes == [(f"task-{step}", "a", step + 1)]


def test_maintenance_beside_a_live_writer_sync(migrated: Backend) -> None:
    """prune and sweep of the thread being written: the writer sees no deadlock."""
    thread_id = new_thread()
    errors: list[BaseException] = []
    last: list[RunnableConfig] = []
    with fresh_saver(migrated) as writer_saver, fresh_saver(migrated) as maintainer:

        def write() -> None:
            parent = config(thread_id)
            try:
                for i in range(PUTS):
                    parent = _put(writer_saver, parent, i)
                last.append(parent)
            except BaseException as error:  # the assertion below reports it
                errors.append(error)

        writer = threading.Thread(target=write)
        writer.start()
        rounds = 0
        while writer.is_alive():
            maintainer.prune([thread_id], keep_last=2)
            maintainer.sweep(dt.timedelta(0), strategy="keep_latest", keep_last=2)
            rounds += 1
        writer.join()
        assert errors == []
        assert rounds > 1
        tuples = list(writer_saver.list(config(thread_id)))
        _assert_consistent(tuples, last[0])
        assert len(tuples) >= 2


async def test_maintenance_beside_a_live_writer_async(migrated: Backend) -> None:
    thread_id = new_thread()
    async with (
        fresh_async_saver(migrated) as writer_saver,
        fresh_async_saver(migrated) as maintainer,
    ):

        async def write() -> RunnableConfig:
            parent = config(thread_id)
            for i in range(PUTS):
                parent = await _aput(writer_saver, parent, i)
            return parent

        writer = asyncio.create_task(write())
        rounds = 0
        while not writer.done():
            await maintainer.aprune([thread_id], keep_last=2)
            await maintainer.asweep(dt.timedelta(0), strategy="keep_latest", keep_last=2)
            rounds += 1
        last = await writer  # raises what the writer saw
        assert rounds > 1
        tuples = [t async for t in writer_saver.alist(config(thread_id))]
        _assert_consistent(tuples, last)
