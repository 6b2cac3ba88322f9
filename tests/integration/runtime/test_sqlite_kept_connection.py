"""The pooled connection a SQLite saver keeps between its calls (``runtime.kept``).

A saver opened by ``from_conn_string`` on a SQLite file keeps one connection of its
own engine's pool between direct-path calls, as the official SqliteSaver holds its
one connection. What users rely on: every call still commits (another connection
sees it at once), no transaction or snapshot outlives a call, a failed call leaves
nothing kept, threads never wait for each other on it, and nothing is left checked
out once the saver is closed. Where keeping could change anything (a pool of one,
pool listeners, an engine the caller owns), nothing is kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import checkpoint, config, errors_in_threads, new_thread
from langgraph.checkpoint.base import ChannelVersions
from sqlalchemy.pool import QueuePool

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.store import SQLAlchemyStore

pytestmark = pytest.mark.sqlite


def _checked_out(engine: sa.Engine) -> int:
    pool = engine.pool
    assert isinstance(pool, QueuePool)
    return pool.checkedout()


def _other_saver_put(url: str, thread_id: str, value: int) -> None:
    with SQLAlchemySaver.from_conn_string(url) as other:
        other.put(config(thread_id), checkpoint({"v": value}, {"v": 1}), {}, {"v": 1})


def test_one_connection_is_kept_between_calls_and_given_back_on_exit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'kept.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url) as saver:
        saver.setup()
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
        saver.put_writes(stored, [("v", 2)], "task-1")
        assert _checked_out(saver.engine) == 1  # the kept one, holding no transaction
        # Committed: another engine's connection sees both calls' rows.
        with sa.create_engine(url).connect() as other:
            rows = other.exec_driver_sql(
                "SELECT count(*) FROM checkpoint_writes WHERE thread_id = ?", (thread_id,)
            ).scalar()
            assert rows == 1
        # No snapshot kept either: what another process commits is read at once.
        later = new_thread()
        _other_saver_put(url, later, 7)
        found = saver.get_tuple(config(later))
        assert found is not None and found.checkpoint["channel_values"] == {"v": 7}
        assert _checked_out(saver.engine) == 1
        engine = saver.engine
    assert _checked_out(engine) == 0


def test_threads_share_the_saver_without_waiting_on_the_kept_connection(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'threads.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url) as saver:
        saver.setup()

        def work(thread_id: str) -> None:
            stored = config(thread_id)
            for step in range(15):
                versions: ChannelVersions = {"n": step + 1}
                stored = saver.put(stored, checkpoint({"n": step}, versions), {}, versions)
                found = saver.get_tuple(config(thread_id))
                assert found is not None and found.checkpoint["channel_values"] == {"n": step}

        assert errors_in_threads(work, [new_thread() for _ in range(4)]) == []
        assert _checked_out(saver.engine) == 1
        engine = saver.engine
    assert _checked_out(engine) == 0


def test_a_failed_call_keeps_nothing_and_the_next_call_is_clean(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'failed.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url) as saver:
        saver.setup()
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
        with saver.engine.begin() as connection:
            connection.execute(sa.text("ALTER TABLE checkpoint_writes RENAME TO writes_away"))
        try:
            with pytest.raises(sa.exc.DBAPIError):
                saver.put_writes(stored, [("v", 2)], "task-1")
            assert _checked_out(saver.engine) == 0  # rolled back by the pool, not kept
        finally:
            with saver.engine.begin() as connection:
                connection.execute(sa.text("ALTER TABLE writes_away RENAME TO checkpoint_writes"))
        saver.put_writes(stored, [("v", 3)], "task-1")
        found = saver.get_tuple(stored)
        assert found is not None and found.pending_writes == [("task-1", "v", 3)]
        assert _checked_out(saver.engine) == 1


def test_nothing_is_kept_where_it_could_change_anything(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url, pool_size=1) as saver:  # a pool of one
        saver.setup()
        saver.put(config(new_thread()), checkpoint({"v": 1}), {}, {"v": 1})
        assert _checked_out(saver.engine) == 0
    with SQLAlchemySaver.from_conn_string(url) as saver:
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
        assert _checked_out(saver.engine) == 1
        checkouts: list[object] = []
        sa.event.listen(saver.engine, "checkout", lambda *_: checkouts.append(1))
        # A pool listener now: every call checks out again, the kept one is closed.
        assert saver.get_tuple(stored) is not None
        assert _checked_out(saver.engine) == 0 and len(checkouts) == 1
    engine = sa.create_engine(url)  # the caller's engine: never kept
    try:
        saver = SQLAlchemySaver(engine)
        assert saver.get_tuple(stored) is not None
        assert _checked_out(engine) == 0
    finally:
        engine.dispose()


def test_a_listener_added_later_to_the_pool_class_or_the_pool_ends_keeping(
    tmp_path: Path,
) -> None:
    """A ``checkin`` listener added to every ``QueuePool`` (the class), or a ``reset``
    listener to this pool, once a store keeps its connection: its next put checks out
    and in again, and the listener sees that check-in (the kept connection is closed)."""
    url = f"sqlite:///{tmp_path / 'later.sqlite'}"
    with SQLAlchemyStore.from_conn_string(url) as store:
        store.setup()
        store.put(("later",), "a", {"v": 1})
        assert _checked_out(store.engine) == 1
        checkins: list[object] = []

        def count(*_: object) -> None:
            checkins.append(1)

        sa.event.listen(QueuePool, "checkin", count)
        try:
            store.put(("later",), "b", {"v": 2})
            assert _checked_out(store.engine) == 0 and len(checkins) == 1
        finally:
            sa.event.remove(QueuePool, "checkin", count)
        store.put(("later",), "c", {"v": 3})  # (kept again: nothing listens now)
        assert _checked_out(store.engine) == 1
        resets: list[object] = []
        sa.event.listen(store.engine.pool, "reset", lambda *_: resets.append(1))
        store.put(("later",), "d", {"v": 4})
        assert _checked_out(store.engine) == 0 and resets
        seen = len(resets)
        store.put(("later",), "e", {"v": 5})  # (still listened to: nothing kept)
        assert _checked_out(store.engine) == 0 and len(resets) == seen + 1
        assert sorted(item.key for item in store.search(("later",))) == ["a", "b", "c", "d", "e"]


def test_an_engine_of_the_callers_keeps_a_connection_when_asked_to(tmp_path: Path) -> None:
    """``keep_connection=True``: the caller's engine keeps one too (what
    ``from_conn_string`` turns on for its own), until ``release_connections``."""
    url = f"sqlite:///{tmp_path / 'asked.sqlite'}"
    engine = sa.create_engine(url)
    try:
        saver = SQLAlchemySaver(engine, keep_connection=True)
        saver.setup()
        stored = saver.put(config(new_thread()), checkpoint({"v": 1}), {}, {"v": 1})
        assert saver.get_tuple(stored) is not None
        assert _checked_out(engine) == 1
        saver.release_connections()
        assert _checked_out(engine) == 0
        store = SQLAlchemyStore(engine, keep_connection=True)
        store.put(("docs",), "a", {"v": 1})
        item = store.get(("docs",), "a")
        assert item is not None and item.value == {"v": 1}
        assert _checked_out(engine) == 1
        store.release_connections()
        assert _checked_out(engine) == 0
    finally:
        engine.dispose()


def test_a_disposed_engine_leaves_no_kept_connection_behind(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'disposed.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url) as saver:
        saver.setup()
        thread_id = new_thread()
        saver.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
        closed: list[object] = []
        sa.event.listen(saver.engine.pool, "close_detached", lambda *_: closed.append(1))
        saver.engine.dispose()  # (the pool the listener is on is gone: keeping goes on)
        assert saver.get_tuple(config(thread_id)) is not None  # on the new pool
        assert len(closed) == 1  # the old pool's kept connection, closed
        assert _checked_out(saver.engine) == 1


async def test_the_async_saver_gives_back_its_threaded_engines_connection(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'async.sqlite'}"
    async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
        await saver.setup()
        thread_id = new_thread()
        stored = await saver.aput(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
        assert await saver.aget_tuple(stored) is not None
        threaded = saver._threaded
        assert threaded is not None and _checked_out(threaded) == 1
    assert _checked_out(threaded) == 0
