"""The connection settings lg_sqla gives the SQLite engines it creates.

Durability is the official SqliteSaver's (and SQLite's own default): a commit is
on disk when ``put`` returns (``synchronous=FULL``). Faster, weaker settings are
an explicit choice (``configure_engine(engine, sqlite_synchronous="NORMAL")``).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import EngineFactory
from helpers import checkpoint, config, new_thread

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.engines import configure_engine
from lg_sqla.runtime.locks import writer_lock
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

pytestmark = pytest.mark.sqlite

FULL, NORMAL = 2, 1  # PRAGMA synchronous reports numbers


def _settings(connection: sa.Connection) -> dict[str, Any]:
    def pragma(name: str) -> Any:
        return connection.exec_driver_sql(f"PRAGMA {name}").scalar()

    return {
        "journal_mode": pragma("journal_mode"),
        "busy_timeout": pragma("busy_timeout"),
        "synchronous": pragma("synchronous"),
    }


DEFAULTS = {"journal_mode": "wal", "busy_timeout": 30_000, "synchronous": FULL}


def test_sync_saver_and_store_engines_commit_durably(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ñandú.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url) as saver, saver.engine.connect() as connection:
        assert _settings(connection) == DEFAULTS
    with SQLAlchemyStore.from_conn_string(url) as store, store.engine.connect() as connection:
        assert _settings(connection) == DEFAULTS


async def test_async_saver_and_store_engines_commit_durably(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'async.sqlite'}"
    async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
        async with saver.engine.connect() as connection:
            assert await connection.run_sync(_settings) == DEFAULTS
        # Whole calls run on a pysqlite engine of the same file: same settings.
        assert saver._threaded is not None
        with saver._threaded.connect() as connection:
            assert _settings(connection) == DEFAULTS
    async with (
        AsyncSQLAlchemyStore.from_conn_string(url) as store,
        store.engine.connect() as connection,
    ):
        assert await connection.run_sync(_settings) == DEFAULTS
        # Its batches too run whole on a pysqlite engine of the same file.
        assert store._threaded is not None
        with store._threaded.connect() as threaded:
            assert _settings(threaded) == DEFAULTS


def test_normal_sync_is_an_explicit_choice(make_engine: EngineFactory, tmp_path: Path) -> None:
    engine = make_engine.track(
        configure_engine(
            sa.create_engine(f"sqlite:///{tmp_path / 'fast.sqlite'}"), sqlite_synchronous="NORMAL"
        )
    )
    with engine.connect() as connection:
        assert _settings(connection) == {**DEFAULTS, "synchronous": NORMAL}
    saver = SQLAlchemySaver(engine)
    saver.setup()
    assert list(saver.list(None)) == []


def test_unknown_synchronous_setting_is_refused() -> None:
    engine = sa.create_engine("sqlite://")
    with pytest.raises(ValueError, match="sqlite_synchronous must be one of"):
        configure_engine(engine, sqlite_synchronous="SOMETIMES")  # type: ignore[arg-type]
    engine.dispose()


def test_writers_of_one_process_share_a_lock_per_database_file(tmp_path: Path) -> None:
    """Writers queue on one Python lock per file (not SQLite's sleeping busy handler):
    shared by every saver and engine on that file, separate for another file."""
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    with (
        SQLAlchemySaver.from_conn_string(url) as one,
        # The same file spelled another way.
        SQLAlchemySaver.from_conn_string(f"sqlite:///{tmp_path}/./x/../shared.sqlite") as two,
        SQLAlchemySaver.from_conn_string(f"sqlite:///{tmp_path / 'other.sqlite'}") as other,
    ):
        lock = writer_lock(one.dialect_ops, one.engine)
        assert lock is not None
        assert writer_lock(two.dialect_ops, two.engine) is lock
        assert writer_lock(other.dialect_ops, other.engine) is not lock


def test_concurrent_writers_in_one_process_all_land(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'busy.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url) as saver:
        saver.setup()
        threads = [new_thread() for _ in range(8)]
        errors: list[BaseException] = []

        def write(thread_id: str) -> None:
            try:
                for step in range(10):
                    stored = saver.put(
                        config(thread_id), checkpoint({"n": step}), {"step": step}, {"n": step + 1}
                    )
                    saver.put_writes(stored, [("n", step)], f"task-{step}")
            except BaseException as error:  # reported below
                errors.append(error)

        workers = [threading.Thread(target=write, args=(t,)) for t in threads]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert errors == []
        assert [len(list(saver.list(config(t)))) for t in threads] == [10] * 8


def test_calls_that_follow_each_other_share_one_connection(tmp_path: Path) -> None:
    """SQLite drops a connection's page cache whenever another connection wrote: the
    engines lg_sqla creates hand out the connection returned last, so a graph's
    reads and writes, one after the other, run on one connection and find their
    pages cached (as the official saver's single connection does)."""
    url = f"sqlite:///{tmp_path / 'lifo.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url) as saver:
        saver.setup()
        used: list[int] = []
        sa.event.listen(saver.engine, "checkout", lambda dbapi, *_: used.append(id(dbapi)))
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"n": 0}), {}, {"n": 1})
        # Two connections checked out at once by someone else go back to the pool too.
        with saver.engine.connect() as other, saver.engine.connect():
            other.exec_driver_sql("SELECT 1")
        used.clear()
        for step in range(5):
            saver.put_writes(stored, [("n", step)], f"task-{step}")
            assert saver.get_tuple(stored) is not None
            stored = saver.put(stored, checkpoint({"n": step}), {"step": step}, {"n": step + 2})
            assert len(list(saver.list(config(thread_id), limit=2))) == 2
        assert len(used) == 20 and len(set(used)) == 1, used


def test_writers_hold_the_lock_from_checkout_to_checkin(tmp_path: Path) -> None:
    """Writers (saver and store on one engine) take the writer lock before a pooled
    connection and give the connection back before the lock: no writer holds a
    connection while it queues (with a small pool, it could starve the lock's
    holder until the pool timed out), and the next writer gets the same connection
    back. Readers take no lock."""
    with SQLAlchemySaver.from_conn_string(f"sqlite:///{tmp_path / 'order.sqlite'}") as saver:
        saver.setup()
        store = SQLAlchemyStore(saver.engine)
        store.setup()
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"n": 0}), {}, {"n": 1})  # warm
        lock = writer_lock(saver.dialect_ops, saver.engine)
        assert lock is not None
        seen: list[tuple[str, bool]] = []
        sa.event.listen(saver.engine, "checkout", lambda *_: seen.append(("out", lock.locked())))
        sa.event.listen(saver.engine, "checkin", lambda *_: seen.append(("in", lock.locked())))
        writes = {
            "put": lambda: saver.put(stored, checkpoint({"n": 1}), {}, {"n": 2}),
            "put_writes": lambda: saver.put_writes(stored, [("n", 3)], "task-1"),
            "store put": lambda: store.put(("ns",), "key", {"v": 1}),
        }
        reads = {
            "get_tuple": lambda: saver.get_tuple(stored),
            "store get": lambda: store.get(("ns",), "key"),
        }
        for calls, locked in ((writes, True), (reads, False)):
            for name, call in calls.items():
                seen.clear()
                call()
                assert seen == [("out", locked), ("in", locked)], name
