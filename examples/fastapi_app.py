"""lg_sqla in a FastAPI application: one saver and one store for the app's lifetime.

    pip install "lg_sqla[postgres,async]" langgraph fastapi uvicorn
    LG_SQLA_DATABASE_URL=postgresql+psycopg://app:secret@db/app uvicorn examples.fastapi_app:app

The lifespan opens the async saver and store on the database URL (their engines
and connection pools), runs ``setup()`` (creates or upgrades lg_sqla's tables;
safe when several workers start at once), compiles the graph once, and closes
everything when the server stops. Requests share the compiled graph: the saver
and the store are safe for concurrent calls. docs/getting-started.md explains it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from pydantic import BaseModel

from lg_sqla import AsyncSQLAlchemySaver
from lg_sqla.store import AsyncSQLAlchemyStore

URL = os.environ.get("LG_SQLA_DATABASE_URL", "sqlite+aiosqlite:///app.sqlite")


async def remember(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
    """A stand-in for a model call: counts the user's turns in long-term memory."""
    user = "anonymous"
    seen = await store.aget(("users", user), "turns")
    turns = (seen.value["n"] if seen else 0) + 1
    await store.aput(("users", user), "turns", {"n": turns})
    said = state["messages"][-1].content
    return {"messages": [("ai", f"turn {turns}: you said {said!r}")]}


def build_graph() -> StateGraph[MessagesState]:
    graph = StateGraph(MessagesState)
    graph.add_node("remember", remember)
    graph.add_edge(START, "remember")
    return graph


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        saver = await stack.enter_async_context(AsyncSQLAlchemySaver.from_conn_string(URL))
        store = await stack.enter_async_context(AsyncSQLAlchemyStore.from_conn_string(URL))
        await saver.setup()  # the store shares the schema: one setup() migrates both
        app.state.graph = build_graph().compile(checkpointer=saver, store=store)
        yield
    # Leaving the stack disposed the engines: no connection outlives the app.


app = FastAPI(lifespan=lifespan)


class Turn(BaseModel):
    message: str


@app.post("/threads/{thread_id}/turns")
async def turn(thread_id: str, body: Turn) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id}}
    state = await app.state.graph.ainvoke({"messages": [("user", body.message)]}, config)
    return {"reply": state["messages"][-1].content, "messages": len(state["messages"])}


@app.get("/threads/{thread_id}")
async def history(thread_id: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id}}
    snapshot = await app.state.graph.aget_state(config)
    return {"messages": [m.content for m in snapshot.values.get("messages", [])]}
