"""The direct path (lg_sqla.runtime.direct): hot calls skip SQLAlchemy Core's execution layer
when nothing listens to the engine's connection events, and behave exactly the same.

The conformance suite and the graph tests run on it (their engines have no listeners);
these tests pin down when it is taken, that the SQL reaching the database is the same
one statement per read, and that its errors are SQLAlchemy's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from helpers import checkpoint, config, count_statements, new_thread

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.runtime import direct

# Also on a MariaDB database at the server's default charset (non-ASCII channel names).
pytestmark = pytest.mark.any_charset


class DirectRuns:
    """Counts the plans the real ``direct.run`` executes (a spy: it still runs them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real: Callable[..., Any] = direct.run

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(direct, "run", spy)


def _calls(saver: SQLAlchemySaver, thread_id: str) -> None:
    stored = saver.put(config(thread_id), checkpoint({"ñandú": "😀"}), {"step": 1}, {"ñandú": 1})
    saver.put_writes(stored, [("ñandú", "x"), ("__interrupt__", "y")], "task-1")
    found = saver.get_tuple(config(thread_id))
    assert found is not None
    assert found.checkpoint["channel_values"] == {"ñandú": "😀"}
    assert sorted(w[1] for w in found.pending_writes or []) == ["__interrupt__", "ñandú"]
    assert [t.metadata["step"] for t in saver.list(config(thread_id))] == [1]


def test_hot_calls_run_directly_without_listeners(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = DirectRuns(monkeypatch)
    with SQLAlchemySaver.from_conn_string(backend.sync_url) as saver:
        saver.setup()
        _calls(saver, new_thread())
    assert runs.count == 4  # put, put_writes, get_tuple, one list page


async def test_hot_calls_run_directly_without_listeners_async(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = DirectRuns(monkeypatch)
    thread_id = new_thread()
    async with AsyncSQLAlchemySaver.from_conn_string(backend.async_url) as saver:
        await saver.setup()
        stored = await saver.aput(config(thread_id), checkpoint({"k": [1]}), {}, {"k": 1})
        await saver.aput_writes(stored, [("k", 2)], "task-1")
        found = await saver.aget_tuple(config(thread_id))
        assert found is not None and found.checkpoint["channel_values"] == {"k": [1]}
        assert found.pending_writes == [("task-1", "k", 2)]
    assert runs.count == 3


def test_a_cursor_listener_keeps_the_core_path(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instrumentation (statement counters, tracing) sees every statement, as before."""
    runs = DirectRuns(monkeypatch)
    with SQLAlchemySaver.from_conn_string(backend.sync_url) as saver:
        saver.setup()
        thread_id = new_thread()
        with count_statements(saver.engine) as counter:
            saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
            written = counter.count
            assert saver.get_tuple(config(thread_id)) is not None
        assert written in (1, 2) and counter.count == written + 1
    assert runs.count == 0


def test_errors_on_the_direct_path_are_sqlalchemys(backend: Backend) -> None:
    """A failing statement raises SQLAlchemy's exception class, with the driver's error
    as ``orig``, and leaves the pooled connection usable."""
    with SQLAlchemySaver.from_conn_string(backend.sync_url, pool_size=1) as saver:
        saver.setup()
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        with saver.engine.begin() as connection:
            connection.execute(sa.text("ALTER TABLE checkpoint_writes RENAME TO writes_away"))
        try:
            with pytest.raises(sa.exc.DBAPIError) as raised:
                saver.put_writes(stored, [("a", 2)], "task-1")
            assert raised.value.orig is not None
            assert not isinstance(raised.value.orig, sa.exc.SQLAlchemyError)
        finally:
            with saver.engine.begin() as connection:
                connection.execute(sa.text("ALTER TABLE writes_away RENAME TO checkpoint_writes"))
        saver.put_writes(stored, [("a", 2)], "task-1")  # same single pooled connection
        found = saver.get_tuple(config(thread_id))
        assert found is not None and found.pending_writes == [("task-1", "a", 2)]


@pytest.mark.sqlite
def test_sqlite_sees_one_statement_per_read(tmp_path: Any) -> None:
    """What SQLite itself executes on the direct path: one statement for a get_tuple
    or a list page (no BEGIN/COMMIT around a read), one per write step."""
    url = f"sqlite:///{tmp_path / 'direct.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url, pool_size=1) as saver:
        saver.setup()
        thread_id = new_thread()
        saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        executed: list[str] = []
        with saver.engine.connect() as connection:
            raw = connection.connection.dbapi_connection
            assert isinstance(raw, sqlite3.Connection)
            raw.set_trace_callback(executed.append)
        try:
            assert saver.get_tuple(config(thread_id)) is not None
            assert len(list(saver.list(config(thread_id)))) == 1
            reads = list(executed)
            executed.clear()
            saver.put(config(thread_id), checkpoint({"a": 2}), {}, {"a": 2})
        finally:
            raw.set_trace_callback(None)
    assert len(reads) == 2 and all(s.lstrip().startswith("WITH page") for s in reads), reads
    kinds = [s.split()[0].upper() for s in executed]
    assert kinds == ["BEGIN", "INSERT", "INSERT", "COMMIT"], executed


def test_connections_go_back_to_the_pool_transactional(backend: Backend) -> None:
    """Single-statement calls run in autocommit where the dialect gains from it; the
    pooled connection is handed back as it was, so its next user's transaction can
    still be rolled back."""
    with SQLAlchemySaver.from_conn_string(backend.sync_url, pool_size=1, max_overflow=0) as saver:
        saver.setup()
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        saver.put_writes(stored, [("a", 2)], "task-1")
        assert saver.get_tuple(config(thread_id)) is not None
        with saver.engine.connect() as connection:  # the pool's only connection
            delete = sa.text("DELETE FROM checkpoints WHERE thread_id = :t")
            assert connection.execute(delete, {"t": thread_id}).rowcount == 1
            connection.rollback()
        assert saver.get_tuple(config(thread_id)) is not None, "the DELETE was autocommitted"


async def test_connections_go_back_to_the_pool_transactional_async(backend: Backend) -> None:
    engine = backend.async_engine(pool_size=1, max_overflow=0)
    try:
        saver = AsyncSQLAlchemySaver(engine)
        await saver.setup()
        thread_id = new_thread()
        stored = await saver.aput(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        await saver.aput_writes(stored, [("a", 2)], "task-1")
        assert await saver.aget_tuple(config(thread_id)) is not None
        async with engine.connect() as connection:  # the pool's only connection
            delete = sa.text("DELETE FROM checkpoints WHERE thread_id = :t")
            assert (await connection.execute(delete, {"t": thread_id})).rowcount == 1
            await connection.rollback()
        assert await saver.aget_tuple(config(thread_id)) is not None, "autocommitted"
    finally:
        await engine.dispose()
