"""Atomicity, proven: a database failure at ANY statement of a write leaves nothing half-written.

For each writing call, the same scenario is replayed with a failure injected
at statement 1, then 2, ... until the call completes without reaching the
failure, so every statement of the call is a failure point. The failure is
raised by the engine's DBAPI cursors themselves (wrapped at connect: see
:class:`Faults`), after the earlier statements of the call have run in the
database; so it reaches both paths a call can take, SQLAlchemy Core and the
direct path, and ``put``/``put_writes`` are replayed on each.

- ``put``, ``put_writes``, ``copy_thread`` and ``delete_for_runs`` are one
  transaction: after a failure, every row of the scenario's threads is exactly
  as before the call.
- ``prune`` and ``sweep`` commit once per thread by design: after a failure,
  each thread is either untouched or exactly as a complete run leaves it.

A shell that committed after each statement (or a plan that split its
transaction) fails these tests; see the atomic helper's report for that check.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory, assert_no_leaked_connections, fresh_saver
from faults import Faults, InjectedFault
from helpers import checkpoint, config, new_thread, table_counts
from langgraph.checkpoint.base import ChannelVersions, CheckpointMetadata
from modes import Either, saver_on, sync_engine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints
from lg_sqla.runtime import direct
from lg_sqla.shared import key_hash

# LangGraph's special channels (their constants are private since LangGraph 1.0).
INTERRUPT, RESUME = "__interrupt__", "__resume__"
TABLES = (checkpoints, checkpoint_writes, checkpoint_blobs)
Saver = Either[SQLAlchemySaver | AsyncSQLAlchemySaver]  # driven in its mode (modes.py)


def snapshot(engine: sa.Engine, threads: Sequence[str]) -> dict[str, list[str]]:
    """Every column of every row of the threads, per thread, in a comparable form."""
    state: dict[str, list[str]] = {t: [] for t in threads}
    with engine.connect() as conn:
        for table in TABLES:
            for row in conn.execute(sa.select(table).where(table.c.thread_id.in_(threads))):
                state[row.thread_id].append(f"{table.name}: {tuple(row)!r}")
    return {t: sorted(rows) for t, rows in state.items()}


def orphans(saver: SQLAlchemySaver, threads: Sequence[str]) -> list[str]:
    """Rows a half-done deletion would strand: writes whose checkpoint is gone, blobs
    no checkpoint references. A complete run never leaves any (and the next run
    would not clean them: a thread without checkpoints is not visited again)."""
    referenced, kept = set(), set()
    for t in threads:
        for tup in saver.list(config(t, checkpoint_ns=None)):  # type: ignore[arg-type]
            h = key_hash(tup.config["configurable"]["checkpoint_ns"])
            kept.add((t, h, tup.config["configurable"]["checkpoint_id"]))
            versions = tup.checkpoint["channel_versions"].items()
            referenced |= {(t, h, ch, str(v)) for ch, v in versions}
    W, B = checkpoint_writes.c, checkpoint_blobs.c
    with saver.engine.connect() as conn:
        writes = conn.execute(
            sa.select(W.thread_id, W.checkpoint_ns_hash, W.checkpoint_id).where(
                W.thread_id.in_(threads)
            )
        )
        blobs = conn.execute(
            sa.select(B.thread_id, B.checkpoint_ns_hash, B.channel, B.version).where(
                B.thread_id.in_(threads)
            )
        )
        return [f"write {tuple(r)}" for r in writes if tuple(r) not in kept] + [
            f"blob {tuple(r)}" for r in blobs if tuple(r) not in referenced
        ]


@dataclass(frozen=True)
class Scenario:
    """Data written by ``prepare`` (returns the threads involved, and the call's
    arguments) and the call under test."""

    prepare: Callable[[SQLAlchemySaver, str], tuple[list[str], Any]]
    operate: Callable[[Saver, Any], Awaitable[Any]]
    per_thread: bool = False  # commits once per thread by design (prune, sweep)
    hot: bool = False  # a checkpointer call: also runs on the direct path


def _chain(saver: SQLAlchemySaver, thread_id: str, n: int, ns: str = "", run: str = "") -> Any:
    """n checkpoints on a thread, each with new blobs, a regular and a special write."""
    parent = config(thread_id, ns)
    for i in range(n):
        versions: ChannelVersions = {"a": i + 1, "b": 1} if i == 0 else {"a": i + 1}
        values = {"a": [ns, i], "b": "constant"}
        metadata: CheckpointMetadata = {"step": i, "run_id": run or f"{thread_id}-run-{i % 2}"}
        parent = saver.put(parent, checkpoint(values, versions), metadata, versions)
        saver.put_writes(parent, [("a", i), (INTERRUPT, f"why {i}")], task_id=f"task-{i}")
    return parent


def _prepare_put(saver: SQLAlchemySaver, prefix: str) -> tuple[list[str], Any]:
    parent = _chain(saver, prefix, 2)
    versions = {"a": 10, "c": 1, "d": 1}
    new = checkpoint({"a": ["new"], "c": b"\x00bytes", "d": {"k": 1}}, versions)
    return [prefix], (parent, new, {"step": 2, "source": "loop"}, versions)


def _prepare_put_writes(saver: SQLAlchemySaver, prefix: str) -> tuple[list[str], Any]:
    stored = _chain(saver, prefix, 2)
    saver.put_writes(stored, [(RESUME, "stale"), ("x", "first")], task_id="task-1")
    # A mixed call: special writes replace stored ones, regular ones add or are ignored.
    writes = [(RESUME, "fresh"), (INTERRUPT, "again"), ("x", "second"), ("y", 1)]
    return [prefix], (stored, writes, "task-1")


def _prepare_copy(saver: SQLAlchemySaver, prefix: str) -> tuple[list[str], Any]:
    _chain(saver, prefix, 3)
    _chain(saver, prefix, 2, ns="child:1")
    return [prefix, f"{prefix}-copy"], (prefix, f"{prefix}-copy")


def _prepare_runs(saver: SQLAlchemySaver, prefix: str) -> tuple[list[str], Any]:
    threads = [f"{prefix}-{i}" for i in range(3)]
    for t in threads:
        _chain(saver, t, 3, run=f"{prefix}-shared" if t.endswith("1") else "")
    runs = [f"{threads[0]}-run-0", f"{prefix}-shared", f"{threads[2]}-run-1", "no-such-run"]
    return threads, runs


def _prepare_prune(saver: SQLAlchemySaver, prefix: str) -> tuple[list[str], Any]:
    threads = [f"{prefix}-{i}" for i in range(3)]
    for t in threads:
        _chain(saver, t, 3)
        _chain(saver, t, 2, ns="child:1")
    return threads, threads


def _age_all(engine: sa.Engine, threads: Sequence[str], days: int) -> None:
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)
    with engine.begin() as conn:
        for table in TABLES:
            if "updated_at" in table.c:
                conn.execute(
                    sa.update(table)
                    .where(table.c.thread_id.in_(threads))
                    .values(updated_at=old, created_at=old)
                )
            elif "created_at" in table.c:
                conn.execute(
                    sa.update(table).where(table.c.thread_id.in_(threads)).values(created_at=old)
                )


def _prepare_sweep(saver: SQLAlchemySaver, prefix: str) -> tuple[list[str], Any]:
    threads = [f"{prefix}-{i}" for i in range(3)]
    for t in threads:
        _chain(saver, t, 3)
    _age_all(saver.engine, threads, 40)
    # A thread that came back to life: old checkpoints, one recent.
    revived = threads[1]
    latest = saver.get_tuple(config(revived))
    assert latest is not None
    saver.put(latest.config, checkpoint({"a": ["recent"]}, {"a": 99}), {"step": 9}, {"a": 99})
    return threads, None


async def _put(saver: Saver, args: Any) -> Any:
    return await saver.put(*args)


async def _put_writes(saver: Saver, args: Any) -> Any:
    return await saver.put_writes(*args)


async def _copy(saver: Saver, args: Any) -> Any:
    return await saver.copy_thread(*args)


async def _delete_runs(saver: Saver, args: Any) -> Any:
    return await saver.delete_for_runs(args)


async def _prune_keep(saver: Saver, args: Any) -> Any:
    return await saver.prune(args, strategy="keep_latest", keep_last=1)


async def _prune_delete(saver: Saver, args: Any) -> Any:
    return await saver.prune(args, strategy="delete")


async def _sweep_delete(saver: Saver, args: Any) -> Any:
    return await saver.sweep(dt.timedelta(days=30), strategy="delete", batch_size=2)


async def _sweep_keep(saver: Saver, args: Any) -> Any:
    return await saver.sweep(
        dt.timedelta(days=30), strategy="keep_latest", keep_last=1, batch_size=2
    )


SCENARIOS = {
    "put": Scenario(_prepare_put, _put, hot=True),
    "put_writes": Scenario(_prepare_put_writes, _put_writes, hot=True),
    "copy_thread": Scenario(_prepare_copy, _copy),
    "delete_for_runs": Scenario(_prepare_runs, _delete_runs),
    "prune-keep_latest": Scenario(_prepare_prune, _prune_keep, per_thread=True),
    "prune-delete": Scenario(_prepare_prune, _prune_delete, per_thread=True),
    "sweep-delete": Scenario(_prepare_sweep, _sweep_delete, per_thread=True),
    "sweep-keep_latest": Scenario(_prepare_sweep, _sweep_keep, per_thread=True),
}


async def fail_at_every_statement(
    make_engine: EngineFactory,
    backend: Backend,
    mode: str,
    scenario: Scenario,
    path: str = "core",
    monkeypatch: pytest.MonkeyPatch | None = None,
) -> int:
    """Replay the scenario with a failure at statement 1, 2, ...; returns how many
    statements the complete call sent. ``path``: the saver's route ("direct": the
    direct path, proven taken; "core": SQLAlchemy Core)."""
    direct_runs = _count_direct_runs(monkeypatch) if monkeypatch is not None else []
    with fresh_saver(backend) as prep:
        engine = make_engine.for_mode(mode, backend)
        faults = Faults()
        faults.install(sync_engine(engine))
        on_direct = path == "direct"
        target = saver_on(engine, direct_path=on_direct)
        await target.get_tuple(config(new_thread()))  # the one-off schema check
        n = 1
        while True:
            threads, args = scenario.prepare(prep, new_thread())
            before = snapshot(prep.engine, threads)
            with faults.at(n) as seen:
                try:
                    await scenario.operate(target, args)
                    failed = False
                except InjectedFault:
                    failed = True
            if not failed:
                # The complete call: it sent fewer than n statements, and it did write.
                assert len(seen) == n - 1, seen
                assert snapshot(prep.engine, threads) != before
                assert orphans(prep, threads) == []
                break
            after_failure = snapshot(prep.engine, threads)
            assert orphans(prep, threads) == [], f"failure at: {seen[-1]}"
            if scenario.per_thread:
                await scenario.operate(target, args)  # now let it finish the job
                complete = snapshot(prep.engine, threads)
                for t in threads:
                    assert after_failure[t] in (before[t], complete[t]), (
                        f"thread {t} half-processed by a failure at statement {n}: {seen[-1]}"
                    )
            else:
                assert after_failure == before, f"half-written by a failure at: {seen[-1]}"
            for t in threads:
                prep.delete_thread(t)
            n += 1
        for t in threads:
            prep.delete_thread(t)
        assert_no_leaked_connections(engine)
        if monkeypatch is not None:
            # The target's calls ran on the path under test.
            ran_direct = target.target._runtime.compiler in direct_runs
            assert ran_direct == on_direct, path
        return n - 1


def _count_direct_runs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The compilers of the plans the real ``direct.run`` executes (one per owner)."""
    runs: list[Any] = []
    real = direct.run

    def spy(*args: Any, **kwargs: Any) -> Any:
        runs.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setattr(direct, "run", spy)
    return runs


# The hot calls on both paths; the maintenance calls run on Core only.
CASES = [
    (name, path)
    for name, scenario in SCENARIOS.items()
    if not name.startswith("sweep")
    for path in (("core", "direct") if scenario.hot else ("core",))
]


@pytest.mark.parametrize(("name", "path"), CASES)
async def test_a_failure_at_any_statement_leaves_nothing_half_written(
    make_engine: EngineFactory,
    backend: Backend,
    mode: str,
    name: str,
    path: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    statements = await fail_at_every_statement(
        make_engine, backend, mode, SCENARIOS[name], path, monkeypatch
    )
    assert statements >= 1


@pytest.mark.parametrize("name", [name for name in SCENARIOS if name.startswith("sweep")])
async def test_a_failure_at_any_statement_of_a_sweep_leaves_no_thread_half_swept(
    make_engine: EngineFactory, fresh_database: Backend, mode: str, name: str
) -> None:
    # A database of its own: a sweep visits every stale thread it holds.
    with fresh_saver(fresh_database) as saver:
        saver.setup()
    statements = await fail_at_every_statement(make_engine, fresh_database, mode, SCENARIOS[name])
    # Two batches of stale threads, several statements per thread.
    assert statements > 6


async def test_a_database_error_on_the_checkpoint_row_rolls_back_its_blobs(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """The database itself refuses the checkpoint row (its statement names a table
    that does not exist); the blobs written by the same ``put`` roll back with it.
    On PostgreSQL blobs and row are one statement, elsewhere two."""
    engine = make_engine.for_mode(mode, backend)
    saver = saver_on(engine)
    broken: list[str] = []

    def break_checkpoint_row(
        conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any
    ) -> tuple[str, Any]:
        if "INSERT INTO checkpoints " in statement:
            broken.append(statement)
            statement = statement.replace("INSERT INTO checkpoints ", "INSERT INTO no_such_table ")
        return statement, parameters

    thread_id = new_thread()
    await saver.get_tuple(config(thread_id))  # the one-off schema check
    sa.event.listen(sync_engine(engine), "before_cursor_execute", break_checkpoint_row, retval=True)
    try:
        with pytest.raises(sa.exc.DBAPIError, match="no_such_table"):
            await saver.put(
                config(thread_id),
                checkpoint({"v": [1], "w": b"x"}),
                {},
                {"v": 1, "w": 1},
            )
    finally:
        sa.event.remove(sync_engine(engine), "before_cursor_execute", break_checkpoint_row)
    assert len(broken) == 1
    with fresh_saver(backend) as check:
        assert snapshot(check.engine, [thread_id]) == {thread_id: []}
        # The same put, unbroken, writes both.
        await saver.put(
            config(thread_id),
            checkpoint({"v": [1], "w": b"x"}),
            {},
            {"v": 1, "w": 1},
        )
        assert table_counts(check.engine, thread_id) == {
            "checkpoints": 1,
            "checkpoint_writes": 0,
            "checkpoint_blobs": 2,
        }
        check.delete_thread(thread_id)
