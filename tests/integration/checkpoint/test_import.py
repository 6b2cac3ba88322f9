# mypy: disable-error-code="arg-type,assignment,call-overload"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Adopting lg_sqla: threads written by LangGraph's official savers (SqliteSaver,
PostgresSaver, the community PyMySQLSaver on MariaDB) are imported through
`lg-sqla import` and read back through both savers and a real graph."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory, fresh_async_saver, fresh_saver
from graph_helpers import build_approval_graph, build_article_graph, build_fan_graph
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from sqlalchemy.engine import make_url
from test_cli import read_json, run_cli

from lg_sqla import SQLAlchemySaver
from lg_sqla.importer import aimport_threads, import_threads, official_task_paths
from lg_sqla.inspection import Inspector


@contextmanager
def official_saver(db: Backend) -> Iterator[BaseCheckpointSaver[Any]]:
    """The official saver of the dialect, on an empty database of its own."""
    url = make_url(db.sync_url)
    if db.name == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(url.database or "", check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            yield saver
        finally:
            conn.close()
    elif db.name == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        with PostgresSaver.from_conn_string(conninfo) as saver:
            saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver

        plain = url.set(drivername="mysql", query={}).render_as_string(hide_password=False)
        with PyMySQLSaver.from_conn_string(plain) as saver:
            saver.setup()
            yield saver


def run_graphs(saver: BaseCheckpointSaver[Any], tag: str) -> dict[str, Any]:
    """Real graphs on the official saver: Sends, an interrupt resumed, a subgraph left
    waiting at an interrupt (pending writes and a nested namespace)."""
    graphs: dict[str, Any] = {}
    fan = build_fan_graph().compile(checkpointer=saver)
    for n in range(2):
        thread_id = f"fan-{tag}-{n}"
        for _ in range(n + 1):
            fan.invoke({"items": [], "note": ""}, {"configurable": {"thread_id": thread_id}})
        graphs[thread_id] = fan
    approval = build_approval_graph(Counter()).compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": f"approval-{tag}"}}
    approval.invoke({"request": "refund"}, cfg)
    approval.invoke(Command(resume="yes"), cfg)
    graphs[f"approval-{tag}"] = approval
    article = build_article_graph(Counter()).compile(checkpointer=saver)
    article.invoke({"topic": "tides"}, {"configurable": {"thread_id": f"article-{tag}"}})
    graphs[f"article-{tag}"] = article
    return graphs


def snapshot_view(snapshot: Any) -> tuple[Any, ...]:
    """What a user sees of a StateSnapshot, comparable across savers."""
    return (
        snapshot.values,
        snapshot.next,
        snapshot.config["configurable"],
        snapshot.metadata,
        snapshot.parent_config["configurable"] if snapshot.parent_config else None,
        [(t.id, t.name, t.path, [i.value for i in t.interrupts], t.result) for t in snapshot.tasks],
        [i.value for i in snapshot.interrupts],
    )


def tuple_view(t: Any, writes_in_any_order: bool = False) -> tuple[Any, ...]:
    writes = list(t.pending_writes)
    if writes_in_any_order:
        writes.sort(key=lambda w: (w[0], w[1]))
    return (
        t.config["configurable"],
        t.checkpoint["channel_values"],
        t.checkpoint["channel_versions"],
        t.metadata,
        t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None,
        writes,
    )


def assert_same_threads(
    source: BaseCheckpointSaver[Any], target: SQLAlchemySaver, graphs: dict[str, Any]
) -> None:
    for thread_id, graph in graphs.items():
        thread = {"configurable": {"thread_id": thread_id}}
        # The community MySQL saver returns a checkpoint's writes by task id, not in
        # LangGraph's writes_sort_key order (task path first) that lg_sqla keeps: compare
        # its writes as a set; the official savers' lists must match exactly.
        any_order = type(source).__module__.startswith("langgraph.checkpoint.mysql")
        theirs = [tuple_view(t, any_order) for t in source.list(thread)]
        ours = [tuple_view(t, any_order) for t in target.list(thread)]
        assert ours == theirs and ours, thread_id
        # Imported rows keep their age (the checkpoint's ts), writes included.
        created = {
            t.checkpoint["id"]: dt.datetime.fromisoformat(t.checkpoint["ts"])
            for t in source.list(thread)
        }
        inspector = Inspector(target)
        for entry in inspector.history(thread_id, limit=1000):
            assert entry.created_at == created[entry.checkpoint_id]
            for write in inspector.writes(thread_id, entry.checkpoint_id):
                assert write.created_at == created[entry.checkpoint_id]
        history = [snapshot_view(s) for s in graph.get_state_history(thread)]
        imported = graph.copy(update={"checkpointer": target})
        assert [snapshot_view(s) for s in imported.get_state_history(thread)] == history
        if thread_id.startswith("article-"):
            sub = imported.get_state(thread, subgraphs=True).tasks[0].state
            assert sub is not None and sub.next == ("review",)  # the subgraph's own namespace


def test_import_from_the_official_saver_through_the_cli(
    backend: Backend, fresh_database: Backend
) -> None:
    """Every thread, same ids, parents, metadata, values and pending writes; idempotent."""
    tag = uuid.uuid4().hex[:8]
    with official_saver(fresh_database) as source:
        graphs = run_graphs(source, tag)
        source_url = fresh_database.sync_url
        first = run_cli(["import", source_url], backend.sync_url)
        assert first.returncode == 0, first.stderr
        assert f"import: {len(graphs)}/{len(graphs)}, " in first.stdout  # plain progress lines
        assert f"done: {len(graphs)} thread(s); imported " in first.stdout
        with fresh_saver(backend) as target:
            assert_same_threads(source, target, graphs)
            # Run again: nothing new is copied, nothing is duplicated.
            again = read_json(["import", source_url], backend.sync_url)
            assert again["checkpoints_imported"] == 0 and again["writes_imported"] == 0
            assert again["checkpoints_skipped"] > 0
            assert_same_threads(source, target, graphs)
            # The imported threads go on running on lg_sqla.
            thread = {"configurable": {"thread_id": f"article-{tag}"}}
            resumed = graphs[f"article-{tag}"].copy(update={"checkpointer": target})
            final = resumed.invoke(Command(resume="ok"), thread)
            assert final["article"] == "tides (ok)"


def test_interrupted_import_resumes_where_it_stopped(
    make_engine: EngineFactory, backend: Backend, fresh_database: Backend
) -> None:
    tag = uuid.uuid4().hex[:8]
    with official_saver(fresh_database) as source, fresh_saver(backend) as target:
        graphs = run_graphs(source, tag)
        threads = sorted(graphs)

        class Stop(Exception):
            pass

        def stop_after_two(report: Any) -> None:
            if report.threads_done == 2:
                raise Stop

        # keeps LangGraph's write order exactly
        paths = official_task_paths(make_engine(fresh_database))
        with pytest.raises(Stop):
            import_threads(
                source, target, thread_ids=threads, task_paths=paths, progress=stop_after_two
            )
        report = import_threads(source, target, thread_ids=threads, task_paths=paths)
        total = sum(len(list(source.list({"configurable": {"thread_id": t}}))) for t in threads)
        assert report.checkpoints_skipped + report.checkpoints_imported == total
        assert report.checkpoints_skipped > 0 and report.checkpoints_imported > 0
        assert_same_threads(source, target, graphs)


async def test_async_import_from_any_saver_instance(backend: Backend) -> None:
    """aimport_threads copies from any BaseCheckpointSaver (here InMemorySaver)."""
    tag = uuid.uuid4().hex[:8]
    source = InMemorySaver()
    graphs = run_graphs(source, tag)
    async with fresh_async_saver(backend) as target:
        report = await aimport_threads(source, target)  # threads discovered via list(None)
        assert set(report.threads) >= set(graphs)
        for thread_id, graph in graphs.items():
            thread = {"configurable": {"thread_id": thread_id}}
            theirs = [snapshot_view(s) async for s in graph.aget_state_history(thread)]
            imported = graph.copy(update={"checkpointer": target})
            ours = [snapshot_view(s) async for s in imported.aget_state_history(thread)]
            assert ours == theirs and ours
        again = await aimport_threads(source, target, thread_ids=sorted(graphs))
        assert again.checkpoints_imported == 0


def _official_writes_table(db: Backend) -> str:
    return "writes" if db.name == "sqlite" else "checkpoint_writes"


def _execute(db: Backend, *statements: str) -> None:
    engine = db.engine(poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


def _make_source(kind: str, db: Backend) -> None:
    """A source database that is not what an official saver reads."""
    if kind == "empty":
        if db.name == "sqlite":
            with contextlib.closing(sqlite3.connect(make_url(db.sync_url).database or "")) as c:
                c.execute("VACUUM")  # a database file without tables
    elif kind == "unrelated":
        # An application's own tables, one of them named like the savers' own.
        _execute(
            db,
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name VARCHAR(50))",
            "CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, body VARCHAR(100))",
        )
    else:  # "partial": the official schema with its writes table left behind
        with official_saver(db):
            pass  # the saver's own setup()
        _execute(db, f"DROP TABLE {_official_writes_table(db)}")


def _as_before_task_path(db: Backend) -> None:
    """The official schema as a saver from before its task_path migration left it."""
    from langgraph.checkpoint.mysql.base import MIGRATIONS as MYSQL_MIGRATIONS
    from langgraph.checkpoint.postgres.base import MIGRATIONS as PG_MIGRATIONS

    migrations = PG_MIGRATIONS if db.name == "postgres" else MYSQL_MIGRATIONS
    added = next(
        v for v, sql in enumerate(migrations) if "ADD COLUMN" in sql and "task_path" in sql
    )
    with official_saver(db):
        pass  # the saver's own setup(): every migration
    _execute(
        db,
        "ALTER TABLE checkpoint_writes DROP COLUMN task_path",
        f"DELETE FROM checkpoint_migrations WHERE v >= {added}",
    )


def _tables(db: Backend) -> list[str]:
    engine = db.engine(poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            return sorted(sa.inspect(connection).get_table_names())
    finally:
        engine.dispose()


def _row_counts(db: Backend) -> dict[str, int]:
    engine = db.engine(poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            return {
                table: connection.execute(
                    sa.select(sa.func.count()).select_from(sa.table(table))
                ).scalar_one()
                for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
            }
    finally:
        engine.dispose()


def _one_error_line(done: Any) -> str:
    assert done.returncode != 0
    assert done.stdout == ""
    line: str = done.stderr
    assert line.startswith("error: ") and line.count("\n") == 1, line
    assert "please report" not in line and "Traceback" not in line, line
    return line


def _shown(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


# What each refused source's error says after "the source database (URL) is not ...".
NOT_OFFICIAL = {
    "empty": ["it has no tables at all", "is this the right database?"],
    "unrelated": [
        "table {writes} is missing",
        "table checkpoints lacks column(s) checkpoint, checkpoint_id, checkpoint_ns",
        "is this the right database?",
    ],
    "partial": ["table {writes} is missing", "is this the right database?"],
}
SAVERS = {
    "sqlite": "LangGraph's SqliteSaver (langgraph-checkpoint-sqlite)",
    "postgres": "LangGraph's PostgresSaver (langgraph-checkpoint-postgres)",
    "mysql": "the community MySQL saver (PyMySQLSaver, langgraph-checkpoint-mysql)",
}
EXPECTED_TABLES = {
    "sqlite": "checkpoints, writes",
    "postgres": "checkpoints, checkpoint_blobs, checkpoint_writes",
    "mysql": "checkpoints, checkpoint_blobs, checkpoint_writes",
}


def _refused(source: Backend, target: Backend) -> str:
    """``lg-sqla import`` of ``source`` into ``target`` fails on one line naming the
    source and its expected saver; nothing is written to the target."""
    before = _row_counts(target)
    line = _one_error_line(run_cli(["import", source.sync_url], target.sync_url))
    prefix = f"error: the source database ({_shown(source.sync_url)}) is not a database of "
    assert line.startswith(prefix + SAVERS[target.name] + ": "), line
    assert f"(expected its tables {EXPECTED_TABLES[target.name]})" in line, line
    assert _row_counts(target) == before
    return line


@pytest.mark.parametrize("kind", list(NOT_OFFICIAL))
def test_a_source_that_is_not_an_official_saver_s_database_is_refused(
    kind: str, backend: Backend, fresh_database: Backend
) -> None:
    """What is missing there and the fix, on one line; the source is left as it was
    (the official saver, whose setup() creates tables, never opens it)."""
    _make_source(kind, fresh_database)
    tables = _tables(fresh_database)
    line = _refused(fresh_database, backend)
    for expected in NOT_OFFICIAL[kind]:
        assert expected.format(writes=_official_writes_table(backend)) in line, line
    assert _tables(fresh_database) == tables


@pytest.mark.parametrize("backend", ["postgres", "mysql"], indirect=True)
def test_a_source_from_an_older_saver_is_refused_with_the_migration_as_fix(
    backend: Backend, fresh_database: Backend
) -> None:
    """The savers' reads need writes.task_path (their last migrations): the error names
    it and says to let the saver migrate; doing so makes the import work."""
    tag = uuid.uuid4().hex[:8]
    with official_saver(fresh_database) as source:
        graphs = run_graphs(source, tag)
    _as_before_task_path(fresh_database)
    line = _refused(fresh_database, backend)
    assert "table checkpoint_writes lacks column(s) task_path" in line, line
    assert "open it once with the saver (its setup() migrates the tables)" in line, line
    with official_saver(fresh_database):
        pass  # the fix the error names
    done = run_cli(["import", fresh_database.sync_url], backend.sync_url)
    assert done.returncode == 0, done.stderr
    assert f"done: {len(graphs)} thread(s)" in done.stdout


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_an_older_sqlite_saver_file_is_imported(backend: Backend, fresh_database: Backend) -> None:
    """SqliteSaver reads (and migrates) a file from before writes.task_path itself, so the
    check does not ask for that column there."""
    tag = uuid.uuid4().hex[:8]
    with official_saver(fresh_database) as source:
        graphs = run_graphs(source, tag)
    _execute(fresh_database, "ALTER TABLE writes DROP COLUMN task_path")
    done = run_cli(["import", fresh_database.sync_url], backend.sync_url)
    assert done.returncode == 0, done.stderr
    assert f"done: {len(graphs)} thread(s)" in done.stdout


def test_a_source_holding_lg_sqla_s_own_tables_is_refused(backend: Backend) -> None:
    """The mistake of passing the target (or another lg_sqla database) as the source."""
    before = _row_counts(backend)
    line = _one_error_line(run_cli(["import", backend.sync_url], backend.sync_url))
    prefix = f"error: the source database ({_shown(backend.sync_url)}) holds lg_sqla's own tables"
    assert line.startswith(prefix), line
    assert SAVERS[backend.name] in line and "point SOURCE_URL at" in line, line
    assert _row_counts(backend) == before


def test_a_missing_source_is_named_as_the_source(backend: Backend, tmp_path: Any) -> None:
    """Not "create it with lg-sqla upgrade" (the target's fix), nor the target's URL."""
    if backend.name == "sqlite":
        path = tmp_path / "missing.sqlite"
        missing = f"sqlite:///{path}"
        expected = f"error: the source database does not exist: no SQLite file at '{path}'"
    else:
        url = make_url(backend.sync_url).set(database="lg_sqla_no_such_database")
        missing = url.render_as_string(hide_password=False)
        expected = f"error: cannot use the source database ({_shown(missing)}): "
    before = _row_counts(backend)
    line = _one_error_line(run_cli(["import", missing], backend.sync_url))
    assert line.startswith(expected), line
    assert "upgrade" not in line, line
    assert (make_url(backend.sync_url).database or "") not in line, line
    assert _row_counts(backend) == before
    if backend.name == "sqlite":
        assert not (tmp_path / "missing.sqlite").exists()  # not created by the attempt


def test_import_errors_are_one_line(backend: Backend) -> None:
    line = _one_error_line(run_cli(["import", "oracle://u:p@h/db"], backend.sync_url))
    assert "the source database (oracle://u:***@h/db)" in line, line
