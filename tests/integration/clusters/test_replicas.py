"""A PostgreSQL hot standby (``pg_basebackup -R``, started by tests/servers.py): what
may run on a replica (reads, inspection, history) works there; a saver opened
``read_only=True`` never writes; errors on a replica name the primary, never
"run setup()" there."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from helpers import checkpoint, config, new_thread
from servers import create_database, postgres_with_standby, sqlalchemy_url

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.errors import ReadOnlyError, SchemaError
from lg_sqla.inspection import Inspector

pytestmark = pytest.mark.postgres


@dataclass(frozen=True)
class Pair:
    primary: str  # sync URLs of one database on the primary and on its standby
    standby: str
    standby_async: str
    standby_admin: str
    primary_admin: str


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with postgres_with_standby() as (primary_admin, standby_admin):
        name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
        create_database(primary_admin, name)  # replicated: the standby has it too
        pair = Pair(
            sqlalchemy_url(primary_admin, "psycopg", name),
            sqlalchemy_url(standby_admin, "psycopg", name),
            sqlalchemy_url(standby_admin, "psycopg", name),
            standby_admin,
            primary_admin,
        )
        with SQLAlchemySaver.from_conn_string(pair.primary) as saver:
            saver.setup()
        yield pair


def _write_thread(primary: str) -> tuple[str, Any]:
    with SQLAlchemySaver.from_conn_string(primary) as saver:
        thread_id = new_thread() + "-ñandú"
        parent = config(thread_id)
        for step in range(3):
            parent = saver.put(
                parent, checkpoint({"m": [step]}, {"m": step + 1}), {"step": step}, {"m": step + 1}
            )
            saver.put_writes(parent, [("m", f"w{step}")], f"task-{step}")
    return thread_id, parent


def test_a_read_only_saver_on_the_standby_reads_what_the_primary_wrote(pair: Pair) -> None:
    # The primary commits with synchronous_commit=remote_apply: a read right after sees it.
    thread_id, last = _write_thread(pair.primary)
    with SQLAlchemySaver.from_conn_string(pair.standby, read_only=True) as replica:
        replica.setup()  # checks the schema, migrates nothing
        found = replica.get_tuple(config(thread_id))
        assert found is not None and found.config == last
        assert found.checkpoint["channel_values"] == {"m": [2]}
        assert found.pending_writes == [("task-2", "m", "w2")]
        assert [t.metadata["step"] for t in replica.list(config(thread_id))] == [2, 1, 0]
        threads = Inspector(replica).threads()
        assert thread_id in {t.thread_id for t in threads.threads}


async def test_an_async_read_only_saver_on_the_standby(pair: Pair) -> None:
    thread_id, last = _write_thread(pair.primary)
    async with AsyncSQLAlchemySaver.from_conn_string(pair.standby_async, read_only=True) as replica:
        await replica.setup()
        found = await replica.aget_tuple(config(thread_id))
        assert found is not None and found.config == last
        assert [t.metadata["step"] async for t in replica.alist(config(thread_id))] == [2, 1, 0]
        with pytest.raises(ReadOnlyError, match="aput"):
            await replica.aput(config(thread_id), checkpoint({"m": 1}), {}, {"m": 1})


def test_every_write_of_a_read_only_saver_is_refused_before_the_database(pair: Pair) -> None:
    thread_id, last = _write_thread(pair.primary)
    engine = sa.create_engine(pair.standby)
    sent: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
    try:
        replica = SQLAlchemySaver(engine, read_only=True)
        writes: dict[str, Callable[[], object]] = {
            "put": lambda: replica.put(last, checkpoint({"m": 9}), {}, {"m": 9}),
            "put_writes": lambda: replica.put_writes(last, [("m", 1)], "t"),
            "delete_thread": lambda: replica.delete_thread(thread_id),
            "delete_for_runs": lambda: replica.delete_for_runs(["run"]),
            "copy_thread": lambda: replica.copy_thread(thread_id, thread_id + "-copy"),
            "prune": lambda: replica.prune([thread_id]),
            "sweep": lambda: replica.sweep(dt.timedelta(days=1)),
            "reencrypt": lambda: replica.reencrypt(),
        }
        for name, write in writes.items():
            with pytest.raises(ReadOnlyError, match=f"^{name}: "):
                write()
        assert sent == []
    finally:
        engine.dispose()


def test_setup_on_a_replica_names_the_primary(pair: Pair) -> None:
    """A database the primary created but never set up: on the standby, neither a
    saver's setup() nor its first call tells the user to run setup() there."""
    name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
    create_database(pair.primary_admin, name)
    url = sqlalchemy_url(pair.standby_admin, "psycopg", name)
    with (
        SQLAlchemySaver.from_conn_string(url) as saver,
        pytest.raises(SchemaError, match="against the primary"),
    ):
        saver.setup()
    with SQLAlchemySaver.from_conn_string(url, read_only=True) as replica:
        with pytest.raises(SchemaError, match="against the primary"):
            replica.setup()
        with pytest.raises(SchemaError, match="against the primary"):
            replica.get_tuple(config(new_thread()))


def test_a_read_only_store_on_the_standby_reads_and_refreshes_no_ttl(pair: Pair) -> None:
    """Refresh on read is an UPDATE: on a replica it failed with 25006 (cannot execute
    UPDATE in a read-only transaction). A read-only store reads without it."""
    from lg_sqla.store import SQLAlchemyStore

    namespace = ("users", new_thread(), "ñ")
    ttl = {"default_ttl": 60.0, "refresh_on_read": True}
    with SQLAlchemyStore.from_conn_string(pair.primary, ttl=ttl) as primary:  # type: ignore[arg-type]
        primary.setup()
        primary.put(namespace, "prefs", {"theme": "dark"})
    with (
        SQLAlchemyStore.from_conn_string(pair.standby, ttl=ttl) as writable,  # type: ignore[arg-type]
        pytest.raises(sa.exc.DBAPIError, match="read-only transaction"),
    ):
        writable.get(namespace, "prefs")  # what a store that may write does there
    with SQLAlchemyStore.from_conn_string(
        pair.standby,
        ttl=ttl,  # type: ignore[arg-type]
        read_only=True,
    ) as replica:
        replica.setup()
        item = replica.get(namespace, "prefs")
        assert item is not None and item.value == {"theme": "dark"}
        assert [i.key for i in replica.search(namespace)] == ["prefs"]
        with pytest.raises(ReadOnlyError, match="put"):
            replica.put(namespace, "prefs", {"theme": "light"})
        with pytest.raises(ReadOnlyError, match="sweep_ttl"):
            replica.sweep_ttl()


def test_the_clis_read_commands_run_on_the_standby(pair: Pair) -> None:
    import json
    import subprocess
    import sys

    thread_id, _ = _write_thread(pair.primary)
    base = [sys.executable, "-m", "lg_sqla", "--url", pair.standby]
    threads = subprocess.run(
        [*base, "threads", "--json"], capture_output=True, text=True, timeout=120, check=True
    )
    assert thread_id in {t["thread_id"] for t in json.loads(threads.stdout)["threads"]}
    history = subprocess.run(
        [*base, "history", thread_id, "--json"], capture_output=True, text=True, timeout=120
    )
    assert history.returncode == 0, history.stderr
    assert len(json.loads(history.stdout)["checkpoints"]) == 3
    # A database the primary never set up: upgrading it on the standby names the primary.
    name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
    create_database(pair.primary_admin, name)
    fresh = sqlalchemy_url(pair.standby_admin, "psycopg", name)
    upgrade = subprocess.run(
        [sys.executable, "-m", "lg_sqla", "--url", fresh, "upgrade"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert upgrade.returncode != 0 and "against the primary" in upgrade.stderr, upgrade
