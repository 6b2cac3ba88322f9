"""The background TTL sweepers: one loop shared by the store's and the checkpointer's.

An owner (a store, a saver) gives a sweep function that returns what it removed, for the
debug log; the sweeper calls it every interval until stopped. A failed sweep is logged
and retried at the next interval: it never ends the sweeper. Stopping lets a sweep under
way finish (it deletes whole threads or items, in transactions of its own).

:class:`ThreadSweeper` is for the sync owners (a daemon thread), :class:`TaskSweeper`
for the async ones (a task of the running loop). Imports nothing of lg_sqla's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable

logger = logging.getLogger(__name__)


class ThreadSweeper:
    """``sweep()`` every interval in a daemon thread named ``name``."""

    def __init__(self, name: str, sweep: Callable[[], str]) -> None:
        self._name = name
        self._sweep = sweep
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self, minutes: float) -> concurrent.futures.Future[None]:
        """Start (a no-op while one runs); the future completes when the thread ends."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._thread is not None and self._thread.is_alive():
            done.set_result(None)
            return done
        self._stop.clear()

        def loop() -> None:
            try:
                while not self._stop.wait(minutes * 60):
                    try:
                        logger.debug("TTL sweeper %s removed %s", self._name, self._sweep())
                    except Exception:  # a failed sweep must not end the sweeper
                        logger.exception("TTL sweep failed; retrying at the next interval")
            finally:
                done.set_result(None)

        self._thread = threading.Thread(target=loop, name=self._name, daemon=True)
        self._thread.start()
        return done

    def stop(self, timeout: float | None = None) -> bool:
        """True when the thread ended (or none was running)."""
        if self._thread is None:
            return True
        self._stop.set()
        self._thread.join(timeout)
        stopped = not self._thread.is_alive()
        if stopped:
            self._thread = None
        return stopped


class TaskSweeper:
    """``await sweep()`` every interval in a task named ``name`` of the running loop."""

    def __init__(self, name: str, sweep: Callable[[], Awaitable[str]]) -> None:
        self._name = name
        self._sweep = sweep
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None

    def start(self, minutes: float) -> asyncio.Task[None]:
        """Start (the running task while one runs); call on the loop it is to run on."""
        if self._task is not None and not self._task.done():
            return self._task
        stop = self._stop = asyncio.Event()

        async def loop() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), minutes * 60)
                    return
                except asyncio.TimeoutError:
                    pass
                try:
                    logger.debug("TTL sweeper %s removed %s", self._name, await self._sweep())
                except Exception:  # a failed sweep must not end the sweeper
                    logger.exception("TTL sweep failed; retrying at the next interval")

        self._task = asyncio.create_task(loop(), name=self._name)
        return self._task

    async def stop(self, timeout: float | None = None) -> bool:
        """True when the task ended (or none was running)."""
        if self._task is None:
            return True
        assert self._stop is not None
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except asyncio.TimeoutError:
            return False
        self._task = None
        return True
