"""Concurrent calls of one store on one event loop gathered into few batches.

A fan-out of LangGraph ``Send`` s over a store can make tens of thousands of
``aget`` / ``aput`` calls at once. Run one transaction each, they would wait for pool
connections until the pool's timeout; LangGraph's own async stores
(``AsyncBatchedBaseStore``) instead gather the calls made in one loop tick into one
batch. So do we, with three differences:

* A call that finds the store idle runs at once, without a hop through a queue task
  (sequential calls, the common case, pay nothing). Calls made while a batch runs
  wait, and run together as the next batches, one at a time: at most one connection
  serves them all.
* Call order is kept: a batch reads before it writes (``_plan.py``), so a call that
  reads what an earlier waiting call puts (a get of the same key, or any search or
  namespace list) starts the next batch and sees the put.
* Errors stay the caller's own: bad input is refused before the call waits
  (``check_op``), and a batch that fails on its data (not on the connection) is run
  again one call at a time, so only the failing call's caller sees the error.
  LangGraph fails every call of the batch.
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import sqlalchemy.exc
from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, Result, SearchOp

# A gathered batch holds at most this many ops (one transaction; its statements stay
# small enough for any driver) and this many searches and namespace lists, each of
# which is a subquery of one UNION whose SQL is built per batch shape.
MAX_OPS = 1000
MAX_SCANS = 16

# Errors of the connection or the server rather than of a call's data: rerunning the
# calls one by one would only repeat them, so every call of the batch gets the error.
_NOT_THE_DATA: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError,
    sqlalchemy.exc.InterfaceError,
    sqlalchemy.exc.TimeoutError,
    sqlalchemy.exc.DisconnectionError,
    OSError,
    TimeoutError,
)

RunBatch = Callable[[list[Op]], Awaitable[list[Result]]]


@dataclass
class _Call:
    ops: list[Op]
    future: asyncio.Future[list[Result]]
    puts: set[tuple[tuple[str, ...], str]] = field(default_factory=set)
    gets: set[tuple[tuple[str, ...], str]] = field(default_factory=set)
    scans: int = 0

    @classmethod
    def of(cls, ops: list[Op], future: asyncio.Future[list[Result]]) -> _Call:
        call = cls(ops, future)
        for op in ops:
            if isinstance(op, PutOp):
                call.puts.add((op.namespace, op.key))
            elif isinstance(op, GetOp):
                call.gets.add((op.namespace, op.key))
            elif isinstance(op, (SearchOp, ListNamespacesOp)):
                call.scans += 1
        return call

    def reads_any_of(self, puts: set[tuple[tuple[str, ...], str]]) -> bool:
        """Whether this call may read what ``puts`` write."""
        return bool(puts) and (self.scans > 0 or not self.gets.isdisjoint(puts))


class Gatherer:
    """The calls of one store on one event loop (see the module docstring)."""

    def __init__(self, run: RunBatch) -> None:
        self._run = run
        self._waiting: collections.deque[_Call] = collections.deque()
        self._busy = False
        self._task: asyncio.Task[None] | None = None

    async def submit(self, ops: list[Op]) -> list[Result]:
        """Run ``ops`` (validated) as one unit of a batch; their results."""
        if not self._busy:
            self._busy = True
            try:
                return await self._run(ops)
            finally:
                self._next()
        future: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
        self._waiting.append(_Call.of(ops, future))
        return await future

    def _next(self) -> None:
        """After a batch: the waiting calls run in a task, else the store is idle."""
        if self._waiting:
            self._task = asyncio.get_running_loop().create_task(self._drain())
        else:
            self._busy = False

    async def _drain(self) -> None:
        try:
            while self._waiting:
                await self._run_together(self._take())
        finally:
            # Cancelled (the loop is closing): nobody will run the waiting calls.
            while self._waiting:
                self._waiting.popleft().future.cancel()
            self._busy = False

    def _take(self) -> list[_Call]:
        """The next batch: waiting calls in order, up to one that reads an earlier one's
        puts, or the batch's size limits."""
        calls: list[_Call] = []
        puts: set[tuple[tuple[str, ...], str]] = set()
        ops = scans = 0
        while self._waiting:
            call = self._waiting[0]
            if call.future.done():  # cancelled while waiting
                self._waiting.popleft()
                continue
            if calls and (
                call.reads_any_of(puts)
                or ops + len(call.ops) > MAX_OPS
                or scans + call.scans > MAX_SCANS
            ):
                break
            self._waiting.popleft()
            calls.append(call)
            puts |= call.puts
            ops += len(call.ops)
            scans += call.scans
        return calls

    async def _run_together(self, calls: Sequence[_Call]) -> None:
        if not calls:
            return
        try:
            results = await self._run([op for call in calls for op in call.ops])
        except asyncio.CancelledError:
            for call in calls:  # the loop is closing: nobody will settle them
                call.future.cancel()
            raise
        except Exception as error:
            if len(calls) == 1 or isinstance(error, _NOT_THE_DATA):
                for call in calls:
                    _settle(call, error=error)
                return
            for call in calls:  # each alone: only the failing call's caller sees it
                try:
                    _settle(call, await self._run(call.ops))
                except Exception as own:
                    _settle(call, error=own)
            return
        start = 0
        for call in calls:
            _settle(call, results[start : start + len(call.ops)])
            start += len(call.ops)


def _settle(
    call: _Call, results: list[Result] | None = None, error: BaseException | None = None
) -> None:
    if call.future.done():  # the caller was cancelled
        return
    if error is not None:
        call.future.set_exception(error)
    else:
        call.future.set_result(results or [])


class Gatherers:
    """A store's gatherer per event loop (a store may serve several loops in turn)."""

    def __init__(self, run: RunBatch) -> None:
        self._run = run
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Gatherer] = (
            weakref.WeakKeyDictionary()
        )

    def here(self) -> Gatherer:
        loop = asyncio.get_running_loop()
        gatherer = self._by_loop.get(loop)
        if gatherer is None:
            gatherer = self._by_loop[loop] = Gatherer(self._run)
        return gatherer
