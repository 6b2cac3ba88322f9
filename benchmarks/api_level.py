"""Saver API level: the graph's own saver calls replayed, then reads, tiny calls, workers.

1. Replay: the ``put`` / ``put_writes`` calls LangGraph made for the graph workload
   (recorded once, see ``workload.record``), each timed; throughput = calls / time in
   those calls.
2. Reads on that data: ``get_tuple`` of each thread's latest checkpoint, ``get_tuple``
   of every checkpoint of one thread by id, and the whole of one thread's ``list``.
3. Per-call overhead: ``put`` and ``get_tuple`` of a tiny checkpoint (one short
   message), where the saver's own cost is all there is to measure.
   Then the bytes the database spends on all its tables, per checkpoint replayed.
4. Workers sharing one saver (threads for sync, asyncio tasks for async): each replays
   one thread's calls under its own thread id, reading the latest checkpoint after
   every ``put``; calls/s with 1 worker and with ``shape.workers``, and their ratio.

Besides the wall clock, the replay and the latest-checkpoint reads record the client CPU
each call costs (``*_cpu_us``, mean per call): Python that competes with the graph's own
for the GIL. Sync: the calling thread's CPU (``time.thread_time``). Async: the whole
process's (``time.process_time``): the event loop's thread and the worker threads that
aiosqlite and lg_sqla's threaded SQLite path run calls in; nothing else runs meanwhile.

Argument copies are made before the clock starts: every saver gets objects of its own.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from .workload import Recording, Shape, config, retarget

METRICS = {
    "put_per_s": ("put", "calls/s", True),
    "put_writes_per_s": ("put_writes", "calls/s", True),
    "get_latest_ms": ("get_tuple (latest)", "ms", False),
    "get_by_id_ms": ("get_tuple (by id)", "ms", False),
    "list_ms": ("list (whole thread)", "ms", False),
    "put_cpu_us": ("put", "µs CPU", False),
    "put_writes_cpu_us": ("put_writes", "µs CPU", False),
    "get_cpu_us": ("get_tuple (latest)", "µs CPU", False),
    "tiny_put_us": ("put, tiny state", "µs", False),
    "tiny_get_us": ("get_tuple, tiny state", "µs", False),
    "storage_per_checkpoint": ("storage / checkpoint", "bytes", False),
    "calls_1_per_s": ("1 worker", "calls/s", True),
    "calls_n_per_s": ("N workers", "calls/s", True),
    "scaling": ("scaling 1 → N workers", "×", True),
}

Calls = list[tuple[str, tuple[Any, ...]]]


def _copies(recording: Recording, suffix: str) -> dict[str, Calls]:
    return {
        f"{thread}{suffix}": [(kind, retarget(args, f"{thread}{suffix}")) for kind, args in calls]
        for thread, calls in recording.threads.items()
    }


def _warm_up(recording: Recording) -> Calls:
    """The first calls of one thread, under a thread id of their own."""
    first = next(iter(recording.threads.values()))
    return [(kind, retarget(args, "warm-up")) for kind, args in first[:6]]


def _tiny_checkpoints(n: int) -> list[tuple[dict[str, Any], dict[str, str]]]:
    out = []
    for i in range(n):
        checkpoint: dict[str, Any] = dict(empty_checkpoint())
        checkpoint["id"] = str(uuid6(clock_seq=i))
        version = f"{i + 1:032}.0"
        checkpoint["channel_values"] = {"messages": [HumanMessage(content="hi", id=f"m{i}")]}
        checkpoint["channel_versions"] = {"messages": version}
        out.append((checkpoint, {"messages": version}))
    return out


def _summary(
    put: list[float],
    writes: list[float],
    cpu: dict[str, list[float]],
    latest: list[float],
    by_id: list[float],
    lists: list[float],
    tiny_put: list[float],
    tiny_get: list[float],
    rate_1: float,
    rate_n: float,
    storage: int,
) -> dict[str, float]:
    return {
        "storage_per_checkpoint": storage / len(put),
        "put_per_s": len(put) / sum(put),
        "put_writes_per_s": len(writes) / sum(writes),
        "get_latest_ms": statistics.median(latest) * 1000,
        "get_by_id_ms": statistics.median(by_id) * 1000,
        "list_ms": statistics.median(lists) * 1000,
        "tiny_put_us": statistics.median(tiny_put) * 1e6,
        "tiny_get_us": statistics.median(tiny_get) * 1e6,
        "calls_1_per_s": rate_1,
        "calls_n_per_s": rate_n,
        "scaling": rate_n / rate_1,
        "put_cpu_us": statistics.fmean(cpu["put"]) * 1e6,
        "put_writes_cpu_us": statistics.fmean(cpu["put_writes"]) * 1e6,
        "get_cpu_us": statistics.fmean(cpu["get"]) * 1e6,
    }


# --- sync ----------------------------------------------------------------------------


def _timed(fn: Any, *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def _cpu_timed(cpu: list[float], fn: Any, *args: Any) -> tuple[float, Any]:
    """``_timed``, appending the calling thread's CPU seconds to ``cpu``."""
    cpu_start = time.thread_time()
    start = time.perf_counter()
    result = fn(*args)
    elapsed = time.perf_counter() - start
    cpu.append(time.thread_time() - cpu_start)
    return elapsed, result


def run_sync(
    saver: Any, recording: Recording, shape: Shape, storage: Callable[[], int]
) -> dict[str, float]:
    for kind, args in _warm_up(recording):  # first calls: connection, schema check, prepare
        if kind == "put":
            saver.put(*args)
        else:
            saver.put_writes(*args)
    saver.get_tuple(config("warm-up"))
    put: list[float] = []
    writes: list[float] = []
    ids: list[dict[str, Any]] = []
    cpu: dict[str, list[float]] = {"put": [], "put_writes": [], "get": []}
    threads = _copies(recording, "")
    for calls in threads.values():
        for kind, args in calls:
            if kind == "put":
                seconds, stored = _cpu_timed(cpu["put"], saver.put, *args)
                put.append(seconds)
                ids.append(stored)
            else:
                writes.append(_cpu_timed(cpu["put_writes"], saver.put_writes, *args)[0])
    latest = [
        _cpu_timed(cpu["get"], saver.get_tuple, config(t))[0]
        for t in threads
        for _ in range(shape.reads)
    ]
    first = next(iter(threads))
    mine = [c for c in ids if c["configurable"]["thread_id"] == first]
    by_id = [_timed(saver.get_tuple, c)[0] for c in mine]
    lists = []
    for _ in range(max(3, shape.reads // 4)):
        seconds, listed = _timed(lambda: list(saver.list(config(first))))
        lists.append(seconds)
    assert len(listed) == len(mine), (len(listed), len(mine))  # the replay stored it all

    table_bytes = storage()  # the replayed data only (before the tiny and workers' threads)

    tiny_put, tiny_get = [], []
    parent = config("tiny")
    for checkpoint, versions in _tiny_checkpoints(shape.tiny_calls):
        seconds, parent = _timed(saver.put, parent, checkpoint, {"step": 0}, versions)
        tiny_put.append(seconds)
        tiny_get.append(_timed(saver.get_tuple, config("tiny"))[0])

    rate_1 = _workers_sync(saver, recording, 1, "one")
    rate_n = _workers_sync(saver, recording, shape.workers, "many")
    return _summary(
        put, writes, cpu, latest, by_id, lists, tiny_put, tiny_get, rate_1, rate_n, table_bytes
    )


def _workers_sync(saver: Any, recording: Recording, n: int, tag: str) -> float:
    template = next(iter(recording.threads.values()))
    work = [(f"{tag}-{w}", [(k, retarget(a, f"{tag}-{w}")) for k, a in template]) for w in range(n)]
    barrier = threading.Barrier(n + 1)

    def worker(thread: str, calls: Calls) -> None:
        barrier.wait()
        for kind, args in calls:
            if kind == "put":
                saver.put(*args)
                saver.get_tuple(config(thread))
            else:
                saver.put_writes(*args)

    pool = [threading.Thread(target=worker, args=item) for item in work]
    for t in pool:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    calls = sum(len(c) + sum(k == "put" for k, _ in c) for _, c in work)
    return calls / elapsed


# --- async ---------------------------------------------------------------------------


async def _atimed(fn: Any, *args: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await fn(*args)
    return time.perf_counter() - start, result


async def _acpu_timed(cpu: list[float], fn: Any, *args: Any) -> tuple[float, Any]:
    """``_atimed``, appending the process's CPU seconds to ``cpu`` (module docstring)."""
    cpu_start = time.process_time()
    start = time.perf_counter()
    result = await fn(*args)
    elapsed = time.perf_counter() - start
    cpu.append(time.process_time() - cpu_start)
    return elapsed, result


async def run_async(
    saver: Any, recording: Recording, shape: Shape, storage: Callable[[], int]
) -> dict[str, float]:
    for kind, args in _warm_up(recording):
        if kind == "put":
            await saver.aput(*args)
        else:
            await saver.aput_writes(*args)
    await saver.aget_tuple(config("warm-up"))
    put: list[float] = []
    writes: list[float] = []
    ids: list[dict[str, Any]] = []
    cpu: dict[str, list[float]] = {"put": [], "put_writes": [], "get": []}
    threads = _copies(recording, "")
    for calls in threads.values():
        for kind, args in calls:
            if kind == "put":
                seconds, stored = await _acpu_timed(cpu["put"], saver.aput, *args)
                put.append(seconds)
                ids.append(stored)
            else:
                writes.append((await _acpu_timed(cpu["put_writes"], saver.aput_writes, *args))[0])
    latest = [
        (await _acpu_timed(cpu["get"], saver.aget_tuple, config(t)))[0]
        for t in threads
        for _ in range(shape.reads)
    ]
    first = next(iter(threads))
    mine = [c for c in ids if c["configurable"]["thread_id"] == first]
    by_id = [(await _atimed(saver.aget_tuple, c))[0] for c in mine]

    async def whole_list() -> list[Any]:
        return [t async for t in saver.alist(config(first))]

    lists = []
    for _ in range(max(3, shape.reads // 4)):
        seconds, listed = await _atimed(whole_list)
        lists.append(seconds)
    assert len(listed) == len(mine), (len(listed), len(mine))  # the replay stored it all

    table_bytes = storage()  # the replayed data only (before the tiny and workers' threads)

    tiny_put, tiny_get = [], []
    parent = config("tiny")
    for checkpoint, versions in _tiny_checkpoints(shape.tiny_calls):
        seconds, parent = await _atimed(saver.aput, parent, checkpoint, {"step": 0}, versions)
        tiny_put.append(seconds)
        tiny_get.append((await _atimed(saver.aget_tuple, config("tiny")))[0])

    rate_1 = await _workers_async(saver, recording, 1, "one")
    rate_n = await _workers_async(saver, recording, shape.workers, "many")
    return _summary(
        put, writes, cpu, latest, by_id, lists, tiny_put, tiny_get, rate_1, rate_n, table_bytes
    )


async def _workers_async(saver: Any, recording: Recording, n: int, tag: str) -> float:
    template = next(iter(recording.threads.values()))
    work = [(f"{tag}-{w}", [(k, retarget(a, f"{tag}-{w}")) for k, a in template]) for w in range(n)]

    async def worker(thread: str, calls: Calls) -> None:
        for kind, args in calls:
            if kind == "put":
                await saver.aput(*args)
                await saver.aget_tuple(config(thread))
            else:
                await saver.aput_writes(*args)

    start = time.perf_counter()
    await asyncio.gather(*(worker(*item) for item in work))
    elapsed = time.perf_counter() - start
    calls = sum(len(c) + sum(k == "put" for k, _ in c) for _, c in work)
    return calls / elapsed
