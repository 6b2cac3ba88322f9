"""The direct path's small optimisations, each measured on and off, in instructions.

    python -m benchmarks.optimisations [--dialects sqlite,postgres,mysql] [--calls 50]
        [--write docs/img/optimisations.json] [--lib PATH --only on]

Four optimisations of the direct path (``lg_sqla/runtime``) each save a single-digit
percentage of a hot call. They are kept only with their gain measured here, on the
databases where they apply:

``kept_connection``
    one pooled connection kept between calls (``runtime.kept``; SQLite files, sync
    psycopg): measured with the saver's ``keep_connection=False`` on the same engine.
``remembered_decision``
    the path decision remembered per first statement (``routing.Router``): measured
    with ``choose_path`` asked at every call instead.
``kept_cursors``
    psycopg's cursor kept with its connection (``DirectDriver.keeps_cursors``):
    measured with a cursor opened and closed per call.
``autocommit_flag``
    psycopg's client-side autocommit flag written directly (``internals.
    psycopg_autocommit_flag``): measured with psycopg's public ``autocommit`` setter,
    what the direct path does where that internal is missing.

For each database, a child process runs under ``valgrind --tool=callgrind``
(``PYTHONHASHSEED=0``): per variant (``on``: all of them; else that one off) a saver
of ``from_conn_string`` makes 20 warm-up rounds (statements compiled, caches full),
then ``--calls`` calls of ``put``, of ``get_tuple`` and of ``put_writes`` (a small
checkpoint of two channels, two writes), each batch between two ``os.getppid()``
calls, where callgrind dumps its counts (``--dump-before``). Instructions per call
are the whole client process's (the calling thread does all the work); the servers
are not counted. ``--lib``: the child imports ``lg_sqla`` from there (another
checkout, e.g. to compare a commit with ``--only on``). ``--write``: the figures as
JSON, which ``python -m benchmarks report`` renders in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CALLS = ("put", "get_tuple", "put_writes")
WARM_UP = 20
# Which optimisation applies where: (dialect of the benchmark, the optimisations).
APPLIES = {
    "sqlite": ("kept_connection", "remembered_decision"),
    "postgres": ("kept_connection", "remembered_decision", "kept_cursors", "autocommit_flag"),
    "mysql": ("remembered_decision",),
}


# --- the child: runs under callgrind, imports only lg_sqla --------------------------


@contextlib.contextmanager
def _switched_off(optimisation: str) -> Iterator[None]:
    """Turn one optimisation off in this process (benchmark only: it swaps lg_sqla's
    own functions, the ones each optimisation lives in, and puts them back)."""
    from lg_sqla import internals
    from lg_sqla.runtime import drivers, routing

    if optimisation == "remembered_decision":
        remembered = routing.Router.path_of

        def decided_every_call(
            self: routing.Router, engine: Any, first: Any, prebuilt: bool
        ) -> routing.Path:
            if not (prebuilt and self.allowed) or first.statement is None:
                return routing.Path.CORE
            return routing.choose_path(
                engine,
                first,
                prebuilt=prebuilt,
                allowed=self.allowed,
                dialect_ops=self.dialect_ops,
                compiler=self.compiler,
            )

        routing.Router.path_of = decided_every_call  # type: ignore[method-assign]
        try:
            yield
        finally:
            routing.Router.path_of = remembered  # type: ignore[method-assign]
    elif optimisation == "kept_cursors":
        table: dict[Any, Any] = drivers.DIRECT_DRIVERS  # type: ignore[assignment]
        before = dict(table)
        for key, driver in before.items():
            table[key] = dataclasses.replace(driver, keeps_cursors=False)
        try:
            yield
        finally:
            table.update(before)
    elif optimisation == "autocommit_flag":
        flag = internals.psycopg_autocommit_flag
        internals.psycopg_autocommit_flag = lambda connection, idle: None  # type: ignore[assignment]
        try:
            yield
        finally:
            internals.psycopg_autocommit_flag = flag  # type: ignore[assignment]
    else:  # "on", and kept_connection (a saver argument)
        yield


def _calls(saver: Any, thread_id: str) -> dict[str, Callable[[int], Any]]:
    from langgraph.checkpoint.base import empty_checkpoint

    thread: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    stored: list[Any] = [thread]

    def put(step: int) -> Any:
        checkpoint = empty_checkpoint()
        # Ids in put order: get_tuple reads the last put's checkpoint every time (with
        # random ids, a random one, with or without the warm-up's writes to decode).
        checkpoint["id"] = f"1ef{step:013d}"
        checkpoint["channel_values"] = {"a": step, "b": "x"}
        checkpoint["channel_versions"] = {"a": step + 1, "b": 1}
        new_versions = {"a": step + 1, "b": 1} if step == 0 else {"a": step + 1}
        stored[0] = saver.put(thread, checkpoint, {"source": "loop", "step": step}, new_versions)

    def put_writes(step: int) -> None:
        saver.put_writes(stored[0], [("a", step), ("b", "y")], f"task{step}")

    return {"put": put, "get_tuple": lambda _: saver.get_tuple(thread), "put_writes": put_writes}


def _child(url: str, variants: list[str], calls: int) -> None:
    from lg_sqla import SQLAlchemySaver

    for variant in variants:
        with SQLAlchemySaver.from_conn_string(url) as owner, _switched_off(variant):
            owner.setup()
            saver = owner
            if variant == "kept_connection":
                saver = SQLAlchemySaver(owner.engine, keep_connection=False)
            run = _calls(saver, f"{variant}-{uuid.uuid4().hex[:8]}")
            for step in range(WARM_UP):
                for name in CALLS:
                    run[name](step)
            for name in CALLS:
                os.getppid()  # callgrind dumps here: the calls below are one dump
                for step in range(WARM_UP, WARM_UP + calls):
                    run[name](step)
            os.getppid()


# --- the parent: servers, callgrind, figures -----------------------------------------


def _totals(out_dir: Path, pid: int) -> list[int]:
    """Each numbered dump's instruction total, in order (the final one, at exit, has
    no number)."""
    found: dict[int, int] = {}
    for path in out_dir.glob(f"cg.{pid}.*"):
        for line in path.read_text().splitlines():
            if line.startswith("totals:"):
                found[int(path.name.rsplit(".", 1)[1])] = int(line.split()[1])
    return [found[i] for i in sorted(found)]


def _measure(url: str, variants: list[str], calls: int, lib: Path | None) -> dict[str, Any]:
    """Instructions per call of each variant: ``{variant: {call: instructions}}``."""
    with tempfile.TemporaryDirectory(prefix="lg_sqla_cg_") as tmp:
        root = lib if lib is not None else Path(__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(root)}
        command = [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=*getppid*",
            f"--callgrind-out-file={tmp}/cg.%p",
            sys.executable,
            __file__,
            "--child",
            url,
            "--variants",
            ",".join(variants),
            "--calls",
            str(calls),
        ]
        process = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if process.returncode != 0:
            raise RuntimeError(f"callgrind run failed:\n{process.stderr[-3000:]}")
        pids = {int(p.name.split(".")[1]) for p in Path(tmp).glob("cg.*")}
        (pid,) = pids
        totals = _totals(Path(tmp), pid)
    # Two dumps per os.getppid() (its Python and C functions both match): dump 2k+1
    # is what ran between the k-th marker and the next (dump 1: up to the first);
    # per variant, len(CALLS) + 1 markers, the calls between the first and the last.
    segments = totals[0::2]
    figures: dict[str, Any] = {}
    per_variant = len(CALLS) + 1
    for index, variant in enumerate(variants):
        start = index * per_variant + 1  # segment 0 is the variant's setup and warm-up
        measured = segments[start : start + len(CALLS)]
        figures[variant] = {
            name: round(total / calls) for name, total in zip(CALLS, measured, strict=True)
        }
    return figures


def _print(dialect: str, figures: dict[str, Any]) -> None:
    on = figures["on"]
    all_on = ", ".join(f"{c} {on[c]:,}" for c in CALLS)
    print(f"{dialect}: instructions per call, all on: {all_on}")
    for variant, off in figures.items():
        if variant == "on":
            continue
        gains = ", ".join(
            f"{c} {off[c]:,} (-{(off[c] - on[c]) / off[c]:.1%} when on)" for c in CALLS
        )
        print(f"  {variant} off: {gains}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--dialects", default="sqlite,postgres,mysql")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--only", help="these variants only, e.g. 'on'")
    parser.add_argument("--lib", type=Path, help="import lg_sqla from this checkout")
    parser.add_argument("--write", type=Path, help="write the figures here (JSON)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--variants", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        # Run as a script: its own folder first on sys.path, not the checkout's lg_sqla.
        here = Path(__file__).resolve().parent
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
        _child(args.child, args.variants.split(","), args.calls)
        return 0
    from benchmarks.databases import servers

    dialects = args.dialects.split(",")
    results: dict[str, Any] = {}
    with servers(dialects) as running:
        for dialect in dialects:
            variants = ["on", *APPLIES[dialect]]
            if args.only:
                variants = [v for v in variants if v in args.only.split(",")]
            with running.fresh(dialect) as db:
                results[dialect] = _measure(db.sync_url, variants, args.calls, args.lib)
            _print(dialect, results[dialect])
    if args.write is not None:
        payload = {"calls": args.calls, "warm_up": WARM_UP, "instructions": results}
        args.write.write_text(json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
