"""The pooled connection a PostgreSQL saver (or async store) keeps between calls (``runtime.kept``).

A sync saver opened by ``from_conn_string`` on PostgreSQL (psycopg) keeps one
connection of its own engine's pool between direct-path calls, as the official
PostgresSaver holds its one connection. What users rely on: the server sees an
idle session between calls (no transaction left open), a session the server ended
(``pg_terminate_backend``, an idle timeout, a restart) fails no call: the next one
runs on a new connection with the data intact, and threads calling at once all
work. (Statement counts: test_statement_counts.py, test_direct_path.py.)
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from backends import Backend
from helpers import checkpoint, config, errors_in_threads, new_thread
from langgraph.checkpoint.base import ChannelVersions
from sqlalchemy.pool import QueuePool

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.store import AsyncSQLAlchemyStore

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)


def _checked_out(engine: sa.Engine) -> int:
    pool = engine.pool
    assert isinstance(pool, QueuePool)
    return pool.checkedout()


class Sessions:
    """The server's view of one saver's sessions, found by their application_name."""

    def __init__(self, backend: Backend) -> None:
        self.name = f"lg_sqla_kept_{uuid.uuid4().hex[:8]}"
        self._admin = backend.engine(poolclass=sa.pool.NullPool)

    def states(self) -> list[tuple[int, str]]:
        """(backend pid, state) of each live session, e.g. 'idle', 'idle in transaction'."""
        with self._admin.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT pid, state FROM pg_stat_activity WHERE application_name = :name"
                    " ORDER BY pid"
                ),
                {"name": self.name},
            ).all()
        return [(int(pid), str(state)) for pid, state in rows]

    def waits(self) -> list[tuple[str, str | None]]:
        """(state, wait_event_type) of each live session."""
        with self._admin.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT state, wait_event_type FROM pg_stat_activity"
                    " WHERE application_name = :name"
                ),
                {"name": self.name},
            ).all()
        return [(str(state), wait) for state, wait in rows]

    def terminate(self, pid: int) -> None:
        with self._admin.connect() as conn:
            assert conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
        self.wait_gone(pid)

    def wait_gone(self, pid: int | None = None) -> None:
        """Until backend ``pid`` (None: every session) has exited, which a closed
        session's backend does just after its client closed it."""
        deadline = time.monotonic() + 10
        while (pid in dict(self.states())) if pid is not None else self.states():
            assert time.monotonic() < deadline, f"sessions still alive: {self.states()}"
            time.sleep(0.01)

    def close(self) -> None:
        self._admin.dispose()


@pytest.fixture
def sessions(backend: Backend) -> Iterator[Sessions]:
    found = Sessions(backend)
    yield found
    found.close()


def test_the_kept_connection_is_idle_between_calls(backend: Backend, sessions: Sessions) -> None:
    with SQLAlchemySaver.from_conn_string(
        backend.sync_url, connect_args={"application_name": sessions.name}
    ) as saver:
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
        saver.put_writes(stored, [("v", 2)], "task-1")
        assert _checked_out(saver.engine) == 1  # kept
        assert [state for _, state in sessions.states()] == ["idle"]  # no open transaction
        found = saver.get_tuple(config(thread_id))
        assert found is not None and found.pending_writes == [("task-1", "v", 2)]
        assert [state for _, state in sessions.states()] == ["idle"]
        engine = saver.engine
    assert _checked_out(engine) == 0
    assert sessions.states() == []  # given back, then closed with the engine


@pytest.mark.parametrize("next_call", ["put", "put_writes", "get_tuple"])
def test_a_terminated_kept_session_fails_no_call(
    backend: Backend, sessions: Sessions, next_call: str
) -> None:
    with SQLAlchemySaver.from_conn_string(
        backend.sync_url, connect_args={"application_name": sessions.name}
    ) as saver:
        thread_id = new_thread()
        first = saver.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
        saver.put_writes(first, [("v", 2)], "task-1")
        [(kept_pid, _)] = sessions.states()
        sessions.terminate(kept_pid)

        stored = first
        if next_call == "put":
            stored = saver.put(first, checkpoint({"v": 3}, {"v": 2}), {}, {"v": 2})
        elif next_call == "put_writes":
            saver.put_writes(first, [("v", 4)], "task-2")
        else:
            found = saver.get_tuple(config(thread_id))
            assert found is not None and found.checkpoint["channel_values"] == {"v": 1}

        # Retried on a new session, which is kept in its turn, idle.
        [(new_pid, state)] = sessions.states()
        assert new_pid != kept_pid and state == "idle"
        assert _checked_out(saver.engine) == 1
        found = saver.get_tuple(stored)
        assert found is not None
        if next_call == "put":
            assert found.checkpoint["channel_values"] == {"v": 3}
            assert found.parent_config == first
        else:
            assert found.checkpoint["channel_values"] == {"v": 1}
            expected = [("task-1", "v", 2)]
            if next_call == "put_writes":
                expected.append(("task-2", "v", 4))
            assert sorted(found.pending_writes or []) == expected


def test_a_disconnect_seen_elsewhere_replaces_the_kept_connection_before_use(
    backend: Backend, sessions: Sessions
) -> None:
    """After a restart, the pool replaces every connection older than the first
    disconnect it saw at their checkout; the kept one too, before a call fails on it."""
    with SQLAlchemySaver.from_conn_string(
        backend.sync_url, connect_args={"application_name": sessions.name}
    ) as saver:
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
        with saver.engine.connect() as conn:  # a second, pooled session
            conn.execute(sa.text("SELECT 1"))
        invalidated: list[object] = []
        sa.event.listen(saver.engine.pool, "invalidate", lambda *_: invalidated.append(1))
        for pid, _ in sessions.states():  # what a restart does to both
            sessions.terminate(pid)
        with pytest.raises(sa.exc.OperationalError), saver.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))  # the pooled one: the pool sees the disconnect
        assert len(invalidated) == 1
        saver.put_writes(stored, [("v", 2)], "task-1")
        assert len(invalidated) == 1  # the kept one was replaced, not failed on
        found = saver.get_tuple(stored)
        assert found is not None and found.pending_writes == [("task-1", "v", 2)]
        assert [state for _, state in sessions.states()] == ["idle"]


def test_threads_calling_at_once_all_work(backend: Backend, sessions: Sessions) -> None:
    with SQLAlchemySaver.from_conn_string(
        backend.sync_url, connect_args={"application_name": sessions.name}
    ) as saver:

        def work(thread_id: str) -> None:
            stored = config(thread_id)
            for step in range(15):
                versions: ChannelVersions = {"n": step + 1}
                stored = saver.put(stored, checkpoint({"n": step}, versions), {}, versions)
                saver.put_writes(stored, [("n", step)], "task")
                found = saver.get_tuple(config(thread_id))
                assert found is not None and found.checkpoint["channel_values"] == {"n": step}
                assert found.pending_writes == [("task", "n", step)]

        assert errors_in_threads(work, [new_thread() for _ in range(4)]) == []
        assert _checked_out(saver.engine) == 1  # one kept; the others back in the pool
        states = sessions.states()
        assert len(states) >= 1 and {state for _, state in states} == {"idle"}


async def test_the_async_saver_keeps_an_idle_connection_between_calls(
    backend: Backend, sessions: Sessions
) -> None:
    async with AsyncSQLAlchemySaver.from_conn_string(
        backend.async_url, connect_args={"application_name": sessions.name}
    ) as saver:
        thread_id = new_thread()
        stored = await saver.aput(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
        await saver.aput_writes(stored, [("v", 2)], "task-1")
        engine = saver.engine.sync_engine
        assert _checked_out(engine) == 1  # kept
        assert [state for _, state in sessions.states()] == ["idle"]  # no open transaction
        found = await saver.aget_tuple(config(thread_id))
        assert found is not None and found.pending_writes == [("task-1", "v", 2)]
    assert _checked_out(engine) == 0
    assert sessions.states() == []  # given back, then closed with the engine


async def test_the_async_store_keeps_an_idle_connection_between_calls(
    backend: Backend, sessions: Sessions
) -> None:
    """As the async saver: one connection kept by the store's own engine, with no
    transaction open between calls, and closed when the store is left."""
    namespace = ("kept", new_thread())
    async with AsyncSQLAlchemyStore.from_conn_string(
        backend.async_url, connect_args={"application_name": sessions.name}
    ) as store:
        await store.aput(namespace, "a", {"v": 1})
        engine = store.engine.sync_engine
        assert _checked_out(engine) == 1  # kept
        assert [state for _, state in sessions.states()] == ["idle"]  # no open transaction
        await store.aput(namespace, "b", {"v": 2})
        found = await store.aget(namespace, "a")
        assert found is not None and found.value == {"v": 1}
        assert _checked_out(engine) == 1  # the same one, not one more per call
        assert [state for _, state in sessions.states()] == ["idle"]
        listed = await store.asearch(namespace)
        assert sorted(item.key for item in listed) == ["a", "b"]
    assert _checked_out(engine) == 0
    assert sessions.states() == []  # given back, then closed with the engine


async def test_leaving_the_async_saver_during_a_call_blocks_no_loop(
    backend: Backend, sessions: Sessions
) -> None:
    """The kept connection's release on the event loop's thread cannot wait for the
    call that has it (that call needs the loop to end): the call closes it instead."""
    thread_id = new_thread()
    blocker = backend.engine(poolclass=sa.pool.NullPool)
    try:
        async with AsyncSQLAlchemySaver.from_conn_string(
            backend.async_url, connect_args={"application_name": sessions.name}
        ) as saver:
            first = checkpoint({"v": 1})
            await saver.aput(config(thread_id), first, {}, {"v": 1})
            holder = blocker.connect()
            holder.execute(  # the checkpoint row locked: a put of it again waits
                sa.text("SELECT 1 FROM checkpoints WHERE thread_id = :t FOR UPDATE"),
                {"t": thread_id},
            )
            put = asyncio.create_task(saver.aput(config(thread_id), first, {}, {"v": 1}))
            while ("active", "Lock") not in sessions.waits():  # (the put, on the lock)
                assert not put.done(), put
                await asyncio.sleep(0.01)
        assert not put.done()  # left while the put held the kept connection
        holder.rollback()
        holder.close()
        stored = await put
        assert stored["configurable"]["checkpoint_id"] == first["id"]
        sessions.wait_gone()  # the put closed the connection as it ended
    finally:
        blocker.dispose()
