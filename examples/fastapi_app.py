"""lg_sqla in a FastAPI application: one saver and one store for the app's lifetime.

    pip install "lg_sqla[postgres,async]" langgraph fastapi uvicorn
    LG_SQLA_DATABASE_URL=postgresql+psycopg://app:secret@db/app uvicorn examples.fastapi_app:app

The lifespan opens the async saver and store on the database URL (their engines
and connection pools), runs ``setup()`` (creates or upgrades lg_sqla's tables;
safe when several workers start at once), compiles the graph once, and closes
everything when the server stops. Requests share the compiled graph: the saver
and the store are safe for concurrent calls. docs/getting-started.md explains it.

Long-term memory written by concurrent requests: each turn writes an item of its own
(key: the turn's id) instead of reading a counter and writing it back. Two requests
that read the same counter would both write it + 1, and one turn would be lost (a
store ``put`` replaces the item; it does not merge or increment). Items of their own
never collide, and the count is the number of items, whatever ran at once.

One thread's turns, though, must not run at once: each reads the thread's latest
checkpoint and writes the next, so two concurrent turns of one thread fork it (the
later checkpoint misses the other's message). Serialize them per thread id: clients
wait for the reply, or the app keeps a lock per thread (one process) or answers 409.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from pydantic import BaseModel

from lg_sqla import AsyncSQLAlchemySaver
from lg_sqla.store import AsyncSQLAlchemyStore

URL = os.environ.get("LG_SQLA_DATABASE_URL", "sqlite+aiosqlite:///app.sqlite")
USER = "anonymous"  # a real app takes it from the request's authentication


def turns_namespace(user: str) -> tuple[str, ...]:
    return ("users", user, "turns")


async def remember(
    state: MessagesState, config: RunnableConfig, *, store: BaseStore
) -> dict[str, Any]:
    """A stand-in for a model call: records the user's turn in long-term memory."""
    turn_id = config["configurable"]["turn_id"]  # a retried node rewrites the same item
    said = state["messages"][-1].content
    await store.aput(turns_namespace(USER), turn_id, {"said": said})
    return {"messages": [("ai", f"noted: you said {said!r}")]}


async def count_turns(store: BaseStore, user: str) -> int:
    """The user's turns: their items, counted page by page. Exact when no turn of the
    user is being written meanwhile (a new item may shift the pages of a count under way)."""
    counted, page = 0, 500
    while True:
        items = await store.asearch(turns_namespace(user), limit=page, offset=counted)
        counted += len(items)
        if len(items) < page:
            return counted


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
        app.state.store = store
        app.state.graph = build_graph().compile(checkpointer=saver, store=store)
        yield
    # Leaving the stack disposed the engines: no connection outlives the app.


app = FastAPI(lifespan=lifespan)


class Turn(BaseModel):
    message: str


@app.post("/threads/{thread_id}/turns")
async def turn(thread_id: str, body: Turn) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id, "turn_id": uuid.uuid4().hex}}
    state = await app.state.graph.ainvoke({"messages": [("user", body.message)]}, config)
    return {"reply": state["messages"][-1].content, "messages": len(state["messages"])}


@app.get("/threads/{thread_id}")
async def history(thread_id: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread_id}}
    snapshot = await app.state.graph.aget_state(config)
    return {"messages": [m.content for m in snapshot.values.get("messages", [])]}


@app.get("/users/{user}")
async def user_memory(user: str) -> dict[str, Any]:
    return {"turns": await count_turns(app.state.store, user)}
