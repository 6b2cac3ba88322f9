"""Two tests on one thread id and one store key: the second sees nothing of the first."""

from __future__ import annotations

from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from sqlalchemy.orm import Session

from lg_sqla import SQLAlchemySaver
from lg_sqla.store import SQLAlchemyStore

CONFIG = {"configurable": {"thread_id": "same-thread-in-every-test"}}


class State(TypedDict):
    turns: int


def build_graph(checkpointer: SQLAlchemySaver, store: SQLAlchemyStore):  # type: ignore[no-untyped-def]
    def turn(state: State, *, store: BaseStore) -> State:
        store.put(("visits",), "user-1", {"turns": state["turns"] + 1})
        return {"turns": state["turns"] + 1}

    builder = StateGraph(State)
    builder.add_node("turn", turn)
    builder.add_edge(START, "turn")
    builder.add_edge("turn", END)
    return builder.compile(checkpointer=checkpointer, store=store)


def run_and_check_a_fresh_start(
    session: Session, bound_saver: SQLAlchemySaver, bound_store: SQLAlchemyStore
) -> None:
    assert bound_saver.get_tuple(CONFIG) is None  # nothing left by another test
    assert bound_store.get(("visits",), "user-1") is None
    graph = build_graph(bound_saver, bound_store)
    assert graph.invoke({"turns": 0}, CONFIG) == {"turns": 1}
    session.commit()  # the app's own commit: a SAVEPOINT released, nothing more
    assert graph.invoke({"turns": 5}, CONFIG) == {"turns": 6}
    assert bound_store.get(("visits",), "user-1").value == {"turns": 6}  # type: ignore[union-attr]
    assert len(list(bound_saver.list(CONFIG))) == 6


def test_first(
    session: Session, bound_saver: SQLAlchemySaver, bound_store: SQLAlchemyStore
) -> None:
    run_and_check_a_fresh_start(session, bound_saver, bound_store)


def test_second(
    session: Session, bound_saver: SQLAlchemySaver, bound_store: SQLAlchemyStore
) -> None:
    run_and_check_a_fresh_start(session, bound_saver, bound_store)
