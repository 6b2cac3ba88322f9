# mypy: disable-error-code="override"
"""Graph writers for the cluster tests (failover, Galera): sync threads and async
tasks running LangGraph chat turns on one URL until stopped, recording what the
savers acknowledged and every error that reached them (the application)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import sqlalchemy as sa
from graph_helpers import build_chat_graph, expected_chat, summarize
from helpers import config, new_thread
from langchain_core.messages import HumanMessage

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver

SYNC_WRITERS = 3
ASYNC_WRITERS = 2
TURNS_PER_THREAD = 3
PROGRESS_TIMEOUT_S = 120.0


@dataclass
class Acknowledged:
    """What the savers returned from without an error, and what reached the app."""

    puts: list[Any] = field(default_factory=list)
    writes: list[tuple[Any, str, int]] = field(default_factory=list)  # config, task, count
    errors: list[BaseException] = field(default_factory=list)
    turns: dict[str, int] = field(default_factory=dict)  # thread -> turns completed


class RecordingSaver(SQLAlchemySaver):
    acknowledged: Acknowledged

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = super().put(config, checkpoint, metadata, new_versions)
        self.acknowledged.puts.append(stored)
        return stored

    def put_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        super().put_writes(config, writes, task_id, task_path)
        self.acknowledged.writes.append((config, task_id, len(writes)))


class AsyncRecordingSaver(AsyncSQLAlchemySaver):
    acknowledged: Acknowledged

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        stored = await super().aput(config, checkpoint, metadata, new_versions)
        self.acknowledged.puts.append(stored)
        return stored

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await super().aput_writes(config, writes, task_id, task_path)
        self.acknowledged.writes.append((config, task_id, len(writes)))


# --------------------------------------------------------------------------- writers


class Writers:
    """SYNC_WRITERS threads and ASYNC_WRITERS tasks (on a loop of their own), each
    running chat turns on thread after thread until stopped."""

    def __init__(self, url: str, acknowledged: Acknowledged, **options: Any) -> None:
        self.url = url
        self.options = options  # the savers' (reconnect_window)
        self.acknowledged = acknowledged
        self.stop = threading.Event()
        self.progress = [0] * (SYNC_WRITERS + ASYNC_WRITERS)
        self.ready = threading.Barrier(SYNC_WRITERS + 2)  # sync writers, async loop, caller
        self._threads = [
            threading.Thread(target=self._sync_writers, args=(w,)) for w in range(SYNC_WRITERS)
        ]
        self._threads.append(threading.Thread(target=asyncio.run, args=(self._async_writers(),)))

    def _turn_done(self, writer: int, thread_id: str) -> None:
        self.acknowledged.turns[thread_id] = self.acknowledged.turns.get(thread_id, 0) + 1
        self.progress[writer] += 1

    def _sync_writers(self, writer: int) -> None:
        # One saver per writer here (one pool each), as separate processes would have.
        with RecordingSaver.from_conn_string(self.url, **self.options) as opened:
            saver = cast(RecordingSaver, opened)
            saver.acknowledged = self.acknowledged
            graph = build_chat_graph().compile(checkpointer=saver)
            self.ready.wait()
            while not self.stop.is_set():
                thread_id = f"sync-{writer}-{new_thread()}"
                for turn in range(TURNS_PER_THREAD):
                    try:
                        graph.invoke(
                            {"messages": [HumanMessage(f"turn {turn}")]},
                            {"configurable": {"thread_id": thread_id}},
                        )
                    except Exception as error:  # what reaches the application: counted
                        self.acknowledged.errors.append(error)
                        break
                    self._turn_done(writer, thread_id)

    async def _async_writers(self) -> None:
        async with AsyncRecordingSaver.from_conn_string(self.url, **self.options) as opened:
            saver = cast(AsyncRecordingSaver, opened)
            saver.acknowledged = self.acknowledged
            graph = build_chat_graph().compile(checkpointer=saver)

            async def writer(index: int) -> None:
                while not self.stop.is_set():
                    thread_id = f"async-{index}-{new_thread()}"
                    for turn in range(TURNS_PER_THREAD):
                        try:
                            await graph.ainvoke(
                                {"messages": [HumanMessage(f"turn {turn}")]},
                                {"configurable": {"thread_id": thread_id}},
                            )
                        except Exception as error:
                            self.acknowledged.errors.append(error)
                            break
                        self._turn_done(index, thread_id)

            await asyncio.to_thread(self.ready.wait)
            await asyncio.gather(*(writer(SYNC_WRITERS + i) for i in range(ASYNC_WRITERS)))

    def __enter__(self) -> Writers:
        for t in self._threads:
            t.start()
        self.ready.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join()

    def wait_for_turns(self, turns: int, what: str, *, errors_allowed: bool = False) -> None:
        """Until every writer finished ``turns`` more graph turns (a condition polled
        against a deadline, never a pause standing in for one)."""
        target = [done + turns for done in self.progress]
        wait_until(
            lambda: all(done >= goal for done, goal in zip(self.progress, target, strict=True)),
            f"{what}: every writer {turns} more turns",
            lambda: None if errors_allowed else self.acknowledged.errors[:3] or None,
        )


def wait_until(
    condition: Any, what: str, failure: Any = lambda: None, timeout: float = PROGRESS_TIMEOUT_S
) -> None:
    """Poll ``condition`` until it holds; fail on ``failure()`` or at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        if (found := failure()) is not None:
            raise AssertionError(f"{what}: {found}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.02)


class WaitsSeen(logging.Handler):
    """Counts the runtime's reconnect-window lines: calls waiting for the database."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1

    def __enter__(self) -> WaitsSeen:
        retry_logger = logging.getLogger("lg_sqla.runtime.retry")
        self._level = retry_logger.level
        retry_logger.setLevel(logging.INFO)
        retry_logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        retry_logger = logging.getLogger("lg_sqla.runtime.retry")
        retry_logger.removeHandler(self)
        retry_logger.setLevel(self._level)


def check_everything_is_there(
    url: str, acknowledged: Acknowledged, *, partial_threads: bool = False
) -> None:
    """Every acknowledged put and put_writes, read on the primary of now; and each
    thread's state is its turns (``partial_threads``: a thread whose turn failed may
    hold that turn's input too, which the application would run again)."""
    with SQLAlchemySaver.from_conn_string(url) as saver:
        for stored in acknowledged.puts:
            assert saver.get_tuple(stored) is not None, f"acknowledged put lost: {stored}"
        # Writes are counted in their table: LangGraph may store a step's writes
        # against a checkpoint whose put then failed (an error the application saw).
        stored_writes = sa.text(
            "SELECT count(*) FROM checkpoint_writes WHERE thread_id = :thread "
            "AND checkpoint_id = :checkpoint AND task_id = :task"
        )
        with saver.engine.connect() as connection:
            for stored, task_id, count in acknowledged.writes:
                key = stored["configurable"]
                found = connection.execute(
                    stored_writes,
                    {
                        "thread": key["thread_id"],
                        "checkpoint": key["checkpoint_id"],
                        "task": task_id,
                    },
                ).scalar_one()
                assert found == count, f"acknowledged writes of {task_id} lost: {stored}"
        for thread_id, turns in acknowledged.turns.items():
            state = saver.get_tuple(config(thread_id))
            assert state is not None
            messages = summarize(state.checkpoint["channel_values"]["messages"])
            expected = expected_chat(*(f"turn {t}" for t in range(turns)))
            if partial_threads:
                messages = messages[: len(expected)]
            assert messages == expected
