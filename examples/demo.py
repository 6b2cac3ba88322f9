"""lg_sqla demo: a LangGraph agent whose conversation survives a process restart.

    python examples/demo.py                 # or: make demo
    python examples/demo.py --db /tmp/x.sqlite --no-fresh

What happens:

1. Turn 1 runs in a *child process*: it opens a saver on the SQLite file,
   runs `setup()` (creates the tables), asks the agent "What is 6 * 7?" and exits.
2. Turn 2 runs in *this* process with a brand-new saver on the same file and
   asks "Now add 100 to that." The agent can only know what "that" is from the
   checkpoints turn 1 left in the database.
3. The thread's full message history and its checkpoint history
   (`graph.get_state_history`) are printed, with the row counts of the tables.
4. The `lg-sqla` commands that show the same thread from the database file
   (threads, history, show, storage) are printed, with the file's URL.

The "model" is a tiny deterministic chat model (no network, no API key): it
calls a calculator tool for arithmetic and reads earlier tool results from the
conversation it is given. Everything else is stock LangGraph.
"""

from __future__ import annotations

import argparse
import ast
import operator
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from lg_sqla import SQLAlchemySaver
from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DB = REPO / "demo_data" / "checkpoints.sqlite"
THREAD_ID = "demo-thread"
TURNS = {1: "What is 6 * 7?", 2: "Now add 100 to that."}

# --- the tool ------------------------------------------------------------------------

_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _evaluate(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        result: float | int = _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
        return result
    raise ValueError("only numbers and + - * / are supported")


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as "6 * 7" (numbers and + - * / only)."""
    return str(_evaluate(ast.parse(expression, mode="eval")))


# --- the deterministic "model" ----------------------------------------------------------

_EXPRESSION = re.compile(r"\d+(?:\s*[-+*/]\s*\d+)+")
_ADD_TO_THAT = re.compile(r"add (\d+) to that", re.IGNORECASE)


class ScriptedCalculatorModel(BaseChatModel):
    """A chat model that answers from the conversation alone, always the same way.

    * after a tool result: states it;
    * "What is 6 * 7?": calls the calculator on the expression;
    * "add N to that": calls the calculator on (the last tool result) + N, which
      only works if the earlier turns of the thread were restored.
    """

    @property
    def _llm_type(self) -> str:
        return "scripted-calculator"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedCalculatorModel:
        return self  # the script knows its single tool

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    @staticmethod
    def _reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"The result is {last.content}.")
        question = str(last.content)
        turn = sum(isinstance(m, HumanMessage) for m in messages)
        call_id = f"call-{turn}"
        if match := _EXPRESSION.search(question):
            expression = match.group(0)
        elif match := _ADD_TO_THAT.search(question):
            earlier = [m for m in messages if isinstance(m, ToolMessage)]
            if not earlier:
                return AIMessage(content="I don't know what 'that' refers to.")
            expression = f"{earlier[-1].content} + {match.group(1)}"
        else:
            return AIMessage(content="Ask me some arithmetic.")
        return AIMessage(
            content="",
            tool_calls=[{"name": "calculator", "args": {"expression": expression}, "id": call_id}],
        )


def build_graph(saver: SQLAlchemySaver) -> Any:
    """agent -> (tools -> agent)* over MessagesState, checkpointed by ``saver``."""
    model = ScriptedCalculatorModel().bind_tools([calculator])

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([calculator]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


# --- running and printing -----------------------------------------------------------------


def _url(db: Path) -> str:
    return f"sqlite:///{db}"


def _show(message: BaseMessage) -> str:
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = ", ".join(f"{c['name']}({c['args']['expression']!r})" for c in message.tool_calls)
        return f"{message.type:>5}: -> {calls}"
    return f"{message.type:>5}: {message.content}"


def run_turn(db: Path, turn: int) -> None:
    """One conversation turn with a fresh saver (and engine) on the database file."""
    question = TURNS[turn]
    with SQLAlchemySaver.from_conn_string(_url(db)) as saver:
        saver.setup()  # creates or upgrades the tables; a no-op when up to date
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": THREAD_ID}}
        before = len(graph.get_state(config).values.get("messages", []))
        result = graph.invoke({"messages": [HumanMessage(question)]}, config)
    print(f"--- turn {turn}, process {os.getpid()}: {before} messages restored from the database")
    for message in result["messages"][before:]:
        print("   ", _show(message))
    sys.stdout.flush()


def print_history(db: Path) -> None:
    with SQLAlchemySaver.from_conn_string(_url(db)) as saver:
        graph = build_graph(saver)
        config = {"configurable": {"thread_id": THREAD_ID}}
        state = graph.get_state(config)
        print(f"\n=== thread {THREAD_ID!r}: full message history")
        for i, message in enumerate(state.values["messages"], start=1):
            print(f"  {i:2}. {_show(message)}")

        print("\n=== checkpoint history, oldest first (graph.get_state_history)")
        # uuid6 checkpoint ids share their leading (time) digits: show their tails.
        print(f"  {'step':>4}  {'source':<6}  {'id':<9}  {'parent':<9}  {'msgs':>4}  next")
        for snapshot in reversed(list(graph.get_state_history(config))):
            meta = snapshot.metadata or {}
            parent = (snapshot.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            checkpoint_id = snapshot.config["configurable"]["checkpoint_id"]
            print(
                f"  {meta.get('step', '?'):>4}  {meta.get('source', '?'):<6}  "
                f"{'…' + checkpoint_id[-8:]:<9}  {'…' + parent[-8:] if parent else '-':<9}  "
                f"{len(snapshot.values.get('messages', [])):>4}  "
                f"{', '.join(snapshot.next) or '(done)'}"
            )

        with saver.engine.connect() as conn:
            counts = {
                table.name: conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()
                for table in (checkpoints, checkpoint_blobs, checkpoint_writes)
            }
    print(
        "\n=== rows stored: "
        + ", ".join(f"{name} {count}" for name, count in counts.items())
        + "\n    (a channel value is stored once per version and shared by later checkpoints)"
    )


def print_cli_hint(db: Path) -> None:
    """What to run next: lg_sqla's command line on the file the demo wrote."""
    url = shlex.quote(_url(db))
    print(
        "\n=== look at what was stored with lg_sqla's command line (or its `lg-sqla` script):"
        f"\n    python -m lg_sqla --url {url} threads"
        f"\n    python -m lg_sqla --url {url} history {THREAD_ID}"
        f"\n    python -m lg_sqla --url {url} show {THREAD_ID}"
        f"\n    python -m lg_sqla --url {url} storage"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--db", type=Path, default=DEFAULT_DB, help=f"SQLite file (default: {DEFAULT_DB})"
    )
    parser.add_argument(
        "--fresh",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="start from an empty database file (default); --no-fresh keeps the file "
        "and only clears the demo thread",
    )
    parser.add_argument("--turn", type=int, choices=sorted(TURNS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    db: Path = args.db.resolve()

    if args.turn is not None:  # the child process
        run_turn(db, args.turn)
        return 0

    db.parent.mkdir(parents=True, exist_ok=True)
    if args.fresh:
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            path.unlink(missing_ok=True)
    elif db.exists():
        with SQLAlchemySaver.from_conn_string(_url(db)) as saver:
            saver.setup()
            saver.delete_thread(THREAD_ID)

    print(f"database: {_url(db)}   (parent process {os.getpid()})")
    child = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--db", str(db), "--turn", "1"],
        check=False,
    )
    if child.returncode != 0:
        print(f"turn 1 failed in the child process (exit {child.returncode})", file=sys.stderr)
        return child.returncode
    print("--- child process exited; a new saver in this process opens the same file")
    run_turn(db, 2)
    print_history(db)
    print_cli_hint(db)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
