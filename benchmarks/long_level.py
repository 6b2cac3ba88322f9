"""Long level: one thread run to 10, 100 and 1,000 turns (``Shape.thread_lengths``).

The chat graph (level ``long``) or the chat graph with ``messages`` on a DeltaChannel
(level ``long-delta``), LangGraph's default durability, one turn after another on a
single thread of a fresh database. At each length L it records the turn latency (the
median of the 5 turns ending at L, so the 50 KB ``notes`` rewrite every third turn is
neither always in nor always out) and the storage per turn: the database's bytes on
all its tables (``Servers.storage_bytes``: data, indexes, TOAST / LOBs) after L turns,
less what the empty schema takes, divided by L. Storage is read between turns, off
the clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from .workload import WORKLOADS, Shape, config, user_turn

LEVELS = {"long": WORKLOADS["graph"], "long-delta": WORKLOADS["delta"]}
WINDOW = 5  # turns whose median is "the latency at length L"


def metrics(lengths: tuple[int, ...]) -> dict[str, tuple[str, str, bool]]:
    """key: (label, unit, higher is better), for these thread lengths."""
    out: dict[str, tuple[str, str, bool]] = {}
    for length in lengths:
        out[f"turn_ms_{length}"] = (f"turn latency at turn {length}", "ms", False)
        out[f"bytes_per_turn_{length}"] = (f"storage per turn at {length} turns", "B", False)
    return out


METRICS = metrics(Shape().thread_lengths)


def _window(latencies: list[float], length: int) -> float:
    return statistics.median(latencies[max(0, length - WINDOW) : length])


def run_sync(
    saver: Any, shape: Shape, storage: Callable[[], int], level: str = "long"
) -> dict[str, float]:
    graph = LEVELS[level].compile(saver)
    empty = storage()
    lengths = sorted(shape.thread_lengths)
    out: dict[str, float] = {}
    latencies: list[float] = []
    for turn in range(1, lengths[-1] + 1):
        start = time.perf_counter()
        graph.invoke(user_turn("long", turn), config("long"))
        latencies.append((time.perf_counter() - start) * 1000)
        if turn in lengths:
            out[f"turn_ms_{turn}"] = _window(latencies, turn)
            out[f"bytes_per_turn_{turn}"] = (storage() - empty) / turn
    return out


async def run_async(
    saver: Any, shape: Shape, storage: Callable[[], int], level: str = "long"
) -> dict[str, float]:
    graph = LEVELS[level].compile(saver)
    empty = storage()
    lengths = sorted(shape.thread_lengths)
    out: dict[str, float] = {}
    latencies: list[float] = []
    for turn in range(1, lengths[-1] + 1):
        start = time.perf_counter()
        await graph.ainvoke(user_turn("long", turn), config("long"))
        latencies.append((time.perf_counter() - start) * 1000)
        if turn in lengths:
            out[f"turn_ms_{turn}"] = _window(latencies, turn)
            out[f"bytes_per_turn_{turn}"] = (storage() - empty) / turn
    return out


def text_table(results: dict[str, Any], level: str) -> str:
    """lg_sqla / official per database, mode and length: medians over the repeats."""
    lengths = tuple(results.get("shape", {}).get("thread_lengths") or Shape().thread_lengths)
    keys = list(metrics(lengths))
    head = ["database", "mode", "saver", *keys]
    rows: list[list[str]] = []
    groups: dict[tuple[str, str, bool], list[dict[str, float]]] = {}
    names: dict[tuple[str, str, bool], str] = {}
    for run in results["runs"]:
        if run["level"] != level or "metrics" not in run:
            continue
        key = (run["dialect"], run["mode"], run["ours"])
        groups.setdefault(key, []).append(run["metrics"])
        names[key] = run["saver"]
    for dialect, mode, ours in sorted(groups, key=lambda k: (k[0], k[1], not k[2])):
        runs = groups[(dialect, mode, ours)]
        cells = [f"{statistics.median(r[k] for r in runs):.1f}" for k in keys]
        rows.append([dialect, mode, names[(dialect, mode, ours)], *cells])
        other = groups.get((dialect, mode, not ours))
        if ours and other:
            ratios = [
                statistics.median(r[k] for r in runs) / statistics.median(r[k] for r in other)
                for k in keys
            ]
            rows.append([dialect, mode, "lg_sqla / official", *(f"{x:.2f}x" for x in ratios)])
    widths = [max(len(str(c)) for c in col) for col in zip(head, *rows, strict=True)]
    lines = [
        " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in [head, *rows]
    ]
    return f"## {level} level ({LEVELS[level].name})\n" + "\n".join(lines)
