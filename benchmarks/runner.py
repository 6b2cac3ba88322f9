"""Interleaved repeats of every (database, level, mode), lg_sqla against the official saver
(at the store level: the official store).

For each database, level (graph, api) and mode (sync, async), repeat r runs both
contenders, lg_sqla first on even r and the official saver first on odd r, each on a
fresh database of its own on the same server. The clock never covers opening the
saver, ``setup()``, building arguments, or a garbage collection left over from the
previous contender: the heap is collected and frozen just before each measurement.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import platform
import subprocess
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from . import api_level, graph_level, long_level, store_level
from .contenders import Contender, contenders
from .databases import ROOT, Servers, base, servers
from .workload import WORKLOADS, Recording, Shape, record

LEVELS = ("graph", "react", "delta", "long", "long-delta", "api", "store")
GRAPH_LEVELS = ("graph", "react", "delta")  # graph_level on workload.WORKLOADS[level]
# A measurement that raises is retried once on a fresh database (a shared machine can
# have a transient server error); both failures are kept in the results and reported.
ATTEMPTS = 2
MODES = ("sync", "async")
PACKAGES = (
    "lg_sqla",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langgraph-checkpoint-mysql",
    "sqlalchemy",
    "psycopg",
    "psycopg-binary",
    "pymysql",
    "asyncmy",
    "aiomysql",
    "aiosqlite",
    "ormsgpack",
)


@contextlib.contextmanager
def settled() -> Iterator[None]:
    """Start from a collected heap whose survivors the collector no longer scans."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _measure(
    srv: Servers, dialect: str, level: str, contender: Contender, rec: Recording, shape: Shape
) -> dict[str, float]:
    with srv.fresh(dialect) as db:

        def storage() -> int:
            return srv.storage_bytes(db)

        if contender.is_async:

            async def go() -> dict[str, float]:
                async with contender.open(db) as saver:
                    with settled():
                        if level in GRAPH_LEVELS:
                            return await graph_level.run_async(saver, shape, WORKLOADS[level])
                        if level in long_level.LEVELS:
                            return await long_level.run_async(saver, shape, storage, level)
                        if level == "store":
                            return await store_level.run_async(saver, shape)
                        return await api_level.run_async(saver, rec, shape, storage)

            return asyncio.run(go())
        with contender.open(db) as saver, settled():
            if level in GRAPH_LEVELS:
                return graph_level.run_sync(saver, shape, WORKLOADS[level])
            if level in long_level.LEVELS:
                return long_level.run_sync(saver, shape, storage, level)
            if level == "store":
                return store_level.run_sync(saver, shape)
            return api_level.run_sync(saver, rec, shape, storage)


def machine(srv: Servers, dialects: list[str]) -> dict[str, Any]:
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError), open("/proc/meminfo", encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    versions = {}
    for name in PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return {
        "commit": _commit(),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": versions,
        "servers": {d: srv.server_version(d) for d in dict.fromkeys(map(base, dialects))},
        "loadavg_start": os.getloadavg(),
    }


def _commit() -> str:
    """The lg_sqla checkout measured: its commit, "+dirty" with uncommitted changes."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "lg_sqla"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def run(
    dialects: list[str],
    levels: list[str],
    modes: list[str],
    repeats: int,
    shape: Shape,
    log: Callable[[str], None] = print,
    level_repeats: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Measure everything asked for; the result is plain JSON-able data.

    ``level_repeats`` overrides ``repeats`` for the levels it names (the store level's
    calls are short, so more repeats of it cost little and steady its medians).
    """
    level_repeats = level_repeats or {}
    started = time.time()
    recording = record(shape)
    runs: list[dict[str, Any]] = []
    with servers(dialects) as srv:
        info = machine(srv, dialects)
        for dialect in dialects:
            for level in levels:
                for mode in modes:
                    # The store level compares stores, the other levels savers.
                    pick = store_level.contenders if level == "store" else contenders
                    pair = pick(dialect, mode == "async")
                    for r in range(level_repeats.get(level, repeats)):
                        for contender in pair if r % 2 == 0 else pair[::-1]:
                            entry: dict[str, Any] = {
                                "dialect": dialect,
                                "level": level,
                                "mode": mode,
                                "repeat": r,
                                "saver": contender.name,
                                "ours": contender.ours,
                            }
                            for attempt in range(ATTEMPTS):
                                try:
                                    entry["metrics"] = _measure(
                                        srv, dialect, level, contender, recording, shape
                                    )
                                    entry.pop("error", None)
                                    break
                                except Exception as exc:  # one broken saver must not end a run
                                    entry["error"] = f"{type(exc).__name__}: {exc}"
                                    entry.setdefault("failed_attempts", []).append(entry["error"])
                                    log(traceback.format_exc())
                                    log(f"attempt {attempt + 1} of {ATTEMPTS} failed")
                            runs.append(entry)
                            shown = entry.get("metrics") or entry.get("error")
                            log(f"{dialect} {level} {mode} r{r} {contender.name}: {shown}")
    info["loadavg_end"] = os.getloadavg()
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "seconds": round(time.time() - started),
        "machine": info,
        "shape": asdict(shape),
        "repeats": repeats,
        "level_repeats": {k: v for k, v in level_repeats.items() if k in levels},
        "dialects": dialects,
        "levels": levels,
        "modes": modes,
        "runs": runs,
    }
