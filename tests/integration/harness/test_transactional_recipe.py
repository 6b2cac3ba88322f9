"""The transactional-test recipe of docs/application.md is the file an application
copies (examples/transactional_tests/conftest.py, verbatim in the page), and it
isolates tests: run by pytest on every database, two tests on the same thread id and
store key each start from nothing, and the database is left without a row of lg_sqla's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from backends import Backend
from bound_helpers import lg_sqla_rows

REPO = Path(__file__).resolve().parents[3]
RECIPE = REPO / "examples" / "transactional_tests"
PAGE = REPO / "docs" / "application.md"


def recipe_in_the_docs() -> str:
    """The code block between the page's markers for the recipe file."""
    marker = re.escape("examples/transactional_tests/conftest.py")
    found = re.search(
        rf"<!-- BEGIN {marker} -->\n```python\n(.*?)```\n<!-- END {marker} -->",
        PAGE.read_text(),
        re.DOTALL,
    )
    assert found is not None, "docs/application.md has no block for the recipe"
    return found.group(1)


def test_the_docs_show_the_recipe_file_verbatim() -> None:
    assert recipe_in_the_docs() == (RECIPE / "conftest.py").read_text()


def test_the_recipe_isolates_tests(fresh_database: Backend) -> None:
    env = {**os.environ, "DATABASE_URL": fresh_database.sync_url, "PYTHONPATH": str(REPO)}
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
            "--rootdir",
            str(RECIPE),
            str(RECIPE),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "2 passed" in ran.stdout
    assert lg_sqla_rows(fresh_database) == {}
