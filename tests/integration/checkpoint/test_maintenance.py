# mypy: disable-error-code="arg-type"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""prune / copy_thread / delete_for_runs / sweep: exactly what they promise, on every dialect.

The DeltaChannel tests run a real graph whose state lives in a DeltaChannel
(only snapshots are stored; other steps are rebuilt from ancestors' writes) and
check that its state is identical before and after pruning and copying.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from graph_helpers import delta_graph
from helpers import checkpoint, config, count_statements, new_thread, table_counts

from lg_sqla import AsyncSQLAlchemySaver, InvalidInputError, SQLAlchemySaver
from lg_sqla.checkpoint import codec
from lg_sqla.checkpoint.maintenance import SweepReport

# Also on a MariaDB database at the server's default charset (conftest.py).
pytestmark = pytest.mark.any_charset


def _run_turns(graph: Any, thread_id: str, turns: int) -> dict[str, Any]:
    cfg = config(thread_id)
    for _ in range(turns):
        graph.invoke({"log": [], "total": 0}, cfg)
    return graph.get_state(cfg).values  # type: ignore[no-any-return]


def _orphan_blobs(engine: sa.Engine, saver: SQLAlchemySaver, thread_id: str) -> list[Any]:
    """Blobs of the thread that no checkpoint's channel_versions references."""
    referenced = set()
    for tup in saver.list(config(thread_id, checkpoint_ns=None)):
        from lg_sqla.shared import key_hash

        h = key_hash(tup.config["configurable"]["checkpoint_ns"])
        referenced |= {(h, ch, str(v)) for ch, v in tup.checkpoint["channel_versions"].items()}
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT checkpoint_ns_hash, channel, version FROM checkpoint_blobs "
                "WHERE thread_id = :t"
            ),
            {"t": thread_id},
        ).all()
    return [tuple(r) for r in rows if tuple(r) not in referenced]


def test_prune_keeps_delta_state_identical(sync_saver: SQLAlchemySaver) -> None:
    graph = delta_graph(sync_saver)
    thread_id = new_thread()
    before = _run_turns(graph, thread_id, 11)
    assert before["log"] == [f"entry-{i}" for i in range(11)]
    n_before = table_counts(sync_saver.engine, thread_id)

    sync_saver.prune([thread_id], strategy="keep_latest")

    after_counts = table_counts(sync_saver.engine, thread_id)
    assert after_counts["checkpoints"] < n_before["checkpoints"]
    fresh = delta_graph(sync_saver)
    assert fresh.get_state(config(thread_id)).values == before
    # ...and the graph keeps working from the pruned thread.
    assert _run_turns(fresh, thread_id, 2)["log"][-2:] == ["entry-11", "entry-12"]
    assert _orphan_blobs(sync_saver.engine, sync_saver, thread_id) == []


def test_copy_thread_keeps_delta_state_identical(sync_saver: SQLAlchemySaver) -> None:
    graph = delta_graph(sync_saver)
    source, target = new_thread(), new_thread()
    before = _run_turns(graph, source, 7)
    history = [
        s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config(source))
    ]

    sync_saver.copy_thread(source, target)

    assert graph.get_state(config(target)).values == before
    copied = [
        s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config(target))
    ]
    assert copied == history
    assert table_counts(sync_saver.engine, source) == table_counts(sync_saver.engine, target)
    with pytest.raises(InvalidInputError, match="already has"):
        sync_saver.copy_thread(source, target)
    with pytest.raises(InvalidInputError, match="has no checkpoints"):
        sync_saver.copy_thread(new_thread(), new_thread())
    # The copy is independent: advancing it leaves the source alone.
    _run_turns(graph, target, 1)
    assert graph.get_state(config(source)).values == before


def test_prune_keep_last_and_namespaces(sync_saver: SQLAlchemySaver) -> None:
    thread_id = new_thread()
    kept: dict[str, list[str]] = {}
    for ns in ("", "child:1"):
        parent = config(thread_id, ns)
        ids = []
        for i in range(6):
            versions = {"a": i + 1}
            parent = sync_saver.put(
                parent, checkpoint({"a": [ns, i]}, versions), {"step": i}, versions
            )
            sync_saver.put_writes(parent, [("a", i)], task_id="t")
            ids.append(parent["configurable"]["checkpoint_id"])
        kept[ns] = ids[-3:]
    other = new_thread()
    sync_saver.put(config(other), checkpoint({"a": 1}), {}, {"a": 1})

    sync_saver.prune([thread_id], strategy="keep_latest", keep_last=3)

    for ns, ids in kept.items():
        left = [
            t.config["configurable"]["checkpoint_id"]
            for t in sync_saver.list(config(thread_id, ns))
        ]
        assert left == list(reversed(ids))
        for t in sync_saver.list(config(thread_id, ns)):
            assert t.pending_writes and t.pending_writes[0][1] == "a"
            assert t.checkpoint["channel_values"]["a"][0] == ns
    assert table_counts(sync_saver.engine, thread_id) == {
        "checkpoints": 6,
        "checkpoint_writes": 6,
        "checkpoint_blobs": 6,
    }
    assert sync_saver.get_tuple(config(other)) is not None
    with pytest.raises(InvalidInputError, match="unknown prune strategy 'latest'"):
        sync_saver.prune([thread_id], strategy="latest")
    with pytest.raises(InvalidInputError, match="keep_last"):
        sync_saver.prune([thread_id], keep_last=0)


def test_gc_never_removes_a_shared_blob(sync_saver: SQLAlchemySaver) -> None:
    """A blob shared by a kept checkpoint (unchanged channel) survives pruning its creator."""
    thread_id = new_thread()
    big = "v1" * codec.INLINE_STR_MAX  # (values too big to be kept in the document)
    first = sync_saver.put(
        config(thread_id), checkpoint({"big": big, "x": [1]}), {}, {"big": 1, "x": 1}
    )
    parent = first
    for i in range(2, 6):
        parent = sync_saver.put(
            parent, checkpoint({"big": big, "x": [i]}, {"big": 1, "x": i}), {}, {"x": i}
        )
    sync_saver.prune([thread_id])
    latest = sync_saver.get_tuple(config(thread_id))
    assert latest is not None and latest.checkpoint["channel_values"] == {"big": big, "x": [5]}
    assert table_counts(sync_saver.engine, thread_id)["checkpoint_blobs"] == 2


def test_delete_for_runs_removes_rows_and_orphans(sync_saver: SQLAlchemySaver) -> None:
    thread_id = new_thread()
    parent = config(thread_id)
    for i, run in enumerate(["run-a", "run-a", "run-b"]):
        versions = {"v": i + 1}
        parent = sync_saver.put(
            parent, checkpoint({"v": [i]}, versions), {"run_id": f"{thread_id}-{run}"}, versions
        )
        sync_saver.put_writes(parent, [("v", i)], task_id="t")
    sync_saver.delete_for_runs([f"{thread_id}-run-a"])
    left = list(sync_saver.list(config(thread_id)))
    assert [t.metadata["run_id"] for t in left] == [f"{thread_id}-run-b"]
    assert table_counts(sync_saver.engine, thread_id) == {
        "checkpoints": 1,
        "checkpoint_writes": 1,
        "checkpoint_blobs": 1,
    }
    sync_saver.delete_for_runs([])


def _age(engine: sa.Engine, thread_id: str, days: int) -> None:
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)
    from lg_sqla.models import checkpoints

    with engine.begin() as conn:
        conn.execute(
            sa.update(checkpoints)
            .where(checkpoints.c.thread_id == thread_id)
            .values(updated_at=old, created_at=old)
        )


def test_sweep_delete_in_batches(make_engine: EngineFactory, backend: Backend) -> None:
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine)
    prefix = new_thread()
    stale = [f"{prefix}-stale-{i}" for i in range(5)]
    fresh = [f"{prefix}-fresh-{i}" for i in range(2)]
    for t in stale + fresh:
        parent = saver.put(config(t), checkpoint({"v": [1]}), {}, {"v": 1})
        saver.put(parent, checkpoint({"v": [2]}, {"v": 2}), {}, {"v": 2})
    for t in stale:
        _age(engine, t, 40)
    reports: list[SweepReport] = []
    report = saver.sweep(dt.timedelta(days=30), batch_size=2, progress=lambda r: reports.append(r))
    # Other tests' threads are all recent, so exactly our five stale threads go.
    assert report.removed.threads == 5
    assert report.removed.checkpoints == 10
    assert report.removed.blobs == 10
    assert report.batches == 3 and len(reports) == 3
    for t in stale:
        assert saver.get_tuple(config(t)) is None
    for t in fresh:
        assert saver.get_tuple(config(t)) is not None
    assert saver.sweep(dt.timedelta(days=30)).removed.threads == 0


async def test_async_sweep_keep_latest(make_engine: EngineFactory, backend: Backend) -> None:
    engine = make_engine.aio(backend)
    sync_engine = make_engine(backend)
    saver = AsyncSQLAlchemySaver(engine)
    thread_id = new_thread()
    parent = config(thread_id)
    for i in range(6):
        versions = {"v": i + 1}
        parent = await saver.aput(parent, checkpoint({"v": [i]}, versions), {"step": i}, versions)
    _age(sync_engine, thread_id, 10)
    recent = await saver.aput(parent, checkpoint({"v": [6]}, {"v": 7}), {"step": 6}, {"v": 7})
    report = await saver.asweep(dt.timedelta(days=5), strategy="keep_latest", keep_last=1)
    assert report.removed.checkpoints >= 6
    left = [t.metadata["step"] async for t in saver.alist(config(thread_id))]
    assert left == [6]
    got = await saver.aget_tuple(recent)
    assert got is not None and got.checkpoint["channel_values"] == {"v": [6]}


def test_prune_statement_count_is_bounded(make_engine: EngineFactory, backend: Backend) -> None:
    """Pruning a long thread costs a fixed number of statements, not one per checkpoint."""
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine)
    thread_id = new_thread()
    parent = config(thread_id)
    for i in range(200):
        versions = {"v": i + 1}
        parent = saver.put(parent, checkpoint({"v": [i]}, versions), {"step": i}, versions)
    with count_statements(engine) as c:
        saver.prune([thread_id])
    # heads, delete checkpoints, delete writes, GC blobs; PostgreSQL and MySQL/MariaDB
    # lock the thread's blobs before the GC decides (a put in flight commits first:
    # test_interleavings.py)
    locks = 1 if saver.dialect_ops.locks_rows else 0
    assert c.count == 4 + locks, c.statements
    assert table_counts(engine, thread_id)["checkpoints"] == 1


def test_prune_never_deletes_what_was_written_while_it_ran(sync_saver: SQLAlchemySaver) -> None:
    """A checkpoint (and a new namespace) written between the prune's first read and
    its deletes survives: deletes are bounded by what the prune saw."""
    from lg_sqla.checkpoint import maintenance
    from lg_sqla.plans import Outcome
    from lg_sqla.runtime.executor import drive

    thread_id = new_thread()
    parent = config(thread_id)
    for i in range(4):
        parent = sync_saver.put(
            parent, checkpoint({"v": [i]}, {"v": i + 1}), {"step": i}, {"v": i + 1}
        )

    plan = maintenance.prune_thread(sync_saver.context, thread_id)
    with sync_saver.engine.connect() as conn:
        heads = next(plan)
        rows = conn.execute(heads.statement, heads.params).all()
        conn.commit()
        # Meanwhile the graph takes another step, and a subgraph starts.
        late = sync_saver.put(parent, checkpoint({"v": [9]}, {"v": 10}), {"step": 9}, {"v": 10})
        sub = sync_saver.put(config(thread_id, "child:1"), checkpoint({"s": 1}), {}, {"s": 1})
        drive(conn, plan, plan.send(Outcome(rows, len(rows))))
        conn.commit()

    assert sync_saver.get_tuple(late) is not None
    assert sync_saver.get_tuple(sub) is not None
    got = sync_saver.get_tuple(late)
    assert got is not None and got.checkpoint["channel_values"] == {"v": [9]}
    steps = [t.metadata["step"] for t in sync_saver.list(config(thread_id))]
    assert steps == [9, 3]  # the kept head (3), the late one (9); 0-2 pruned


def test_sweep_delete_keeps_a_thread_that_came_back_to_life(sync_saver: SQLAlchemySaver) -> None:
    """A thread picked as stale but written to before its turn: its old checkpoints go
    with their writes; the new checkpoint stays whole."""
    engine = sync_saver.engine
    thread_id = new_thread()
    parent = config(thread_id)
    for i in range(3):
        versions = {"v": i + 1, "keep": 1}
        values = {"v": [i], "keep": ["shared"]}
        parent = sync_saver.put(
            parent, checkpoint(values, versions), {"step": i}, versions if i == 0 else {"v": i + 1}
        )
        sync_saver.put_writes(parent, [("v", i)], task_id="t")
    _age(engine, thread_id, 40)
    with engine.begin() as conn:  # their writes are as old as their checkpoints
        from lg_sqla.models import checkpoint_writes

        old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=40)
        conn.execute(
            sa.update(checkpoint_writes)
            .where(checkpoint_writes.c.thread_id == thread_id)
            .values(created_at=old)
        )
    revived = sync_saver.put(
        parent,
        checkpoint({"v": [9], "keep": ["shared"]}, {"v": 10, "keep": 1}),
        {"step": 9},
        {"v": 10},
    )
    sync_saver.put_writes(revived, [("v", 9)], task_id="t")

    # The thread was picked as stale, then revived before its turn: run that turn.
    from lg_sqla.checkpoint import maintenance

    cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=30)
    sync_saver.run(maintenance.sweep_thread(sync_saver.context, thread_id, cutoff, "delete", 1))

    got = sync_saver.get_tuple(config(thread_id))
    assert got is not None and got.config == revived
    assert got.checkpoint["channel_values"] == {"v": [9], "keep": ["shared"]}
    assert got.pending_writes == [("t", "v", 9)]
    assert table_counts(engine, thread_id) == {
        "checkpoints": 1,
        "checkpoint_writes": 1,
        "checkpoint_blobs": 2,  # v@10 and the shared keep@1
    }
    # A whole sweep leaves the revived (no longer stale) thread alone.
    sync_saver.sweep(dt.timedelta(days=30))
    assert table_counts(engine, thread_id)["checkpoints"] == 1


def test_prune_and_sweep_commands(make_engine: EngineFactory, tmp_path: object) -> None:
    """`python -m lg_sqla prune|sweep` drive the same API (one run proves the wiring)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    url = f"sqlite:///{Path(str(tmp_path)) / 'cli.sqlite'}"
    engine = make_engine.track(sa.create_engine(url))
    saver = SQLAlchemySaver(engine)
    saver.setup()
    thread_id = new_thread()
    parent = config(thread_id)
    for i in range(5):
        parent = saver.put(parent, checkpoint({"v": [i]}, {"v": i + 1}), {"step": i}, {"v": i + 1})
    env = {**os.environ, "LG_SQLA_DATABASE_URL": url}
    cli = [sys.executable, "-m", "lg_sqla"]
    done = subprocess.run(
        [*cli, "prune", thread_id, "--keep-last", "2"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert [t.metadata["step"] for t in saver.list(config(thread_id))] == [4, 3]
    _age(engine, thread_id, 40)
    done = subprocess.run(
        [*cli, "sweep", "--older-than-days", "30"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "removed 1 thread(s), 2 checkpoint(s)" in done.stdout
    assert saver.get_tuple(config(thread_id)) is None
