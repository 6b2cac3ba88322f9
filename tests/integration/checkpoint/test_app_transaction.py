# mypy: disable-error-code="index"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Atomic with the application: an app's own declarative models and lg_sqla's thread
history change in ONE transaction (docs/application.md), on every database, with an
ORM ``Session`` (sync) and an ``AsyncSession`` (async).

The app (its own ``DeclarativeBase`` and ``MetaData``, apart from lg_sqla's) keeps a
``Conversation`` per LangGraph thread, related to lg_sqla's ``CheckpointRow`` by
``thread_id``. Three things it does together with lg_sqla, each committed, or failing
in one of two places:

* ``between``: lg_sqla's call went through, then the app's own next statement fails
  at the database (a duplicate conversation): the whole transaction rolls back;
* ``after``: the app's statement and lg_sqla's both went through, then the request
  fails before the commit.

Either way nothing of the two is left: a version of lg_sqla that committed its own
part separately (its own connection) fails these tests (checked once by a mutant).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from bound_helpers import migrated_database
from graph_helpers import build_chat_graph
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from modes import either
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, foreign, mapped_column, relationship

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.importer import aimport_threads, import_threads
from lg_sqla.models import CheckpointRow, checkpoints

pytestmark = [
    pytest.mark.parametrize("mode", ["sync", "async"]),
    pytest.mark.parametrize("outcome", ["commit", "between", "after"]),
]


class AppBase(DeclarativeBase):
    """The application's own models: a metadata of its own, in its own Alembic history."""


class Conversation(AppBase):
    __tablename__ = "app_conversations"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    title: Mapped[str] = mapped_column(sa.String(200))
    # lg_sqla's own column type: the same length and, on MySQL/MariaDB, the same binary
    # collation, so joins on it compare as lg_sqla's keys do.
    thread_id: Mapped[str] = mapped_column(checkpoints.c.thread_id.type, unique=True)
    # No thread table to point a foreign key at (a thread is its checkpoints): the
    # relationship joins on thread_id, read-only.
    checkpoints: Mapped[list[CheckpointRow]] = relationship(
        CheckpointRow,
        primaryjoin=lambda: foreign(CheckpointRow.thread_id) == Conversation.thread_id,
        viewonly=True,
    )

    __table_args__ = ({"mysql_charset": "utf8mb4", "mysql_collate": "utf8mb4_bin"},)


class RequestFailed(Exception):
    """The app's request fails after both statements, before its commit."""


@pytest.fixture(scope="module")
def app_db(
    request: pytest.FixtureRequest, backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    """A database of the module's own, with lg_sqla's tables (its migrations) and the
    app's (the app's own ``create_all``: its Alembic history in real life)."""
    for db in migrated_database(request, backend, tmp_path_factory.mktemp("app")):
        engine = db.engine()
        try:
            AppBase.metadata.create_all(engine)
        finally:
            engine.dispose()
        yield db


def new_thread_id() -> str:
    return f"conv-{uuid.uuid4().hex[:10]}"


def start_conversation(db: Backend, title: str) -> str:
    """A conversation with one chat turn, committed together (a bound saver)."""
    thread_id = new_thread_id()
    engine = db.engine()
    try:
        saver = SQLAlchemySaver(engine)
        with Session(engine) as session, session.begin():
            session.add(Conversation(title=title, thread_id=thread_id))
            graph = build_chat_graph().compile(checkpointer=saver.bound(session))
            config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
            graph.invoke({"messages": [HumanMessage("hello")]}, config)
    finally:
        engine.dispose()
    return thread_id


def stored(db: Backend, thread_id: str) -> tuple[list[str], int]:
    """What is committed for ``thread_id``: the titles of its conversations, and its
    checkpoints counted through the app's relationship."""
    engine = db.engine()
    try:
        with Session(engine) as session:
            found = session.scalars(
                sa.select(Conversation).where(Conversation.thread_id == thread_id)
            ).all()
            titles = [c.title for c in found]
            via_relationship = sum(len(c.checkpoints) for c in found)
            joined = session.scalar(
                sa.select(sa.func.count())
                .select_from(CheckpointRow)
                .where(CheckpointRow.thread_id == thread_id)
            )
            if found:  # the relationship sees exactly the thread's checkpoints
                assert via_relationship == joined
            return titles, int(joined or 0)
    finally:
        engine.dispose()


@asynccontextmanager
async def app_transaction(db: Backend, mode: str) -> AsyncIterator[tuple[Any, Any]]:
    """The app's ORM session in a transaction (``session.begin()``: committed at the end,
    rolled back on an error), with a saver bound to it; both wrapped for ``mode``."""
    if mode == "sync":
        engine = db.engine()
        try:
            with Session(engine) as session, session.begin():
                yield either(session, mode), either(SQLAlchemySaver(engine).bound(session), mode)
        finally:
            engine.dispose()
        return
    async_engine = db.async_engine()
    try:
        async with AsyncSession(async_engine) as async_session, async_session.begin():
            bound = AsyncSQLAlchemySaver(async_engine).bound(async_session)
            yield either(async_session, mode), either(bound, mode)
    finally:
        await async_engine.dispose()


async def fail_as(outcome: str, session: Any, taken_thread_id: str) -> None:
    """The failure of ``outcome``: ``between``, the app's next statement is refused by
    the database (a second conversation on a thread that has one); ``after``, the
    request fails once both statements went through."""
    if outcome == "between":
        session.target.add(Conversation(title="duplicate", thread_id=taken_thread_id))
        await session.flush()
    elif outcome == "after":
        raise RequestFailed


EXPECTED_FAILURE = {"between": sa.exc.IntegrityError, "after": RequestFailed}


async def run_app_transaction(outcome: str, body: Any) -> None:
    if outcome == "commit":
        await body()
        return
    with pytest.raises(EXPECTED_FAILURE[outcome]):
        await body()


async def test_delete_conversation_and_thread(app_db: Backend, mode: str, outcome: str) -> None:
    thread_id = start_conversation(app_db, "to delete")
    other = start_conversation(app_db, "another")
    assert stored(app_db, thread_id)[1] > 0

    async def body() -> None:
        async with app_transaction(app_db, mode) as (session, saver):
            found = await session.execute(
                sa.select(Conversation).where(Conversation.thread_id == thread_id)
            )
            await session.delete(found.scalar_one())
            await session.flush()  # the app's statement
            await saver.delete_thread(thread_id)  # lg_sqla's
            await fail_as(outcome, session, other)

    before = stored(app_db, thread_id)
    await run_app_transaction(outcome, body)
    assert stored(app_db, thread_id) == (([], 0) if outcome == "commit" else before)


async def test_fork_conversation_and_copy_thread(app_db: Backend, mode: str, outcome: str) -> None:
    source = start_conversation(app_db, "original")
    fork = new_thread_id()

    async def body() -> None:
        async with app_transaction(app_db, mode) as (session, saver):
            session.target.add(Conversation(title="original (fork)", thread_id=fork))
            await session.flush()
            await saver.copy_thread(source, fork)
            await fail_as(outcome, session, source)

    await run_app_transaction(outcome, body)
    if outcome == "commit":
        assert stored(app_db, fork) == (["original (fork)"], stored(app_db, source)[1])
    else:
        assert stored(app_db, fork) == ([], 0)
    assert stored(app_db, source)[0] == ["original"]


async def test_import_threads_with_their_conversations(
    app_db: Backend, mode: str, outcome: str
) -> None:
    source = InMemorySaver()
    thread_ids = [new_thread_id(), new_thread_id()]
    for thread_id in thread_ids:
        graph = build_chat_graph().compile(checkpointer=source)
        graph.invoke(
            {"messages": [HumanMessage("imported")]}, {"configurable": {"thread_id": thread_id}}
        )
    taken = start_conversation(app_db, "taken")

    async def body() -> None:
        async with app_transaction(app_db, mode) as (session, saver):
            for thread_id in thread_ids:
                session.target.add(Conversation(title=f"imported {thread_id}", thread_id=thread_id))
            await session.flush()
            if mode == "sync":
                report = import_threads(source, saver.target, thread_ids=thread_ids)
            else:
                report = await aimport_threads(source, saver.target, thread_ids=thread_ids)
            assert report.threads_done == 2 and report.checkpoints_imported > 0
            await fail_as(outcome, session, taken)

    await run_app_transaction(outcome, body)
    for thread_id in thread_ids:
        titles, count = stored(app_db, thread_id)
        if outcome == "commit":
            assert titles == [f"imported {thread_id}"] and count == 3  # input, loop x2
        else:
            assert (titles, count) == ([], 0)
