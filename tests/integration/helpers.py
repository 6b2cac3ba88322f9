"""Small helpers shared by the integration tests."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from lg_sqla.runtime import direct


def errors_in_threads(work: Callable[[str], None], thread_ids: list[str]) -> list[BaseException]:
    """Run ``work(thread_id)`` for each id on a thread of its own, all at once; what
    they raised (an empty list when every one succeeded)."""
    errors: list[BaseException] = []

    def guarded(thread_id: str) -> None:
        try:
            work(thread_id)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in thread_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def new_thread() -> str:
    return f"t-{uuid.uuid4()}"


def config(
    thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def checkpoint(values: dict[str, Any], versions: dict[str, Any] | None = None) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict(versions) if versions is not None else {k: 1 for k in values}
    return cp


# Test counts per capability in langgraph-checkpoint-conformance 0.0.2: the base
# contract (58 tests) and the extended surface (delete_for_runs, copy_thread, prune).
CONFORMANCE_TESTS = {
    "put": 17,
    "put_writes": 10,
    "get_tuple": 10,
    "list": 16,
    "delete_thread": 5,
    "delete_for_runs": 7,
    "copy_thread": 8,
    "prune": 8,
}


def assert_conformance(report: object) -> None:
    """Every capability of the conformance suite detected and passed, all its tests run."""
    from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

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
        assert result.tests_passed == CONFORMANCE_TESTS[capability.value], (
            capability.value,
            result.tests_passed,
        )


class StatementCounter:
    """Counts statements sent to the database (an executemany counts once)."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self.statements.append(statement)

    @property
    def count(self) -> int:
        return len(self.statements)


@contextmanager
def count_statements(engine: sa.Engine) -> Iterator[StatementCounter]:
    counter = StatementCounter()
    sa.event.listen(engine, "before_cursor_execute", counter)
    try:
        yield counter
    finally:
        sa.event.remove(engine, "before_cursor_execute", counter)


def table_counts(engine: sa.Engine, thread_id: str) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            table: conn.execute(
                sa.text(f"SELECT COUNT(*) FROM {table} WHERE thread_id = :t"), {"t": thread_id}
            ).scalar_one()
            for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
        }


class DirectRuns:
    """Counts the plans the real ``direct.run`` executes (a spy: it still runs them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real: Callable[..., Any] = direct.run

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(direct, "run", spy)
