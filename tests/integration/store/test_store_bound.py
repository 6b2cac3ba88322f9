# mypy: disable-error-code="arg-type,call-overload,union-attr"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""The store and the node cache bound to the caller's transaction (``store.bound(conn)``,
``cache.bound(conn)``), sync and async, on SQLite, PostgreSQL and MySQL/MariaDB.

Inside ONE transaction the test began: the store's ops (puts, updates, deletes,
filters, namespace listing, semantic search) agree with LangGraph's InMemoryStore; a
graph whose nodes write the store from several worker threads, with a bound
checkpointer and a bound node cache on the same connection, runs as on engines.
Rolling the transaction back leaves no row of lg_sqla's.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from backends import Backend
from bound_helpers import caller_transaction, lg_sqla_rows, migrated_database, rows_inside
from langgraph.graph import END, START, StateGraph
from langgraph.store.memory import InMemoryStore
from langgraph.types import CachePolicy
from modes import either
from store_helpers import fake_index
from test_store_graphs import build_memory_graph

from lg_sqla import AsyncSQLAlchemySaver, InvalidInputError, SQLAlchemySaver
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

pytestmark = pytest.mark.parametrize("mode", ["sync", "async"])


@pytest.fixture(scope="module")
def clean_backend(
    request: pytest.FixtureRequest, backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    yield from migrated_database(request, backend, tmp_path_factory.mktemp("bound-store"))


def bound_store(connection: Any, mode: str, **kwargs: Any) -> Any:
    if mode == "sync":
        return SQLAlchemyStore(connection.engine, **kwargs).bound(connection)
    return AsyncSQLAlchemyStore(connection.engine, **kwargs).bound(connection)


PEOPLE = [
    (("people", "eu"), "ann", {"name": "Ann", "age": 31, "city": "Lyon", "text": "likes cats"}),
    (("people", "eu"), "bob", {"name": "Bob", "age": 45, "city": "Porto", "text": "likes dogs"}),
    (("people", "us"), "cid", {"name": "Cid", "age": 31, "city": "Reno", "text": "likes tea"}),
    (("people", "us", "west"), "dee", {"name": "Dee", "age": 22, "text": "likes cats a lot"}),
    (("pets",), "rex", {"kind": "dog", "age": 3, "text": "a dog"}),
    (("pets",), "tom", {"kind": "cat", "age": 5, "text": "a cat"}),
]


async def test_store_ops_agree_with_in_memory_store_then_roll_back(
    clean_backend: Backend, mode: str
) -> None:
    memory = InMemoryStore(index=fake_index(["text"]))
    async with caller_transaction(clean_backend, mode) as connection:
        store = either(bound_store(connection, mode, index=fake_index(["text"])), mode)
        for namespace, key, value in PEOPLE:
            await store.put(namespace, key, value)
            memory.put(namespace, key, value)
        await store.put(("people", "eu"), "bob", {**PEOPLE[1][2], "age": 46})  # an update
        memory.put(("people", "eu"), "bob", {**PEOPLE[1][2], "age": 46})
        await store.delete(("pets",), "rex")
        memory.delete(("pets",), "rex")

        assert (await store.get(("people", "eu"), "bob")).value["age"] == 46
        assert await store.get(("pets",), "rex") is None
        for filter_ in ({"age": 31}, {"age": {"$gt": 30}}, {"city": "Lyon"}, None):
            ours = {i.key for i in await store.search(("people",), filter=filter_, limit=10)}
            theirs = {i.key for i in memory.search(("people",), filter=filter_, limit=10)}
            assert ours == theirs, filter_
        for kwargs in ({}, {"prefix": ("people",)}, {"max_depth": 2}, {"suffix": ("west",)}):
            assert await store.list_namespaces(**kwargs) == memory.list_namespaces(**kwargs)
        best = await store.search(("people",), query="likes cats", limit=1)
        assert [i.key for i in best] == [
            i.key for i in memory.search(("people",), query="likes cats", limit=1)
        ]
        inside = await rows_inside(connection)
        assert inside["store_items"] == 5 and inside.get("store_vectors", 0) == 5
    assert lg_sqla_rows(clean_backend) == {}


class CacheState(TypedDict, total=False):
    x: int
    y: int


def cached_graph(calls: Counter[int]) -> StateGraph[Any]:
    def double(state: CacheState) -> dict[str, int]:
        calls[state["x"]] += 1
        return {"y": state["x"] * 2}

    builder = StateGraph(CacheState)
    builder.add_node("double", double, cache_policy=CachePolicy(ttl=120))
    builder.add_edge(START, "double")
    builder.add_edge("double", END)
    return builder


async def test_graph_with_bound_checkpointer_store_and_cache_then_roll_back(
    clean_backend: Backend, mode: str
) -> None:
    facts = [f"fact {i}" for i in range(6)]
    async with caller_transaction(clean_backend, mode) as connection:
        engine = connection.engine
        saver_class = SQLAlchemySaver if mode == "sync" else AsyncSQLAlchemySaver
        saver = saver_class(engine).bound(connection)
        store = bound_store(connection, mode)
        # Nodes on worker threads write the store while LangGraph writes checkpoints:
        # one connection, one call at a time.
        graph = either(build_memory_graph("users").compile(checkpointer=saver, store=store), mode)
        config = {"configurable": {"thread_id": f"bound-{uuid.uuid4().hex[:8]}"}}
        out = await graph.invoke({"user": "ann", "facts": facts}, config)
        assert out["recalled"] == sorted(facts)

        calls: Counter[int] = Counter()
        cache: SQLAlchemyCache[Any] = SQLAlchemyCache(engine).bound(connection)
        cached = either(cached_graph(calls).compile(cache=cache), mode)
        assert await cached.invoke({"x": 7}) == {"x": 7, "y": 14}
        assert await cached.invoke({"x": 7}) == {"x": 7, "y": 14}
        assert calls == Counter({7: 1})  # the second run was served by the bound cache
        inside = await rows_inside(connection)
        assert inside["store_items"] == len(facts) and inside["cache_entries"] == 1
        assert inside["checkpoints"] > 0
    assert lg_sqla_rows(clean_backend) == {}


async def test_bound_views_refuse_what_needs_a_connection_of_their_own(
    clean_backend: Backend, mode: str
) -> None:
    async with caller_transaction(clean_backend, mode) as connection:
        store = bound_store(connection, mode)
        with pytest.raises(InvalidInputError, match="bound"):
            await either(store, mode).setup()
        with pytest.raises(InvalidInputError, match="bound"):
            await either(store, mode).start_ttl_sweeper()
        with pytest.raises(InvalidInputError, match="Connection or ORM Session"):
            SQLAlchemyStore(clean_backend.engine()).bound("not a connection")
        if mode == "async":  # a sync store on an async connection, and a sync cache
            sync_engine = connection.sync_engine
            with pytest.raises(InvalidInputError, match="cannot be bound to an AsyncConnection"):
                SQLAlchemyStore(sync_engine).bound(connection)
            with pytest.raises(InvalidInputError, match="cannot be bound to an AsyncConnection"):
                SQLAlchemyCache(sync_engine).bound(connection)
    assert lg_sqla_rows(clean_backend) == {}
