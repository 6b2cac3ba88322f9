"""The official conformance suite (langgraph-checkpoint-conformance) on every dialect.

Run through the async saver (native async I/O) and through the sync saver
(whose async methods run its sync methods in a worker thread), so both
implementations are held to the same contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from backends import PORTABLE, Backend, EngineFactory
from helpers import assert_conformance
from langgraph.checkpoint.conformance import checkpointer_test, validate

from lg_sqla import AsyncSQLAlchemySaver, InvalidInputError, SQLAlchemySaver
from lg_sqla.checkpoint.state_migrations import (
    RenameChannel,
    RenameNode,
    StateMigrations,
    StateRevision,
    TransformChannel,
)

# Also on a MariaDB database at the server's default charset (conftest.py).
# ... and on DuckDB, a dialect served by the portable path only.
pytestmark = [pytest.mark.any_charset, pytest.mark.any_dialect]


# "-url": the savers opened by from_conn_string, on engines lg_sqla configures itself
# (no rollback-on-return; an async SQLite file runs calls on pysqlite in a worker thread).
@pytest.mark.parametrize("mode", ["async", "sync", "async-url", "sync-url"])
async def test_conformance(make_engine: EngineFactory, backend: Backend, mode: str) -> None:
    if mode == "async-url":

        async def factory() -> AsyncIterator[AsyncSQLAlchemySaver]:
            async with AsyncSQLAlchemySaver.from_conn_string(backend.async_url) as saver:
                yield saver

    elif mode == "sync-url":

        async def factory() -> AsyncIterator[SQLAlchemySaver]:  # type: ignore[misc]
            with SQLAlchemySaver.from_conn_string(backend.sync_url) as saver:
                yield saver

    elif mode == "async":

        async def factory() -> AsyncIterator[AsyncSQLAlchemySaver]:
            engine = make_engine.aio(backend)
            yield AsyncSQLAlchemySaver(engine)

    else:

        async def factory() -> AsyncIterator[SQLAlchemySaver]:  # type: ignore[misc]
            engine = make_engine(backend)
            yield SQLAlchemySaver(engine)

    registered = checkpointer_test(name=f"lg_sqla-{backend.name}-{mode}")(factory)
    report = await validate(registered)
    assert_conformance(report)


# Revisions whose operations name channels and nodes the suite never writes: every
# read goes through the migrating path (state_reads), every write stamps the head.
MIGRATIONS = StateMigrations(
    [
        StateRevision("0001_renamed", None, [RenameChannel("legacy", "current")]),
        StateRevision("0002_node", "0001_renamed", [RenameNode("old_node", "new_node")]),
        StateRevision("0003_typed", "0002_node", [TransformChannel("legacy_count", str)]),
    ]
)


@pytest.mark.parametrize("mode", ["async", "sync"])
async def test_conformance_with_state_migrations(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """The contract holds for a saver given state migrations (lg_sqla.checkpoint.
    state_migrations): its reads and writes take their own path, not the plain one."""
    if backend.name == PORTABLE:  # refused there, by name, at construction
        with pytest.raises(InvalidInputError, match="not supported on the generic dialect"):
            SQLAlchemySaver(make_engine(backend), state_migrations=MIGRATIONS)
        return

    if mode == "async":

        async def factory() -> AsyncIterator[AsyncSQLAlchemySaver]:
            yield AsyncSQLAlchemySaver(make_engine.aio(backend), state_migrations=MIGRATIONS)

    else:

        async def factory() -> AsyncIterator[SQLAlchemySaver]:  # type: ignore[misc]
            yield SQLAlchemySaver(make_engine(backend), state_migrations=MIGRATIONS)

    registered = checkpointer_test(name=f"lg_sqla-{backend.name}-{mode}-migrations")(factory)
    report = await validate(registered)
    assert_conformance(report)
