# mypy: disable-error-code="arg-type"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""A dialect lg_sqla has no code for: DuckDB (embedded, through duckdb-engine).

The conformance suite and the graph tests also run on it (modules marked
`any_dialect`, see conftest.py). These tests cover what only a dialect unknown
to Alembic and to lg_sqla exercises: the generic Alembic implementation behind
``setup()``, the command line and offline SQL, and the portable read and write
paths (existence check before insert, a batched blob query, metadata filters
applied in Python).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from backends import EngineFactory
from helpers import checkpoint, config, count_statements, new_thread

from lg_sqla import SQLAlchemySaver, migrate
from lg_sqla.dialects import GenericOps
from lg_sqla.models import metadata

pytestmark = pytest.mark.duckdb

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"duckdb:///{tmp_path / 'portable.duckdb'}"


def test_lg_sqla_has_no_code_for_duckdb(make_engine: EngineFactory, url: str) -> None:
    engine = make_engine.track(sa.create_engine(url))
    assert type(SQLAlchemySaver(engine).dialect_ops) is GenericOps


def test_setup_downgrade_setup(make_engine: EngineFactory, url: str) -> None:
    # (compare_metadata needs column reflection, which duckdb-engine 0.17 lacks:
    # it runs PostgreSQL catalog queries DuckDB cannot answer. The models match
    # the migrations on the first-class dialects, test_migrations.py.)
    engine = make_engine.track(sa.create_engine(url))
    SQLAlchemySaver(engine).setup()
    with engine.connect() as conn:
        assert migrate.current_revision(conn) == migrate.head_revision()
        assert set(sa.inspect(conn).get_table_names()) == {
            *metadata.tables,
            migrate.VERSION_TABLE,
        }
        migrate.downgrade_connection(conn, "base")
    assert set(sa.inspect(engine).get_table_names()) == {migrate.VERSION_TABLE}
    SQLAlchemySaver(engine).setup()
    saver = SQLAlchemySaver(engine)
    stored = saver.put(config(new_thread()), checkpoint({"a": [1]}), {}, {"a": 1})
    got = saver.get_tuple(stored)
    assert got is not None and got.checkpoint["channel_values"] == {"a": [1]}


def test_setup_from_several_threads(make_engine: EngineFactory, url: str) -> None:
    engine = make_engine.track(sa.create_engine(url))
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def run() -> None:
        try:
            start.wait()
            SQLAlchemySaver(engine).setup()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    with engine.connect() as conn:
        assert migrate.current_revision(conn) == migrate.head_revision()


def test_command_line_and_alembic_on_an_unknown_dialect(url: str) -> None:
    env = {**os.environ, "LG_SQLA_DATABASE_URL": url}
    lg_sqla = [sys.executable, "-m", "lg_sqla"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*lg_sqla, *args], env=env, capture_output=True, text=True)

    assert run("check").returncode == 1
    offline = run("upgrade", "--sql")  # (from the database's revision: none yet)
    assert offline.returncode == 0, offline.stderr
    assert "CREATE TABLE checkpoints" in offline.stdout
    upgraded = run("upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    current = run("current")
    assert current.stdout.strip() == migrate.head_revision(), current.stderr
    assert run("check").returncode == 0
    at_head = run("upgrade", "--sql")
    assert at_head.returncode == 0 and at_head.stdout == "", at_head.stderr
    alembic = [sys.executable, "-m", "alembic", "-c", str(REPO / "alembic.ini")]
    down = subprocess.run(
        [*alembic, "downgrade", "base"], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert down.returncode == 0, down.stderr
    assert run("check").returncode == 1


def test_list_filters_metadata_in_python_with_limits(make_engine: EngineFactory, url: str) -> None:
    """No JSON functions are known here: the filter runs on loaded pages, and
    `limit` still counts matches (keeps reading pages until it has them)."""
    engine = make_engine.track(sa.create_engine(url))
    SQLAlchemySaver(engine).setup()
    saver = SQLAlchemySaver(engine, list_page_size=3)
    thread = new_thread()
    parent = config(thread)
    for step in range(10):
        metadata_ = {"step": step, "source": "loop" if step % 4 else "input", "flag": step == 8}
        parent = saver.put(parent, checkpoint({"n": step}), metadata_, {"n": step + 1})
    listed = list(saver.list(config(thread), filter={"source": "input"}))
    assert [t.metadata["step"] for t in listed] == [8, 4, 0]
    with count_statements(engine) as counter:
        limited = list(saver.list(config(thread), filter={"source": "input"}, limit=2))
    assert [t.metadata["step"] for t in limited] == [8, 4]
    # Pages of 3 newest first: 9-7 (match 8), 6-4 (match 4): two pages of
    # three statements each (page, blobs, writes), and no third page.
    assert counter.count == 6
    # JSON equality, not Python's: true is not 1, a missing key matches None.
    assert [t.metadata["step"] for t in saver.list(None, filter={"flag": True})] == [8]
    assert list(saver.list(None, filter={"flag": 1})) == []
    assert len(list(saver.list(None, filter={"absent": None}))) == 10
    assert list(saver.list(None, filter={"step": 4, "source": "loop"})) == []
