"""Command line: ``python -m benchmarks MODE [options]`` (``--help`` lists them).

report    graph + api + store levels (--levels) on every database, sync and async; writes
          docs/benchmarks.md, docs/img/bench-*.png, docs/img/bench-results.json and (--docs
          left at docs/) the generated block of README.md's Performance section
graph     the graph level only, tables printed (the chat graph)
react     the graph level on LangGraph's prebuilt ReAct agent (fake tool-calling model)
delta     the graph level on the chat graph with messages on a DeltaChannel
long      one thread to 10 / 100 / 1,000 turns (--lengths): turn latency, storage per turn
long-delta  the same, messages on a DeltaChannel
api       the saver-API level only, tables printed
store     the store level only (lg_sqla's store against the official stores)
instructions  instructions per call under callgrind, lg_sqla vs the official stores and
          savers (benchmarks/instructions.py; ``python -m benchmarks instructions --help``)
scale     cross-thread calls at 1k / 10k / 100k threads (benchmarks/scale_level.py;
          ``python -m benchmarks scale --help``)
ops | concurrent | async | prune | storage   the older single-purpose modes
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .databases import ROOT, SETUPS
from .workload import QUICK, Shape

LEGACY = ("ops", "concurrent", "async", "prune", "storage")
LEVELS = ("graph", "react", "delta", "long", "long-delta", "api", "store")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in LEGACY:
        from . import legacy

        legacy.main(argv)
        return 0
    if argv and argv[0] == "instructions":
        from . import instructions

        return instructions.main(argv[1:])
    if argv and argv[0] == "scale":
        from . import scale_level

        return scale_level.main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parser.add_argument(
        "mode",
        choices=["report", *LEVELS, *LEGACY],
    )
    parser.add_argument(
        "--dialects",
        default=",".join(SETUPS),
        help="default: all; sqlite-normal = SQLite with both savers at synchronous=NORMAL",
    )
    parser.add_argument(
        "--modes", default="sync,async", help="sync, async, or sync,async (default; also: both)"
    )
    parser.add_argument("--repeats", type=int, help="interleaved repeats (default 5; --quick: 1)")
    parser.add_argument(
        "--level-repeats",
        default="",
        help="repeats for some levels, overriding --repeats: LEVEL=N[,LEVEL=N] (e.g. store=5)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a tiny workload, 1 repeat: smoke test"
    )
    parser.add_argument("--threads", type=int, help="graph threads (default 4)")
    parser.add_argument("--turns", type=int, help="turns per thread (default 8)")
    parser.add_argument("--workers", type=int, help="the N of 1 vs N workers (default 8)")
    parser.add_argument(
        "--levels",
        default="graph,api,store",
        help=f"report: the levels run (default graph,api,store; all: {','.join(LEVELS)})",
    )
    parser.add_argument(
        "--lengths",
        help="long levels: thread lengths in turns, comma-separated (default 10,100,1000)",
    )
    parser.add_argument("--json", type=Path, help="also save the raw results here")
    parser.add_argument(
        "--scale",
        type=Path,
        help="report: add the scale level from this `python -m benchmarks scale --json` file",
    )
    parser.add_argument("--docs", type=Path, default=ROOT / "docs", help="report: where to write")
    parser.add_argument("--from", dest="source", type=Path, help="report: re-render saved results")
    parser.add_argument(
        "--note", default="", help="report: a paragraph about this run's conditions"
    )
    args = parser.parse_args(argv)

    if args.source:
        results = json.loads(args.source.read_text(encoding="utf-8"))
    else:
        from .runner import run

        shape = QUICK if args.quick else Shape()
        overrides = {k: getattr(args, k) for k in ("threads", "turns", "workers")}
        shape = Shape(**{**shape.__dict__, **{k: v for k, v in overrides.items() if v}})
        if args.lengths:
            lengths = tuple(int(n) for n in args.lengths.split(",") if n)
            if not lengths or min(lengths) < 1:
                parser.error(f"--lengths: positive turn counts, got {args.lengths!r}")
            shape = Shape(**{**shape.__dict__, "thread_lengths": lengths})
        dialects = [d for d in args.dialects.split(",") if d]
        unknown = set(dialects) - set(SETUPS)
        if unknown:
            parser.error(f"unknown dialect(s) {sorted(unknown)}; choose from {SETUPS}")
        levels = args.levels.split(",") if args.mode == "report" else [args.mode]
        if unknown := set(levels) - set(LEVELS):
            parser.error(f"--levels: unknown level(s) {', '.join(sorted(unknown))}")
        modes = [m for m in args.modes.split(",") if m]
        modes = ["sync", "async"] if modes == ["both"] else modes
        if unknown := set(modes) - {"sync", "async"}:
            parser.error(f"--modes: unknown mode(s) {', '.join(sorted(unknown))}")
        repeats = args.repeats or (1 if args.quick else 5)
        level_repeats: dict[str, int] = {}
        for item in (x for x in args.level_repeats.split(",") if x):
            level, _, count = item.partition("=")
            if level not in LEVELS or not count.isdigit() or int(count) < 1:
                parser.error(f"--level-repeats: expected LEVEL=N with a known level, got {item!r}")
            level_repeats[level] = int(count)
        results = run(
            dialects, levels, modes, repeats, shape, log=_log, level_repeats=level_repeats
        )
    if args.scale:
        results["scale"] = json.loads(args.scale.read_text(encoding="utf-8"))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")

    from .report import text_tables, write_docs

    print(text_tables(results))
    if args.mode == "report":
        if args.note:
            results["note"] = args.note  # the page is a function of the kept results
        args.docs.mkdir(parents=True, exist_ok=True)
        # The results the page is rendered from are kept beside its plots, also when
        # re-rendering (--from), so page and results never come from different runs.
        raw = args.docs / "img" / "bench-results.json"
        raw.parent.mkdir(parents=True, exist_ok=True)
        if "instructions" not in results and raw.exists():
            # The callgrind section comes from its own, slower run: kept across reports.
            kept = json.loads(raw.read_text(encoding="utf-8")).get("instructions")
            if kept:
                results["instructions"] = kept
        raw.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {raw}")
        print(f"wrote {write_docs(results, args.docs)}")
        if args.docs.resolve() == (ROOT / "docs").resolve():
            from . import readme

            print(f"wrote the Performance block of {readme.write(ROOT / 'README.md', results)}")
    return 1 if any("error" in r for r in results["runs"]) else 0


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
