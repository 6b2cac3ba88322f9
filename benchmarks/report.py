"""Medians, per-repeat ratios, the targets, tables, plots and docs/benchmarks.md.

Every ratio is lg_sqla / the official saver, on the same database in the same run:
per repeat first (repeat r of lg_sqla against repeat r of the official saver, which
ran right before or after it), then the median of those per-repeat ratios.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import api_level, graph_level, long_level, store_level
from .contenders import OFFICIAL
from .databases import LABELS, base

METRICS = {
    "graph": graph_level.METRICS,
    "react": graph_level.METRICS,  # the graph level's measurements on other graphs
    "delta": graph_level.METRICS,
    "api": api_level.METRICS,
    "store": store_level.METRICS,
}
# The plots' row labels (LABELS spells out the SQLite=NORMAL variant at length).
SHORT = {
    "sqlite": "SQLite",
    "sqlite-normal": "SQLite NORMAL",
    "postgres": "PostgreSQL",
    "mysql": "MariaDB",
}

# The targets against the official savers: (level, metric, dialects) -> bound;
# ">=" for throughputs, "<=" else.
TARGETS: list[tuple[str, str, dict[str, float]]] = [
    ("graph", "turns_per_s", {"sqlite": 1.0, "postgres": 1.0, "mysql": 1.0}),
    ("graph", "turn_p50_ms", {"sqlite": 1.0, "postgres": 1.0, "mysql": 1.0}),
    ("graph", "get_state_ms", {"sqlite": 1.0, "postgres": 1.0, "mysql": 1.0}),
    ("graph", "history_ms", {"sqlite": 1.0, "postgres": 1.0, "mysql": 1.0}),
    ("api", "put_per_s", {"sqlite": 1.05, "postgres": 1.0, "mysql": 1.0}),
    ("api", "put_writes_per_s", {"sqlite": 1.0, "postgres": 1.0, "mysql": 1.5}),
    ("api", "get_latest_ms", {"sqlite": 1.0, "postgres": 1.0, "mysql": 0.8}),
    ("api", "get_by_id_ms", {"sqlite": 1.0, "postgres": 1.0, "mysql": 0.8}),
    ("api", "list_ms", {"sqlite": 1.0, "postgres": 1.0, "mysql": 0.5}),
    ("api", "scaling", {"postgres": 1.4, "mysql": 1.4}),
]


@dataclass
class Cell:
    ours: float | None  # median over repeats
    theirs: float | None
    ratios: list[float]  # per repeat, lg_sqla / official

    @property
    def ratio(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None


def cells(results: dict[str, Any]) -> dict[tuple[str, str, str, str], Cell]:
    """(level, dialect, mode, metric) -> Cell."""
    by_key: dict[tuple[str, str, str], dict[bool, dict[int, dict[str, float]]]] = {}
    for run in results["runs"]:
        if "metrics" not in run:
            continue
        key = (run["level"], run["dialect"], run["mode"])
        by_key.setdefault(key, {True: {}, False: {}})[run["ours"]][run["repeat"]] = run["metrics"]
    out: dict[tuple[str, str, str, str], Cell] = {}
    for (level, dialect, mode), sides in by_key.items():
        if level not in METRICS:
            continue  # the long levels: their own table (long_level.text_table)
        for metric in METRICS[level]:
            # A metric may be missing on one side (the store level's semantic search:
            # the official store has none on that database).
            ours = [m[metric] for m in sides[True].values() if metric in m]
            theirs = [m[metric] for m in sides[False].values() if metric in m]
            paired = [
                r
                for r in sorted(set(sides[True]) & set(sides[False]))
                if metric in sides[True][r] and metric in sides[False][r]
            ]
            ratios = [sides[True][r][metric] / sides[False][r][metric] for r in paired]
            out[(level, dialect, mode, metric)] = Cell(
                statistics.median(ours) if ours else None,
                statistics.median(theirs) if theirs else None,
                ratios,
            )
    return out


def _num(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _ratio(cell: Cell | None) -> str:
    if cell is None or cell.ratio is None:
        return "–"
    return f"{cell.ratio:.2f}×"


def _errors(results: dict[str, Any]) -> list[str]:
    """Failed attempts, the same error of the same database counted once."""
    seen: dict[tuple[str, str], list[str]] = {}
    for r in results["runs"]:
        where = f"{r['level']} {r['mode']} r{r['repeat']} {r['saver']}"
        outcome = "no figure" if "error" in r else "retried, measured"
        for error in r.get("failed_attempts", []):
            first = error.splitlines()[0]
            key = (LABELS[r["dialect"]], first.split("'/tmp/")[0])  # temp file names vary
            seen.setdefault(key, []).append(f"{where} ({outcome})")
    return [
        f"{db}: `{error}` - {len(places)} attempt(s): {', '.join(dict.fromkeys(places))}"
        for (db, error), places in seen.items()
    ]


def targets_table(results: dict[str, Any]) -> str:
    table = cells(results)
    rows = [
        "| target | database | bound | sync | async |",
        "|---|---|---|---|---|",
    ]
    for level, metric, bounds in TARGETS:
        label, _unit, higher = METRICS[level][metric]
        for dialect in results["dialects"]:
            if dialect not in bounds:
                continue
            if level not in results["levels"]:
                continue
            bound = bounds[dialect]
            out = []
            for mode in ("sync", "async"):
                cell = table.get((level, dialect, mode, metric))
                if cell is None or cell.ratio is None:
                    out.append("–")
                    continue
                met = cell.ratio >= bound if higher else cell.ratio <= bound
                each = ", ".join(f"{r:.2f}" for r in cell.ratios)
                out.append(f"{'✅' if met else '❌'} **{cell.ratio:.2f}×** ({each})")
            sign = "≥" if higher else "≤"
            name = f"{level}: {label}"
            rows.append(f"| {name} | {LABELS[dialect]} | {sign} {bound:g}× | {out[0]} | {out[1]} |")
    return "\n".join(rows)


def detail_table(results: dict[str, Any], level: str, metrics: list[str]) -> str:
    table = cells(results)
    spec = METRICS[level]
    official = store_level.OFFICIAL if level == "store" else OFFICIAL
    head = ["database", "mode", "official store" if level == "store" else "official saver"]
    for metric in metrics:
        label, unit, higher = spec[metric]
        head.append(f"{label} ({unit}, {'↑' if higher else '↓'})")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for dialect in results["dialects"]:
        for mode in results["modes"]:
            row = [LABELS[dialect], mode, official[(base(dialect), mode == "async")]]
            for metric in metrics:
                cell = table.get((level, dialect, mode, metric))
                if cell is None:
                    row.append("–")
                else:
                    row.append(f"{_num(cell.ours)} / {_num(cell.theirs)} = {_ratio(cell)}")
            rows.append("| " + " | ".join(row) + " |")
    return "\n".join(rows)


GRAPH_COLUMNS = list(graph_level.METRICS)
API_COLUMNS = [
    "put_per_s",
    "put_writes_per_s",
    "get_latest_ms",
    "get_by_id_ms",
    "list_ms",
    "storage_per_checkpoint",
]
TINY_COLUMNS = ["tiny_put_us", "tiny_get_us"]
CPU_COLUMNS = ["put_cpu_us", "put_writes_cpu_us", "get_cpu_us"]
WORKER_COLUMNS = ["calls_1_per_s", "calls_n_per_s", "scaling"]
STORE_COLUMNS = list(store_level.METRICS)


def text_tables(results: dict[str, Any]) -> str:
    """What the command line prints: every table of the report."""
    parts = []
    if "graph" in results["levels"]:
        parts += ["## graph level", detail_table(results, "graph", GRAPH_COLUMNS)]
    if "react" in results["levels"]:
        parts += ["## graph level: ReAct agent", detail_table(results, "react", GRAPH_COLUMNS)]
    if "delta" in results["levels"]:
        parts += [
            "## graph level: chat graph, messages on a DeltaChannel",
            detail_table(results, "delta", GRAPH_COLUMNS),
        ]
    parts += [
        long_level.text_table(results, level)
        for level in long_level.LEVELS
        if level in results["levels"]
    ]
    if "api" in results["levels"]:
        parts += [
            "## saver API: replay and reads",
            detail_table(results, "api", API_COLUMNS),
            "## saver API: client CPU per call (sync: the thread's; async: the process's)",
            detail_table(results, "api", CPU_COLUMNS),
            "## saver API: per-call overhead, tiny state",
            detail_table(results, "api", TINY_COLUMNS),
            f"## saver API: 1 vs {results['shape']['workers']} workers sharing one saver",
            detail_table(results, "api", WORKER_COLUMNS),
        ]
    if "store" in results["levels"]:
        parts += ["## store (long-term memory)", detail_table(results, "store", STORE_COLUMNS)]
    if {"graph", "api"} & set(results["levels"]):  # the targets are the savers'
        parts += ["## targets, ratio lg_sqla / official", targets_table(results)]
    errors = _errors(results)
    if errors:
        parts += ["## errors", "\n".join(f"* {e}" for e in errors)]
    return "\n\n".join(parts) + "\n"


# --- plots ---------------------------------------------------------------------------


def plot(results: dict[str, Any], level: str, metrics: list[str], path: Path) -> None:
    """One panel per metric: the lg_sqla / official ratio of each database and mode as a
    horizontal bar, its value written at the bar's end (rows never collide, however
    many databases), the parity line at 1.0, and the target as a tick where there is one.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = cells(results)
    combos = [(d, m) for d in results["dialects"] for m in results["modes"]]
    names = [f"{SHORT[d]} {m}" for d, m in combos]
    bounds = {(lv, m): b for lv, m, b in TARGETS}
    cols = len(metrics) if len(metrics) <= 4 else 3  # one row of up to 4, else rows of 3
    rows = (len(metrics) + cols - 1) // cols
    panel_height = 0.9 + 0.32 * len(combos)
    fig, axes = plt.subplots(
        rows, cols, figsize=(4.2 * cols + 1.0, panel_height * rows + 0.6), squeeze=False
    )
    for n, (ax, metric) in enumerate(zip(axes.flat, metrics, strict=False)):
        label, _unit, higher = METRICS[level][metric]
        values = []
        for dialect, mode in combos:
            cell = table.get((level, dialect, mode, metric))
            values.append(cell.ratio if cell is not None else None)
        marks = bounds.get((level, metric), {}).values()
        top = max([1.0, *marks, *(v for v in values if v is not None)])
        for y, ((dialect, _mode), value) in enumerate(zip(combos, values, strict=True)):
            bound = bounds.get((level, metric), {}).get(dialect)
            if value is None:
                ax.text(0.02 * top, y, "no result", va="center", fontsize=8, color="grey")
                continue
            line = 1.0 if bound is None else bound
            good = value >= line if higher else value <= line
            ax.barh(y, value, height=0.7, color="#3a7d44" if good else "#c0504d")
            # After the bar and after the target's tick, so neither hides the number.
            after = max(value, bound or 0.0) + 0.02 * top
            ax.text(after, y, f"{value:.2f}×", va="center", fontsize=8)
            if bound is not None:
                ax.vlines(bound, y - 0.42, y + 0.42, colors="black", lw=1.4)
        ax.axvline(1.0, color="grey", linewidth=0.8, linestyle="dashed")
        ax.set_yticks(range(len(combos)))
        # Rows are the same in every panel: named once, in the first column.
        ax.set_yticklabels(names if n % cols == 0 else [], fontsize=8)
        ax.invert_yaxis()  # the first database on top, as in the tables
        ax.set_xlim(0, top * 1.25)  # room for the value after the longest bar
        ax.tick_params(axis="x", labelsize=8)
        ax.set_title(f"{label}\n{'higher' if higher else 'lower'} is better", fontsize=9)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.axis("off")
    against = "store" if level == "store" else "saver"
    fig.suptitle(
        f"lg_sqla / official {against}: median of the per-repeat ratios. Dashed: parity (1.0); "
        "black tick: target; green: target met (or better than parity where none)",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


# --- docs/benchmarks.md --------------------------------------------------------------


def machine_text(results: dict[str, Any]) -> str:
    m = results["machine"]
    # "PostgreSQL 15.18 (Debian ...) on x86_64-pc-linux-gnu, compiled by ...": keep the start.
    servers = "; ".join(f"{LABELS[d]}: {v.split(' on ')[0]}" for d, v in m["servers"].items())
    s = results["shape"]
    shape = (
        f"{s['threads']} threads × {s['turns']} turns, a long thread of {s['long_turns']} "
        f"turns, {s['reads']} samples per read, {s['tiny_calls']} tiny calls, 1 vs "
        f"{s['workers']} workers"
    )
    packages = ", ".join(f"{k} {v}" for k, v in m["packages"].items())
    load = (
        f"load average (1/5/15 min) {tuple(round(x, 2) for x in m['loadavg_start'])} at the "
        f"start, {tuple(round(x, 2) for x in m['loadavg_end'])} at the end"
    )
    overrides = "".join(f" ({level}: {n})" for level, n in results.get("level_repeats", {}).items())
    return (
        f"* run: {results['date']}, lg_sqla at commit {m.get('commit', 'unknown')}, "
        f"{results['seconds']} s, {results['repeats']} interleaved "
        f"repeats{overrides}; {shape}\n"
        f"* machine: {m['cores']} cores ({m['cpu']}), {m['memory']}, {m['os']}, "
        f"Python {m['python']}; {load}\n"
        f"* servers (same machine, loopback): {servers}\n"
        f"* packages: {packages}"
    )


def write_docs(results: dict[str, Any], docs: Path) -> Path:
    """Write docs/benchmarks.md and its plots (docs/img/bench-*.png)."""
    img = docs / "img"
    for level, metrics in PLOTS.items():
        if level in results["levels"]:
            plot(results, level, metrics, img / f"bench-{level}.png")
    path = docs / "benchmarks.md"
    path.write_text(page(results), encoding="utf-8")
    return path


# The levels with a plot on the page, and the metrics each plot shows.
PLOTS = {
    "graph": GRAPH_COLUMNS,
    "api": [*API_COLUMNS, *TINY_COLUMNS, "scaling"],
    "store": STORE_COLUMNS,
}


def page(results: dict[str, Any]) -> str:
    """docs/benchmarks.md: a function of the results alone (their ``note`` included),
    so the page can be checked against the results kept beside it."""
    plots = [level for level in PLOTS if level in results["levels"]]
    return render(results, plots, results.get("note", ""))


def render(results: dict[str, Any], plots: list[str], note: str) -> str:
    workers = results["shape"]["workers"]
    parts = [HEADER, "## This run", machine_text(results)]
    if note:
        parts.append(note)
    errors = _errors(results)
    if errors:
        parts.append("Failed attempts in this run:\n\n" + "\n".join(f"* {e}" for e in errors))
    parts += [
        "## Targets",
        "Ratio lg_sqla / official saver on the same database in this run: the median of "
        "the per-repeat ratios (each repeat's ratios in brackets). ✅ = target met. "
        "On SQLite both savers commit durably (`synchronous=FULL`); the detail tables "
        "below also show SQLite with both at `synchronous=NORMAL`.",
        targets_table(results),
    ]
    if "graph" in plots:
        parts += [
            "## Graph level",
            GRAPH_TEXT,
            "![graph-level ratios](img/bench-graph.png)",
            "Each cell: lg_sqla / official saver (medians over repeats) = median per-repeat "
            "ratio. ↑ higher is better, ↓ lower is better.",
            detail_table(results, "graph", GRAPH_COLUMNS),
        ]
    if "api" in plots:
        parts += [
            "## Saver API level",
            API_TEXT,
            "![saver-API ratios](img/bench-api.png)",
            "### Replay of the graph's calls, and reads of its data",
            detail_table(results, "api", API_COLUMNS),
            "### Client CPU per call",
            "Mean CPU time per call in the replay and the latest-checkpoint reads: sync, "
            "the calling thread's (`time.thread_time`); async, the process's "
            "(`time.process_time`: the event loop's thread and the driver's worker "
            "threads). Python the saver spends here competes with the graph's own for "
            "the GIL.",
            detail_table(results, "api", CPU_COLUMNS),
            "### Per-call overhead on tiny state",
            detail_table(results, "api", TINY_COLUMNS),
            f"### 1 vs {workers} workers sharing one saver",
            WORKERS_TEXT.format(workers=workers),
            detail_table(results, "api", WORKER_COLUMNS),
        ]
    for level, title in (
        ("react", "Graph level: LangGraph's prebuilt ReAct agent"),
        ("delta", "Graph level: the chat graph with `messages` on a DeltaChannel"),
    ):
        if level in results["levels"]:
            parts += [
                f"## {title}",
                GRAPH_VARIANT_TEXT,
                detail_table(results, level, GRAPH_COLUMNS),
            ]
    long_levels = [level for level in long_level.LEVELS if level in results["levels"]]
    if long_levels:
        parts += ["## Long threads", LONG_TEXT]
        for level in long_levels:
            # The long level's own text table, kept monospaced (a code block).
            title, _, body = long_level.text_table(results, level).partition("\n")
            parts += [title.replace("## ", "### "), f"```text\n{body.strip(chr(10))}\n```"]
    if "store" in plots:
        parts += [
            "## Store level (long-term memory)",
            STORE_TEXT.format(calls=results["shape"].get("store_calls", "?")),
            "![store ratios](img/bench-store.png)",
            "Each cell: lg_sqla / official store (medians over repeats) = median per-repeat "
            "ratio. ↑ higher is better.",
            detail_table(results, "store", STORE_COLUMNS),
        ]
    if "instructions" in results:
        from .instructions_table import section

        parts.append(section(results["instructions"]))
    if "scale" in results:
        parts += ["## Big tables (scale level)", *scale_sections(results["scale"])]
    parts += [
        METHOD,
        STATIC_TEXT.format(
            table=statements_table(),
            optimisations=optimisations_section(),
            other=other_measurements(),
        ),
    ]
    return "\n\n".join(parts) + "\n"


def scale_sections(scale: dict[str, Any]) -> list[str]:
    """The scale level (``python -m benchmarks scale --json``): per database, each
    cross-thread call's median time and client CPU at each size, and its growth."""
    sizes = [str(s) for s in scale["sizes"]]
    load = tuple(round(x, 2) for x in scale.get("load_start", ()))
    sections = [
        SCALE_TEXT,
        f"Run: {scale.get('date', '?')}, lg_sqla at commit {scale.get('commit', '?')}, "
        f"{scale.get('seconds', '?')} s; load average at the start {load}.",
    ]
    for dialect, results in scale["results"].items():
        head = "| call | " + " | ".join(f"{int(s):,} threads" for s in sizes) + " |"
        lines = [head, "|---" * (len(sizes) + 1) + "|"]
        for name in results[sizes[0]]:
            first = results[sizes[0]][name]["ms"]
            cells = []
            for size in sizes:
                t = results[size][name]
                growth = "" if size == sizes[0] else f" ({t['ms'] / first:.1f}×)"
                cells.append(f"{_num(t['ms'])} ms{growth}, CPU {_num(t['cpu_ms'])}")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        sections += [f"### {LABELS[dialect]}", "\n".join(lines)]
    return sections


SCALE_TEXT = """\
How each call that spans threads grows with the tables (`benchmarks/scale_level.py`,
run on its own: `python -m benchmarks scale --json F`, then `report --scale F`): one
database per dialect grows through the sizes, each thread holding 10 checkpoints, 20
pending writes and 30 channel values, built with set-based SQL from a thread the saver
wrote (sample threads' built rows are compared with the saver's, column by column).
Each cell: median wall time per call (its growth over the smallest size), and the
client's thread CPU in ms. A call whose work is bounded by its page stays near 1×;
`tests/integration/checkpoint/test_query_plans.py` and `test_inspect_plans.py` assert the bounded
work with each database's own counters."""


GRAPH_VARIANT_TEXT = """\
The graph level's measurements (`benchmarks/graph_level.py`) on another graph of
`benchmarks/workload.py`: the ReAct agent is `create_react_agent` with a deterministic
fake tool-calling model and the chat graph's `lookup` tool (5 checkpoints a turn); the
DeltaChannel variant is the chat graph with `messages` stored as each step's writes
plus a snapshot every 100 updates. Each cell: lg_sqla / official saver (medians over
repeats) = median per-repeat ratio."""

LONG_TEXT = """\
One thread run turn after turn on a fresh database (`benchmarks/long_level.py`): at
each length, the turn latency (median of the 5 turns ending there) and the storage per
turn (the database's bytes on all tables, data, indexes and TOAST / LOBs, less the
empty schema's, divided by the turns). Medians over repeats; the ratio row is
lg_sqla / official saver."""

HEADER = """\
# Benchmarks

<!-- Generated by `python -m benchmarks report`: edit benchmarks/report.py, not this file. -->

lg_sqla against the saver each user would otherwise pick, on the same database
server in the same run: `SqliteSaver` / `AsyncSqliteSaver`
(langgraph-checkpoint-sqlite), `PostgresSaver` / `AsyncPostgresSaver`
(langgraph-checkpoint-postgres), and on MariaDB the community `PyMySQLSaver` /
`AIOMySQLSaver` (langgraph-checkpoint-mysql; there is no official MySQL saver);
and lg_sqla's store against the same packages' stores (`SqliteStore`,
`PostgresStore`, `PyMySQLStore` and their async twins).
Every figure can be reproduced:

```sh
.venv/bin/pip install -e . --group bench         # the official savers, matplotlib
.venv/bin/python -m benchmarks report            # everything: rewrites this page + plots
.venv/bin/python -m benchmarks report --quick --dialects sqlite --docs /tmp/x   # a smoke run
.venv/bin/python -m benchmarks graph --dialects postgres --modes async         # print tables only
.venv/bin/python -m benchmarks api --dialects mysql --repeats 5
.venv/bin/python -m benchmarks store --dialects sqlite,postgres --repeats 5    # stores only
```

PostgreSQL and MariaDB are private servers started by `tests/servers.py` (or the
ones named by `LG_SQLA_TEST_POSTGRES_URL` / `LG_SQLA_TEST_MYSQL_URL`); SQLite is a
file. `python -m benchmarks report --from docs/img/bench-results.json` re-renders
this page, and the figures of README.md's Performance section, from the raw results
of the run shown, which are kept beside the plots; `tests/unit/test_benchmark_claims.py`
fails when either no longer matches them.
Wall-clock figures depend on the machine and its load: compare the two savers within
one run (that is what the ratios do), not runs of different days."""

GRAPH_TEXT = """\
A chat agent as a real LangGraph `StateGraph` (benchmarks/workload.py): a
`messages` channel with tool calls (a deterministic fake model asks a `ToolNode`
tool, then answers), a ~50 KB `notes` dict that changes every 3 turns and a `plan`
channel that changes every turn; 6 checkpoints per turn. Turns go round-robin over
the threads with `graph.invoke` (sync saver) or `graph.ainvoke` (async saver) and
LangGraph's default durability (`"async"`). turns/s counts only those turns; the
latency is per `invoke`. `get_state` and the full `get_state_history` are then
timed on a separate, longer thread (`long_turns` turns)."""

API_TEXT = """\
The `put` / `put_writes` calls LangGraph made for the same graph workload, recorded
once and replayed through each saver's API (throughput = calls / time spent in
those calls); then `get_tuple` of each thread's latest checkpoint, `get_tuple` of
every checkpoint of one thread by id, and `list` of one whole thread."""

WORKERS_TEXT = """\
Each worker replays one thread's calls under a thread id of its own and reads the
latest checkpoint after every `put`; {workers} workers are threads sharing one sync
saver, or asyncio tasks sharing one async saver. Scaling = calls/s with {workers}
workers / calls/s with 1; its ratio is lg_sqla's scaling / the official saver's.
The official savers serialize calls on an instance-wide lock (one connection);
lg_sqla draws connections from SQLAlchemy's pool (default size 5, overflow 10)."""

STORE_TEXT = """\
lg_sqla's `SQLAlchemyStore` / `AsyncSQLAlchemyStore` against the official store of
each database (benchmarks/store_level.py), each on a fresh database: {calls} calls of
each kind, one at a time, each timed (rate = calls / time spent in them) after a
warm-up: `put` of a new item (spread over 4 user namespaces), `get` of each stored
item, `search` of one user's namespace with an equality filter and `limit=10`, and
`batch` of 5 mixed ops (a put, two gets, a filtered search, a `list_namespaces`);
then semantic search (`query=`, `limit=10`, a deterministic 64-dimension fake
embedding) over 1k and 10k items, ranked natively where the store can (sqlite-vec;
the official PostgreSQL and MariaDB stores have no figure: no pgvector on the
benchmark's server, no vector search in the MariaDB store), and `list_namespaces`
under a prefix of 10k namespaces. The official async stores (`AsyncBatchedBaseStore`) gather
concurrent calls into one batch; these calls come one at a time."""

METHOD = """\
## Method

* A measurement that raises is retried once on a fresh database; failed attempts
  are listed under "This run".
* Interleaved repeats: for each database, level and mode, repeat *r* runs both
  savers back to back, lg_sqla first on even *r*, the official saver first on odd
  *r*; every saver gets a fresh database (SQLite: a fresh file) on the same server.
* Same data: the workload is deterministic (fixed seed, message and tool-call ids);
  the API level replays one recording of the graph's own calls, with a private copy
  of the arguments for each saver made before the clock starts.
* Warm-up: one graph turn (or one read) on a throwaway thread before timing;
  connecting and `setup()` are never timed.
* GC: before each measurement the heap is collected and frozen (`gc.freeze()`), so
  no contender pays for another's garbage; the collector stays on while timing, as in
  production.
* How each saver is opened is in benchmarks/contenders.py: lg_sqla with
  `from_conn_string` and the README's URLs (psycopg 3; PyMySQL / asyncmy with
  `charset=utf8mb4`; aiosqlite); the official savers with their `from_conn_string`
  (PostgreSQL: `autocommit=True, prepare_threshold=0, row_factory=dict_row`, their
  own choice). `AIOMySQLSaver` cannot send `bytes` with aiomysql 0.3.2 and
  PyMySQL >= 1.2.3 (aio-libs/aiomysql#1080); the benchmark, and only it, restores the
  helper aiomysql calls (`patch_aiomysql_bytes`).
* The servers are tuned for tests, not durability (PostgreSQL `fsync=off`,
  `synchronous_commit=off`; InnoDB `innodb_flush_log_at_trx_commit=0`): CPU and
  round trips are measured, not disks.
* SQLite is the exception: both savers run as shipped, with WAL and SQLite's default
  `synchronous=FULL`, which fsyncs the WAL at every commit, so the "SQLite" write
  figures include the disk's fsync (and whatever else loads it). The "SQLite, both
  synchronous=NORMAL" rows set both savers' connections to NORMAL (safe from
  application crashes; the last commits can be lost to a power cut) and compare code
  without the fsync."""

# Statements per call, asserted by the tests (not timed): the call, its count on SQLite,
# PostgreSQL and MySQL/MariaDB, and the test that asserts it. The page's table and the
# README's Performance block (benchmarks/readme.py) are both written from this list.
STATEMENTS: list[tuple[str, tuple[str, str, str], str]] = [
    ("`get_tuple`", ("1", "1", "1"), "`test_statement_counts.py`"),
    ("`list`, per page of `list_page_size` (100)", ("1", "1", "1"), "same"),
    ("`put`", ("2", "1", "2"), "same"),
    ("`put_writes`", ("1", "1", "1"), "same"),
    (
        "`get_delta_channel_history`, any chain",
        ("2", "2", "3 (1 `SET SESSION`)"),
        "`test_delta_history.py`",
    ),
    ("`prune` of one thread (no DeltaChannel)", ("4", "4", "4"), "`test_maintenance.py`"),
]

# Figures of `python -m benchmarks prune` and `storage`, which are not part of the
# report's run: stated on the page and quoted by the README from here only.
PRUNE_CHECKPOINTS = 10_000
PRUNE_SECONDS = {"sqlite": 0.15, "postgres": 0.06, "mysql": 0.38}
PRUNE_STATEMENTS = 4
# What `CompressedSerializer` cut a 100-turn chat thread's storage by, per database.
COMPRESSION_CUT = {"sqlite": "about 20×", "mysql": "about 20×", "postgres": "1.5×"}


def statements_table() -> str:
    rows = [
        "| call | SQLite | PostgreSQL | MySQL/MariaDB | test |",
        "|---|---|---|---|---|",
    ]
    rows += [f"| {call} | {' | '.join(counts)} | {test} |" for call, counts, test in STATEMENTS]
    return "\n".join(rows)


# What `python -m benchmarks.optimisations --write` measured (kept in the repository:
# the figures of the section below, re-rendered with the page).
OPTIMISATIONS = Path(__file__).resolve().parents[1] / "docs" / "img" / "optimisations.json"
OPTIMISATION_NAMES = {
    "kept_connection": "a pooled connection kept between calls (`runtime/kept.py`)",
    "remembered_decision": "the path decision remembered (`runtime/routing.py`)",
    "kept_cursors": "psycopg's cursor kept with its connection (`DirectDriver.keeps_cursors`)",
    "autocommit_flag": "psycopg's autocommit flag written directly (`internals.py`)",
}
CALLS = ("put", "get_tuple", "put_writes")


def optimisations_section() -> str:
    import json

    measured = json.loads(OPTIMISATIONS.read_text())
    rows = [
        "| optimisation | database | " + " | ".join(f"`{c}`: off → on" for c in CALLS) + " |",
        "|---|---|---|---|---|",
    ]
    for dialect, variants in measured["instructions"].items():
        on = variants["on"]
        for variant, off in variants.items():
            if variant == "on":
                continue
            cells = [
                f"{off[c] / 1e3:,.0f}k → {on[c] / 1e3:,.0f}k ({(on[c] - off[c]) / off[c]:+.1%})"
                for c in CALLS
            ]
            rows.append(
                f"| {OPTIMISATION_NAMES[variant]} | {LABELS[dialect]} | {' | '.join(cells)} |"
            )
    return OPTIMISATIONS_TEXT.format(
        calls=measured["calls"], warm_up=measured["warm_up"], table="\n".join(rows)
    )


def other_measurements() -> str:
    assert COMPRESSION_CUT["sqlite"] == COMPRESSION_CUT["mysql"]  # one clause names both
    return OTHER_TEXT.format(
        checkpoints=f"{PRUNE_CHECKPOINTS:,}",
        seconds=PRUNE_SECONDS,
        statements=PRUNE_STATEMENTS,
        cut=COMPRESSION_CUT,
    )


STATIC_TEXT = """\
## Statements per call (asserted by the tests, not timed)

{table}

These counts hold on both execution paths: through SQLAlchemy Core (what an engine
with event listeners, like the tests' statement counter, gets) and on the direct
path the benchmark measures (`lg_sqla/runtime/direct.py`; `test_direct_path.py` reads what
SQLite itself executed through its trace callback).

{optimisations}

## Other measurements

{other}"""

OPTIMISATIONS_TEXT = """\
## Small optimisations of the direct path (instructions per call, not timed)

Each of these saves from a fraction of a percent to about a sixth of a hot call's
instructions (a negative figure: the call costs that much less with it on); each is
kept with its gain measured here, by `python -m benchmarks.optimisations --write
docs/img/optimisations.json` (callgrind, the whole client process, {calls} calls
after {warm_up} warm-up rounds of a small checkpoint of two channels and two writes;
each optimisation turned off alone, on the databases where it applies). Servers are
not counted. Instruction counts barely depend on the machine's load, except where the
client waits for the server: psycopg polls its socket until the answer is there, which
moves PostgreSQL's figures by about 1% between runs (SQLite's and MariaDB's by 0.3%).

{table}"""

OTHER_TEXT = """\
`python -m benchmarks prune` (prune a {checkpoints}-checkpoint thread per database) and
`python -m benchmarks storage` (bytes per checkpoint, compression off / on) print
their tables; they are not part of this page's run. Earlier results: prune of one
{checkpoints}-checkpoint thread took {seconds[sqlite]} s on SQLite,
{seconds[postgres]} s on PostgreSQL and {seconds[mysql]} s on MariaDB, {statements}
statements each; `CompressedSerializer` (zstd) cut a 100-turn chat thread's storage
{cut[sqlite]} on SQLite and MariaDB and {cut[postgres]} on PostgreSQL (which already
compresses large values with TOAST)."""
