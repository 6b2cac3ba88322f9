"""The README's performance claims are the benchmark's: nothing stated that the run did not
measure.

docs/benchmarks.md and the generated block of README.md's Performance section are both
written by ``python -m benchmarks report`` from the results kept in
docs/img/bench-results.json. These tests fail when either file was edited by hand or
left behind by a new run, and, independently of the README's generator, when a ratio,
the repeat count or an "ahead"/"behind" in the README disagrees with the page's tables.
No server, no benchmark run: the kept results only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import readme, report  # noqa: E402

RESULTS = ROOT / "docs" / "img" / "bench-results.json"
PAGE = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
# The page's sections whose tables hold the ratios the README quotes.
QUOTED_SECTIONS = ("## Graph level\n", "### Replay of the graph's calls", "### 1 vs ")
DATABASES = {"SQLite", "PostgreSQL", "MariaDB"}


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(RESULTS.read_text(encoding="utf-8"))
    return loaded


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _block() -> str:
    text = _text(README)
    return text[text.index(readme.BEGIN) : text.index(readme.END)]


def _flat(text: str) -> str:
    return " ".join(text.split())


def _rows(table: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]


def _first_table(text: str) -> str:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


def _page_ratios() -> dict[tuple[str, str, str, str], float]:
    """(database, mode, measure, arrow) -> the ratio the page prints."""
    page = _text(PAGE)
    found: dict[tuple[str, str, str, str], float] = {}
    for heading in QUOTED_SECTIONS:
        head, *rows = _rows(_first_table(page[page.index(heading) :]))
        for row in rows:
            database, mode = row[0], row[1]
            for column, cell in zip(head[3:], row[3:], strict=True):
                measure, _, unit = column.rpartition(" (")
                ratio = re.search(r"= ([\d.]+)×$", cell)
                if ratio:
                    found[(database, mode, measure, unit[-2])] = float(ratio.group(1))
    return found


def _readme_ratios() -> dict[tuple[str, str, str, str], float]:
    head, *rows = _rows(_first_table(_block()))
    found: dict[tuple[str, str, str, str], float] = {}
    for row in rows:
        label, arrow = row[0].rsplit(" ", 1)
        measure = label.split(": ", 1)[1]
        for database, cell in zip(head[1:], row[1:], strict=True):
            sync, aio = (float(x.rstrip("×")) for x in cell.split(" / "))
            found[(database, "sync", measure, arrow)] = sync
            found[(database, "async", measure, arrow)] = aio
    return found


def test_the_page_is_written_from_the_kept_results(results: dict[str, Any]) -> None:
    assert report.page(results) == _text(PAGE), (
        "docs/benchmarks.md differs from what `python -m benchmarks report --from "
        "docs/img/bench-results.json` writes: edit benchmarks/report.py, not the page"
    )


def test_the_readme_block_is_written_from_the_kept_results(results: dict[str, Any]) -> None:
    assert readme.rewrite(_text(README), results) == _text(README), (
        "README.md's generated Performance block differs from the kept results: run "
        "`python -m benchmarks report --from docs/img/bench-results.json`"
    )


def test_every_ratio_in_the_readme_is_the_page_s() -> None:
    page, quoted = _page_ratios(), _readme_ratios()
    assert {database for database, *_ in quoted} == DATABASES
    assert len(quoted) == 2 * 3 * 10  # sync and async, 3 databases, 10 measures
    assert {key: page.get(key) for key in quoted} == quoted


def test_the_run_described_is_the_page_s(results: dict[str, Any]) -> None:
    """The repeat count, date and commit: the README's intro against the page's "This run"."""
    block, page = _flat(_block()), _flat(_text(PAGE))
    repeats = re.search(r"over (\d+) interleaved repeats( \([^)]*\))?", block)
    assert repeats is not None
    assert f"{repeats.group(1)} interleaved repeats{repeats.group(2) or ''};" in page
    assert int(repeats.group(1)) == results["repeats"]
    for fact in (results["date"], results["machine"]["commit"]):
        assert fact in block and fact in page


def test_ahead_and_behind_follow_from_the_page_s_ratios() -> None:
    """Each "ahead / even / behind on ..." of the README, recomputed from the page."""
    page = _page_ratios()
    measures = {(measure, arrow) for _db, _mode, measure, arrow in _readme_ratios()}
    block = _flat(_block())
    clauses = 0
    for database in DATABASES:
        bullet = re.search(rf"- \*\*{database}:\*\* (.*?)\.(?= - \*\*| \|)", block)
        assert bullet is not None, database
        for clause in bullet.group(1).split("; "):
            mode, word, count, of = re.match(  # type: ignore[union-attr]
                r"(sync|async) (ahead|even|behind) on (\d+) of (\d+)", clause
            ).groups()
            expected: dict[str, set[str]] = {"ahead": set(), "even": set(), "behind": set()}
            for (db, m, measure, arrow), ratio in page.items():
                if (db, m) != (database, mode) or (measure, arrow) not in measures:
                    continue
                if f"{ratio:.2f}" == "1.00":
                    expected["even"].add(measure)
                elif (ratio > 1) == (arrow == "↑"):
                    expected["ahead"].add(measure)
                else:
                    expected["behind"].add(measure)
            assert int(of) == sum(len(v) for v in expected.values())
            assert int(count) == len(expected[word]), (database, mode, word)
            for other, names in re.findall(
                r", (ahead|even|behind) on ((?:`[^`]+`(?:, )?)+)", clause
            ):
                assert set(re.findall(r"`([^`]+)`", names)) == expected[other], (database, mode)
            clauses += 1
    assert clauses == 6


def test_statement_counts_and_earlier_figures_are_the_page_s() -> None:
    page = _text(PAGE)
    statements = _rows(_first_table(page[page.index("## Statements per call") :]))
    quoted = _rows(_first_table(_block()[_block().index("| statements per call") :]))
    assert [row[1:4] for row in quoted[1:]] == [row[1:4] for row in statements[1:]]
    assert [row[0] for row in quoted[1:]] == [row[0] for row in statements[1:]]
    earlier = _flat(_block()[_block().index("Earlier runs") :])
    for seconds, database in re.findall(r"([\d.]+) s on (\w+)", earlier):
        assert f"{seconds} s on {database}" in _flat(page)
    for cut in re.findall(r"cut a chat thread's storage (.*)\.", earlier)[0].split(", "):
        figure, database = cut.rsplit(" on ", 1)
        assert figure in _flat(page) and database in DATABASES


def test_the_performance_section_states_figures_only_in_the_generated_block() -> None:
    """Hand-written text around the block may explain, not measure: a ratio, a timing, a
    repeat count or a comparison written there would not follow the next run."""
    text = _text(README)
    section = text[
        text.index("## Performance\n") : text.index("\n## ", text.index("## Performance"))
    ]
    outside = section.replace(_block(), "")
    for claim in (
        r"\d\s*×",
        r"\d\s*(ms|s|µs|KB|MB|%)\b",
        r"\brepeats?\b",
        r"\b(faster|slower|ahead|behind|beats?|even on|outperforms?)\b",
    ):
        assert not re.search(claim, outside, re.IGNORECASE), claim
