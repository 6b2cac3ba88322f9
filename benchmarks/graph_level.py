"""Graph level: the chat agent run with ``graph.invoke`` / ``graph.ainvoke``.

LangGraph's default durability ("async": checkpoints are written in the background
while the next step runs). Turns go round-robin over the threads, one at a time, as
one user after another would; a warm-up turn on a thread of its own comes first.
Then a long thread is built (untimed) and ``get_state`` and the full
``get_state_history`` are timed on it.

The same measurements run on three graphs (``workload.WORKLOADS``): level ``graph``
is the chat graph, ``delta`` the chat graph with ``messages`` on a DeltaChannel,
``react`` LangGraph's prebuilt ReAct agent.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from .workload import WORKLOADS, GraphWorkload, Shape, config, user_turn

METRICS = {
    # key: (label, unit, higher is better)
    "turns_per_s": ("turns/s", "turns/s", True),
    "turn_p50_ms": ("turn latency p50", "ms", False),
    "get_state_ms": ("get_state (long thread)", "ms", False),
    "history_ms": ("get_state_history (full)", "ms", False),
}


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def run_sync(
    saver: Any, shape: Shape, workload: GraphWorkload = WORKLOADS["graph"]
) -> dict[str, float]:
    graph = workload.compile(saver)
    graph.invoke(user_turn("warm-up", 0), config("warm-up"))
    threads = [f"thread-{t}" for t in range(shape.threads)]
    latencies = []
    begin = time.perf_counter()
    for turn in range(shape.turns):
        for thread in threads:
            start = time.perf_counter()
            graph.invoke(user_turn(thread, turn), config(thread))
            latencies.append(_ms(start))
    elapsed = time.perf_counter() - begin
    for turn in range(shape.long_turns):
        graph.invoke(user_turn("long", turn), config("long"))
    states, histories = [], []
    for _ in range(shape.reads):
        start = time.perf_counter()
        graph.get_state(config("long"))
        states.append(_ms(start))
    for _ in range(max(3, shape.reads // 4)):
        start = time.perf_counter()
        history = list(graph.get_state_history(config("long")))
        histories.append(_ms(start))
    assert len(history) == workload.checkpoints_per_turn * shape.long_turns, len(history)
    return {
        "turns_per_s": len(latencies) / elapsed,
        "turn_p50_ms": statistics.median(latencies),
        "get_state_ms": statistics.median(states),
        "history_ms": statistics.median(histories),
    }


async def run_async(
    saver: Any, shape: Shape, workload: GraphWorkload = WORKLOADS["graph"]
) -> dict[str, float]:
    graph = workload.compile(saver)
    await graph.ainvoke(user_turn("warm-up", 0), config("warm-up"))
    threads = [f"thread-{t}" for t in range(shape.threads)]
    latencies = []
    begin = time.perf_counter()
    for turn in range(shape.turns):
        for thread in threads:
            start = time.perf_counter()
            await graph.ainvoke(user_turn(thread, turn), config(thread))
            latencies.append(_ms(start))
    elapsed = time.perf_counter() - begin
    for turn in range(shape.long_turns):
        await graph.ainvoke(user_turn("long", turn), config("long"))
    states, histories = [], []
    for _ in range(shape.reads):
        start = time.perf_counter()
        await graph.aget_state(config("long"))
        states.append(_ms(start))
    for _ in range(max(3, shape.reads // 4)):
        start = time.perf_counter()
        history = [s async for s in graph.aget_state_history(config("long"))]
        histories.append(_ms(start))
    assert len(history) == workload.checkpoints_per_turn * shape.long_turns, len(history)
    return {
        "turns_per_s": len(latencies) / elapsed,
        "turn_p50_ms": statistics.median(latencies),
        "get_state_ms": statistics.median(states),
        "history_ms": statistics.median(histories),
    }
