"""The workload: a chat agent as a real LangGraph ``StateGraph``.

Every turn: a user message -> ``planner`` (rewrites the ``plan`` channel; every
``NOTES_EVERY`` turns replaces the ~50 KB ``notes`` dict) -> ``agent`` (a deterministic
fake model that asks for a tool) -> ``tools`` (LangGraph's ``ToolNode``) -> ``agent``
(answers with the tool's result) -> END. That is 6 checkpoints a turn (the input's,
then one per step) and their writes, with a ``messages`` channel that grows by 4
messages of ~0.5 KB a turn.

Two more graphs for the graph level's variants (``WORKLOADS``): the same chat graph
with ``messages`` on a LangGraph ``DeltaChannel``, and LangGraph's prebuilt ReAct agent
with a fake tool-calling model (user message -> agent -> tools -> agent: 5 checkpoints a
turn).

Everything is deterministic (fixed seed, fixed message and tool-call ids), so every
contender stores the same data.
"""

from __future__ import annotations

import copy
import random
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

SEED = 20261123
NOTES_EVERY = 3
# The input, then one before each of planner, agent, tools, agent, and the final one.
CHECKPOINTS_PER_TURN = 6
NOTES_BYTES = 50_000
WORDS = [
    *("checkpoint", "saver", "thread", "channel", "version", "writes", "graph", "agent"),
    *("tool", "state", "plan", "message", "durable", "replay", "history", "node", "edge"),
    *("pending", "task", "branch", "resume", "interrupt"),
]


@dataclass(frozen=True)
class Shape:
    """How much work one repeat does."""

    threads: int = 4
    turns: int = 8
    long_turns: int = 16  # the thread get_state / get_state_history are measured on
    reads: int = 20  # samples of each read measurement
    tiny_calls: int = 200  # per-call overhead samples
    workers: int = 8  # the "many" side of the 1 vs N scaling measurement
    store_calls: int = 300  # store level: calls of each kind (benchmarks/store_level.py)
    # store level: items of the large semantic search and namespaces of list_namespaces
    # (the small semantic search has a tenth)
    store_items: int = 10_000
    # long level: one thread run to the largest length, measured at each (benchmarks/long_level.py)
    thread_lengths: tuple[int, ...] = (10, 100, 1000)


QUICK = Shape(
    threads=2,
    turns=2,
    long_turns=3,
    reads=3,
    tiny_calls=10,
    workers=2,
    store_calls=10,
    store_items=200,
    thread_lengths=(3, 10),
)


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def _make_notes(version: int) -> dict[str, Any]:
    """A ~50 KB dict of documents, different for every version."""
    rng = random.Random(SEED + version)
    notes: dict[str, Any] = {"version": version, "docs": {}}
    size = 0
    i = 0
    while size < NOTES_BYTES:
        body = _text(rng, 60)
        notes["docs"][f"doc-{i}"] = {"title": _text(rng, 4), "body": body, "score": i / 7}
        size += len(body) + 40
        i += 1
    return notes


_NOTES: dict[int, dict[str, Any]] = {}


def notes(version: int) -> dict[str, Any]:
    # Built once per process, outside the timed turns, then shared (never mutated).
    if version not in _NOTES:
        _NOTES[version] = _make_notes(version)
    return _NOTES[version]


class AgentState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    plan: list[str]
    notes: dict[str, Any]
    turn: int


@tool
def lookup(query: str, turn: int) -> str:
    """Look a query up in the knowledge base."""
    rng = random.Random(f"{query}/{turn}")
    return f"results for {query!r} (turn {turn}): " + _text(rng, 60)


def _planner(state: AgentState) -> dict[str, Any]:
    turn = state.get("turn", 0) + 1
    update: dict[str, Any] = {
        "turn": turn,
        "plan": [f"turn {turn}: step {i}: {WORDS[(turn + i) % len(WORDS)]}" for i in range(6)],
    }
    if turn % NOTES_EVERY == 1:
        update["notes"] = notes(turn // NOTES_EVERY)
    return update


def _agent(state: AgentState) -> dict[str, Any]:
    """A fake chat model: asks for a tool after a user message, answers after a tool."""
    last = state["messages"][-1]
    turn = state["turn"]
    rng = random.Random(f"agent/{turn}/{len(state['messages'])}")
    if isinstance(last, ToolMessage):
        answer = f"Here is what I found: {last.content[:120]} ... " + _text(rng, 50)
        return {"messages": [AIMessage(content=answer, id=f"ai-{turn}-answer")]}
    call = {"name": "lookup", "args": {"query": _text(rng, 3), "turn": turn}, "id": f"c{turn}"}
    return {
        "messages": [
            AIMessage(
                content="Let me look that up. " + _text(rng, 40),
                id=f"ai-{turn}-call",
                tool_calls=[call],
            )
        ]
    }


def build_graph(state: type[Any] = AgentState) -> StateGraph:
    builder = StateGraph(state)
    if state is AgentState:
        builder.add_node("planner", _planner)
        builder.add_node("agent", _agent)
        builder.add_node("tools", ToolNode([lookup]))
    else:  # the nodes' annotations (and ToolNode's schema) declare add_messages
        builder.add_node("planner", _planner, input_schema=state)
        builder.add_node("agent", _agent, input_schema=state)
        builder.add_node("tools", ToolNode([lookup]), input_schema=state)
    builder.add_edge(START, "planner")
    builder.add_edge("planner", "agent")
    builder.add_conditional_edges("agent", tools_condition)  # "tools" or END
    builder.add_edge("tools", "agent")
    return builder


# --- the same chat graph with ``messages`` on a DeltaChannel ---------------------------


def _add_message_batches(messages: list[AnyMessage], batches: Sequence[Any]) -> list[AnyMessage]:
    """``add_messages`` over a batch of writes: a DeltaChannel reducer folds many at once."""
    for batch in batches:
        messages = add_messages(messages, batch)
    return messages


class DeltaAgentState(TypedDict):
    # Stored as the writes of each step plus a snapshot every 100 updates
    # (DeltaChannel's default), not as the whole list at every version.
    messages: Annotated[list[AnyMessage], DeltaChannel(_add_message_batches)]
    plan: list[str]
    notes: dict[str, Any]
    turn: int


def build_delta_graph() -> StateGraph:
    return build_graph(DeltaAgentState)


# --- LangGraph's prebuilt ReAct agent with a fake tool-calling model -------------------


class FakeToolCallingModel(BaseChatModel):
    """Deterministic: asks for ``lookup`` after a user message, answers after a tool."""

    @property
    def _llm_type(self) -> str:
        return "fake-tool-calling"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> FakeToolCallingModel:
        return self  # always calls `lookup`, the only tool it is given

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        last = messages[-1]
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        rng = random.Random(f"react/{turn}/{len(messages)}")
        if isinstance(last, ToolMessage):
            text = f"Here is what I found: {str(last.content)[:120]} ... " + _text(rng, 50)
            message = AIMessage(content=text, id=f"ai-{turn}-answer")
        else:
            call = {"name": "lookup", "args": {"query": _text(rng, 3), "turn": turn}}
            message = AIMessage(
                content="Let me look that up. " + _text(rng, 40),
                id=f"ai-{turn}-call",
                tool_calls=[{**call, "id": f"c{turn}"}],
            )
        return ChatResult(generations=[ChatGeneration(message=message)])


def _react_agent(checkpointer: Any) -> Any:
    """LangGraph's ``create_react_agent`` (langchain's newer ``create_agent`` is not a
    dependency here) on the fake model and the chat graph's ``lookup`` tool."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in favour of langchain.agents
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(FakeToolCallingModel(), [lookup], checkpointer=checkpointer)


@dataclass(frozen=True)
class GraphWorkload:
    """A graph of the graph levels: ``compile(saver)`` and its checkpoints per turn."""

    name: str
    compile: Callable[[Any], Any]
    checkpoints_per_turn: int


# The input, then one before each of agent, tools, agent, and the final one.
REACT_CHECKPOINTS_PER_TURN = 5
WORKLOADS = {
    "graph": GraphWorkload(
        "chat", lambda saver: build_graph().compile(checkpointer=saver), CHECKPOINTS_PER_TURN
    ),
    "delta": GraphWorkload(
        "chat, messages on a DeltaChannel",
        lambda saver: build_delta_graph().compile(checkpointer=saver),
        CHECKPOINTS_PER_TURN,
    ),
    "react": GraphWorkload("ReAct agent", _react_agent, REACT_CHECKPOINTS_PER_TURN),
}


def user_turn(thread: str, turn: int) -> dict[str, Any]:
    rng = random.Random(f"user/{thread}/{turn}")
    text = f"Question {turn}: " + _text(rng, 80)
    return {"messages": [HumanMessage(content=text, id=f"{thread}-user-{turn}")]}


def config(thread: str) -> dict[str, Any]:
    # checkpoint_ns: the official savers' put requires it (LangGraph always sets it).
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


# --- the same workload, as saver API calls -------------------------------------------


class _Recorder(InMemorySaver):
    """An in-memory saver that keeps a copy of every write call LangGraph makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        args = (_plain(config), checkpoint, metadata, new_versions)
        self.calls.append(("put", copy.deepcopy(args)))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        args = (_plain(config), writes, task_id, task_path)
        self.calls.append(("put_writes", copy.deepcopy(args)))
        super().put_writes(config, writes, task_id, task_path)


def _plain(config: Any) -> dict[str, Any]:
    """The part of a config a saver reads (LangGraph adds runtime objects to the rest)."""
    keys = ("thread_id", "checkpoint_ns", "checkpoint_id")
    return {
        "configurable": {k: config["configurable"][k] for k in keys if k in config["configurable"]}
    }


@dataclass(frozen=True)
class Recording:
    """The saver calls of ``threads`` x ``turns`` graph turns, per thread, in order."""

    threads: dict[str, list[tuple[str, tuple[Any, ...]]]]


def record(shape: Shape) -> Recording:
    """Run the graph once on an in-memory saver and keep its put / put_writes calls."""
    recorder = _Recorder()
    graph = build_graph().compile(checkpointer=recorder)
    names = [f"thread-{t}" for t in range(shape.threads)]
    for turn in range(shape.turns):
        for name in names:
            # durability="sync": calls recorded in the order their data depends on.
            graph.invoke(user_turn(name, turn), config(name), durability="sync")
    per_thread: dict[str, list[tuple[str, tuple[Any, ...]]]] = {n: [] for n in names}
    for kind, args in recorder.calls:
        per_thread[args[0]["configurable"]["thread_id"]].append((kind, args))
    return Recording(per_thread)


def retarget(args: tuple[Any, ...], thread: str) -> tuple[Any, ...]:
    """A private copy of recorded call arguments, moved to another thread id."""
    config, *rest = copy.deepcopy(args)
    config["configurable"]["thread_id"] = thread
    return (config, *rest)
