"""The table of ``python -m benchmarks instructions``'s results (docs/benchmarks.md's
section "Instructions per call"): what the measuring side (instructions.py) and the page
(report.py) share, so neither imports the other's whole."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .databases import LABELS

STORE_CALLS = ("store put", "store get", "store search (filter, 20 items)", "store batch (4 ops)")
SAVER_CALLS = ("put", "put_writes", "get_tuple (latest)", "get_tuple (by id)", "graph turn")
FAMILIES = {"store": STORE_CALLS, "saver": SAVER_CALLS}
DIALECTS = ("sqlite", "postgres", "mysql")
# Ratio lg_sqla / official at or below which a cell meets issue 29's target.
TARGETS = {"store": 1.0, "saver": 1.1, "graph turn": 1.05}


def _cells(
    results: dict[str, Any],
) -> Iterator[tuple[str, str, str, dict[str, Any], dict[str, Any]]]:
    """(dialect, mode, family, lg_sqla's entry, the official one's) of each measured pair."""
    by_key = {(c["dialect"], c["mode"], c["family"], c["ours"]): c for c in results["cells"]}
    for (dialect, mode, family, ours), entry in by_key.items():
        if ours:
            yield dialect, mode, family, entry, by_key[(dialect, mode, family, False)]


def table(results: dict[str, Any]) -> str:
    """Markdown: one row per call, one column per database and mode; each cell the ratio
    lg_sqla / official, with both instruction counts (thousands) under it."""
    columns = sorted(
        {(d, m) for d, m, *_ in _cells(results)},
        key=lambda c: (DIALECTS.index(c[0]), c[1] != "sync"),
    )
    found = {(d, m, f): (ours, other) for d, m, f, ours, other in _cells(results)}
    header = "| call | " + " | ".join(f"{LABELS[d]} {m}" for d, m in columns) + " |"
    lines = [header, "|---|" + "---|" * len(columns)]
    measured = {c["family"] for c in results["cells"]}
    for family, names in ((f, n) for f, n in FAMILIES.items() if f in measured):
        for name in names:
            row = [name]
            for dialect, mode in columns:
                ours, other = found.get((dialect, mode, family), ({}, {}))
                if "per_call" not in ours or "per_call" not in other:
                    row.append("error")
                    continue
                mine, theirs = ours["per_call"][name], other["per_call"][name]
                ratio = mine / theirs
                target = TARGETS.get(name, TARGETS[family])
                mark = "" if ratio <= target else "**"
                row.append(f"{mark}{ratio:.2f}×{mark} ({mine / 1e3:,.0f}k / {theirs / 1e3:,.0f}k)")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def section(results: dict[str, Any]) -> str:
    """docs/benchmarks.md's section on these results."""
    names = sorted({f"{c['name']}" for c in results["cells"] if not c["ours"]})
    errors = [
        f"* {c['dialect']} {c['mode']} {c['name']}: {c['error']}"
        for c in results["cells"]
        if "error" in c
    ]
    return "\n\n".join(
        [
            "## Instructions per call (callgrind)",
            "Instructions the client process executes per call (`valgrind --tool=callgrind`, "
            "every thread), lg_sqla / the official store or saver of the same database "
            f"({', '.join(names)}); in brackets both counts, in thousands. "
            f"{results['calls']} calls of each kind ({results['turns']} graph turns) after "
            f"{results['warm_up']} of warm-up, a fresh database per contender, "
            "`PYTHONHASHSEED=0`. Unlike wall-clock time, this figure does not move with the "
            "machine's load; it leaves out the database server's work. In bold: above the "
            "target (store calls 1.0×, saver calls 1.1×, a graph turn 1.05×). "
            f"Commit {results.get('commit', 'unknown')}; regenerate with "
            "`python -m benchmarks instructions` (`benchmarks/instructions.py`).",
            table(results),
            *(["Failed cells:\n\n" + "\n".join(errors)] if errors else []),
            *(
                [
                    "The baseline: the same measure at commit "
                    f"{baseline.get('commit', 'unknown')}.",
                    table(baseline),
                ]
                if (baseline := results.get("baseline"))
                else []
            ),
        ]
    )
