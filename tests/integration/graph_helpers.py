"""Small deterministic LangGraph graphs for the end-to-end tests in test_graphs.py.

No network and no real model: the "model" is a plain node that derives its reply
from the conversation it is given, so a reply proves which history it saw.
Builders return uncompiled ``StateGraph`` objects; tests compile them with the
saver under test. Call counters let tests check which nodes really re-ran.

This module is also imported by a subprocess (see ``chat_turn_script``), so it
depends on nothing but LangGraph and lg_sqla.
"""

from __future__ import annotations

import json
import operator
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Send, interrupt
from typing_extensions import TypedDict

HELPERS_DIR = Path(__file__).resolve().parent

# --- 1/2/7. chat memory ----------------------------------------------------------


def fake_reply(messages: list[AnyMessage]) -> AIMessage:
    """A deterministic "model": quotes the last human turn and counts what it saw."""
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    return AIMessage(
        content=f"reply #{len(humans)} to {humans[-1].content!r} (saw {len(messages)} messages)"
    )


def build_chat_graph() -> StateGraph[Any]:
    """START -> chatbot -> END over ``MessagesState`` (``add_messages`` reducer)."""

    def chatbot(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [fake_reply(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("chatbot", chatbot)
    builder.add_edge(START, "chatbot")
    builder.add_edge("chatbot", END)
    return builder


def expected_chat(*turns: str) -> list[tuple[str, str]]:
    """The (type, content) pairs a chat graph holds after ``turns``, in order."""
    out: list[tuple[str, str]] = []
    for i, text in enumerate(turns, start=1):
        out.append(("human", text))
        out.append(("ai", f"reply #{i} to {text!r} (saw {2 * i - 1} messages)"))
    return out


def summarize(messages: list[AnyMessage]) -> list[tuple[str, str]]:
    return [(m.type, str(m.content)) for m in messages]


def run_chat_turn(url: str, thread_id: str, text: str) -> None:
    """One chat turn with a fresh saver on ``url``; prints the state's messages as JSON."""
    from lg_sqla import SQLAlchemySaver

    with SQLAlchemySaver.from_conn_string(url) as saver:
        graph = build_chat_graph().compile(checkpointer=saver)
        result = graph.invoke(
            {"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread_id}}
        )
    out = [{"type": m.type, "content": m.content, "id": m.id} for m in result["messages"]]
    json.dump(out, sys.stdout)


def chat_turn_script(url: str, thread_id: str, text: str) -> str:
    """Python source that runs ``run_chat_turn`` in a separate interpreter."""
    return (
        "import sys\n"
        f"sys.path.insert(0, {str(HELPERS_DIR)!r})\n"
        "from graph_helpers import run_chat_turn\n"
        f"run_chat_turn({url!r}, {thread_id!r}, {text!r})\n"
    )


# --- 3. human in the loop ------------------------------------------------------------


class ApprovalState(TypedDict, total=False):
    request: str
    answer: str
    log: Annotated[list[str], operator.add]


def build_approval_graph(calls: Counter[str]) -> StateGraph[Any]:
    """prepare -> ask_human (interrupts with a question) -> finish."""

    def prepare(state: ApprovalState) -> ApprovalState:
        calls["prepare"] += 1
        return {"log": [f"prepared {state['request']}"]}

    def ask_human(state: ApprovalState) -> ApprovalState:
        calls["ask_human"] += 1
        answer = interrupt({"question": f"Approve {state['request']}?"})
        return {"answer": answer, "log": [f"human said {answer}"]}

    def finish(state: ApprovalState) -> ApprovalState:
        calls["finish"] += 1
        return {"log": [f"finished with {state['answer']}"]}

    builder = StateGraph(ApprovalState)
    builder.add_node("prepare", prepare)
    builder.add_node("ask_human", ask_human)
    builder.add_node("finish", finish)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "ask_human")
    builder.add_edge("ask_human", "finish")
    builder.add_edge("finish", END)
    return builder


# --- 4/7. a linear pipeline for time travel and durability ------------------------------


class TrailState(TypedDict):
    trail: Annotated[list[str], operator.add]


def build_pipeline(
    calls: Counter[str], nodes: tuple[str, ...] = ("a", "b", "c")
) -> StateGraph[Any]:
    """START -> a -> b -> c -> END; each node appends its name to ``trail``."""

    def make(name: str) -> Any:
        def node(state: TrailState) -> TrailState:
            calls[name] += 1
            return {"trail": [name]}

        return node

    builder = StateGraph(TrailState)
    previous = START
    for name in nodes:
        builder.add_node(name, make(name))
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder


# --- 5. subgraph ----------------------------------------------------------------------------


class ResearchState(TypedDict, total=False):
    topic: str
    approved: str
    # Private to the subgraph (the parent has no such keys):
    draft: str
    review_log: Annotated[list[str], operator.add]


class ArticleState(TypedDict, total=False):
    topic: str
    approved: str
    notes: Annotated[list[str], operator.add]
    article: str


def build_article_graph(calls: Counter[str]) -> StateGraph[Any]:
    """plan -> research (a compiled subgraph: draft -> review[interrupt]) -> publish.

    The subgraph is compiled without a checkpointer, so it inherits the parent's
    and checkpoints under its own, non-empty ``checkpoint_ns``.
    """

    def draft(state: ResearchState) -> ResearchState:
        calls["draft"] += 1
        return {"draft": f"draft on {state['topic']}", "review_log": ["drafted"]}

    def review(state: ResearchState) -> ResearchState:
        calls["review"] += 1
        verdict = interrupt({"question": f"Publish {state['draft']!r}?"})
        return {"approved": verdict, "review_log": [f"reviewed: {verdict}"]}

    sub = StateGraph(ResearchState)
    sub.add_node("draft", draft)
    sub.add_node("review", review)
    sub.add_edge(START, "draft")
    sub.add_edge("draft", "review")
    sub.add_edge("review", END)

    def plan(state: ArticleState) -> ArticleState:
        calls["plan"] += 1
        return {"notes": [f"planned {state['topic']}"]}

    def publish(state: ArticleState) -> ArticleState:
        calls["publish"] += 1
        return {"article": f"{state['topic']} ({state['approved']})", "notes": ["published"]}

    builder = StateGraph(ArticleState)
    builder.add_node("plan", plan)
    builder.add_node("research", sub.compile())
    builder.add_node("publish", publish)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "research")
    builder.add_edge("research", "publish")
    builder.add_edge("publish", END)
    return builder


# --- 6. parallel fan-out and Send ---------------------------------------------------------------


class FanOutState(TypedDict, total=False):
    topics: list[str]
    results: Annotated[list[str], operator.add]
    summary: str


class WorkerInput(TypedDict):
    topic: str


def build_fan_out_graph(calls: Counter[str], fail_once: set[str] | None = None) -> StateGraph[Any]:
    """START -> {left, right} in one superstep -> Send("worker", topic) per topic -> summary.

    ``fail_once``: names (``left``, ``right`` or a topic) whose task raises the
    first time it runs, to test resuming a superstep from its pending writes.
    """
    failing = fail_once if fail_once is not None else set()

    def check(name: str) -> None:
        calls[name] += 1
        if name in failing:
            failing.discard(name)
            raise RuntimeError(f"transient failure in {name}")

    def left(state: FanOutState) -> FanOutState:
        check("left")
        return {"results": ["left"]}

    def right(state: FanOutState) -> FanOutState:
        check("right")
        return {"results": ["right"]}

    def dispatch(state: FanOutState) -> list[Send]:
        return [Send("worker", {"topic": topic}) for topic in state["topics"]]

    def worker(state: WorkerInput) -> FanOutState:  # the Send payload, not FanOutState
        check(state["topic"])
        return {"results": [f"worker:{state['topic']}"]}

    def summarize_results(state: FanOutState) -> FanOutState:
        calls["summary"] += 1
        return {"summary": ",".join(sorted(state["results"]))}

    builder: StateGraph[Any] = StateGraph(FanOutState)
    builder.add_node("left", left)
    builder.add_node("right", right)
    builder.add_node("worker", worker, input_schema=WorkerInput)
    builder.add_node("summary", summarize_results)
    builder.add_edge(START, "left")
    builder.add_edge(START, "right")
    # Both branches must finish before the Sends go out (a join on [left, right]).
    builder.add_node("join", lambda state: {})
    builder.add_edge(["left", "right"], "join")
    builder.add_conditional_edges("join", dispatch, ["worker"])
    builder.add_edge("worker", "summary")
    builder.add_edge("summary", END)
    return builder


# --- operators' toolkit: pull tasks, Send tasks and a large value -----------------


class FanState(TypedDict):
    items: Annotated[list[Any], operator.add]
    note: str


def build_fan_graph() -> StateGraph[Any]:
    """START -> plan -> Send x2 -> work -> END: pull tasks, push tasks, several writes."""

    def plan(state: FanState) -> dict[str, Any]:
        return {"items": ["planned"], "note": "x" * 5000}

    def fan(state: FanState) -> list[Send]:
        return [Send("work", {"items": [n], "note": ""}) for n in range(2)]

    def work(state: FanState) -> dict[str, Any]:
        return {"items": [f"done-{state['items'][-1]}"]}

    builder = StateGraph(FanState)
    builder.add_node("plan", plan)
    builder.add_node("work", work)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", fan, ["work"])
    builder.add_edge("work", END)
    return builder


# --- operators reading a conversation: tool calls, an interrupt, a failure ------------

WEATHER = "18°C and sunny"


def build_tool_chat_graph() -> StateGraph[Any]:
    """START -> agent -> tools -> agent -> END over ``MessagesState``.

    The "model" asks for the ``get_weather`` tool on a human turn and answers from
    the tool's result after it; ``tools`` waits for a human's approval
    (``interrupt``, resumed with ``Command(resume=True)``); a human turn containing
    "fail" makes the model raise (an ``__error__`` write).
    """
    from langchain_core.messages import ToolMessage

    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        last = state["messages"][-1]
        if isinstance(last, HumanMessage):
            if "fail" in str(last.content):
                raise RuntimeError("the model is down")
            call = {"name": "get_weather", "args": {"city": str(last.content)}, "id": "call_1"}
            return {"messages": [AIMessage(content="", tool_calls=[call])]}
        return {"messages": [AIMessage(content=f"It is {last.content} in Paris.")]}

    def tools(state: MessagesState) -> dict[str, list[AnyMessage]]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        call = last.tool_calls[0]
        interrupt({"question": "run get_weather?", "args": call["args"]})
        return {
            "messages": [ToolMessage(content=WEATHER, tool_call_id=call["id"], name=call["name"])]
        }

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


def _append(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return state + [item for batch in writes for item in batch]


class DeltaState(TypedDict):
    """A state whose log lives in a DeltaChannel: only every 4th step stores a
    snapshot; the others are rebuilt from their ancestors' writes."""

    log: Annotated[list[str], DeltaChannel(_append, snapshot_frequency=4)]
    total: Annotated[int, operator.add]


def delta_graph(saver: Any) -> Any:
    """One step per invoke, appending "entry-N" to the DeltaChannel log."""

    def step(state: DeltaState) -> dict[str, Any]:
        return {"log": [f"entry-{state['total']}"], "total": 1}

    builder = StateGraph(DeltaState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=saver)
