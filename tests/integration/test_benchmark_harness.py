"""The benchmark harness (``python -m benchmarks``) runs end to end in --quick mode.

Correctness of the harness only: both savers of each database, sync and async, graph
and saver-API levels, report and plots written. No timing is asserted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.__main__ import main  # noqa: E402
from benchmarks.report import METRICS  # noqa: E402

OURS = {"sync": "SQLAlchemySaver", "async": "AsyncSQLAlchemySaver"}
OFFICIAL = {
    "sqlite": {"sync": "SqliteSaver", "async": "AsyncSqliteSaver"},
    "postgres": {"sync": "PostgresSaver", "async": "AsyncPostgresSaver"},
    "mysql": {"sync": "PyMySQLSaver", "async": "AIOMySQLSaver"},
}


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
        for level in ("graph", "api")
        for mode in ("sync", "async")
        for saver in (OURS[mode], OFFICIAL[dialect][mode])
    }
    for run in results["runs"]:
        assert set(run["metrics"]) == set(METRICS[run["level"]])
        assert all(v > 0 for v in run["metrics"].values()), run

    page = (tmp_path / "benchmarks.md").read_text(encoding="utf-8")
    for saver in OFFICIAL[dialect].values():
        assert f"| {saver} |" in page
    assert "## Targets (issue 8)" in page and "×** (" in page  # ratios were computed
    for plot in ("bench-graph.png", "bench-api.png"):
        assert (tmp_path / "img" / plot).read_bytes().startswith(b"\x89PNG")
