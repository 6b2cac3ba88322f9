"""The benchmark harness (``python -m benchmarks``) runs end to end in --quick mode.

Correctness of the harness only: both savers (and both stores) of each database, sync
and async, graph, saver-API and store levels, report and plots written. No timing is
asserted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from benchmarks.__main__ import main  # noqa: E402
from benchmarks.report import METRICS  # noqa: E402

OURS = {"sync": "SQLAlchemySaver", "async": "AsyncSQLAlchemySaver"}
OFFICIAL = {
    "sqlite": {"sync": "SqliteSaver", "async": "AsyncSqliteSaver"},
    "postgres": {"sync": "PostgresSaver", "async": "AsyncPostgresSaver"},
    "mysql": {"sync": "PyMySQLSaver", "async": "AIOMySQLSaver"},
}
OUR_STORES = {"sync": "SQLAlchemyStore", "async": "AsyncSQLAlchemyStore"}
OFFICIAL_STORES = {
    "sqlite": {"sync": "SqliteStore", "async": "AsyncSqliteStore"},
    "postgres": {"sync": "PostgresStore", "async": "AsyncPostgresStore"},
    "mysql": {"sync": "PyMySQLStore", "async": "AIOMySQLStore"},
}


def contenders(dialect: str, level: str, mode: str) -> tuple[str, str]:
    if level == "store":
        return OUR_STORES[mode], OFFICIAL_STORES[dialect][mode]
    return OURS[mode], OFFICIAL[dialect][mode]


@pytest.fixture(
    params=[
        pytest.param("sqlite", marks=pytest.mark.sqlite),
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("mysql", marks=pytest.mark.mysql),
    ]
)
def dialect(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    # The benchmark reuses this session's servers instead of starting its own.
    if request.param == "postgres":
        monkeypatch.setenv(
            "LG_SQLA_TEST_POSTGRES_URL", request.getfixturevalue("postgres_admin_url")
        )
    if request.param == "mysql":
        monkeypatch.setenv("LG_SQLA_TEST_MYSQL_URL", request.getfixturevalue("mysql_admin_url"))
    return str(request.param)


def test_quick_report_runs_both_savers_sync_and_async(dialect: str, tmp_path: Path) -> None:
    # On SQLite, also the setup with the official saver at lg_sqla's synchronous=NORMAL.
    setups = ["sqlite", "sqlite-normal"] if dialect == "sqlite" else [dialect]
    code = main(["report", "--quick", "--dialects", ",".join(setups), "--docs", str(tmp_path)])

    results = json.loads((tmp_path / "img" / "bench-results.json").read_text(encoding="utf-8"))
    assert [r["error"] for r in results["runs"] if "error" in r] == []
    assert code == 0
    measured = {(r["dialect"], r["level"], r["mode"], r["saver"]) for r in results["runs"]}
    assert measured == {
        (setup, level, mode, saver)
        for setup in setups
        for level in ("graph", "api", "store")
        for mode in ("sync", "async")
        for saver in contenders(dialect, level, mode)
    }
    semantic = {"semantic_1k_per_s", "semantic_10k_per_s"}
    for run in results["runs"]:
        # The official stores have no semantic search on PostgreSQL without pgvector
        # (the benchmark's server) or on MariaDB: no figure, rather than a failure.
        official_store = run["level"] == "store" and not run["ours"] and dialect != "sqlite"
        lacking = semantic if official_store else set()
        assert set(run["metrics"]) == set(METRICS[run["level"]]) - lacking, run
        assert all(v > 0 for v in run["metrics"].values()), run

    page = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    for saver in [*OFFICIAL[dialect].values(), *OFFICIAL_STORES[dialect].values()]:
        assert f"| {saver} |" in page
    assert (
        "## Targets" in page and "issue 8" not in page and "×** (" in page
    )  # ratios were computed
    assert "## Store level (long-term memory)" in page
    for plot in ("bench-graph.png", "bench-api.png", "bench-store.png"):
        assert (tmp_path / "img" / plot).read_bytes().startswith(b"\x89PNG")


def test_store_mode_runs_both_stores_sync_and_async(
    dialect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m benchmarks store``: the store level alone, its table printed."""
    raw = tmp_path / "store.json"
    code = main(["store", "--quick", "--dialects", dialect, "--json", str(raw)])

    results = json.loads(raw.read_text(encoding="utf-8"))
    assert [r["error"] for r in results["runs"] if "error" in r] == []
    assert code == 0
    measured = {(r["level"], r["mode"], r["saver"]) for r in results["runs"]}
    assert measured == {
        ("store", mode, store)
        for mode in ("sync", "async")
        for store in contenders(dialect, "store", mode)
    }
    semantic = {"semantic_1k_per_s", "semantic_10k_per_s"}
    for run in results["runs"]:
        # The official stores have no semantic search on PostgreSQL without pgvector
        # (the benchmark's server) or on MariaDB: no figure, rather than a failure.
        lacking = semantic if not run["ours"] and dialect != "sqlite" else set()
        assert set(run["metrics"]) == set(METRICS["store"]) - lacking, run
        assert all(v > 0 for v in run["metrics"].values()), run
    printed = capsys.readouterr().out
    assert "## store (long-term memory)" in printed
    for store in OFFICIAL_STORES[dialect].values():
        assert f"| {store} |" in printed
    assert "= " in printed and "×" in printed  # ratios were computed
    assert "## graph level" not in printed and "## targets" not in printed


@pytest.mark.sqlite
def test_graph_variants_and_long_threads_run_both_savers(tmp_path: Path) -> None:
    """The ReAct agent and a long thread of the DeltaChannel chat graph (sync; level
    ``delta`` is the graph level on that graph, ``long`` the long level on the chat one)."""
    from benchmarks.long_level import metrics

    levels = ["react", "long-delta"]
    options = ["--levels", ",".join(levels), "--lengths", "2,4", "--docs", str(tmp_path)]
    code = main(["report", "--quick", "--dialects", "sqlite", "--modes", "sync", *options])

    results = json.loads((tmp_path / "img" / "bench-results.json").read_text(encoding="utf-8"))
    assert [r["error"] for r in results["runs"] if "error" in r] == []
    assert code == 0
    measured = {(r["level"], r["saver"]) for r in results["runs"]}
    assert measured == {
        (level, saver) for level in levels for saver in contenders("sqlite", level, "sync")
    }
    for run in results["runs"]:
        wanted = metrics((2, 4)) if run["level"] == "long-delta" else METRICS[run["level"]]
        assert set(run["metrics"]) == set(wanted)
        assert all(v > 0 for v in run["metrics"].values()), run
    page = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    assert "## Graph level: LangGraph's prebuilt ReAct agent" in page
    assert "### long-delta level" in page and "lg_sqla / official" in page
