"""Instructions per call (valgrind callgrind): lg_sqla against the official stores and savers.

``python -m benchmarks instructions [--dialects ...] [--modes ...] [--calls N] [--jobs J]``

Wall-clock ratios on a shared 2-core machine move with the neighbours' load; the number
of instructions the client process executes does not. For every database (SQLite,
PostgreSQL, MariaDB), mode (sync, async), family (store, saver) and contender (lg_sqla,
the official store or saver of that database: ``store_level.contenders`` and
``contenders.contenders``, opened exactly as those levels open them), one child process
runs under ``valgrind --tool=callgrind`` on a fresh database of its own:

* store: ``put`` of a new item, ``get`` of one, ``search`` with an equality filter
  returning 20 items (of 40 in the namespace), ``batch`` of 4 mixed ops (a put, two
  gets, a filtered search);
* saver: ``put`` (a small checkpoint, two channels), ``put_writes`` (two writes),
  ``get_tuple`` of the latest checkpoint and of one by id, and a whole turn of the chat
  graph (``workload.WORKLOADS["graph"]``, a thread's second turn).

Each call kind is made ``WARM_UP`` times first (connections, compiled and prepared
statements), then ``--calls`` times between two calls of ``os.getppid()``: callgrind is
told to dump its counters before every ``getppid`` (``--dump-before``), so each call
kind's calls are one dump of their own, holding just those calls: every thread of the
client process (a driver's or the store's worker thread included), start-up, set-up
and warm-up excluded. That is the difference of a run with ``N`` calls and one with 0,
taken within one run (half the cost). Divided by the calls: instructions per call.
``PYTHONHASHSEED=0``, so string hashing is the same in every run. Start-up, set-up and
warm-up run with callgrind's instrumentation off (``--instr-atstart=no``; the child
says when it is ready and the parent turns it on with ``callgrind_control``): a cell
then takes a fifth of the CPU time.

``--baseline FILE`` (a ``--json`` of an earlier run) adds that run's table below, e.g.
the commit before a change.

The database servers are the benchmark's own (``databases.servers``); their work is not
counted (the client's is what lg_sqla can change). Valgrind is installed with apt-get
when missing (root or ``sudo -n``).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .databases import ROOT, Database
from .instructions_table import DIALECTS, FAMILIES, table

WARM_UP = 20
CALLS = 100
TURNS = 10  # graph turns are ~100x a single call: fewer of them, the same precision
SPACE = ("bench", "users")
SEARCHED = ("bench", "search")
FLAG_ENV = "LG_SQLA_BENCH_INSTRUMENTED"  # the file the parent creates once instrumentation is on


# --- the child: runs under callgrind ---------------------------------------------------


def _mark() -> None:
    """A segment boundary: callgrind dumps its counters before each getppid."""
    os.getppid()


def _ready() -> None:
    """Set-up and warm-up done: ask the parent to turn callgrind's instrumentation on
    (it runs them with it off: 5x faster) and wait until it did."""
    flag = Path(os.environ[FLAG_ENV])
    print(f"ready {os.getpid()}", flush=True)
    while not flag.exists():
        time.sleep(0.01)


def _value(i: int) -> dict[str, Any]:
    return {"text": f"memory {i}: the user prefers short answers", "tag": i % 2, "n": i}


def _store_ops(i: int) -> list[Any]:
    from langgraph.store.base import GetOp, PutOp, SearchOp

    return [
        PutOp((*SPACE, f"u{i % 4}"), f"b{i}", _value(i)),
        GetOp((*SPACE, f"u{i % 4}"), f"k{i}"),
        GetOp((*SPACE, f"u{(i + 1) % 4}"), f"k{i + 1}"),
        SearchOp(SEARCHED, filter={"tag": 0}, limit=10),
    ]


def _store_segments(store: Any, calls: int, is_async: bool) -> list[Callable[[int], Any]]:
    """The measured calls, one callable per call kind (coroutine functions if async)."""
    prefix = "a" if is_async else ""
    put, get = getattr(store, f"{prefix}put"), getattr(store, f"{prefix}get")
    search, batch = getattr(store, f"{prefix}search"), getattr(store, f"{prefix}batch")
    return [
        lambda i: put((*SPACE, f"u{i % 4}"), f"k{i}", _value(i)),
        lambda i: get((*SPACE, f"u{i % 4}"), f"k{i % calls}"),
        lambda i: search(SEARCHED, filter={"tag": 0}, limit=20),
        lambda i: batch(_store_ops(i % calls)),
    ]


async def _maybe(result: Any) -> Any:
    return await result if asyncio.iscoroutine(result) else result


async def _run_store(store: Any, calls: int, is_async: bool) -> None:
    prefix = "a" if is_async else ""
    put = getattr(store, f"{prefix}put")
    for i in range(40):
        await _maybe(put(SEARCHED, f"s{i}", _value(i)))
    warm = _store_segments(store, WARM_UP, is_async)
    for i in range(WARM_UP):
        for call in warm:
            await _maybe(call(i))
    found: list[Any] = []
    _ready()
    for call in _store_segments(store, calls, is_async):
        _mark()
        for i in range(calls):
            found.append(await _maybe(call(i)))
    _mark()
    gets = found[calls : 2 * calls]
    assert all(item is not None and item.value["n"] == i for i, item in enumerate(gets))
    assert all(len(hits) == 20 for hits in found[2 * calls : 3 * calls])


def _checkpoint(step: int) -> Any:
    from langgraph.checkpoint.base import empty_checkpoint

    checkpoint = empty_checkpoint()
    checkpoint["id"] = f"1ef{step:013d}-0000-6000-8000-000000000000"
    checkpoint["channel_values"] = {"a": step, "b": "x"}
    checkpoint["channel_versions"] = {"a": step + 1, "b": 1}
    return checkpoint


async def _run_saver(saver: Any, calls: int, turns: int, is_async: bool) -> None:
    from .workload import WORKLOADS, config, user_turn

    prefix = "a" if is_async else ""
    put, put_writes = getattr(saver, f"{prefix}put"), getattr(saver, f"{prefix}put_writes")
    get_tuple = getattr(saver, f"{prefix}get_tuple")
    thread = config("t")
    graph = WORKLOADS["graph"].compile(saver)
    invoke = graph.ainvoke if is_async else graph.invoke

    async def put_one(step: int) -> Any:
        versions = {"a": step + 1, "b": 1} if step == 0 else {"a": step + 1}
        return await _maybe(
            put(thread, _checkpoint(step), {"source": "loop", "step": step}, versions)
        )

    stored = [await put_one(step) for step in range(WARM_UP)]
    for step, one in enumerate(stored):
        await _maybe(put_writes(one, [("a", step), ("b", "y")], "task"))
        await _maybe(get_tuple(thread))
        await _maybe(get_tuple(stored[WARM_UP // 2]))
    for i in range(WARM_UP // 4 + turns):  # every thread's first turn; some warm up
        await _maybe(invoke(user_turn(f"g{i}", 1), config(f"g{i}")))
    for i in range(WARM_UP // 4):
        await _maybe(invoke(user_turn(f"g{i}", 2), config(f"g{i}")))
    _ready()
    _mark()
    measured = [await put_one(WARM_UP + i) for i in range(calls)]
    _mark()
    for i, one in enumerate(measured):
        await _maybe(put_writes(one, [("a", i), ("b", "y")], "task"))
    _mark()
    latest = [await _maybe(get_tuple(thread)) for _ in range(calls)]
    _mark()
    by_id = [await _maybe(get_tuple(stored[WARM_UP // 2])) for _ in range(calls)]
    _mark()
    for i in range(WARM_UP // 4, WARM_UP // 4 + turns):
        await _maybe(invoke(user_turn(f"g{i}", 2), config(f"g{i}")))
    _mark()
    assert all(len(t.pending_writes) == 2 for t in latest + by_id)
    assert by_id[0].checkpoint["id"] == stored[WARM_UP // 2]["configurable"]["checkpoint_id"]


def child(spec: dict[str, Any]) -> None:
    """Open one contender on the database ``spec`` names and make its calls."""
    from . import contenders, store_level

    db = Database(**spec["db"])
    is_async = spec["mode"] == "async"
    family = spec["family"]
    pair = (store_level.contenders if family == "store" else contenders.contenders)(
        db.dialect, is_async
    )
    contender = pair[0] if spec["ours"] else pair[1]
    opener: Callable[..., Any] = contender.open
    if family == "store":  # the stores without an index (store_level opens both)
        opener = functools.partial(opener, with_index=False)

    async def body(opened: Any) -> None:
        if family == "store":
            await _run_store(opened.plain, spec["calls"], is_async)
        else:
            await _run_saver(opened, spec["calls"], spec["turns"], is_async)

    if is_async:

        async def main() -> None:
            async with opener(db) as opened:
                await body(opened)

        asyncio.run(main())
    else:
        with opener(db) as opened:
            _drive(body(opened))


def _drive(coroutine: Any) -> None:
    """Run a coroutine that never suspends (the sync calls) without an event loop, so
    the sync store and saver run as in a plain sync program."""
    try:
        coroutine.send(None)
    except StopIteration:
        return
    coroutine.close()
    raise RuntimeError("a sync run suspended")


# --- the parent: servers, fresh databases, valgrind, the table ---------------------------


@dataclasses.dataclass(frozen=True)
class Cell:
    dialect: str
    mode: str
    family: str
    ours: bool


def ensure_valgrind() -> str:
    """valgrind's path, installing the Debian package first when it is missing."""
    found = shutil.which("valgrind")
    if found:
        return found
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", "valgrind"], check=True, env=env)
    found = shutil.which("valgrind")
    if not found:
        raise RuntimeError("apt-get installed valgrind, yet it is not on PATH")
    return found


def _totals(out_dir: Path, segments: int) -> list[int]:
    """The instruction totals of the measured dumps (one per call kind), in order."""
    dumps = sorted(
        (p for p in out_dir.iterdir() if re.fullmatch(r"cg\.\d+\.\d+", p.name)),
        key=lambda p: int(p.name.rsplit(".", 1)[1]),
    )
    totals = []
    for dump in dumps:
        text = dump.read_text(errors="replace")
        match = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
        totals.append(int(match.group(1)) if match else 0)
    # cg.PID.1: start-up to the first mark; then one per call kind (the exit's is cg.PID).
    if len(totals) != segments + 1:
        raise RuntimeError(
            f"expected {segments + 1} callgrind dumps, found {len(totals)} "
            "(something else called getppid?)"
        )
    return totals[1:]


def measure(valgrind: str, cell: Cell, db: Database, calls: int, turns: int) -> dict[str, Any]:
    """Run one cell's child under callgrind: {call: instructions per call}."""
    spec = {
        "db": dataclasses.asdict(db),
        "mode": cell.mode,
        "family": cell.family,
        "ours": cell.ours,
        "calls": calls,
        "turns": turns,
    }
    names = FAMILIES[cell.family]
    callgrind_control = str(Path(valgrind).with_name("callgrind_control"))
    with tempfile.TemporaryDirectory(prefix="lg_sqla_cg_") as tmp:
        out = Path(tmp)
        argv = [
            valgrind,
            "--tool=callgrind",
            "--instr-atstart=no",  # on once set up (``_ready``)
            "--dump-before=getppid",  # libc's (a pattern would match Python's os_getppid too)
            f"--callgrind-out-file={out}/cg.%p",
            sys.executable,
            "-m",
            "benchmarks.instructions",
            "--child",
            json.dumps(spec),
        ]
        flag = out / "instrumented"
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT), FLAG_ENV: str(flag)}
        started = time.monotonic()
        log = out / "stderr.txt"
        with (
            log.open("w") as stderr,
            subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
            ) as process,
        ):
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith("ready "):
                    pid = line.split()[1]
                    subprocess.run(
                        [callgrind_control, "--instr=on", pid], check=True, capture_output=True
                    )
                    flag.touch()
        if process.returncode:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise RuntimeError(f"{cell} failed ({process.returncode}):\n{tail}")
        totals = _totals(out, len(names))
    counts = [turns if name == "graph turn" else calls for name in names]
    return {
        "seconds": round(time.monotonic() - started, 1),
        "per_call": {name: total / n for name, total, n in zip(names, totals, counts, strict=True)},
    }


def run(
    dialects: list[str],
    modes: list[str],
    calls: int,
    turns: int,
    jobs: int,
    log: Any,
    families: tuple[str, ...] = tuple(FAMILIES),
) -> dict[str, Any]:
    from .contenders import contenders
    from .databases import servers
    from .store_level import contenders as store_contenders

    valgrind = ensure_valgrind()
    cells = [
        Cell(dialect, mode, family, ours)
        for dialect in dialects
        for mode in modes
        for family in families
        for ours in (True, False)
    ]
    results: list[dict[str, Any]] = []
    with servers(dialects) as srv, concurrent.futures.ThreadPoolExecutor(jobs) as pool:

        def one(cell: Cell) -> dict[str, Any]:
            pick = store_contenders if cell.family == "store" else contenders
            name = pick(cell.dialect, cell.mode == "async")[0 if cell.ours else 1].name
            entry: dict[str, Any] = {**dataclasses.asdict(cell), "name": name}
            try:
                with srv.fresh(cell.dialect) as db:
                    entry.update(measure(valgrind, cell, db, calls, turns))
            except Exception as exc:  # reported in the table; the run goes on
                entry["error"] = str(exc)
            log(f"{cell.dialect} {cell.mode} {cell.family} {name}: {entry.get('seconds', '-')} s")
            return entry

        results = list(pool.map(one, cells))
    return {"calls": calls, "turns": turns, "warm_up": WARM_UP, "cells": results}


def _commit() -> str:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    return "unknown"


def write(results: dict[str, Any], docs: Path) -> Path:
    """Keep the results beside the page's (bench-results.json) and re-render the page."""
    from .report import page

    raw = docs / "img" / "bench-results.json"
    kept = json.loads(raw.read_text(encoding="utf-8"))
    kept["instructions"] = results
    raw.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")
    path = docs / "benchmarks.md"
    path.write_text(page(kept), encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks instructions", description=__doc__)
    parser.add_argument("--dialects", default=",".join(DIALECTS))
    parser.add_argument("--modes", default="sync,async")
    parser.add_argument("--families", default="store,saver", help="store, saver or both")
    parser.add_argument("--calls", type=int, default=CALLS, help=f"calls per kind ({CALLS})")
    parser.add_argument("--turns", type=int, default=TURNS, help=f"graph turns ({TURNS})")
    parser.add_argument("--jobs", type=int, default=2, help="cells run at once (2)")
    parser.add_argument("--json", type=Path, help="also save the raw results here")
    parser.add_argument("--from", dest="source", type=Path, help="re-render saved results")
    parser.add_argument("--baseline", type=Path, help="an earlier run's --json, shown below")
    parser.add_argument("--docs", type=Path, help="write the section into DOCS/benchmarks.md")
    args = parser.parse_args(argv)
    if args.source:
        results = json.loads(args.source.read_text(encoding="utf-8"))
    else:
        dialects = [d for d in args.dialects.split(",") if d]
        modes = [m for m in args.modes.split(",") if m]
        families = tuple(f for f in args.families.split(",") if f)
        if set(dialects) - set(DIALECTS) or set(modes) - {"sync", "async"}:
            parser.error(f"--dialects from {DIALECTS}, --modes from sync, async")
        if not families or set(families) - set(FAMILIES):
            parser.error(f"--families from {', '.join(FAMILIES)}")
        log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        results = run(dialects, modes, args.calls, args.turns, args.jobs, log, families)
        results["commit"] = _commit()
    if args.baseline:
        results["baseline"] = json.loads(args.baseline.read_text(encoding="utf-8"))
        results["baseline"].pop("baseline", None)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(table(results))
    if args.docs:
        print(f"wrote {write(results, args.docs)}")
    return 1 if any("error" in c for c in results["cells"]) else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
    else:
        sys.exit(main(sys.argv[1:]))
