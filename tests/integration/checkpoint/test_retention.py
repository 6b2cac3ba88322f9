# mypy: disable-error-code="arg-type,type-arg"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Retention by policy (``ttl=``): what users rely on, on every dialect, sync and async.

- an expired thread reads as absent (get_tuple, list, get_state) before any sweep, and
  the sweep deletes all of it, settings included; pinned threads and threads with a
  longer TTL of their own stay; a refreshing read restarts the clock, a read-only
  saver never writes;
- a graph mid-run is never swept, even with a tiny TTL, by the background sweeper;
- keep_last prunes inside every put of a real DeltaChannel graph and its state stays
  exactly what an unpruned saver gives;
- ``lg-sqla ttl`` through the entry point.

Threads are aged by moving their timestamps back, never by sleeping past a TTL.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import operator
import threading
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from graph_helpers import delta_graph
from helpers import checkpoint, config, count_statements, new_thread, table_counts
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from modes import either, saver_on
from test_cli import read_json

from lg_sqla import InvalidInputError, ReadOnlyError, SQLAlchemySaver, migrate
from lg_sqla.cli import main
from lg_sqla.models import checkpoint_retention, checkpoints

HOUR = 60.0  # minutes


@pytest.fixture
def swept_database(fresh_database: Backend) -> Backend:
    """A database of the test's own, migrated: a TTL sweep deletes every expired thread
    of the database it runs on, so tests that sweep must not share one with the suite
    (other tests' aged or encrypted threads)."""
    engine = sa.create_engine(fresh_database.sync_url)
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
    return fresh_database


def age(engine: sa.Engine, thread_id: str, minutes: float) -> None:
    """Move every checkpoint of the thread ``minutes`` into the past, its stored expiry
    (``expires_at``: the writer's TTL after its write) along with it."""
    then = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=minutes)
    c = checkpoints.c
    with engine.begin() as conn:
        rows = conn.execute(
            sa.select(c.checkpoint_ns_hash, c.checkpoint_id, c.updated_at, c.expires_at).where(
                c.thread_id == thread_id
            )
        ).all()
        for row in rows:
            ttl = None if row.expires_at is None else row.expires_at - row.updated_at
            conn.execute(
                sa.update(checkpoints)
                .where(
                    c.thread_id == thread_id,
                    c.checkpoint_ns_hash == row.checkpoint_ns_hash,
                    c.checkpoint_id == row.checkpoint_id,
                )
                .values(
                    updated_at=then, created_at=then, expires_at=None if ttl is None else then + ttl
                )
            )


def settings_rows(engine: sa.Engine, thread_id: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).where(checkpoint_retention.c.thread_id == thread_id)
            ).scalar_one()
        )


def engine_for(make_engine: EngineFactory, backend: Backend, mode: str) -> Any:
    return make_engine.aio(backend) if mode == "async" else make_engine(backend)


async def put_thread(saver: Any, thread_id: str, steps: int = 2) -> Any:
    stored = config(thread_id)
    for i in range(steps):
        versions = {"v": i + 1}
        stored = await saver.put(stored, checkpoint({"v": [i]}, versions), {"step": i}, versions)
        await saver.put_writes(stored, [("v", i)], task_id="t")
    return stored


async def test_expired_threads_read_as_absent_and_the_sweep_deletes_them_whole(
    make_engine: EngineFactory, swept_database: Backend, mode: str
) -> None:
    backend = swept_database  # sweeps reach every thread of the database: its own
    engine = engine_for(make_engine, backend, mode)
    sync = make_engine(backend)
    saver = saver_on(engine, ttl={"default_ttl": HOUR})
    prefix = new_thread()
    names = ("expired", "fresh", "pinned", "own-longer", "own-shorter")
    threads = {name: f"{prefix}-{name}" for name in names}
    for thread_id in threads.values():
        await put_thread(saver, thread_id)
    for name in ("expired", "pinned", "own-longer"):
        age(sync, threads[name], 2 * HOUR)
    age(sync, threads["own-shorter"], 10)
    await saver.pin_thread(threads["pinned"])
    await saver.set_thread_ttl(threads["own-longer"], 3 * HOUR)
    shorter = await saver.set_thread_ttl(threads["own-shorter"], 5)
    assert shorter.ttl_minutes == 5 and shorter.expired

    # Before any sweep: an expired thread is gone for every read, not half-gone.
    for name in ("expired", "own-shorter"):
        assert await saver.get_tuple(config(threads[name])) is None
        assert await saver.list(config(threads[name])) == []
    for name in ("fresh", "pinned", "own-longer"):
        found = await saver.get_tuple(config(threads[name]))
        assert found is not None and found.checkpoint["channel_values"] == {"v": [1]}
        assert len(await saver.list(config(threads[name]))) == 2
    listed = {t.config["configurable"]["thread_id"] for t in await saver.list(None)}
    assert threads["fresh"] in listed and threads["expired"] not in listed

    report = await saver.sweep_ttl(batch_size=2)
    assert report.removed.threads >= 2
    for name in ("expired", "own-shorter"):
        assert table_counts(sync, threads[name]) == {
            "checkpoints": 0,
            "checkpoint_writes": 0,
            "checkpoint_blobs": 0,
        }
        assert settings_rows(sync, threads[name]) == 0
    for name in ("fresh", "pinned", "own-longer"):
        assert table_counts(sync, threads[name])["checkpoints"] == 2

    # Unpinned, the old thread's TTL applies again; back to the default, the same.
    unpinned = await saver.unpin_thread(threads["pinned"])
    assert unpinned.expired and not unpinned.pinned
    default = await saver.set_thread_ttl(threads["own-longer"], None)
    assert default.ttl_minutes is None and default.effective_ttl_minutes == HOUR
    assert (await saver.sweep_ttl()).removed.threads >= 2
    assert table_counts(sync, threads["pinned"])["checkpoints"] == 0
    assert table_counts(sync, threads["own-longer"])["checkpoints"] == 0
    await saver.delete_thread(threads["fresh"])

    with pytest.raises(InvalidInputError, match="ttl_minutes"):
        await saver.set_thread_ttl(threads["fresh"], -1)
    with pytest.raises(InvalidInputError, match="default_ttl"):
        saver_on(engine, ttl={"default_ttl": 0})
    with pytest.raises(InvalidInputError, match="unknown key"):
        saver_on(engine, ttl={"default_tll": 5})


def test_reads_cost_one_statement_more_with_a_policy_and_none_without(
    make_engine: EngineFactory, backend: Backend
) -> None:
    engine = make_engine(backend)
    thread_id = new_thread()
    stored = SQLAlchemySaver(engine).put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
    costs = {}
    for name, ttl in (("none", None), ("keep_last only", {"keep_last": 3}), ("ttl", {})):
        saver = SQLAlchemySaver(engine, ttl=ttl)
        saver.get_tuple(stored)  # (the first call checks the schema)
        with count_statements(engine) as counter:
            assert saver.get_tuple(stored) is not None
        costs[name] = counter.count
    assert costs["keep_last only"] == costs["none"]
    assert costs["ttl"] == costs["none"] + 1


async def test_refresh_on_read_restarts_the_clock_and_a_read_only_saver_writes_nothing(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    engine = engine_for(make_engine, backend, mode)
    sync = make_engine(backend)
    policy = {"default_ttl": HOUR, "refresh_on_read": True}
    saver = saver_on(engine, ttl=policy)
    replica = saver_on(engine, ttl=policy, read_only=True)
    thread_id = new_thread()
    await put_thread(saver, thread_id, steps=1)
    age(sync, thread_id, 50)
    assert await replica.get_tuple(config(thread_id)) is not None
    assert settings_rows(sync, thread_id) == 0  # the replica's read wrote nothing
    with pytest.raises(ReadOnlyError):
        await replica.pin_thread(thread_id)
    assert await saver.get_tuple(config(thread_id)) is not None  # refreshes
    age(sync, thread_id, 2 * HOUR)
    assert await saver.get_tuple(config(thread_id)) is not None  # read 0 min ago
    assert await replica.get_tuple(config(thread_id)) is not None
    report = await saver.thread_ttl(thread_id)
    assert report.touched_at is not None and not report.expired
    await saver.delete_thread(thread_id)


class Counter(TypedDict):
    n: Annotated[int, operator.add]


def blocking_graph(saver: Any, entered: Any, release: Any, is_async: bool) -> Any:
    """START -> first -> wait -> last; ``wait`` blocks until released (mid-run)."""

    def first(state: Counter) -> dict[str, int]:
        return {"n": 1}

    def wait(state: Counter) -> dict[str, int]:
        entered.set()
        release.wait(30)
        return {"n": 10}

    async def await_release(state: Counter) -> dict[str, int]:
        entered.set()
        await asyncio.wait_for(release.wait(), 30)
        return {"n": 10}

    def last(state: Counter) -> dict[str, int]:
        return {"n": 100}

    builder = StateGraph(Counter)
    builder.add_node("first", first)
    builder.add_node("wait", await_release if is_async else wait)
    builder.add_node("last", last)
    builder.add_edge(START, "first")
    builder.add_edge("first", "wait")
    builder.add_edge("wait", "last")
    builder.add_edge("last", END)
    return builder.compile(checkpointer=saver)


class SweeperPasses:
    """The background sweeper's passes as they end (its ``on_pass``): a test waits for
    passes that began after what it set up, never for a time."""

    def __init__(self) -> None:
        self._done = threading.Condition()
        self.reports: list[Any] = []

    def record(self, report: Any) -> None:
        with self._done:
            self.reports.append(report)
            self._done.notify_all()

    @property
    def count(self) -> int:
        with self._done:
            return len(self.reports)

    def wait_for(self, count: int) -> None:
        """Until ``count`` passes have ended (a generous bound: a failure, not a wait)."""
        with self._done:
            assert self._done.wait_for(lambda: len(self.reports) >= count, 60), (
                f"the sweeper ended {len(self.reports)} pass(es), not {count}"
            )

    async def after_next(self, passes: int) -> None:
        """Until ``passes`` whole passes have run that began after this call (the pass
        under way, if any, does not count), off the loop: the async sweeper is a task
        of it."""
        await asyncio.to_thread(self.wait_for, self.count + passes + 1)


async def test_the_sweeper_never_sweeps_a_graph_mid_run(
    make_engine: EngineFactory, swept_database: Backend, mode: str
) -> None:
    """A tiny TTL, a background sweeper every 0.3 s, a node blocked between supersteps:
    the thread stays whole and readable through three passes; once the run is over the
    next pass deletes it. Waits on the sweeper's passes (on_pass), not on time."""
    backend = swept_database  # sweeps reach every thread of the database: its own
    engine = engine_for(make_engine, backend, mode)
    sync = make_engine(backend)
    # A TTL of the thread's own (no default): other tests' threads are not the sweeper's.
    target = saver_on(engine, ttl={"sweep_interval_minutes": 0.005}).target
    thread_id = new_thread()
    cfg = config(thread_id)
    is_async = mode == "async"
    entered: Any = asyncio.Event() if is_async else threading.Event()
    release: Any = asyncio.Event() if is_async else threading.Event()
    graph = blocking_graph(target, entered, release, is_async)
    saver = either(target, mode)
    passes = SweeperPasses()

    # durability="sync": each superstep's checkpoint is stored before the next one runs,
    # so once ``wait`` is entered all three are there (with "async", the default, the
    # third may still be on its way: a race of the test, not of the sweeper).
    if is_async:
        run: Any = asyncio.create_task(graph.ainvoke({"n": 0}, cfg, durability="sync"))
        await asyncio.wait_for(entered.wait(), 30)
    else:
        result: dict[str, Any] = {}
        run = threading.Thread(
            target=lambda: result.update(graph.invoke({"n": 0}, cfg, durability="sync"))
        )
        run.start()
        assert entered.wait(30)
    await saver.set_thread_ttl(thread_id, 0.001)
    await saver.start_ttl_sweeper(on_pass=passes.record)
    try:
        # (Sync database calls off the loop: the loop's sweeper task must go on meanwhile.)
        await asyncio.to_thread(age, sync, thread_id, 30)  # far past its TTL, within max_run
        await saver.sweep_ttl()
        written = await asyncio.to_thread(table_counts, sync, thread_id)
        assert written["checkpoints"] == 3 and written["checkpoint_writes"] > 0
        await passes.after_next(3)  # three background sweeps of the aged, mid-run thread
        assert await asyncio.to_thread(table_counts, sync, thread_id) == written
        status = await saver.thread_ttl(thread_id)
        assert status.running and not status.expired
        state = await either(graph, mode).get_state(cfg)
        assert state.values == {"n": 1} and state.next == ("wait",)
    finally:
        if is_async:
            release.set()
            final = await run
        else:
            release.set()
            await asyncio.to_thread(run.join, 30)
            final = result
    assert final == {"n": 111}
    await asyncio.to_thread(age, sync, thread_id, 30)  # the finished run is idle as long
    await passes.after_next(1)  # one pass that began after: it deleted the thread
    assert await asyncio.to_thread(table_counts, sync, thread_id) == {
        "checkpoints": 0,
        "checkpoint_writes": 0,
        "checkpoint_blobs": 0,
    }
    assert settings_rows(sync, thread_id) == 0
    assert sum(r.removed.threads for r in passes.reports) == 1
    assert await saver.stop_ttl_sweeper(30) is True


def test_an_interrupted_or_finished_thread_is_not_taken_for_running(
    make_engine: EngineFactory, backend: Backend
) -> None:
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine, ttl={"default_ttl": HOUR})

    def ask(state: Counter) -> dict[str, int]:
        return {"n": int(interrupt("how many?"))}

    builder = StateGraph(Counter)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    graph = builder.compile(checkpointer=saver)
    thread_id = new_thread()
    graph.invoke({"n": 0}, config(thread_id))
    assert graph.get_state(config(thread_id)).next == ("ask",)  # waiting for a human
    age(engine, thread_id, 2 * HOUR)
    status = saver.thread_ttl(thread_id)
    assert not status.running and status.expired
    assert saver.get_tuple(config(thread_id)) is None
    saver.delete_thread(thread_id)


async def test_keep_last_prunes_on_write_and_keeps_delta_state_exact(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    engine = engine_for(make_engine, backend, mode)
    sync = make_engine(backend)
    shallow = saver_on(engine, ttl={"keep_last": 2}).target
    full = saver_on(engine).target
    pruned_thread, full_thread = new_thread(), new_thread()
    graphs = {
        pruned_thread: either(delta_graph(shallow), mode),
        full_thread: either(delta_graph(full), mode),
    }
    counts = []
    for _turn in range(10):
        for thread_id, graph in graphs.items():
            await graph.invoke({"log": [], "total": 0}, config(thread_id))
        counts.append(table_counts(sync, pruned_thread)["checkpoints"])
    # Each turn writes 3 checkpoints; the newest 2 stay, plus DeltaChannel ancestors
    # back to the nearest snapshot (every 4th step).
    assert max(counts) <= 2 + 4, counts
    assert table_counts(sync, full_thread)["checkpoints"] == 30
    pruned_state = await graphs[pruned_thread].get_state(config(pruned_thread))
    full_state = await graphs[full_thread].get_state(config(full_thread))
    assert pruned_state.values == full_state.values
    assert len(pruned_state.values["log"]) == 10
    # Every kept checkpoint still reconstructs as the unpruned thread's at that step.
    full_by_step = {
        s.metadata["step"]: s.values
        for s in await graphs[full_thread].get_state_history(config(full_thread))
    }
    kept = await graphs[pruned_thread].get_state_history(config(pruned_thread))
    assert 2 <= len(kept) <= 6
    for snapshot in kept:
        assert snapshot.values == full_by_step[snapshot.metadata["step"]]
    # No blob is left that no kept checkpoint references, and nothing of the kept ones went.
    with sync.connect() as conn:
        blobs = conn.execute(
            sa.text("SELECT channel, version FROM checkpoint_blobs WHERE thread_id = :t"),
            {"t": pruned_thread},
        ).all()
    referenced = {
        (channel, str(version))
        for t in await either(shallow, mode).list(config(pruned_thread))
        for channel, version in t.checkpoint["channel_versions"].items()
    }
    assert {tuple(b) for b in blobs} <= referenced
    for thread_id in graphs:
        await either(full, mode).delete_thread(thread_id)


def test_ttl_commands_through_the_entry_point(
    make_engine: EngineFactory, swept_database: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lg-sqla ttl``: set, pin and the dry run through ``main`` in this process (the
    console script's function), the sweep as a real ``python -m lg_sqla`` process."""
    backend = swept_database  # sweeps reach every thread of the database: its own
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine)
    prefix = new_thread()
    doomed, pinned = f"{prefix}-doomed", f"{prefix}-pinned"
    for thread_id in (doomed, pinned):
        stored = saver.put(config(thread_id), checkpoint({"v": [1]}), {}, {"v": 1})
        saver.put_writes(stored, [("v", 2)], task_id="t")
        age(engine, thread_id, 2 * HOUR)
    url = backend.sync_url

    def lg_sqla(*args: str) -> Any:
        assert main(["--url", url, *args, "--json"]) == 0
        out = capsys.readouterr()
        assert out.err == ""
        return json.loads(out.out)

    shown = lg_sqla("ttl", "set", doomed, "--minutes", "60")
    assert shown["thread_id"] == doomed and shown["ttl_minutes"] == 60.0
    assert shown["expired"] is True and shown["exists"] is True
    saver.set_thread_ttl(pinned, 60)
    assert lg_sqla("ttl", "pin", pinned)["pinned"] is True
    would = lg_sqla("ttl", "sweep", "--dry-run")
    assert would["dry_run"] is True and would["threads"] >= 1 and would["checkpoints"] >= 1
    assert table_counts(engine, doomed)["checkpoints"] == 1  # a dry run deletes nothing
    done = read_json(["ttl", "sweep", "--yes"], url)
    assert done["dry_run"] is False and done["threads"] >= 1
    assert table_counts(engine, doomed)["checkpoints"] == 0
    assert table_counts(engine, pinned) == {
        "checkpoints": 1,
        "checkpoint_writes": 1,
        "checkpoint_blobs": 1,
    }
    assert lg_sqla("ttl", "unpin", pinned)["expired"] is True
    saver.delete_thread(pinned)


def test_cli_refuses_negative_ages_and_ttls(
    backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    """Argument checks (argparse, before any database): in-process, on one database."""
    if backend.name != "sqlite":
        pytest.skip("argument checks: one database is enough")
    for args in (
        ["sweep", "--older-than-days", "-3"],
        ["ttl", "set", "t", "--days", "-3"],
        ["ttl", "apply", "--minutes", "0"],
        ["ttl", "apply", "--days", "nan"],
        ["ttl", "apply", "--days", "1", "--idle-days", "-1"],
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["--url", backend.sync_url, *args])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert ("timedelta" not in err and "must be" in err) or "not a number" in err, err
    # The default TTL `ttl sweep`/`ttl show` took before expiry was stored: refused,
    # naming what replaced it.
    for args in (["ttl", "sweep", "--days", "3"], ["ttl", "show", "t", "--minutes", "5"]):
        assert main(["--url", backend.sync_url, *args]) == 2
        err = capsys.readouterr().err
        assert "no default TTL" in err and "ttl apply" in err, err
