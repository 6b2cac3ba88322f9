# mypy: disable-error-code="arg-type,type-arg"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Retention is data, pins hold everywhere: on every dialect, sync and async.

- two processes on one database, a TTL policy in one only: the other's threads stay
  visible to it and survive its ``sweep_ttl`` and its background sweeper; its own
  thread expires as its policy said when it wrote it;
- the expiry is what is stored: a saver with another policy, or none, reads and
  reports the same thread the same way;
- a pinned thread survives the age sweep (Python and ``lg-sqla sweep``), which says
  so; its pin row stays with it and goes when it is deleted; no retention row
  outlives its thread (delete_thread, prune, delete_for_runs, the age sweep);
- ``sweep_ttl(dry_run=True)`` and ``lg-sqla ttl apply --dry-run`` change nothing and
  report what they would do.

No test waits on time: rows are written with old timestamps (``age``), a sweep is
given a later ``now``, and the background sweeper is waited for by its passes.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread, table_counts
from modes import saver_on
from test_cli import read_json
from test_retention import age, engine_for, put_thread, settings_rows
from test_retention import swept_database as swept_database  # (a fixture, found by name)

from lg_sqla.models import checkpoints

HOUR = 60.0  # minutes
DAY = 24 * HOUR
LATER = dt.timedelta(days=365)  # a `now` far past every stamped TTL of these tests

# One process's part of the probe: a saver on the URL, with the policy given (or
# none), does what it is told and prints JSON. Run as a real process of its own.
PROCESS = textwrap.dedent(
    """
    import asyncio, datetime as dt, json, sys, threading
    import sqlalchemy as sa
    from sqlalchemy.ext.asyncio import create_async_engine
    from langgraph.checkpoint.base import empty_checkpoint
    from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
    from lg_sqla.models import checkpoints as C

    url, mode, task = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    ttl = task.get("ttl")

    def cfg(thread_id):
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}

    async def call(saver, name, *args, **kwargs):
        if mode == "async":
            return await getattr(saver, "a" + name)(*args, **kwargs)
        return await asyncio.to_thread(getattr(saver, name), *args, **kwargs)

    async def write(saver, thread_id):
        stored = cfg(thread_id)
        for step in range(2):
            cp = empty_checkpoint()
            cp["channel_values"] = {"v": [thread_id, step]}
            cp["channel_versions"] = {"v": step + 1}
            stored = await call(saver, "put", stored, cp, {"step": step}, {"v": step + 1})
            await call(saver, "put_writes", stored, [("v", step)], "task")

    def age(engine, thread_id, minutes):
        # Its rows written `minutes` earlier: the stored expiry moves with them.
        shift = dt.timedelta(minutes=minutes)
        with engine.begin() as conn:
            rows = conn.execute(
                sa.select(C.c.checkpoint_id, C.c.updated_at, C.c.expires_at).where(
                    C.c.thread_id == thread_id
                )
            ).all()
            for row in rows:
                conn.execute(
                    sa.update(C)
                    .where(C.c.thread_id == thread_id, C.c.checkpoint_id == row.checkpoint_id)
                    .values(
                        updated_at=row.updated_at - shift,
                        created_at=row.updated_at - shift,
                        expires_at=None if row.expires_at is None else row.expires_at - shift,
                    )
                )

    async def main():
        sync_url, async_url = url.split(" ")
        engine = sa.create_engine(sync_url)
        if mode == "async":
            saver = AsyncSQLAlchemySaver(create_async_engine(async_url), ttl=ttl)
        else:
            saver = SQLAlchemySaver(engine, ttl=ttl)
        out = {}
        for thread_id in task.get("write", []):
            await write(saver, thread_id)
        for thread_id in task.get("age", []):
            age(engine, thread_id, task["age_minutes"])
        seen = task.get("read", [])
        out["visible"] = {t: await call(saver, "get_tuple", cfg(t)) is not None for t in seen}
        listed = await call(saver, "list", None) if mode == "sync" else None
        if mode == "sync":
            out["listed"] = sorted({t.config["configurable"]["thread_id"] for t in listed})
        else:
            out["listed"] = sorted(
                {t.config["configurable"]["thread_id"] async for t in saver.alist(None)}
            )
        if task.get("sweep"):
            later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=365)
            dry = await call(saver, "sweep_ttl", dry_run=True, now=later)
            out["dry_run_would_delete"] = sorted(dry.thread_ids)
            out["swept_now"] = (await call(saver, "sweep_ttl")).removed.threads
            passes = []
            done = threading.Event()

            def on_pass(report):
                passes.append(report.removed.threads)
                if len(passes) >= 3:
                    done.set()

            if mode == "async":
                await saver.start_ttl_sweeper(0.002, on_pass=on_pass)
                await asyncio.to_thread(done.wait, 60)
                await saver.stop_ttl_sweeper(30)
            else:
                saver.start_ttl_sweeper(0.002, on_pass=on_pass)
                await asyncio.to_thread(done.wait, 60)
                saver.stop_ttl_sweeper(30)
            out["sweeper_passes"] = passes
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def run_process(backend: Backend, mode: str, task: dict[str, Any], tmp_path: Path) -> Any:
    """The probe's part ``task`` in a process of its own (``python script``)."""
    script = tmp_path / "retention_process.py"
    script.write_text(PROCESS)
    urls = f"{backend.sync_url} {backend.async_url}"
    done = subprocess.run(
        [sys.executable, str(script), urls, mode, json.dumps(task)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_policy_in_one_process_never_reaches_another_process_threads(
    swept_database: Backend, mode: str, tmp_path: Path
) -> None:
    """The hidden probe: process A writes under no policy; process B has a tiny
    default_ttl (0.01 min). B sees A's threads, its sweep and its background sweeper
    (three passes) leave them whole; B's own thread, written under its policy and
    then older than its TTL, is hidden from B's reads and deleted."""
    backend = swept_database  # sweeps reach every thread of the database: its own
    prefix = new_thread()
    policyless = [f"{prefix}-plain-{i}" for i in range(3)]
    own = f"{prefix}-policy"
    written = run_process(backend, mode, {"write": policyless}, tmp_path)
    assert written["listed"] == sorted(policyless)
    engine = sa.create_engine(backend.sync_url)
    before = {t: table_counts(engine, t) for t in policyless}
    # (The aging moves B's thread 10 minutes back: far past its 0.01-minute TTL.)
    seen = run_process(
        backend,
        mode,
        {
            "ttl": {"default_ttl": 0.01},
            "write": [own],
            "age": [own],
            "age_minutes": 10,
            "read": [*policyless, own],
            "sweep": True,
        },
        tmp_path,
    )
    assert seen["visible"] == {**{t: True for t in policyless}, own: False}
    assert seen["listed"] == sorted(policyless)
    assert seen["dry_run_would_delete"] == [own]  # a year later: still only its own
    assert seen["swept_now"] == 1
    assert seen["sweeper_passes"][:3] == [0, 0, 0]
    for thread_id in policyless:
        assert table_counts(engine, thread_id) == before[thread_id]
    assert table_counts(engine, own) == {
        "checkpoints": 0,
        "checkpoint_writes": 0,
        "checkpoint_blobs": 0,
    }
    # And back in process A (no policy): all of its threads, as it wrote them.
    again = run_process(backend, mode, {"read": policyless}, tmp_path)
    assert again["visible"] == {t: True for t in policyless}
    engine.dispose()


async def test_the_stored_expiry_is_the_same_for_every_reader(
    make_engine: EngineFactory, swept_database: Backend, mode: str
) -> None:
    """Savers with another default_ttl, or none, report the same expiry for a thread:
    the TTL it was written under; dry_run=True deletes nothing and names it."""
    backend = swept_database
    engine = engine_for(make_engine, backend, mode)
    sync = make_engine(backend)
    writer = saver_on(engine, ttl={"default_ttl": HOUR})
    short = saver_on(engine, ttl={"default_ttl": 1})
    plain = saver_on(engine)
    prefix = new_thread()
    stamped, unstamped = f"{prefix}-stamped", f"{prefix}-unstamped"
    await put_thread(writer, stamped)
    await put_thread(plain, unstamped)
    age(sync, stamped, 30)
    age(sync, unstamped, 30)
    for reader in (writer, short, plain):
        report = await reader.thread_ttl(stamped)
        assert report.stamped_ttl_minutes == pytest.approx(HOUR)
        assert report.effective_ttl_minutes == pytest.approx(HOUR) and not report.expired
        never = await reader.thread_ttl(unstamped)
        assert never.effective_ttl_minutes is None and never.expires_at is None
    # The short policy's reader hides neither (30 min old, TTLs of an hour and none).
    assert await short.get_tuple(config(stamped)) is not None
    assert await short.get_tuple(config(unstamped)) is not None
    age(sync, stamped, 2 * HOUR)
    assert await writer.get_tuple(config(stamped)) is None  # its stored expiry passed
    assert await short.get_tuple(config(unstamped)) is not None

    later = dt.datetime.now(dt.timezone.utc) + LATER
    dry = await short.sweep_ttl(dry_run=True, now=later)
    assert dry.dry_run and dry.thread_ids == [stamped]
    assert dry.removed.threads == 1 and dry.removed.checkpoints == 2
    assert dry.removed.writes == 2 and dry.removed.blobs == 2
    assert table_counts(sync, stamped)["checkpoints"] == 2  # the dry run deleted nothing
    swept = await plain.sweep_ttl(now=later)  # a saver without a policy sweeps the same
    assert swept.removed.threads == 1 and not swept.dry_run
    assert table_counts(sync, stamped)["checkpoints"] == 0
    assert table_counts(sync, unstamped)["checkpoints"] == 2

    # A later write under no policy ends the thread's TTL; under one, restarts it.
    await put_thread(writer, stamped)
    assert (await plain.thread_ttl(stamped)).effective_ttl_minutes == pytest.approx(HOUR)
    await put_thread(plain, stamped, steps=1)
    assert (await writer.thread_ttl(stamped)).effective_ttl_minutes is None
    for thread_id in (stamped, unstamped):
        await plain.delete_thread(thread_id)


async def test_a_pinned_thread_survives_the_age_sweep_and_its_pin_goes_with_it(
    make_engine: EngineFactory, swept_database: Backend, mode: str
) -> None:
    backend = swept_database  # the age sweep reaches every thread of the database
    engine = engine_for(make_engine, backend, mode)
    sync = make_engine(backend)
    saver = saver_on(engine)
    prefix = new_thread()
    pinned, plain, kept_long = f"{prefix}-pinned", f"{prefix}-plain", f"{prefix}-long"
    for thread_id in (pinned, plain, kept_long):
        await put_thread(saver, thread_id, steps=3)
        age(sync, thread_id, 10 * DAY)
    await saver.pin_thread(pinned)
    await saver.pin_thread(kept_long)
    await saver.set_thread_ttl(plain, 30 * DAY)  # a setting row, to see it go too

    pruned = await saver.sweep(dt.timedelta(days=1), strategy="keep_latest", keep_last=1)
    assert pruned.pinned_skipped == 2
    assert table_counts(sync, pinned)["checkpoints"] == 3  # pruning is a deletion too
    assert table_counts(sync, plain)["checkpoints"] == 1
    swept = await saver.sweep(dt.timedelta(days=1))
    assert swept.pinned_skipped == 2 and swept.removed.threads == 1
    assert table_counts(sync, plain)["checkpoints"] == 0
    assert settings_rows(sync, plain) == 0  # no retention row outlives its thread
    for thread_id in (pinned, kept_long):
        assert table_counts(sync, thread_id) == {
            "checkpoints": 3,
            "checkpoint_writes": 3,
            "checkpoint_blobs": 3,
        }
        assert (await saver.thread_ttl(thread_id)).pinned
    await saver.delete_thread(pinned)  # an explicit delete of that very thread
    assert settings_rows(sync, pinned) == 0
    await saver.unpin_thread(kept_long)
    assert (await saver.sweep(dt.timedelta(days=1))).removed.threads == 1
    assert settings_rows(sync, kept_long) == 0


def test_lg_sqla_sweep_keeps_pinned_threads_and_says_so(
    make_engine: EngineFactory, swept_database: Backend
) -> None:
    """The documented cron recipe, ``lg-sqla sweep --older-than-days N``, as a real
    process: the dry run and the sweep skip the pinned thread and report it."""
    backend = swept_database
    engine = make_engine(backend)
    saver = saver_on(engine).target
    prefix = new_thread()
    pinned, plain = f"{prefix}-pinned", f"{prefix}-plain"
    for thread_id in (pinned, plain):
        stored = saver.put(config(thread_id), checkpoint({"v": [1]}), {}, {"v": 1})
        saver.put_writes(stored, [("v", 2)], task_id="t")
        age(engine, thread_id, 10 * DAY)
    saver.pin_thread(pinned)
    url = backend.sync_url
    dry = read_json(["sweep", "--older-than-days", "1", "--dry-run"], url)
    assert dry["threads"] == 1 and dry["pinned_skipped"] == 1
    done = read_json(["sweep", "--older-than-days", "1", "--yes"], url)
    assert done["threads"] == 1 and done["pinned_skipped"] == 1
    assert table_counts(engine, plain)["checkpoints"] == 0
    assert table_counts(engine, pinned) == {
        "checkpoints": 1,
        "checkpoint_writes": 1,
        "checkpoint_blobs": 1,
    }
    assert settings_rows(engine, pinned) == 1
    text = subprocess.run(
        [sys.executable, "-m", "lg_sqla", "--url", url, "sweep", "--older-than-days", "1"],
        capture_output=True,
        text=True,
        input="",
    )
    assert text.returncode == 0 and "skipped 1 pinned" in text.stdout, text.stderr
    saver.delete_thread(pinned)
    assert settings_rows(engine, pinned) == 0


def test_whole_thread_deletes_leave_no_retention_row(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """prune(strategy="delete") and delete_for_runs removing a thread's last checkpoint
    take its settings with it; delete_for_runs leaving a checkpoint keeps them."""
    engine = make_engine(backend)
    saver = saver_on(engine).target
    gone, partly, pruned = new_thread(), new_thread(), new_thread()
    run_a, run_b = f"run-{new_thread()}", f"run-{new_thread()}"
    for thread_id in (gone, partly, pruned):
        saver.put(config(thread_id), checkpoint({"v": 1}), {"run_id": run_a}, {"v": 1})
        saver.set_thread_ttl(thread_id, 5)
    for thread_id in (partly, pruned):  # a checkpoint of another run: they keep one
        saver.put(config(thread_id), checkpoint({"v": 2}), {"run_id": run_b}, {"v": 2})
    saver.delete_for_runs([run_a])
    assert settings_rows(engine, gone) == 0
    assert settings_rows(engine, partly) == 1
    saver.prune([pruned], strategy="delete")
    assert settings_rows(engine, pruned) == 0
    saver.delete_thread(partly)
    assert settings_rows(engine, partly) == 0


def test_ttl_apply_counts_first_and_its_dry_run_changes_nothing(
    make_engine: EngineFactory, swept_database: Backend
) -> None:
    """``lg-sqla ttl apply`` (real processes): the dry run counts the threads that never
    expire, skipping the pinned one, and writes nothing; applied, they get the TTL;
    ``--idle-days`` and ``--replace`` select as documented."""
    backend = swept_database  # apply walks every thread of the database
    engine = make_engine(backend)
    plain = saver_on(engine).target
    stamping = saver_on(engine, ttl={"default_ttl": HOUR}).target
    prefix = new_thread()
    never, idle, stamped, pinned = (f"{prefix}-{n}" for n in ("never", "idle", "stamped", "pin"))
    for thread_id in (never, idle, pinned):
        plain.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
    stamping.put(config(stamped), checkpoint({"v": 1}), {}, {"v": 1})
    age(engine, idle, 3 * DAY)
    plain.pin_thread(pinned)
    url = backend.sync_url

    dry = read_json(["ttl", "apply", "--days", "1", "--dry-run"], url)
    assert dry["dry_run"] is True and dry["threads"] == 2 and dry["pinned_skipped"] == 1
    assert all(settings_rows(engine, t) == 0 for t in (never, idle, stamped))
    idle_only = read_json(["ttl", "apply", "--days", "1", "--idle-days", "2", "--dry-run"], url)
    assert idle_only["threads"] == 1
    done = read_json(["ttl", "apply", "--days", "1", "--idle-days", "2", "--yes"], url)
    assert done["dry_run"] is False and done["threads"] == 1
    assert plain.thread_ttl(idle).ttl_minutes == DAY and plain.thread_ttl(idle).expired
    assert plain.thread_ttl(never).ttl_minutes is None
    done = read_json(["ttl", "apply", "--minutes", "90", "--yes"], url)
    assert done["threads"] == 1 and done["pinned_skipped"] == 1  # `never` only
    assert plain.thread_ttl(never).ttl_minutes == 90
    assert plain.thread_ttl(stamped).ttl_minutes is None  # its stamped TTL stays
    replaced = plain.set_threads_ttl(120, replace_existing=True, dry_run=True)
    assert replaced.threads == 3 and replaced.pinned_skipped == 1
    assert plain.thread_ttl(stamped).ttl_minutes is None
    swept = plain.sweep_ttl()
    assert swept.removed.threads == 1  # `idle`: a day's TTL, idle for three
    assert table_counts(engine, idle)["checkpoints"] == 0
    for thread_id in (never, stamped, pinned):
        plain.delete_thread(thread_id)
        assert settings_rows(engine, thread_id) == 0


async def test_set_threads_ttl_in_python(
    make_engine: EngineFactory, swept_database: Backend, mode: str
) -> None:
    backend = swept_database
    engine = engine_for(make_engine, backend, mode)
    sync = make_engine(backend)
    saver = saver_on(engine)
    thread_id = new_thread()
    await put_thread(saver, thread_id)
    counted = await saver.set_threads_ttl(5, dry_run=True, batch_size=1)
    assert counted.threads == 1 and counted.dry_run
    assert settings_rows(sync, thread_id) == 0
    applied = await saver.set_threads_ttl(5, batch_size=1)
    assert applied.threads == 1 and (await saver.thread_ttl(thread_id)).ttl_minutes == 5
    assert (await saver.set_threads_ttl(5)).threads == 0  # it has a TTL now
    with sync.connect() as conn:  # nothing stamped: the TTL is the row's
        assert (
            conn.execute(
                sa.select(sa.func.count()).where(
                    checkpoints.c.thread_id == thread_id, checkpoints.c.expires_at.is_not(None)
                )
            ).scalar_one()
            == 0
        )
    await saver.delete_thread(thread_id)
