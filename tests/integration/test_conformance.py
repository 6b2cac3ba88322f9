"""The official conformance suite (langgraph-checkpoint-conformance) on every dialect.

Run through the async saver (native async I/O) and through the sync saver
(whose async methods run its sync methods in a worker thread), so both
implementations are held to the same contract.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from backends import Backend
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver

# Also on a MariaDB database at the server's default charset (conftest.py).
# ... and on DuckDB, a dialect served by the portable path only.
pytestmark = [pytest.mark.any_charset, pytest.mark.any_dialect]

# Test counts per capability in langgraph-checkpoint-conformance 0.0.2: the base
# contract (58 tests) and the extended surface (delete_for_runs, copy_thread, prune).
EXPECTED_TESTS = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


def _assert_report(report: object) -> None:
    results = report.results  # type: ignore[attr-defined]
    failures = {
        name: result.failures
        for name, result in results.items()
        if result.detected and not result.passed
    }
    assert not failures, failures
    for capability in ALL_CAPABILITIES:
        result = results[capability.value]
        assert result.detected, f"{capability.value} not detected"
        assert result.passed, f"{capability.value}: {result.failures}"
        assert result.tests_passed == EXPECTED_TESTS[capability.value], (
            capability.value,
            result.tests_passed,
        )


# "-url": the savers opened by from_conn_string, on engines lg_sqla configures itself
# (no rollback-on-return; an async SQLite file runs calls on pysqlite in a worker thread).
@pytest.mark.parametrize("mode", ["async", "sync", "async-url", "sync-url"])
async def test_conformance(backend: Backend, mode: str) -> None:
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
            engine = backend.async_engine()
            try:
                yield AsyncSQLAlchemySaver(engine)
            finally:
                await engine.dispose()

    else:

        async def factory() -> AsyncIterator[SQLAlchemySaver]:  # type: ignore[misc]
            engine = backend.engine()
            try:
                yield SQLAlchemySaver(engine)
            finally:
                engine.dispose()

    registered = checkpointer_test(name=f"lg_sqla-{backend.name}-{mode}")(factory)
    report = await validate(registered)
    _assert_report(report)
