"""State migrations: a thread written by version 1 of a graph resumes under version 2.

The graph (state_app.py) has a subgraph that interrupts, a DeltaChannel message channel
renamed between the versions, and a score whose type changed. Version 2 resumes a
version-1 thread read lazily (the saver given the migrations) and, separately, after
``lg-sqla state upgrade`` rewrote it; either way the final state is the one of a thread
run under version 2 from the start. The offline upgrade killed mid-run (a real
subprocess) and run again leaves every row at the head and every thread intact; a
checkpoint a migration function raises on is left as it was and reported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import state_app
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command
from modes import either
from state_app import V1, V2, build, first_input, later_input

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver, cli
from lg_sqla.checkpoint import codec, json_values
from lg_sqla.checkpoint.state_migrations import (
    MissingDowngradeError,
    RenameNode,
    StateMigrations,
    StateRevision,
    StateRevisionError,
    TransformChannel,
)
from lg_sqla.checkpoint.state_upgrade import (
    astate_counts,
    aupgrade_state,
    state_counts,
    upgrade_state,
)
from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints
from lg_sqla.serde import CompressedSerializer, EncryptedSerializer

HERE = Path(__file__).resolve().parent
HEAD = state_app.MIGRATIONS.head
KEY = b"k" * 32
TABLES = (checkpoints, checkpoint_blobs, checkpoint_writes)


async def _paused_v1(graph: Any, thread_id: str, points: int = 0) -> None:
    """Version 1: one whole turn (interrupted, resumed), then a second one left paused
    at the subgraph's interrupt."""
    cfg = config(thread_id)
    await graph.invoke(first_input(V1, points), cfg)
    await graph.invoke(Command(resume="first"), cfg)
    await graph.invoke(later_input(V1), cfg)


async def _finished_v2(graph: Any, thread_id: str, points: int = 0) -> dict[str, Any]:
    """Version 2 from the start: the same turns, the last one resumed with "yes"."""
    cfg = config(thread_id)
    await graph.invoke(first_input(V2, points), cfg)
    await graph.invoke(Command(resume="first"), cfg)
    await graph.invoke(later_input(V2), cfg)
    return await _resumed(graph, thread_id)


async def _resumed(graph: Any, thread_id: str) -> dict[str, Any]:
    cfg = config(thread_id)
    pending = await graph.get_state(cfg)
    assert [i.value for i in pending.interrupts] == ["approve the draft?"]
    await graph.invoke(Command(resume="yes"), cfg)
    return (await graph.get_state(cfg)).values  # type: ignore[no-any-return]


def _saver(engine: Any, **kwargs: Any) -> Any:
    if isinstance(engine, sa.Engine):
        return SQLAlchemySaver(engine, **kwargs)
    return AsyncSQLAlchemySaver(engine, **kwargs)


def _revisions(engine: sa.Engine, thread_ids: list[str]) -> set[str | None]:
    with engine.connect() as conn:
        return {
            revision
            for table in TABLES
            for revision in conn.execute(
                sa.select(table.c.state_revision).where(table.c.thread_id.in_(thread_ids))
            ).scalars()
        }


def _rows(engine: sa.Engine, thread_id: str) -> dict[str, list[Any]]:
    with engine.connect() as conn:
        return {
            t.name: sorted(
                (tuple(r) for r in conn.execute(sa.select(t).where(t.c.thread_id == thread_id))),
                key=repr,
            )
            for t in TABLES
        }


async def test_version_1_thread_resumes_under_version_2_lazily(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """Interrupt pending in a subgraph, DeltaChannel renamed, score retyped: read through
    the migrations, the thread resumes and ends as a version-2 thread does; every
    checkpoint of its history (the subgraph's included) reads in the new shape."""
    engine = make_engine(backend) if mode == "sync" else make_engine.aio(backend)
    old, migrated = new_thread(), new_thread()
    await _paused_v1(either(build(V1, _saver(engine)), mode), old)
    saver = _saver(engine, state_migrations=state_app.MIGRATIONS)
    v2 = either(build(V2, saver), mode)
    reference = await _finished_v2(v2, migrated)
    # (The subgraph hands its whole state back, so its DeltaChannel list is appended
    # to the parent's again: what LangGraph does with a plain reducer, in both versions.)
    turn = ["hello 0", "hello 0", "draft", "answer:first", "done", "again", "hello 6"]
    assert reference == {"chat": [*turn, *turn, "draft", "answer:yes", "done"], "score": "224 pts"}
    assert await _resumed(v2, old) == reference
    # Stored as version 2 stores it: the renamed DeltaChannel kept its snapshot cadence.
    counters = [
        [
            found.metadata.get("counters_since_delta_snapshot")
            for found in await either(saver, mode).list(config(thread))
        ]
        for thread in (old, migrated)
    ]
    assert counters[0] == counters[1] and "chat" in str(counters[0])
    # The thread's checkpoints in every namespace (a config without checkpoint_ns): not
    # list(None), which would read other tests' threads, written at other revisions.
    mine = await either(saver, mode).list({"configurable": {"thread_id": old}})
    assert {t.config["configurable"]["checkpoint_ns"] != "" for t in mine} == {True, False}
    for found in mine:
        assert "messages" not in found.checkpoint["channel_versions"]
        assert not isinstance(found.checkpoint["channel_values"].get("score", ""), int)
        assert all(write[1] != "messages" for write in found.pending_writes or ())
    # What version 1 wrote stayed as it was; what version 2 wrote is at the head.
    assert _revisions(make_engine(backend), [old]) == {None, HEAD}
    # Code that knows only the first revision refuses the rows written at the second.
    first_only = either(build(V2, _saver(engine, state_migrations=state_app.FIRST_ONLY)), mode)
    with pytest.raises(StateRevisionError, match=r"'0002_score_text'.*'0001_chat'"):
        await first_only.get_state(config(old))


async def test_offline_upgrade_then_version_2_resumes(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """``upgrade_state`` rewrites a version-1 thread (dry run first: counts, nothing
    changed); a saver without the migrations then refuses it, version 2 resumes it;
    ``to="base"`` takes both threads back and version 1 reads them as its own."""
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    old, reference_thread = new_thread(), new_thread()
    await _paused_v1(either(build(V1, SQLAlchemySaver(engine)), "sync"), old)
    saver = SQLAlchemySaver(engine, state_migrations=state_app.MIGRATIONS)
    before = _rows(engine, old)
    dry = upgrade_state(saver, dry_run=True)
    assert dry.pending == {name: len(rows) for name, rows in _named(before).items()}
    assert dry.pending_threads == 1
    assert _rows(engine, old) == before
    report = upgrade_state(saver, batch_size=2)
    assert report.failures == [] and report.threads_running == []
    assert report.checkpoints == len(before["checkpoints"])
    assert _revisions(engine, [old]) == {HEAD}
    assert state_counts(saver)["checkpoints"] == {HEAD: len(before["checkpoints"])}
    with engine.connect() as conn:  # the DeltaChannel's snapshot counters renamed too
        stored = conn.execute(sa.select(checkpoints.c.metadata)).scalars().all()
    assert "chat" in str(stored) and "messages" not in str(stored)
    with pytest.raises(StateRevisionError, match="0002_score_text"):
        build(V1, SQLAlchemySaver(engine)).get_state(config(old))
    v2 = either(build(V2, saver), "sync")
    reference = await _finished_v2(v2, reference_thread)
    assert await _resumed(v2, old) == reference
    # And back: revision zero, read by version 1's code as if it had written it all.
    upgrade_state(saver, to="base")
    assert _revisions(engine, [old, reference_thread]) == {None}
    for thread_id in (old, reference_thread):
        values = build(V1, SQLAlchemySaver(engine)).get_state(config(thread_id)).values
        assert values == {"messages": reference["chat"], "score": 224}


def _named(rows: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return {
        "checkpoints": rows["checkpoints"],
        "blobs": rows["checkpoint_blobs"],
        "writes": rows["checkpoint_writes"],
    }


def test_a_checkpoint_a_migration_fails_on_is_left_as_it_was(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """The score transform raises on one value: the checkpoints naming it keep every row
    (document, blobs, writes) as it was and are reported; the rest of the thread is
    rewritten; lazy reads still see the whole thread in the new shape, and a run with
    the fixed function finishes the job."""
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    thread = new_thread()
    v1 = build(V1, SQLAlchemySaver(engine))
    v1.invoke(first_input(V1, 5000), config(thread))  # greet: 5001, the subgraph drafts 5002
    before = _rows(engine, thread)
    fragile = SQLAlchemySaver(engine, state_migrations=state_app.fragile_migrations(5001))
    report = upgrade_state(fragile, batch_size=1)
    failed = {(f.checkpoint_ns != "", f.checkpoint_id) for f in report.failures}
    assert failed and all("cannot convert 5001" in f.error for f in report.failures)
    assert 0 < report.checkpoints < len(before["checkpoints"])
    after = _rows(engine, thread)
    kept = {r[2] for r in before["checkpoints"] if (r[3] != "", r[2]) in failed}
    assert [r for r in after["checkpoints"] if r[2] in kept] == [
        r for r in before["checkpoints"] if r[2] in kept
    ]
    assert {r[-1] for r in after["checkpoints"] if r[2] not in kept} == {HEAD}
    # Every checkpoint still reads, in the new shape, through the real migrations.
    saver = SQLAlchemySaver(engine, state_migrations=state_app.MIGRATIONS)
    scores = {t.checkpoint["channel_values"].get("score") for t in saver.list(config(thread))}
    assert scores >= {"5001 pts"} and not any(isinstance(s, int) for s in scores)
    again = upgrade_state(saver)
    assert again.failures == [] and again.checkpoints == len(kept)
    assert _revisions(engine, [thread]) == {HEAD}
    build(V2, saver).invoke(Command(resume="yes"), config(thread))
    assert build(V2, saver).get_state(config(thread)).values["score"] == "5112 pts"


async def test_upgrade_killed_mid_run_and_run_again(
    make_engine: EngineFactory, fresh_database: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lg-sqla state upgrade` in a real process that dies (os._exit) in its fourth batch
    of one thread: three threads are at the head, the others untouched and readable;
    the command run again finishes, and every thread resumes as version 2."""
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    v1 = either(build(V1, SQLAlchemySaver(engine)), "sync")
    threads = [f"killed-{n}" for n in range(6)]  # upgraded in this (thread id) order
    for n, thread in enumerate(threads):
        await _paused_v1(v1, thread, points=1000 * n)
    command = [sys.executable, "-m", "lg_sqla", "--url", fresh_database.sync_url, "state"]
    command += ["upgrade", "--migrations", "state_app:MIGRATIONS", "--batch-size", "1", "--yes"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    killed = subprocess.run(
        command, cwd=HERE, env={**env, "STATE_APP_CRASH_FROM": "3000"}, capture_output=True
    )
    assert killed.returncode == 17, killed.stderr
    assert _revisions(engine, threads[:3]) == {HEAD}
    assert _revisions(engine, threads[3:]) == {None}
    saver = SQLAlchemySaver(engine, state_migrations=state_app.MIGRATIONS)
    # Run again (in this process: the command's code, without a second interpreter).
    assert cli.main(command[3:]) == 0
    assert "rewritten to state revision 0002_score_text in 3 batch(es)" in capsys.readouterr().out
    assert _revisions(engine, threads) == {HEAD}
    v2 = either(build(V2, saver), "sync")
    for n, thread in enumerate(threads):
        reference = await _finished_v2(v2, f"reference-{n}", points=1000 * n)
        assert reference["score"] == f"{1000 * n + 224} pts"
        assert await _resumed(v2, thread) == reference


async def test_an_encrypted_and_compressed_saver_migrates_the_same_way(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """Values are decoded and written again through the saver's serializer: after the
    upgrade they are still encrypted and compressed, and version 2 resumes lazily
    (one thread) and after the upgrade (another) to the same state."""
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    serde = EncryptedSerializer.gcm({"k1": KEY}, CompressedSerializer())
    v1 = either(build(V1, SQLAlchemySaver(engine, serde=serde)), "sync")
    lazy, offline, reference_thread = new_thread(), new_thread(), new_thread()
    for thread in (lazy, offline):
        await _paused_v1(v1, thread)
    saver = SQLAlchemySaver(engine, serde=serde, state_migrations=state_app.MIGRATIONS)
    v2 = either(build(V2, saver), "sync")
    reference = await _finished_v2(v2, reference_thread)
    assert await _resumed(v2, lazy) == reference
    report = upgrade_state(saver)
    assert report.failures == [] and report.blobs > 0
    with engine.connect() as conn:
        types = set(conn.execute(sa.select(checkpoint_blobs.c.type)).scalars())
    assert all("aes" in t and "+" in t for t in types), types
    assert await _resumed(v2, offline) == reference


def test_a_downgrade_without_a_way_back_changes_nothing(
    make_engine: EngineFactory, fresh_database: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    """A revision that drops a channel has no down: `to=` an older revision (and `lg-sqla
    state downgrade`) says so, naming it, before any row changes; `lg-sqla state show`
    counts the rows per revision."""
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    thread = new_thread()
    build(V1, SQLAlchemySaver(engine)).invoke(first_input(V1), config(thread))
    saver = SQLAlchemySaver(engine, state_migrations=state_app.DROPPING)
    upgrade_state(saver)
    upgraded = saver.get_tuple(config(thread))
    assert upgraded is not None and "score" not in upgraded.checkpoint["channel_values"]
    before = _rows(engine, thread)
    with pytest.raises(MissingDowngradeError, match=r"0003_no_score: DropChannel\('score'\)"):
        upgrade_state(saver, to="0001_chat")
    state = ["--url", fresh_database.sync_url, "state"]
    refusal = [*state, "downgrade", "--to", "base", "--migrations", "state_app:DROPPING"]
    assert cli.main(refusal) != 0
    refused = capsys.readouterr().err
    assert "0003_no_score: DropChannel('score') cannot be undone" in refused
    assert "nothing was changed" in refused
    assert _rows(engine, thread) == before
    assert cli.main([*state, "show", "--migrations", "state_app:DROPPING", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    counts = {row["revision"]: row["checkpoints"] for row in shown}
    assert counts == {None: 0, "0003_no_score": len(before["checkpoints"])}


def test_a_thread_a_graph_is_running_on_is_left_alone(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """The sweeper's rule: a thread between the supersteps of a run (written within
    max_run, tasks to run, no interrupt) is skipped and reported, not rewritten; a
    thread paused at an interrupt is rewritten. Once the run ended, a second upgrade
    takes the first thread too."""
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    started, release = threading.Event(), threading.Event()

    def first(state: Any) -> dict[str, Any]:
        return {"messages": ["one"], "score": 1}

    def second(state: Any) -> dict[str, Any]:
        started.set()
        assert release.wait(120), "the test never released the run"
        return {"messages": ["two"], "score": state["score"] + 1}

    builder: StateGraph[Any] = StateGraph(state_app.StateV1)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    graph: Any = builder.compile(checkpointer=SQLAlchemySaver(engine))
    running, paused = "run-a", "run-b"
    build(V1, SQLAlchemySaver(engine)).invoke(first_input(V1), config(paused))
    failures: list[BaseException] = []

    def run() -> None:
        try:
            # durability="sync": each step's checkpoint is stored before the next runs.
            graph.invoke(first_input(V1), config(running), durability="sync")
        except BaseException as error:  # reported below
            failures.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        assert started.wait(120)
        before = _rows(engine, running)
        saver = SQLAlchemySaver(engine, state_migrations=state_app.MIGRATIONS)
        report = upgrade_state(saver)
        assert report.threads_running == [running] and report.failures == []
        assert _rows(engine, running) == before
        assert _revisions(engine, [paused]) == {HEAD}
    finally:
        release.set()
        worker.join(120)
    assert not worker.is_alive() and failures == []
    assert upgrade_state(saver).threads_running == []
    assert _revisions(engine, [running, paused]) == {HEAD}
    values = build(V2, saver).get_state(config(running)).values
    assert values == {"chat": ["one", "two"], "score": "2 pts"}


def test_the_documented_example_resumes_a_version_1_ticket_under_version_2(
    make_engine: EngineFactory, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """examples/state_migrations.py, as docs/state-migrations.md runs it: a ticket paused
    by version 1 is approved by version 2 through the migrations."""
    spec = importlib.util.spec_from_file_location(
        "lg_sqla_example_state_migrations", HERE.parents[2] / "examples" / "state_migrations.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, example)  # (its TypedDicts' annotations)
    spec.loader.exec_module(example)
    engine = make_engine(backend)
    thread = new_thread()
    example.version_1(SQLAlchemySaver(engine)).invoke(
        {"messages": ["user: printer on fire"]}, config(thread)
    )
    saver = SQLAlchemySaver(engine, state_migrations=example.MIGRATIONS)
    result = example.version_2(saver).invoke(Command(resume="yes"), config(thread))
    assert result["priority"] == "high"
    assert result["conversation"] == [
        "user: printer on fire",
        "bot: triaged",
        "agent: yes",
        "bot: on it (priority high)",
    ]


async def test_the_async_saver_upgrades_too(fresh_database: Backend) -> None:
    """``aupgrade_state`` on an AsyncSQLAlchemySaver: the same rewrite, on the saver's
    own loop; ``astate_counts`` then finds every checkpoint at the head."""
    engine = fresh_database.async_engine()
    try:
        await AsyncSQLAlchemySaver(engine).setup()
        thread = new_thread()
        v1 = either(build(V1, AsyncSQLAlchemySaver(engine)), "async")
        await _paused_v1(v1, thread)
        saver = AsyncSQLAlchemySaver(engine, state_migrations=state_app.MIGRATIONS)
        report = await aupgrade_state(saver, batch_size=1)
        assert report.failures == [] and report.checkpoints > 0
        counts = await astate_counts(saver)
        assert set(counts["checkpoints"]) == {HEAD}
        v2 = either(build(V2, saver), "async")
        assert (await _resumed(v2, thread))["score"] == "224 pts"
    finally:
        await engine.dispose()


def test_a_none_kept_in_the_document_that_a_transform_gives_a_value_becomes_a_blob(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """``None`` values live in the checkpoint document, not in a blob: a transform that
    gives them a value reads it lazily, and the upgrade stores it as the channel's blob
    (the document keeps only what is still ``None``, or a small primitive it may hold)."""
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    stored = SQLAlchemySaver(engine).put(
        config(new_thread()),
        checkpoint({"note": None, "short": None, "gone": None}),
        {},
        {"note": 1, "short": 1, "gone": 1},
    )
    filled = StateMigrations(
        [
            StateRevision(
                "0001_note",
                None,
                [
                    TransformChannel("note", lambda v: ["(none)"] if v is None else v),
                    TransformChannel("short", lambda v: "(none)" if v is None else v),
                ],
            )
        ]
    )
    saver = SQLAlchemySaver(engine, state_migrations=filled)
    expected = {"note": ["(none)"], "short": "(none)", "gone": None}
    lazily = saver.get_tuple(stored)
    assert lazily is not None
    assert lazily.checkpoint["channel_values"] == expected
    assert upgrade_state(saver).failures == []
    upgraded = saver.get_tuple(stored)
    assert upgraded is not None and upgraded.checkpoint["channel_values"] == expected
    with engine.connect() as conn:
        blobs = conn.execute(sa.select(checkpoint_blobs.c.channel)).scalars().all()
        document = conn.execute(sa.select(checkpoints.c.checkpoint)).scalar_one()
    assert blobs == ["note"]
    assert codec.inline_values(json_values.json_object(document)) == {
        "short": "(none)",
        "gone": None,
    }


def _steps_graph(node: str, checkpointer: Any) -> Any:
    """START -> draft -> ``node`` -> END, stopped before ``node``."""

    def draft(state: Any) -> dict[str, Any]:
        return {"messages": ["draft"], "score": state["score"] + 1}

    def finish(state: Any) -> dict[str, Any]:
        return {"messages": [f"{node} done"], "score": state["score"] * 10}

    builder: StateGraph[Any] = StateGraph(state_app.StateV1)
    builder.add_node("draft", draft)
    builder.add_node(node, finish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", node)
    builder.add_edge(node, END)
    return builder.compile(checkpointer=checkpointer, interrupt_before=[node])


def test_a_renamed_node_runs_where_the_old_one_was_due(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """Stopped before node ``agent`` (its trigger channel written, not yet read), the
    thread resumes under a graph that calls it ``assistant``: the renamed node runs, as
    in a thread run under the new names from the start."""
    engine = make_engine(backend)
    old, fresh = new_thread(), new_thread()
    _steps_graph("agent", SQLAlchemySaver(engine)).invoke(first_input(V1), config(old))
    renamed = StateMigrations(
        [StateRevision("0001_assistant", None, [RenameNode("agent", "assistant")])]
    )
    saver = SQLAlchemySaver(engine, state_migrations=renamed)
    graph = _steps_graph("assistant", saver)
    graph.invoke(first_input(V1), config(fresh))
    assert graph.get_state(config(old)).next == ("assistant",)
    for thread in (old, fresh):
        graph.invoke(None, config(thread))
    expected = {"messages": ["draft", "assistant done"], "score": 10}
    assert graph.get_state(config(old)).values == graph.get_state(config(fresh)).values == expected
