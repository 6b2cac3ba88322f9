# mypy: disable-error-code="index"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""A saver bound to the caller's transaction (``saver.bound(connection)``), sync and async,
on SQLite, PostgreSQL and MySQL/MariaDB (docs/application.md).

Everything runs inside ONE transaction the test began, through the bound saver: the
official conformance suite, and LangGraph graphs with interrupt/resume and time
travel. The rows are there inside it; rolling it back leaves the database without a
row of lg_sqla's. And a bound call that fails leaves the caller's transaction usable,
with nothing of that call applied; a lock conflict is raised to the caller once, never
retried inside its transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from bound_helpers import caller_transaction, lg_sqla_rows, migrated_database, rows_inside
from graph_helpers import build_approval_graph, build_pipeline
from helpers import assert_conformance
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.types import Command
from modes import either
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla import models as lg_sqla_models
from lg_sqla.models import checkpoint_retention
from lg_sqla.plans import Plan, Step
from lg_sqla.runtime.bound import BOUND_CONFLICT_NOTE

pytestmark = pytest.mark.parametrize("mode", ["sync", "async"])


@pytest.fixture(scope="module")
def clean_backend(
    request: pytest.FixtureRequest, backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    """A migrated database of this module's own: its row counts are the module's."""
    yield from migrated_database(request, backend, tmp_path_factory.mktemp("bound"))


def saver_of(connection: Any, mode: str) -> SQLAlchemySaver | AsyncSQLAlchemySaver:
    """A saver on the connection's own engine, bound to the connection."""
    if mode == "sync":
        return SQLAlchemySaver(connection.engine).bound(connection)
    return AsyncSQLAlchemySaver(connection.engine).bound(connection)


async def test_conformance_in_one_rolled_back_transaction(
    clean_backend: Backend, mode: str
) -> None:
    async with caller_transaction(clean_backend, mode) as connection:

        async def factory() -> AsyncIterator[SQLAlchemySaver | AsyncSQLAlchemySaver]:
            yield saver_of(connection, mode)

        registered = checkpointer_test(name=f"bound-{clean_backend.name}-{mode}")(factory)
        report = await validate(registered)
        assert_conformance(report)
        inside = await rows_inside(connection)
        assert inside.get("checkpoints", 0) > 0 and inside.get("checkpoint_writes", 0) > 0
    assert lg_sqla_rows(clean_backend) == {}


def new_thread() -> RunnableConfig:
    return {"configurable": {"thread_id": f"bound-{uuid.uuid4().hex[:10]}"}}


async def test_graphs_interrupt_resume_and_time_travel_then_rollback(
    clean_backend: Backend, mode: str
) -> None:
    async with caller_transaction(clean_backend, mode) as connection:
        calls: Counter[str] = Counter()
        graph = either(
            build_approval_graph(calls).compile(checkpointer=saver_of(connection, mode)), mode
        )
        config = new_thread()
        paused = await graph.invoke({"request": "the refund"}, config)
        assert [i.value for i in paused["__interrupt__"]] == [{"question": "Approve the refund?"}]
        # Resumed through another saver (a second request), bound to the same transaction.
        resumed = either(
            build_approval_graph(calls).compile(checkpointer=saver_of(connection, mode)), mode
        )
        final = await resumed.invoke(Command(resume="yes"), config)
        assert final["log"] == ["prepared the refund", "human said yes", "finished with yes"]
        assert calls == Counter(prepare=1, ask_human=2, finish=1)

        steps: Counter[str] = Counter()
        pipeline = either(
            build_pipeline(steps).compile(checkpointer=saver_of(connection, mode)), mode
        )
        config = new_thread()
        assert await pipeline.invoke({"trail": ["start"]}, config) == {
            "trail": ["start", "a", "b", "c"]
        }
        history = await pipeline.get_state_history(config)
        assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]
        old = history[2]  # after "a", before "b"
        assert await pipeline.invoke(None, old.config) == {"trail": ["start", "a", "b", "c"]}
        assert steps == Counter(a=1, b=2, c=2)  # the replay ran only what followed
        fork = await pipeline.update_state(old.config, {"trail": ["edited"]})
        assert await pipeline.invoke(None, fork) == {"trail": ["start", "a", "edited", "b", "c"]}
        assert len(await pipeline.get_state_history(config)) > len(history)
        inside = await rows_inside(connection)
        assert inside["checkpoints"] >= 10 and inside["checkpoint_blobs"] > 0
    assert lg_sqla_rows(clean_backend) == {}


def failing_plan(thread_id: str) -> Plan[None]:
    """Two statements: a valid insert, then one the database refuses (the same key)."""
    row = {
        "thread_id": thread_id,
        "pinned": True,
        "updated_at": sa.func.current_timestamp(),
    }
    yield Step(sa.insert(checkpoint_retention).values(**row))
    yield Step(sa.insert(checkpoint_retention).values(**row))


async def test_a_failed_call_leaves_the_callers_transaction_usable(
    clean_backend: Backend, mode: str
) -> None:
    async with caller_transaction(clean_backend, mode) as connection:
        saver = either(saver_of(connection, mode), mode)
        mine = new_thread()
        await saver.pin_thread(mine["configurable"]["thread_id"])  # the caller's earlier work
        with pytest.raises(sa.exc.IntegrityError):
            await saver.run(lambda: failing_plan("half-done"))
        # The transaction goes on (PostgreSQL included): nothing of the failed call,
        # everything from before it.
        inside = await rows_inside(connection)
        assert inside == {"checkpoint_retention": 1}
        pinned = await saver.thread_ttl(mine["configurable"]["thread_id"])
        assert pinned.pinned
    assert lg_sqla_rows(clean_backend) == {}


def retention_row(thread_id: str) -> sa.Insert:
    return sa.insert(checkpoint_retention).values(
        thread_id=thread_id, pinned=False, updated_at=sa.func.current_timestamp()
    )


@contextlib.contextmanager
def conflicting_writer(backend: Backend, thread_id: str) -> Iterator[None]:
    """Another connection's write of ``thread_id``'s retention row that a pin of the
    thread conflicts with: held uncommitted (SQLite: the database's one writer; MySQL:
    the row lock), or committed after the caller's snapshot (PostgreSQL, whose
    REPEATABLE READ caller then gets a serialization failure). Undone at the end."""
    engine = backend.engine()
    try:
        with engine.connect() as holder:
            if backend.name == "sqlite":
                holder.exec_driver_sql("BEGIN IMMEDIATE")
            holder.execute(retention_row(thread_id))
            if backend.name == "postgres":
                holder.commit()
            try:
                yield
            finally:
                holder.rollback()
                if backend.name == "postgres":
                    holder.execute(
                        sa.delete(checkpoint_retention).where(
                            checkpoint_retention.c.thread_id == thread_id
                        )
                    )
                    holder.commit()
    finally:
        engine.dispose()


# The caller's own settings: give up waiting for a lock soon; on PostgreSQL, a
# snapshot taken before the other writer commits.
CALLER_SETTINGS = {
    "sqlite": ["PRAGMA busy_timeout = 50"],
    "postgres": ["SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "SELECT 1"],
    "mysql": ["SET SESSION innodb_lock_wait_timeout = 1"],
}


async def test_a_lock_conflict_is_raised_once_never_retried(
    clean_backend: Backend, mode: str
) -> None:
    thread_id = f"locked-{uuid.uuid4().hex[:8]}"
    async with caller_transaction(clean_backend, mode) as connection:
        sync_engine = connection.engine if mode == "sync" else connection.sync_engine
        for statement in CALLER_SETTINGS[clean_backend.name]:
            await either(connection, mode).exec_driver_sql(statement)
        attempts: list[str] = []

        def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            if "checkpoint_retention" in statement and "INSERT" in statement.upper():
                attempts.append(statement)

        sa.event.listen(sync_engine, "before_cursor_execute", count)
        with conflicting_writer(clean_backend, thread_id):
            saver = either(saver_of(connection, mode), mode)
            with pytest.raises(sa.exc.OperationalError) as raised:
                await saver.pin_thread(thread_id)
        assert len(attempts) == 1  # not retried inside the caller's transaction
        if sys.version_info >= (3, 11):
            assert BOUND_CONFLICT_NOTE in raised.value.__notes__
    assert lg_sqla_rows(clean_backend) == {}


async def test_a_writer_on_the_engine_beside_an_open_bound_transaction(
    clean_backend: Backend, mode: str
) -> None:
    """A writer of this process on the engine waits for the caller's transaction (on
    SQLite, in the database's busy handler, holding the in-process writer lock), and the
    caller's further bound calls do not wait for that writer: bound calls take no writer
    lock, or each would wait for the other until busy_timeout."""
    engine = clean_backend.engine()
    writer_holds_lock = threading.Event()
    sa.event.listen(engine, "checkout", lambda *_: writer_holds_lock.set())  # (lock first)
    writer_errors: list[BaseException] = []  # (SQLite: "database is locked" after 30 s)
    sa.event.listen(engine, "handle_error", lambda context: writer_errors.append(context))
    outcome: list[BaseException | None] = []

    def write_on_the_engine() -> None:
        try:
            SQLAlchemySaver(engine).pin_thread("engine-writer")
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    writer = threading.Thread(target=write_on_the_engine)
    try:
        async with caller_transaction(clean_backend, mode) as connection:
            saver = either(saver_of(connection, mode), mode)
            await saver.pin_thread("caller-1")  # (SQLite: the caller holds the write lock)
            writer.start()
            await asyncio.to_thread(writer_holds_lock.wait)
            await saver.pin_thread("caller-2")
            # Done while the writer still waits in its first attempt: not behind it.
            assert writer_errors == []
            assert (await rows_inside(connection))["checkpoint_retention"] >= 2
        await asyncio.to_thread(writer.join)
        assert outcome == [None]
        assert lg_sqla_rows(clean_backend) == {"checkpoint_retention": 1}  # the writer's
        SQLAlchemySaver(engine).delete_thread("engine-writer")
    finally:
        engine.dispose()
    assert lg_sqla_rows(clean_backend) == {}


async def test_a_session_with_binds_per_model_is_bound_through_lg_sqlas_models(
    clean_backend: Backend, mode: str
) -> None:
    """A session without a default bind, whose binds name lg_sqla's models (an app with
    several databases): the bound saver finds its connection as the ORM would."""
    async with caller_transaction(clean_backend, mode) as connection:
        if mode == "sync":
            session: Any = Session(binds={lg_sqla_models.Base: connection})
            saver: Any = SQLAlchemySaver(connection.engine).bound(session)
        else:
            session = AsyncSession(binds={lg_sqla_models.Base: connection})
            saver = AsyncSQLAlchemySaver(connection.engine).bound(session)
        await either(saver, mode).pin_thread("bound-by-model")
        assert await rows_inside(connection) == {"checkpoint_retention": 1}
    assert lg_sqla_rows(clean_backend) == {}


async def test_a_saver_with_a_schema_of_its_own_bound_to_the_callers_connection(
    clean_backend: Backend, mode: str
) -> None:
    """``schema=`` holds for a bound view: its rows go to its schema's tables, and the
    caller's connection keeps its own options after the call."""
    if clean_backend.name == "sqlite":
        pytest.skip("SQLite has no schemas for lg_sqla (schema= raises InvalidInputError there)")
    schema = f"lgs_{uuid.uuid4().hex[:10]}"
    engine = clean_backend.engine()
    try:
        SQLAlchemySaver(engine, schema=schema).setup()
        async with caller_transaction(clean_backend, mode) as connection:
            saver_class = SQLAlchemySaver if mode == "sync" else AsyncSQLAlchemySaver
            saver = either(saver_class(connection.engine, schema=schema).bound(connection), mode)
            await saver.pin_thread("in-its-schema")
            options = (
                connection if mode == "sync" else connection.sync_connection
            ).get_execution_options()
            assert options.get("schema_translate_map") is None  # the caller's, as it was
            in_schema = sa.select(sa.func.count()).select_from(
                checkpoint_retention.to_metadata(sa.MetaData(), schema=schema)
            )
            assert (await either(connection, mode).execute(in_schema)).scalar_one() == 1
            assert await rows_inside(connection) == {}  # nothing in the default schema
        with engine.connect() as check:
            assert check.execute(in_schema).scalar_one() == 0
    finally:
        with engine.begin() as cleanup:
            quoted = cleanup.dialect.identifier_preparer.quote(schema)
            kind = "SCHEMA" if clean_backend.name == "postgres" else "DATABASE"
            cleanup.exec_driver_sql(
                f"DROP {kind} IF EXISTS {quoted}" + (" CASCADE" if kind == "SCHEMA" else "")
            )
        engine.dispose()
    assert lg_sqla_rows(clean_backend) == {}
