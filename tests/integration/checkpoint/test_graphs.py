# mypy: disable-error-code="index"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""End-to-end LangGraph graphs on lg_sqla, on every dialect (SQLite, PostgreSQL, MySQL).

Where the conformance suite checks the saver's methods one by one, these tests
run real compiled graphs and assert what users rely on: conversation memory
across saver instances and processes, interrupt/resume, time travel (history,
replay, forks), subgraphs in their own checkpoint namespace, parallel writes
and ``Send`` (pending writes and TASKS), streaming and durability modes.

The graphs and their deterministic fake "model" live in graph_helpers.py. Each
test uses its own thread id, since a dialect's database is shared by the session.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import uuid
from collections import Counter
from typing import Any

import pytest
from backends import Backend, fresh_async_saver
from graph_helpers import (
    build_approval_graph,
    build_article_graph,
    build_chat_graph,
    build_fan_out_graph,
    build_pipeline,
    chat_turn_script,
    expected_chat,
    summarize,
)
from graph_runner import Runner
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, Send, StateSnapshot

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver

# Also on a MariaDB database at the server's default charset (conftest.py).
pytestmark = [pytest.mark.any_charset, pytest.mark.any_dialect]

TASKS = "__pregel_tasks"  # LangGraph's channel for Send packets


@pytest.fixture
def runner(request: pytest.FixtureRequest, backend: Backend, mode: str) -> Runner:
    """The test body runs once on the sync saver and once on the async saver."""
    saver = request.getfixturevalue("async_saver" if mode == "async" else "sync_saver")
    return Runner(mode, backend, saver)


def new_thread() -> RunnableConfig:
    return {"configurable": {"thread_id": f"graph-{uuid.uuid4()}"}}


def checkpoint_id(config: RunnableConfig | None) -> str | None:
    return None if config is None else str(config["configurable"]["checkpoint_id"])


def ids_of(snapshots: list[StateSnapshot]) -> list[str | None]:
    return [checkpoint_id(s.config) for s in snapshots]


def assert_linear_history(history: list[StateSnapshot]) -> None:
    """Newest first; each snapshot's parent is the next (older) one; the oldest has none."""
    ids = [str(i) for i in ids_of(history)]
    assert ids == sorted(ids, reverse=True), "history is not newest first"
    assert len(set(ids)) == len(ids)
    for newer, older in itertools.pairwise(history):
        assert checkpoint_id(newer.parent_config) == checkpoint_id(older.config)
    assert history[-1].parent_config is None


# --- 1/2. multi-turn memory ----------------------------------------------------------


async def test_chat_memory_across_two_saver_instances(runner: Runner) -> None:
    config = new_thread()
    async with runner.other() as first_saver:
        graph_a = first_saver.compile(build_chat_graph())
        first = await first_saver.invoke(
            graph_a, {"messages": [HumanMessage("hi, I am Ada")]}, config
        )
    assert summarize(first["messages"]) == expected_chat("hi, I am Ada")

    async with runner.other() as second_saver:
        graph_b = second_saver.compile(build_chat_graph())
        second = await second_saver.invoke(
            graph_b, {"messages": [HumanMessage("what is my name?")]}, config
        )
        state = await second_saver.get_state(graph_b, config)

    expected = expected_chat("hi, I am Ada", "what is my name?")
    # The fake model's second reply says it saw 3 messages: turn 1 was loaded.
    assert summarize(second["messages"]) == expected
    assert summarize(state.values["messages"]) == expected
    # Message ids survive the round trip, so add_messages appended instead of duplicating.
    assert [m.id for m in second["messages"][:2]] == [m.id for m in first["messages"]]
    assert len({m.id for m in second["messages"]}) == 4
    assert state.next == ()


def test_chat_memory_across_a_process_boundary(
    backend: Backend, sync_saver: SQLAlchemySaver
) -> None:
    config = new_thread()
    thread_id = config["configurable"]["thread_id"]
    script = chat_turn_script(backend.sync_url, thread_id, "hi from another process")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    turn_1 = json.loads(done.stdout)
    assert [(m["type"], m["content"]) for m in turn_1] == expected_chat("hi from another process")

    graph = build_chat_graph().compile(checkpointer=sync_saver)
    result = graph.invoke({"messages": [HumanMessage("and now from the test")]}, config)
    assert summarize(result["messages"]) == expected_chat(
        "hi from another process", "and now from the test"
    )
    assert [m.id for m in result["messages"][:2]] == [m["id"] for m in turn_1]


# --- 3. human in the loop -----------------------------------------------------------


async def test_interrupt_then_resume(runner: Runner) -> None:
    config = new_thread()
    calls: Counter[str] = Counter()
    graph = runner.compile(build_approval_graph(calls))

    paused = await runner.invoke(graph, {"request": "the refund"}, config)
    question = {"question": "Approve the refund?"}
    assert [i.value for i in paused["__interrupt__"]] == [question]
    assert "answer" not in paused

    state = await runner.get_state(graph, config)
    assert state.next == ("ask_human",)
    assert [i.value for i in state.interrupts] == [question]
    assert [(t.name, [i.value for i in t.interrupts]) for t in state.tasks] == [
        ("ask_human", [question])
    ]

    # Resume from another saver instance, as a second web request would.
    async with runner.other() as other:
        resumed_graph = other.compile(build_approval_graph(calls))
        final = await other.invoke(resumed_graph, Command(resume="yes"), config)
        after = await other.get_state(resumed_graph, config)

    assert final["answer"] == "yes"
    assert final["log"] == ["prepared the refund", "human said yes", "finished with yes"]
    assert after.next == ()
    assert after.interrupts == ()
    assert after.values == final
    # "prepare" ran once: the resume started from the stored checkpoint. The
    # interrupted node re-runs by design (interrupt() then returns the value).
    assert calls == Counter(prepare=1, ask_human=2, finish=1)


# --- 4. time travel -----------------------------------------------------------------------


async def run_pipeline(runner: Runner) -> tuple[Any, RunnableConfig, Counter[str]]:
    config = new_thread()
    calls: Counter[str] = Counter()
    graph = runner.compile(build_pipeline(calls))
    result = await runner.invoke(graph, {"trail": ["start"]}, config)
    assert result == {"trail": ["start", "a", "b", "c"]}
    return graph, config, calls


async def test_state_history_newest_first_with_steps_and_parents(runner: Runner) -> None:
    graph, config, _ = await run_pipeline(runner)
    history = await runner.history(graph, config)

    assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]
    assert [s.metadata["source"] for s in history] == ["loop"] * 4 + ["input"]
    assert [s.next for s in history] == [(), ("c",), ("b",), ("a",), ("__start__",)]
    assert [s.values["trail"] for s in history] == [
        ["start", "a", "b", "c"],
        ["start", "a", "b"],
        ["start", "a"],
        ["start"],
        [],  # the input checkpoint: the input is not applied yet
    ]
    assert_linear_history(history)
    # The saver's own listing agrees, and honours limit and before.
    listed = await runner.list(config)
    assert [checkpoint_id(t.config) for t in listed] == ids_of(history)
    assert ids_of(await runner.history(graph, config, limit=2)) == ids_of(history[:2])
    before = await runner.history(graph, config, before=history[1].config)
    assert ids_of(before) == ids_of(history[2:])


async def test_replay_from_an_old_checkpoint(runner: Runner) -> None:
    graph, config, calls = await run_pipeline(runner)
    original = await runner.history(graph, config)
    head, old = original[0], original[2]
    assert old.next == ("b",)

    replayed = await runner.invoke(graph, None, old.config)

    assert replayed == {"trail": ["start", "a", "b", "c"]}
    # Only the nodes after the old checkpoint ran again.
    assert calls == Counter(a=1, b=2, c=2)
    # The new head descends from the old checkpoint ...
    new_head = await runner.get_state(graph, config)
    assert checkpoint_id(new_head.config) != checkpoint_id(head.config)
    ancestors = []
    snapshot: StateSnapshot | None = new_head
    while snapshot is not None and snapshot.parent_config is not None:
        ancestors.append(checkpoint_id(snapshot.parent_config))
        snapshot = await runner.get_state(graph, snapshot.parent_config)
    assert checkpoint_id(old.config) in ancestors
    assert checkpoint_id(head.config) not in ancestors
    # ... and the original branch is still there, unchanged.
    assert (await runner.get_state(graph, head.config)).values == head.values
    assert (await runner.get_state(graph, old.config)).values == {"trail": ["start", "a"]}
    assert len(await runner.history(graph, config)) > len(original)


async def test_update_state_forks_from_an_old_checkpoint(runner: Runner) -> None:
    graph, config, calls = await run_pipeline(runner)
    original = await runner.history(graph, config)
    head, old = original[0], original[2]  # old: after "a", before "b"

    fork_config = await runner.update_state(graph, old.config, {"trail": ["edited"]})

    fork = await runner.get_state(graph, fork_config)
    assert checkpoint_id(fork.parent_config) == checkpoint_id(old.config)
    assert fork.metadata is not None and fork.metadata["source"] == "update"
    assert fork.values == {"trail": ["start", "a", "edited"]}
    assert fork.next == ("b",)
    # The fork is the thread's latest checkpoint now; the main branch's head is untouched.
    latest = await runner.get_state(graph, config)
    assert checkpoint_id(latest.config) == checkpoint_id(fork_config)
    main_head = {"trail": ["start", "a", "b", "c"]}
    assert (await runner.get_state(graph, head.config)).values == main_head

    finished = await runner.invoke(graph, None, fork_config)
    assert finished == {"trail": ["start", "a", "edited", "b", "c"]}
    assert calls == Counter(a=1, b=2, c=2)
    assert (await runner.get_state(graph, head.config)).values == main_head
    assert (await runner.get_state(graph, config)).values == finished
    # Both branches share the checkpoints up to the fork point.
    assert set(ids_of(original)) < set(ids_of(await runner.history(graph, config)))


# --- 5. subgraphs ---------------------------------------------------------------------------


QUESTION = {"question": "Publish 'draft on cats'?"}


def check_paused_subgraph(state: StateSnapshot) -> str:
    """Assertions on the parent's state while the subgraph waits; returns the subgraph ns."""
    assert state.next == ("research",)
    assert [i.value for i in state.interrupts] == [QUESTION]
    (task,) = state.tasks
    assert task.name == "research"
    sub = task.state
    assert isinstance(sub, StateSnapshot)
    assert sub.next == ("review",)
    assert sub.values["draft"] == "draft on cats"
    assert sub.values["review_log"] == ["drafted"]
    assert [i.value for i in sub.tasks[0].interrupts] == [QUESTION]
    ns = sub.config["configurable"]["checkpoint_ns"]
    assert ns.startswith("research:")
    return str(ns)


def check_subgraph_checkpoints(tuples: list[CheckpointTuple], ns: str) -> None:
    assert tuples, f"no checkpoints stored in namespace {ns!r}"
    assert {t.config["configurable"]["checkpoint_ns"] for t in tuples} == {ns}
    # The latest subgraph checkpoint carries the draft made before the interrupt.
    assert tuples[0].checkpoint["channel_values"]["draft"] == "draft on cats"


def check_finished_article(final: dict[str, Any], calls: Counter[str]) -> None:
    assert final["article"] == "cats (yes)"
    assert final["approved"] == "yes"
    assert final["notes"] == ["planned cats", "published"]
    assert "draft" not in final  # private to the subgraph
    # "draft" ran once: on resume the subgraph continued from its own checkpoint.
    assert calls == Counter(plan=1, draft=1, review=2, publish=1)


async def test_subgraph_state_and_interrupt_resume(runner: Runner) -> None:
    config = new_thread()
    thread_id = config["configurable"]["thread_id"]
    calls: Counter[str] = Counter()
    graph = runner.compile(build_article_graph(calls))

    paused = await runner.invoke(graph, {"topic": "cats"}, config)
    assert [i.value for i in paused["__interrupt__"]] == [QUESTION]
    ns = check_paused_subgraph(await runner.get_state(graph, config, subgraphs=True))

    sub_config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}
    check_subgraph_checkpoints(await runner.list(sub_config), ns)
    every_ns = {t.config["configurable"]["checkpoint_ns"] for t in await runner.list(config)}
    assert every_ns == {"", ns}

    final = await runner.invoke(graph, Command(resume="yes"), config)
    check_finished_article(final, calls)
    done = await runner.get_state(graph, config, subgraphs=True)
    assert done.next == ()
    assert done.tasks == ()
    assert done.values == final


# --- 6. parallel writes, Send, pending writes ------------------------------------------------

TOPICS = ["alpha", "beta", "gamma"]
ALL_RESULTS = ["left", "right", "worker:alpha", "worker:beta", "worker:gamma"]


def task_outcomes(state: StateSnapshot) -> tuple[list[Any], list[str]]:
    """The pending tasks' results and errors, each sorted (task order is unspecified)."""
    results = sorted(((t.name, t.result) for t in state.tasks if t.error is None), key=repr)
    errors = sorted(f"{t.name}: {t.error}" for t in state.tasks if t.error is not None)
    return results, errors


async def test_parallel_fan_out_and_send(runner: Runner) -> None:
    config = new_thread()
    calls: Counter[str] = Counter()
    graph = runner.compile(build_fan_out_graph(calls))

    result = await runner.invoke(graph, {"topics": TOPICS}, config)

    assert sorted(result["results"]) == ALL_RESULTS  # order within a superstep is unspecified
    assert result["summary"] == ",".join(ALL_RESULTS)
    assert calls == Counter(left=1, right=1, alpha=1, beta=1, gamma=1, summary=1)
    assert (await runner.get_state(graph, config)).values == result

    # The writes of each superstep were stored against the checkpoint before it.
    by_next = {s.next: s for s in await runner.history(graph, config)}
    fan = await runner.get_tuple(by_next[("left", "right")].config)
    assert fan is not None
    assert sorted(w[2][0] for w in fan.pending_writes or [] if w[1] == "results") == [
        "left",
        "right",
    ]
    join = await runner.get_tuple(by_next[("join",)].config)
    assert join is not None
    sends = [w[2] for w in join.pending_writes or [] if w[1] == TASKS]
    assert sorted(sends, key=lambda s: s.arg["topic"]) == [
        Send("worker", {"topic": topic}) for topic in TOPICS
    ]
    workers = await runner.get_tuple(by_next[("worker", "worker", "worker")].config)
    assert workers is not None
    assert len({w[0] for w in workers.pending_writes or []}) == 3  # one task id per Send


def finished_results(state: StateSnapshot) -> list[Any]:
    """The pending tasks that finished: their stored results (sorted).

    A task finished when it has stored output, error or not: LangGraph cancels the
    siblings of a failed task, and a sibling cancelled after its node returned is
    stored with its output *and* a CancelledError. LangGraph counts it as finished
    (not in ``next``, not run again), and so do the tests.
    """
    return sorted(((t.name, t.result) for t in state.tasks if t.result is not None), key=repr)


async def test_failed_supersteps_resume_from_pending_writes(runner: Runner) -> None:
    """A task that fails leaves its finished siblings' writes pending; a retry re-runs
    only the tasks without stored writes (the failed one, and any sibling LangGraph
    cancelled before it finished: which siblings finish first is timing)."""
    config = new_thread()
    calls: Counter[str] = Counter()
    fail_once = {"right", "beta"}  # one parallel branch, then one Send worker
    graph = runner.compile(build_fan_out_graph(calls, fail_once))

    with pytest.raises(RuntimeError, match="transient failure in right"):
        await runner.invoke(graph, {"topics": TOPICS}, config)
    assert calls["right"] == 1 and calls["left"] <= 1
    # The stored writes tell finished tasks (with their result) from the failed one.
    state = await runner.get_state(graph, config)
    _, errors = task_outcomes(state)
    assert "right: RuntimeError('transient failure in right')" in errors
    assert set(errors) <= {
        "right: RuntimeError('transient failure in right')",
        "left: CancelledError()",
    }
    stored = finished_results(state)
    assert stored in ([], [("left", {"results": ["left"]})])
    assert state.next == (("right",) if stored else ("left", "right"))
    before = Counter(calls)

    async with runner.other() as other:  # retry from a different saver instance
        retry = other.compile(build_fan_out_graph(calls, fail_once))
        with pytest.raises(RuntimeError, match="transient failure in beta"):
            await other.invoke(retry, None, config)
        # A finished "left" was not re-run: its write was loaded from the pending writes.
        assert calls["left"] == (before["left"] if stored else before["left"] + 1)
        assert calls["right"] == 2 and calls["beta"] == 1
        state = await other.get_state(retry, config)
        _, errors = task_outcomes(state)
        # Cancelled siblings (async) may be recorded as such, beside beta's error.
        assert "worker: RuntimeError('transient failure in beta')" in errors
        assert set(errors) <= {
            "worker: RuntimeError('transient failure in beta')",
            "worker: CancelledError()",
        }
        workers_stored = finished_results(state)
        # `next` names the tasks without a stored result: beta and any cancelled sibling.
        assert state.next == ("worker",) * (len(TOPICS) - len(workers_stored))
        for outcome in workers_stored:
            assert outcome in (
                ("worker", {"results": ["worker:alpha"]}),
                ("worker", {"results": ["worker:gamma"]}),
            )
        before = Counter(calls)

        result = await other.invoke(retry, None, config)

    assert sorted(result["results"]) == ALL_RESULTS
    assert result["summary"] == ",".join(ALL_RESULTS)
    # Workers with stored results ran no more; the others (beta included) ran once more.
    for topic in ("alpha", "beta", "gamma"):
        was_stored = ("worker", {"results": [f"worker:{topic}"]}) in workers_stored
        assert calls[topic] == before[topic] + (0 if was_stored else 1), (topic, calls)
    assert calls["beta"] == 2 and calls["summary"] == 1


async def test_a_failed_send_worker_is_retried_alone(runner: Runner) -> None:
    config = new_thread()
    calls: Counter[str] = Counter()
    fail_once = {"beta"}
    graph = runner.compile(build_fan_out_graph(calls, fail_once))

    with pytest.raises(RuntimeError, match="transient failure in beta"):
        await runner.invoke(graph, {"topics": TOPICS}, config)
    # Siblings that finished before beta failed have stored results; LangGraph
    # cancels the others (timing), and only those run again.
    workers_stored = finished_results(await runner.get_state(graph, config))
    before = Counter(calls)
    result = await runner.invoke(graph, None, config)

    assert sorted(result["results"]) == ALL_RESULTS
    for topic in ("alpha", "beta", "gamma"):
        was_stored = ("worker", {"results": [f"worker:{topic}"]}) in workers_stored
        assert calls[topic] == before[topic] + (0 if was_stored else 1), (topic, calls)
    assert calls["beta"] == 2
    assert (calls["left"], calls["right"], calls["summary"]) == (1, 1, 1)
    assert (await runner.get_state(graph, config)).values == result


# --- 7. streaming and durability ----------------------------------------------------------------


async def test_stream_values_continues_the_stored_conversation(runner: Runner) -> None:
    config = new_thread()
    graph = runner.compile(build_chat_graph())

    first = {"messages": [HumanMessage("one")]}
    turn_1 = await runner.stream(graph, first, config, stream_mode="values")
    assert [summarize(chunk["messages"]) for chunk in turn_1] == [
        expected_chat("one")[:1],
        expected_chat("one"),
    ]

    second = {"messages": [HumanMessage("two")]}
    turn_2 = await runner.stream(graph, second, config, stream_mode="values")
    # The first chunk already holds the stored turn plus the new input.
    assert [summarize(chunk["messages"]) for chunk in turn_2] == [
        expected_chat("one", "two")[:3],
        expected_chat("one", "two"),
    ]
    state = await runner.get_state(graph, config)
    assert summarize(state.values["messages"]) == expected_chat("one", "two")


async def test_stream_values_of_a_pipeline(runner: Runner) -> None:
    config = new_thread()
    graph = runner.compile(build_pipeline(Counter()))

    chunks = await runner.stream(graph, {"trail": ["start"]}, config, stream_mode="values")

    assert [c["trail"] for c in chunks] == [
        ["start"],
        ["start", "a"],
        ["start", "a", "b"],
        ["start", "a", "b", "c"],
    ]
    assert (await runner.get_state(graph, config)).values == chunks[-1]


# Checkpoints a 3-node run leaves: "exit" writes only the final one.
CHECKPOINTS_BY_DURABILITY = {"exit": 1, "sync": 5}


@pytest.mark.parametrize("durability", ["exit", "sync"])
async def test_durability_modes_persist_the_final_state(runner: Runner, durability: Any) -> None:
    config = new_thread()
    graph = runner.compile(build_pipeline(Counter()))

    result = await runner.invoke(graph, {"trail": ["start"]}, config, durability=durability)

    async with runner.other() as other:
        reader = other.compile(build_pipeline(Counter()))
        state = await other.get_state(reader, config)
        history = await other.history(reader, config)
    assert result == {"trail": ["start", "a", "b", "c"]}
    assert state.values == result
    assert state.next == ()
    assert state.metadata is not None and state.metadata["step"] == 3
    assert len(history) == CHECKPOINTS_BY_DURABILITY[durability]


async def test_chat_on_a_saver_from_conn_string_async(backend: Backend) -> None:
    """The saver users open by URL (on SQLite: calls on pysqlite in worker threads):
    concurrent conversations, each one's history intact, readable by another saver."""
    turns = ["hi, I am Ada", "what is my name?", "and again?"]
    configs = [new_thread() for _ in range(4)]

    async def converse(graph: Any, config: RunnableConfig) -> None:
        for text in turns:
            await graph.ainvoke({"messages": [HumanMessage(text)]}, config)

    reference = build_chat_graph().compile(checkpointer=InMemorySaver())
    await converse(reference, configs[0])
    steps = [s.metadata for s in reference.get_state_history(configs[0])]

    async with AsyncSQLAlchemySaver.from_conn_string(backend.async_url) as saver:
        graph = build_chat_graph().compile(checkpointer=saver)
        await asyncio.gather(*(converse(graph, config) for config in configs))
        for config in configs:
            state = await graph.aget_state(config)
            assert summarize(state.values["messages"]) == expected_chat(*turns)
            history = [s async for s in graph.aget_state_history(config)]
            assert [s.metadata for s in history] == steps
    async with fresh_async_saver(backend) as other:
        graph = build_chat_graph().compile(checkpointer=other)
        for config in configs:
            state = await graph.aget_state(config)
            assert summarize(state.values["messages"]) == expected_chat(*turns)
