"""The instant a put and put_writes stamp their rows with, on every database and mode.

What users rely on (retention and TTL sweeps, ``list_threads(idle_for=...)``, orphan
write pruning compare these columns): a checkpoint's ``created_at`` and
``updated_at`` are the instant of its put, its blobs' ``created_at`` too, a write's
``created_at`` the instant of its put_writes, read back as aware UTC datetimes; a
checkpoint's ``expires_at`` is NULL without a TTL and ``updated_at`` plus the TTL with
one. (On SQLite and on MySQL through PyMySQL, asyncmy and mysqlclient a write without
TTL stamps its rows with the clock read as the columns' text: the same instant.)
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from modes import saver_on

from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints
from lg_sqla.shared import utc_now

TTL_MINUTES = 90.0


def _stamps(engine: sa.Engine, table: sa.Table, thread_id: str, *columns: str) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                sa.select(*(table.c[name] for name in columns)).where(
                    table.c.thread_id == thread_id
                )
            )
        )


@pytest.mark.parametrize("ttl", [None, TTL_MINUTES], ids=["no-ttl", "ttl"])
async def test_put_and_put_writes_stamp_their_rows_with_the_instant_of_the_call(
    make_engine: EngineFactory, backend: Backend, mode: str, ttl: float | None
) -> None:
    saver = saver_on(
        make_engine.for_mode(mode, backend),
        **({} if ttl is None else {"ttl": {"default_ttl": ttl}}),
    )
    sync_engine = make_engine(backend)  # reads the rows themselves
    thread_id = new_thread()
    values = {"count": 3, "messages": ["hi"]}  # (an inline value and a blob)
    versions = {"count": 1, "messages": 1}

    before_put = utc_now()
    stored = await saver.put(config(thread_id), checkpoint(values, versions), {}, versions)
    after_put = utc_now()
    before_writes = utc_now()
    await saver.put_writes(stored, [("count", 4), ("messages", ["ho"])], "task-1")
    after_writes = utc_now()

    [(created, updated, expires)] = _stamps(
        sync_engine, checkpoints, thread_id, "created_at", "updated_at", "expires_at"
    )
    assert created.tzinfo is not None and created.utcoffset() == dt.timedelta(0)
    assert before_put <= created == updated <= after_put
    if ttl is None:
        assert expires is None
    else:
        assert expires == updated + dt.timedelta(minutes=ttl)
    [(blob_created,)] = _stamps(sync_engine, checkpoint_blobs, thread_id, "created_at")
    assert before_put <= blob_created <= after_put
    writes = _stamps(sync_engine, checkpoint_writes, thread_id, "created_at")
    assert len(writes) == 2
    assert writes[0][0] == writes[1][0]  # (one instant per call)
    assert before_writes <= writes[0][0] <= after_writes

    # The stamps read back as they were written: a later put of the same checkpoint
    # (an upsert) moves updated_at, never created_at.
    again = checkpoint(values, versions)
    again["id"] = stored["configurable"]["checkpoint_id"]
    await saver.put(config(thread_id), again, {}, {})
    [(created_again, updated_again, _)] = _stamps(
        sync_engine, checkpoints, thread_id, "created_at", "updated_at", "expires_at"
    )
    assert created_again == created and updated_again >= updated
