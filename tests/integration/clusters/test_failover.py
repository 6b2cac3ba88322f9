# mypy: disable-error-code="call-overload,arg-type"
# Relaxed for this test module only: LangGraph configs passed as plain dicts.
"""Graphs ride through a PostgreSQL failover (tests/failover.py): a primary and its
synchronous standby, the application on a libpq multi-host URL with
``target_session_attrs=read-write``, writers running LangGraph graphs (sync and
async) while the primary is crashed (``pg_ctl stop -m immediate``) and the standby
promoted, again and again.

What each test holds lg_sqla to:

* no error reaches the application: the reconnect window (``runtime.retry``) waits
  for the promotion, and runs again only what is safe to (nothing ran, or the call is
  idempotent);
* every acknowledged ``put`` and ``put_writes`` is on the new primary afterwards
  (synchronous replication makes it so; lg_sqla must not lose or mangle any), and
  every thread's state is exactly its turns;
* a COMMIT waiting for a synchronous standby that is gone ends with
  ``CallTimeoutError`` under ``call_timeout``, instead of hanging.

The figures (acknowledged writes, errors, failover times) are printed (``-s``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from failover import Pair, failover_pair
from graph_writers import (
    ASYNC_WRITERS,
    SYNC_WRITERS,
    Acknowledged,
    WaitsSeen,
    Writers,
    check_everything_is_there,
    wait_until,
)
from helpers import checkpoint, config, new_thread
from servers import create_database

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.errors import CallTimeoutError
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

pytestmark = pytest.mark.postgres

FAILOVERS = 3
# Graph turns every writer must finish after each promotion (and after each rebuild):
# the proof that the writers went on, not merely that they did not fail.
TURNS_AFTER = 4


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with failover_pair() as running:
        yield running


@pytest.fixture(scope="module")
def database(pair: Pair) -> str:
    name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
    create_database(pair.admin_url(pair.primary), name)  # (replicated to the standby)
    with SQLAlchemySaver.from_conn_string(pair.url(name)) as saver:
        saver.setup()
    return name


# --------------------------------------------------------------------------- the tests


def test_graphs_ride_through_repeated_failovers(pair: Pair, database: str) -> None:
    """Each time, the standby is promoted only once the writers' calls are seen
    waiting in the reconnect window (one per writer at least): the outage is real."""
    url = pair.url(database)
    acknowledged = Acknowledged()
    writer_count = SYNC_WRITERS + ASYNC_WRITERS
    with Writers(url, acknowledged) as writers, WaitsSeen() as waits:
        writers.wait_for_turns(TURNS_AFTER, "before the first failover")
        for round_ in range(FAILOVERS):
            seen = waits.count

            def writers_wait(seen: int = seen) -> None:
                wait_until(
                    lambda: waits.count >= seen + writer_count,
                    "calls waiting for the database",
                    lambda: acknowledged.errors[:3] or None,
                )

            pair.fail_over(before_promotion=writers_wait)
            writers.wait_for_turns(TURNS_AFTER, f"after promotion {round_ + 1}")
            pair.rebuild_standby()
            writers.wait_for_turns(TURNS_AFTER, f"after standby {round_ + 1} was rebuilt")
    print(
        f"\n{FAILOVERS} failovers (crash to promoted: "
        f"{', '.join(f'{s:.1f}s' for s in pair.failovers)}); "
        f"{len(acknowledged.puts)} puts and {len(acknowledged.writes)} put_writes "
        f"acknowledged over {len(acknowledged.turns)} threads; "
        f"errors reaching the application: {len(acknowledged.errors)}; "
        f"reconnect-window waits: {waits.count}"
    )
    assert acknowledged.errors == []
    check_everything_is_there(url, acknowledged)
    print("acknowledged writes lost: 0")


def test_without_the_window_the_application_sees_the_failover(pair: Pair, database: str) -> None:
    """The control: ``reconnect_window=0`` (lg_sqla's behaviour before the window).
    The promotion waits until errors reached the application; nothing acknowledged
    is lost either way."""
    url = pair.url(database)
    acknowledged = Acknowledged()
    with Writers(url, acknowledged, reconnect_window=0) as writers:
        writers.wait_for_turns(TURNS_AFTER, "before the failover")
        pair.fail_over(
            before_promotion=lambda: wait_until(
                lambda: len(acknowledged.errors) >= 1, "an error reaching the application"
            )
        )
        writers.wait_for_turns(TURNS_AFTER, "after the promotion", errors_allowed=True)
        pair.rebuild_standby()
    print(
        f"\nreconnect_window=0: errors reaching the application: {len(acknowledged.errors)} "
        f"({len(acknowledged.puts)} puts acknowledged)"
    )
    assert acknowledged.errors
    check_everything_is_there(url, acknowledged, partial_threads=True)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_commit_waiting_for_a_missing_standby_ends_at_call_timeout(
    pair: Pair, database: str, mode: str
) -> None:
    """The primary names a synchronous standby that is down: every COMMIT waits for
    it. Under ``call_timeout`` the call is cut and says why, instead of hanging."""
    url = pair.url(database)
    standby = pair.standby
    pair.crash(standby)
    try:
        parent = config(new_thread())
        memory = (("memories", parent["configurable"]["thread_id"]), "fact")
        if mode == "sync":
            with SQLAlchemySaver.from_conn_string(url, call_timeout=1.5) as saver:
                assert saver.get_tuple(parent) is None  # reads do not wait: answered
                with pytest.raises(CallTimeoutError, match="synchronous_standby_names"):
                    saver.put(parent, checkpoint({"a": 1}), {}, {})
                saver.get_tuple(parent)  # answers: the cut connection was replaced
            # The store and the node cache take the same option, with the same effect.
            with SQLAlchemyStore.from_conn_string(url, call_timeout=1.5) as store:
                assert store.get(*memory) is None
                with pytest.raises(CallTimeoutError, match="synchronous_standby_names"):
                    store.put(*memory, {"text": "likes tea"})
                assert store.get(*memory) is None
            engine = sa.create_engine(url)
            try:
                cache: SQLAlchemyCache[object] = SQLAlchemyCache(engine, call_timeout=1.5)
                assert cache.get([memory]) == {}
                with pytest.raises(CallTimeoutError, match="synchronous_standby_names"):
                    cache.set({memory: ("value", None)})
            finally:
                engine.dispose()
        else:
            async with AsyncSQLAlchemySaver.from_conn_string(url, call_timeout=1.5) as asaver:
                assert await asaver.aget_tuple(parent) is None
                with pytest.raises(CallTimeoutError, match="synchronous_standby_names"):
                    await asaver.aput(parent, checkpoint({"a": 1}), {}, {})
            async with AsyncSQLAlchemyStore.from_conn_string(url, call_timeout=1.5) as astore:
                assert await astore.aget(*memory) is None
                with pytest.raises(CallTimeoutError, match="synchronous_standby_names"):
                    await astore.aput(*memory, {"text": "likes tea"})
    finally:
        pair.rebuild_standby()  # (synchronous again, for whatever runs next)
