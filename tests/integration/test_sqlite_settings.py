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
from helpers import checkpoint, config, new_thread

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.engines import configure_engine
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


def test_normal_sync_is_an_explicit_choice(tmp_path: Path) -> None:
    engine = configure_engine(
        sa.create_engine(f"sqlite:///{tmp_path / 'fast.sqlite'}"), sqlite_synchronous="NORMAL"
    )
    try:
        with engine.connect() as connection:
            assert _settings(connection) == {**DEFAULTS, "synchronous": NORMAL}
        saver = SQLAlchemySaver(engine)
        saver.setup()
        assert list(saver.list(None)) == []
    finally:
        engine.dispose()


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
        lock = one.ops.writer_lock(one.engine)
        assert lock is not None
        assert two.ops.writer_lock(two.engine) is lock
        assert other.ops.writer_lock(other.engine) is not lock


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
