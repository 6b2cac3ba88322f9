"""PostgreSQL with the checkpoint tables hash-partitioned by thread_id
(``lg_sqla.partitioning``): the contract holds, the schema check sees the schema it
expects, and a thread's calls touch one partition of each table (read from
PostgreSQL's own plans and counters, not from timings)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from backends import Backend, new_database
from helpers import assert_conformance, checkpoint, config, new_thread
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from lg_sqla import AsyncSQLAlchemySaver, InvalidInputError, SQLAlchemySaver, migrate
from lg_sqla.models import metadata
from lg_sqla.partitioning import THREAD_TABLES, partition_by_thread, partitions_of

pytestmark = pytest.mark.postgres

PARTITIONS = 4
TABLE_NAMES = {t.name for t in metadata.sorted_tables} | {migrate.VERSION_TABLE}


@pytest.fixture(scope="module")
def partitioned(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    for db in new_database(request, "postgres", tmp_path_factory.mktemp("partitioned")):
        engine = db.engine()
        try:
            partition_by_thread(engine, PARTITIONS)
        finally:
            engine.dispose()
        yield db


def test_the_tables_are_partitioned_and_the_schema_is_what_alembic_expects(
    partitioned: Backend,
) -> None:
    engine = partitioned.engine()
    try:
        with engine.connect() as conn:
            assert {t.name: partitions_of(conn, t.name) for t in THREAD_TABLES} == {
                t.name: PARTITIONS for t in THREAD_TABLES
            }
            migrate.check_schema(conn)  # at head
            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    "version_table": migrate.VERSION_TABLE,
                    "include_name": lambda name, type_, parent: (
                        type_ != "table" or name in TABLE_NAMES
                    ),
                },
            )
            assert compare_metadata(context, metadata) == []
        partition_by_thread(engine, PARTITIONS)  # again: nothing to do
        with pytest.raises(InvalidInputError, match="partitions already"):
            partition_by_thread(engine, PARTITIONS * 2)
    finally:
        engine.dispose()


def test_a_database_with_rows_is_refused_and_left_as_it_was(fresh_postgres: Backend) -> None:
    engine = fresh_postgres.engine()
    try:
        saver = SQLAlchemySaver(engine)
        saver.setup()
        thread_id = new_thread()
        saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        with pytest.raises(InvalidInputError, match="holds rows"):
            partition_by_thread(engine, PARTITIONS)
        with engine.connect() as conn:
            assert partitions_of(conn, "checkpoints") == 0
        assert saver.get_tuple(config(thread_id)) is not None
    finally:
        engine.dispose()


@pytest.fixture
def fresh_postgres(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Backend]:
    yield from new_database(request, "postgres", tmp_path)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_conformance_on_partitioned_tables(partitioned: Backend, mode: str) -> None:
    if mode == "async":

        async def factory() -> AsyncIterator[AsyncSQLAlchemySaver]:
            engine = partitioned.async_engine()
            try:
                yield AsyncSQLAlchemySaver(engine)
            finally:
                await engine.dispose()

    else:

        async def factory() -> AsyncIterator[SQLAlchemySaver]:  # type: ignore[misc]
            engine = partitioned.engine()
            try:
                yield SQLAlchemySaver(engine)
            finally:
                engine.dispose()

    registered = checkpointer_test(name=f"lg_sqla-partitioned-{mode}")(factory)
    assert_conformance(await validate(registered))


class Chat(TypedDict):
    turns: Annotated[list[str], lambda a, b: a + b]


def test_a_graph_keeps_its_memory_on_partitioned_tables(partitioned: Backend) -> None:
    builder = StateGraph(Chat)
    builder.add_node("reply", lambda s: {"turns": [f"reply {len(s['turns'])}"]})
    builder.add_edge(START, "reply")
    with SQLAlchemySaver.from_conn_string(partitioned.sync_url) as saver:
        graph = builder.compile(checkpointer=saver)
        cfg: Any = {"configurable": {"thread_id": new_thread() + "-ñandú"}}
        graph.invoke({"turns": ["hi"]}, cfg)
        state = graph.invoke({"turns": ["again"]}, cfg)
        assert state["turns"] == ["hi", "reply 1", "again", "reply 3"]
        history = list(graph.get_state_history(cfg))
        assert len(history) == 6


def _recorded(engine: sa.Engine, call: Any) -> list[tuple[str, Any]]:
    """The (statement, parameters) ``call`` sends (a listener keeps it on Core)."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        call()
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    return seen


def _partitions_planned(engine: sa.Engine, statement: str, parameters: Any) -> dict[str, set[str]]:
    """Per table, the partitions PostgreSQL's plan for the statement reads."""
    with engine.connect() as conn:
        plan = "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + statement, parameters))
    found: dict[str, set[str]] = {}
    for table in THREAD_TABLES:
        names = set(re.findall(rf"\b({table.name}_p\d+)\b", plan))
        if names:
            found[table.name] = names
    return found


def test_a_threads_reads_plan_one_partition_of_each_table(partitioned: Backend) -> None:
    engine = partitioned.engine()
    try:
        saver = SQLAlchemySaver(engine)
        thread_id = new_thread()
        parent = config(thread_id)
        for step in range(3):
            parent = saver.put(
                parent, checkpoint({"m": [step]}, {"m": step + 1}), {}, {"m": step + 1}
            )
            saver.put_writes(parent, [("m", step)], f"task-{step}")
        reads = {
            "get_tuple latest": lambda: saver.get_tuple(config(thread_id)),
            "get_tuple by id": lambda: saver.get_tuple(parent),
            "list": lambda: list(saver.list(config(thread_id))),
        }
        for name, read in reads.items():
            ((statement, parameters),) = _recorded(engine, read)
            planned = _partitions_planned(engine, statement, parameters)
            # checkpoints, their blobs and their writes: one partition each.
            assert set(planned) == {t.name for t in THREAD_TABLES}, (name, planned)
            assert all(len(p) == 1 for p in planned.values()), (name, planned)
            assert len({p.rsplit("_p", 1)[1] for ps in planned.values() for p in ps}) == 1
    finally:
        engine.dispose()


def test_a_threads_writes_land_in_one_partition_of_each_table(partitioned: Backend) -> None:
    engine = partitioned.engine()
    try:
        saver = SQLAlchemySaver(engine)
        thread_id = new_thread()
        # (lists: blob rows; small ints would be kept in the checkpoint document)
        values = {"a": [1], "b": [2]}
        stored = saver.put(config(thread_id), checkpoint(values), {}, {"a": 1, "b": 1})
        saver.put_writes(stored, [("a", 3), ("b", 4)], "task-1")
        with engine.connect() as conn:
            for table in THREAD_TABLES:
                holding = [
                    n
                    for n in range(PARTITIONS)
                    if conn.execute(
                        sa.text(f"SELECT count(*) FROM {table.name}_p{n} WHERE thread_id = :t"),
                        {"t": thread_id},
                    ).scalar_one()
                ]
                assert len(holding) == 1, (table.name, holding)
    finally:
        engine.dispose()


def test_the_cli_partitions_an_empty_database(fresh_postgres: Backend) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [
            *(sys.executable, "-m", "lg_sqla", "--url", fresh_postgres.sync_url),
            *("partition", "--partitions", "3"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "into 3 partitions" in done.stdout
    engine = fresh_postgres.engine()
    try:
        with engine.connect() as conn:
            assert [partitions_of(conn, t.name) for t in THREAD_TABLES] == [3, 3, 3]
            migrate.check_schema(conn)
    finally:
        engine.dispose()
