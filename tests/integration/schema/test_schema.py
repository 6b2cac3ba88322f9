"""schema=: lg_sqla's tables in a schema of their own (a PostgreSQL schema, a MariaDB
database), beside LangGraph's official saver's tables of the same names."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory, checked_engine
from graph_helpers import build_fan_graph
from test_cli import read_json, run_cli
from test_import import official_saver, snapshot_view

from lg_sqla import AsyncSQLAlchemySaver, InvalidInputError, SQLAlchemySaver
from lg_sqla.inspection import Inspector

REPO = Path(__file__).resolve().parents[3]


def drop_schema(db: Backend, schema: str) -> None:
    with checked_engine(db) as engine, engine.begin() as conn:
        quoted = conn.dialect.identifier_preparer.quote(schema)
        if db.name == "postgres":
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {quoted} CASCADE")
        else:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {quoted}")


@pytest.fixture
def schema(fresh_database: Backend) -> Iterator[str]:
    name = f"lgs_{uuid.uuid4().hex[:10]}"
    yield name
    if fresh_database.name != "sqlite":
        drop_schema(fresh_database, name)


def tables_in(engine: sa.Engine, schema: str | None) -> set[str]:
    return set(sa.inspect(engine).get_table_names(schema=schema))


def run_fan(saver: Any, thread_id: str) -> Any:
    graph = build_fan_graph().compile(checkpointer=saver)
    graph.invoke({"items": [], "note": ""}, {"configurable": {"thread_id": thread_id}})
    return graph


async def test_lg_sqla_beside_the_official_saver(
    make_engine: EngineFactory, fresh_database: Backend, schema: str
) -> None:
    db = fresh_database
    engine = make_engine(db)
    if db.name == "sqlite":
        with pytest.raises(InvalidInputError, match="schema"):
            SQLAlchemySaver(engine, schema=schema)
        return
    with official_saver(db) as official:
        theirs = f"official-{uuid.uuid4().hex[:8]}"
        official_graph = run_fan(official, theirs)
        default_tables = tables_in(engine, None)
        assert "checkpoints" in default_tables  # the official saver's own table
        # Without a schema of its own, lg_sqla would collide with that table...
        with pytest.raises(sa.exc.DBAPIError):
            SQLAlchemySaver(engine).setup()
        engine.dispose()
        # ...and the CLI says what to do about it.
        done = run_cli(["upgrade"], db.sync_url)
        assert done.returncode == 1 and "lg-sqla --schema lg_sqla upgrade" in done.stderr

        saver = SQLAlchemySaver(engine, schema=schema)
        saver.setup()  # creates the schema, the tables and the version table in it
        assert {"checkpoints", "checkpoint_writes", "checkpoint_blobs"} <= tables_in(engine, schema)
        assert "lg_sqla_alembic_version" in tables_in(engine, schema)
        saver.setup()  # idempotent

        ours = f"ours-{uuid.uuid4().hex[:8]}"
        graph = run_fan(saver, ours)
        assert graph.get_state({"configurable": {"thread_id": ours}}).values["items"] == [
            "planned",
            "done-0",
            "done-1",
        ]
        saver.prune([ours], keep_last=2)  # MySQL's anti-join delete names the schema too
        assert len(list(saver.list({"configurable": {"thread_id": ours}}))) == 2
        assert [t.thread_id for t in Inspector(saver).threads().threads] == [ours]

        async_engine = make_engine.aio(db)
        async_saver = AsyncSQLAlchemySaver(async_engine, schema=schema)
        async_thread = f"async-{uuid.uuid4().hex[:8]}"
        agraph = build_fan_graph().compile(checkpointer=async_saver)
        await agraph.ainvoke(
            {"items": [], "note": ""}, {"configurable": {"thread_id": async_thread}}
        )
        state = await agraph.aget_state({"configurable": {"thread_id": async_thread}})
        assert state.values["items"] == ["planned", "done-0", "done-1"]

        # The official saver's table holds its own thread only, and still reads it.
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT DISTINCT thread_id FROM checkpoints")).all()
        assert [r[0] for r in rows] == [theirs]
        assert official_graph.get_state({"configurable": {"thread_id": theirs}}).values

        # The CLI with --schema; without it the default schema has no lg_sqla tables.
        url = db.sync_url
        listed = read_json(["--schema", schema, "threads"], url)
        assert {t["thread_id"] for t in listed["threads"]} == {ours, async_thread}
        assert "not set up in this database" in run_cli(["check"], url).stderr
        # Adoption in place: import the official thread into our schema, same database.
        report = read_json(["--schema", schema, "import", url], url)
        assert report["threads_done"] == 1 and report["checkpoints_imported"] > 0
        thread = {"configurable": {"thread_id": theirs}}
        expected = [snapshot_view(s) for s in official_graph.get_state_history(thread)]
        adopted = official_graph.copy(update={"checkpointer": saver})
        assert [snapshot_view(s) for s in adopted.get_state_history(thread)] == expected


def test_alembic_environment_and_cli_take_a_schema(
    make_engine: EngineFactory, fresh_database: Backend, schema: str
) -> None:
    url = fresh_database.sync_url
    if fresh_database.name == "sqlite":
        done = run_cli(["--schema", schema, "upgrade"], url)
        assert done.returncode == 2 and "--schema needs PostgreSQL or MySQL" in done.stderr
        return
    env = {**os.environ, "LG_SQLA_DATABASE_URL": url}
    alembic = [sys.executable, "-m", "alembic", "-c", str(REPO / "alembic.ini")]
    subprocess.run(
        [*alembic, "-x", f"schema={schema}", "upgrade", "head"],
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    assert read_json(["--schema", schema, "check"], url)["up_to_date"] is True
    engine = make_engine(fresh_database)
    assert "checkpoints" not in tables_in(engine, None)  # nothing in the default schema
    # `downgrade base` drops the tables of that schema only.
    assert run_cli(["--schema", schema, "downgrade", "base", "--yes"], url).returncode == 0
    assert "not set up in schema" in run_cli(["--schema", schema, "check"], url).stderr
    assert run_cli(["upgrade", "--schema", schema], url).returncode == 0  # option after command
    assert run_cli(["check", "--schema", schema], url).returncode == 0
