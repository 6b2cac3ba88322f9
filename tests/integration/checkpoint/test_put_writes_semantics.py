"""``put_writes`` decides per write, as LangGraph's reference ``InMemorySaver`` does.

A write to a special channel (``__error__``, ``__scheduled__``, ``__interrupt__``,
``__resume__``) replaces the one stored for the same task; a regular write is
insert-or-ignore (first write wins, so a retried task is idempotent). The
official SQL savers decide per *call* instead, which keeps a stale resume value
when one call mixes both kinds, as ``Command(resume=..., update=...)`` does.

Every test compares lg_sqla with InMemorySaver fed the same calls, on every
dialect, through the sync and the async saver.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

import pytest
from backends import Backend, EngineFactory, fresh_saver
from helpers import checkpoint, config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.constants import END, START
from langgraph.graph import StateGraph
from langgraph.types import Command, Interrupt, interrupt
from modes import Either, either, saver_on

ERROR, SCHEDULED, INTERRUPT, RESUME = "__error__", "__scheduled__", "__interrupt__", "__resume__"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"

# One put_writes call: (task_id, [(channel, value), ...]).
Call = tuple[str, list[tuple[str, Any]]]


def stored_writes(saved: CheckpointTuple | None) -> list[tuple[str, str, Any]]:
    assert saved is not None
    return sorted(
        (task, channel, repr(value)) for task, channel, value in saved.pending_writes or []
    )


def replay_sync(saver: BaseCheckpointSaver[Any], thread_id: str, calls: Sequence[Call]) -> Any:
    stored = saver.put(config(thread_id), checkpoint({"x": 1}), {"step": 0}, {"x": 1})
    for task_id, writes in calls:
        saver.put_writes(stored, writes, task_id, task_path=f"~{task_id}")
    return stored_writes(saver.get_tuple(stored))


async def replay(
    saver: Either[BaseCheckpointSaver[Any]], thread_id: str, calls: Sequence[Call]
) -> Any:
    """replay_sync, in the saver's mode (modes.py)."""
    stored = await saver.put(config(thread_id), checkpoint({"x": 1}), {"step": 0}, {"x": 1})
    for task_id, writes in calls:
        await saver.put_writes(stored, writes, task_id, task_path=f"~{task_id}")
    return stored_writes(await saver.get_tuple(stored))


# Each scenario is a sequence of calls whose stored result differs between the
# per-write rule and a per-call rule (or a naive always-upsert / always-ignore).
SCENARIOS: dict[str, list[Call]] = {
    # Command(resume=..., update=...) twice: the second resume must win.
    "resume_with_update_twice": [
        (NULL_TASK_ID, [("notes", "n1"), (RESUME, "A")]),
        (NULL_TASK_ID, [("notes", "n2"), (RESUME, "B")]),
    ],
    # A retried task: regular writes are first-wins, its error is replaced.
    "retry_mixed_error": [
        ("task-1", [("out", "first"), (ERROR, "boom 1")]),
        ("task-1", [("out", "second"), (ERROR, "boom 2")]),
    ],
    # All-special calls replace; all-regular calls are ignored on conflict.
    "pure_calls": [
        ("task-1", [(INTERRUPT, "ask 1")]),
        ("task-1", [(INTERRUPT, "ask 2"), (SCHEDULED, "s")]),
        ("task-2", [("a", 1), ("b", 2)]),
        ("task-2", [("a", 10), ("b", 20), ("c", 30)]),
    ],
    # One call naming a special channel twice keeps its last value.
    "repeated_special_in_one_call": [
        ("task-1", [("a", 1), (RESUME, "r1"), (RESUME, "r2")]),
    ],
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_put_writes_matches_in_memory_saver(
    make_engine: EngineFactory, backend: Backend, mode: str, scenario: str
) -> None:
    calls = SCENARIOS[scenario]
    expected = replay_sync(InMemorySaver(), "t", calls)
    saver = saver_on(make_engine.for_mode(mode, backend))
    assert await replay(saver, f"pw-{uuid.uuid4()}", calls) == expected


def test_scenarios_tell_the_rules_apart() -> None:
    """The scenarios above would catch a per-call rule (guards the test's own power)."""

    class PerCallSaver(InMemorySaver):
        def put_writes(
            self,
            config: RunnableConfig,
            writes: Sequence[tuple[str, Any]],
            task_id: str,
            task_path: str = "",
        ) -> None:
            if all(channel in (ERROR, SCHEDULED, INTERRUPT, RESUME) for channel, _ in writes):
                super().put_writes(config, writes, task_id, task_path)
                return
            key = (
                config["configurable"]["thread_id"],
                config["configurable"].get("checkpoint_ns", ""),
                config["configurable"]["checkpoint_id"],
            )
            before = dict(self.writes.get(key, {}))
            super().put_writes(config, writes, task_id, task_path)
            self.writes[key].update(before)  # insert-or-ignore for the whole call

    differing = [
        name
        for name, calls in SCENARIOS.items()
        if replay_sync(PerCallSaver(), "t", calls) != replay_sync(InMemorySaver(), "t", calls)
    ]
    assert differing == ["resume_with_update_twice", "retry_mixed_error"]


channel_names = st.sampled_from(["a", "b", ERROR, SCHEDULED, INTERRUPT, RESUME])
calls_strategy = st.lists(
    st.tuples(
        st.sampled_from(["task-1", "task-2", NULL_TASK_ID]),
        st.lists(st.tuples(channel_names, st.integers(0, 9)), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=calls_strategy)
def test_put_writes_random_calls_match_in_memory_saver(backend: Backend, calls: list[Call]) -> None:
    expected = replay_sync(InMemorySaver(), "t", calls)
    with fresh_saver(backend) as saver:
        assert replay_sync(saver, f"pw-{uuid.uuid4()}", calls) == expected


# --- a graph: one node, two interrupts, each resumed with an update -------------------


class AskState(TypedDict):
    answers: Annotated[list[str], operator.add]
    notes: Annotated[list[str], operator.add]


def build_two_question_graph() -> StateGraph[Any]:
    def ask(state: AskState) -> dict[str, Any]:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"answers": [first, second]}

    builder: StateGraph[Any] = StateGraph(AskState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder


def _normalized(value: Any) -> Any:
    if isinstance(value, list) and value and all(isinstance(v, Interrupt) for v in value):
        return [("interrupt", v.value) for v in value]
    return value


async def history_writes(saver: Either[BaseCheckpointSaver[Any]], history: list[Any]) -> list[Any]:
    """Per checkpoint, newest first: its values and its pending writes, task ids anonymized."""
    out = []
    for snapshot in history:
        saved = await saver.get_tuple(snapshot.config)
        assert saved is not None
        writes = sorted(
            ("null" if task == NULL_TASK_ID else "task", channel, repr(_normalized(value)))
            for task, channel, value in saved.pending_writes or []
        )
        out.append((snapshot.values, writes))
    return out


RESUMES: list[Command[Any]] = [
    Command(resume="A", update={"notes": ["n1"]}),
    Command(resume="B", update={"notes": ["n2"]}),
]


async def run(saver: Either[BaseCheckpointSaver[Any]]) -> tuple[Any, list[Any]]:
    graph = either(build_two_question_graph().compile(checkpointer=saver.target), saver.mode)
    cfg: RunnableConfig = {"configurable": {"thread_id": f"ask-{uuid.uuid4()}"}}
    await graph.invoke({"answers": [], "notes": []}, cfg)
    result = None
    for command in RESUMES:
        result = await graph.invoke(command, cfg)
    return result, await history_writes(saver, await graph.get_state_history(cfg))


async def test_resume_with_update_stores_what_in_memory_saver_stores(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    expected_result, expected_history = await run(either(InMemorySaver(), "sync"))
    assert expected_result == {"answers": ["A", "B"], "notes": ["n1", "n2"]}
    # The reference keeps the newest resume value of the null task: "B".
    assert ("null", RESUME, repr("B")) in expected_history[1][1]
    saver = saver_on(make_engine.for_mode(mode, backend))
    assert await run(saver) == (expected_result, expected_history)
