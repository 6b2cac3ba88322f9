"""Two versions of a support-ticket graph and the state migration between them
(docs/state-migrations.md walks through it).

Version 1 keeps the conversation in ``messages`` and the ticket's priority as a
number (1-3). Version 2 renamed ``messages`` to ``conversation`` and keeps the
priority as a label ("low", "normal", "high"). Both ask a person to approve the
reply (``interrupt``), so threads sit paused across the deployment.

    python examples/state_migrations.py v1 sqlite:///tickets.sqlite T-1 "printer on fire"
    python examples/state_migrations.py v2 sqlite:///tickets.sqlite T-1 --resume yes
    cd examples && lg-sqla --url sqlite:///../tickets.sqlite state upgrade \\
        --migrations state_migrations:MIGRATIONS
"""

from __future__ import annotations

import argparse
import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from lg_sqla import SQLAlchemySaver
from lg_sqla.checkpoint.state_migrations import (
    RenameChannel,
    StateMigrations,
    StateRevision,
    TransformChannel,
)

LABELS = {1: "low", 2: "normal", 3: "high"}


def priority_label(number: int) -> str:
    return LABELS[number]


def priority_number(label: str) -> int:
    return {text: number for number, text in LABELS.items()}[label]


# What changed between version 1 and version 2, in order, like Alembic revisions.
MIGRATIONS = StateMigrations(
    [
        StateRevision(
            "0001_conversation",
            parent=None,
            operations=[RenameChannel("messages", "conversation")],
            description="messages is called conversation",
        ),
        StateRevision(
            "0002_priority_label",
            parent="0001_conversation",
            operations=[TransformChannel("priority", priority_label, down=priority_number)],
            description="priority is a label, not a number",
        ),
    ]
)


# --- version 1 ---------------------------------------------------------------------------


class TicketV1(TypedDict):
    messages: Annotated[list[str], operator.add]
    priority: int


def triage_v1(state: TicketV1) -> dict[str, Any]:
    urgent = "fire" in state["messages"][-1]
    return {"priority": 3 if urgent else 1, "messages": ["bot: triaged"]}


def approve_v1(state: TicketV1) -> dict[str, Any]:
    answer = interrupt(f"send a reply to a priority-{state['priority']} ticket?")
    return {"messages": [f"agent: {answer}"]}


def reply_v1(state: TicketV1) -> dict[str, Any]:
    return {"messages": [f"bot: on it (priority {state['priority']})"]}


def version_1(checkpointer: Any) -> Any:
    graph = StateGraph(TicketV1)
    graph.add_node("triage", triage_v1)
    graph.add_node("approve", approve_v1)
    graph.add_node("reply", reply_v1)
    graph.add_edge(START, "triage")
    graph.add_edge("triage", "approve")
    graph.add_edge("approve", "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=checkpointer)


# --- version 2 ---------------------------------------------------------------------------


class TicketV2(TypedDict):
    conversation: Annotated[list[str], operator.add]
    priority: str


def triage_v2(state: TicketV2) -> dict[str, Any]:
    urgent = "fire" in state["conversation"][-1]
    return {"priority": "high" if urgent else "low", "conversation": ["bot: triaged"]}


def approve_v2(state: TicketV2) -> dict[str, Any]:
    answer = interrupt(f"send a reply to a {state['priority']}-priority ticket?")
    return {"conversation": [f"agent: {answer}"]}


def reply_v2(state: TicketV2) -> dict[str, Any]:
    return {"conversation": [f"bot: on it (priority {state['priority']})"]}


def version_2(checkpointer: Any) -> Any:
    graph = StateGraph(TicketV2)
    graph.add_node("triage", triage_v2)
    graph.add_node("approve", approve_v2)
    graph.add_node("reply", reply_v2)
    graph.add_edge(START, "triage")
    graph.add_edge("triage", "approve")
    graph.add_edge("approve", "reply")
    graph.add_edge("reply", END)
    return graph.compile(checkpointer=checkpointer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", choices=["v1", "v2"])
    parser.add_argument("url")
    parser.add_argument("thread_id")
    parser.add_argument("message", nargs="?")
    parser.add_argument("--resume", help="approve a paused thread with this answer")
    args = parser.parse_args()
    v2 = args.version == "v2"
    # Version 2's saver is given the migrations: it reads version 1's threads as if
    # version 2 had written them, and writes version 2's revision.
    with SQLAlchemySaver.from_conn_string(
        args.url, state_migrations=MIGRATIONS if v2 else None
    ) as saver:
        saver.setup()
        graph = (version_2 if v2 else version_1)(saver)
        config = {"configurable": {"thread_id": args.thread_id}}
        if args.resume is not None:
            result = graph.invoke(Command(resume=args.resume), config)
        else:
            key = "conversation" if v2 else "messages"
            result = graph.invoke({key: [f"user: {args.message}"]}, config)
        print(result)


if __name__ == "__main__":
    main()
