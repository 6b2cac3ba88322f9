"""Two versions of one application's graph, and the state migrations between them
(tests of lg_sqla.checkpoint.state_migrations; importable by ``lg-sqla state
--migrations state_app:MIGRATIONS`` from this folder).

Version 1 keeps the conversation in ``messages`` (a DeltaChannel) and the score as
an int; version 2 renamed ``messages`` to ``chat`` and keeps the score as text
("12 pts"). The graph: ``greet``, then ``review`` (a subgraph that drafts and asks
for approval with ``interrupt``), then ``finish``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from lg_sqla.checkpoint.state_migrations import (
    DropChannel,
    RenameChannel,
    StateMigrations,
    StateRevision,
    TransformChannel,
)


def _append(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return state + [item for batch in writes for item in batch]


class StateV1(TypedDict):
    messages: Annotated[list[str], DeltaChannel(_append, snapshot_frequency=2)]
    score: int


class StateV2(TypedDict):
    chat: Annotated[list[str], DeltaChannel(_append, snapshot_frequency=2)]
    score: str


def score_text(points: int) -> str:
    # The crash test's subprocess dies here, mid-upgrade, at a chosen thread's values.
    crash_from = os.environ.get("STATE_APP_CRASH_FROM")
    if crash_from is not None and points >= int(crash_from):
        os._exit(17)
    return f"{points} pts"


def score_points(text: str) -> int:
    return int(text.split()[0])


MIGRATIONS = StateMigrations(
    [
        StateRevision("0001_chat", None, [RenameChannel("messages", "chat")]),
        StateRevision(
            "0002_score_text",
            "0001_chat",
            [TransformChannel("score", score_text, down=score_points)],
        ),
    ]
)

# A third revision that drops the score: it has no way back.
DROPPING = StateMigrations(
    [
        *MIGRATIONS.revisions,
        StateRevision("0003_no_score", "0002_score_text", [DropChannel("score")]),
    ]
)

# Only the first revision: the code of an application between the two versions.
FIRST_ONLY = StateMigrations(MIGRATIONS.revisions[:1])


def fragile_migrations(refuse: int) -> StateMigrations:
    """MIGRATIONS whose score transform raises on the value ``refuse``."""

    def fragile(points: int) -> str:
        if points == refuse:
            raise ValueError(f"cannot convert {points}")
        return score_text(points)

    first, second = MIGRATIONS.revisions
    return StateMigrations(
        [first, StateRevision(second.id, second.parent, [TransformChannel("score", fragile)])]
    )


@dataclass(frozen=True)
class Version:
    """What differs between the two versions' code: the state, its key, the score."""

    state: type
    key: str
    load: Callable[[Any], int]
    dump: Callable[[int], Any]


V1 = Version(StateV1, "messages", int, int)
V2 = Version(StateV2, "chat", score_points, lambda n: f"{n} pts")


def build(version: Version, checkpointer: Any) -> Any:
    key, load, dump = version.key, version.load, version.dump

    def greet(state: Any) -> dict[str, Any]:
        return {key: [f"hello {len(state[key])}"], "score": dump(load(state["score"]) + 1)}

    def draft(state: Any) -> dict[str, Any]:
        return {key: ["draft"], "score": dump(load(state["score"]) + 1)}

    def ask(state: Any) -> dict[str, Any]:
        answer = interrupt("approve the draft?")
        return {key: [f"answer:{answer}"], "score": dump(load(state["score"]) + 10)}

    def finish(state: Any) -> dict[str, Any]:
        return {key: ["done"], "score": dump(load(state["score"]) + 100)}

    review: StateGraph[Any] = StateGraph(version.state)
    review.add_node("draft", draft)
    review.add_node("ask", ask)
    review.add_edge(START, "draft")
    review.add_edge("draft", "ask")
    review.add_edge("ask", END)

    graph: StateGraph[Any] = StateGraph(version.state)
    graph.add_node("greet", greet)
    graph.add_node("review", review.compile())
    graph.add_node("finish", finish)
    graph.add_edge(START, "greet")
    graph.add_edge("greet", "review")
    graph.add_edge("review", "finish")
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=checkpointer)


def first_input(version: Version, points: int = 0) -> dict[str, Any]:
    return {version.key: [], "score": version.dump(points)}


def later_input(version: Version) -> dict[str, Any]:
    return {version.key: ["again"]}
