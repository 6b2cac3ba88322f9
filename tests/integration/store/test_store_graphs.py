# mypy: disable-error-code="arg-type,call-overload"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""lg_sqla's store and node cache inside real LangGraph graphs, on every dialect,
sync and async, beside lg_sqla's own checkpointer; and the cache's own calls."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import uuid
from collections import Counter
from typing import Any, TypedDict

import pytest
from backends import Backend, EngineFactory, fresh_async_saver, fresh_saver
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.types import CachePolicy, Send
from modes import cache_on, either
from store_helpers import age_cache_entries, open_store, root

from lg_sqla import InvalidInputError

pytestmark = pytest.mark.parametrize("mode", ["sync", "async"])


class MemoryState(TypedDict, total=False):
    user: str
    facts: list[str]
    recalled: list[str]


class Fact(TypedDict):
    user: str
    fact: str
    n: int


def build_memory_graph(users_root: str) -> StateGraph[Any]:
    """Fan out one task per fact (LangGraph runs them on worker threads); each writes
    through get_store(); a later node recalls them through an injected store."""

    def fan(state: MemoryState) -> list[Send]:
        return [
            Send("remember", {"user": state["user"], "fact": f, "n": i})
            for i, f in enumerate(state["facts"])
        ]

    def remember(fact: Fact) -> dict[str, Any]:
        get_store().put((users_root, fact["user"], "facts"), fact["fact"], {"text": fact["fact"]})
        return {}

    def recall(state: MemoryState, *, store: BaseStore) -> dict[str, Any]:
        items = store.search((users_root, state["user"], "facts"), limit=100)
        return {"recalled": sorted(i.value["text"] for i in items)}

    builder = StateGraph(MemoryState)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_node("start", lambda state: {})
    builder.add_edge(START, "start")
    builder.add_conditional_edges("start", fan, ["remember"])
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder


async def test_graph_nodes_share_the_store_across_threads(backend: Backend, mode: str) -> None:
    users = root()
    facts = [f"fact {i}" for i in range(6)]
    async with open_store(backend, mode) as s:
        graph_builder = build_memory_graph(users)
        if mode == "sync":
            with fresh_saver(backend) as saver:
                graph = graph_builder.compile(checkpointer=saver, store=s.store)
                cfg = {"configurable": {"thread_id": str(uuid.uuid4())}}
                out = graph.invoke({"user": "ann", "facts": facts}, cfg)
                # A second thread of the conversation sees the same long-term memory.
                other = {"configurable": {"thread_id": str(uuid.uuid4())}}
                again = graph.invoke({"user": "ann", "facts": ["extra"]}, other)
        else:
            async with fresh_async_saver(backend) as asaver:
                graph = graph_builder.compile(checkpointer=asaver, store=s.store)
                cfg = {"configurable": {"thread_id": str(uuid.uuid4())}}
                out = await graph.ainvoke({"user": "ann", "facts": facts}, cfg)
                other = {"configurable": {"thread_id": str(uuid.uuid4())}}
                again = await graph.ainvoke({"user": "ann", "facts": ["extra"]}, other)
        assert out["recalled"] == sorted(facts)
        assert again["recalled"] == sorted([*facts, "extra"])
        assert await s.list_namespaces(prefix=(users,)) == [(users, "ann", "facts")]


async def test_store_from_many_threads_at_once(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode) as s:
        r = root()
        if mode == "sync":
            store = s.store
            errors: list[BaseException] = []

            def work(n: int) -> None:
                try:
                    for i in range(10):
                        store.put((r, str(n)), f"k{i}", {"n": n, "i": i})
                except BaseException as error:
                    errors.append(error)

            threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == []
        else:
            await asyncio.gather(
                *(
                    s.put((r, str(n)), f"k{i}", {"n": n, "i": i})
                    for n in range(4)
                    for i in range(10)
                )
            )
        assert len(await s.search((r,), limit=100)) == 40
        assert len(await s.list_namespaces(prefix=(r,))) == 4


class CacheState(TypedDict, total=False):
    x: int
    y: int


async def test_cached_node_is_skipped_on_the_second_run(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    calls: Counter[int] = Counter()

    def slow(state: CacheState) -> dict[str, int]:
        calls[state["x"]] += 1
        return {"y": state["x"] * 2}

    builder = StateGraph(CacheState)
    builder.add_node("slow", slow, cache_policy=CachePolicy(ttl=120))
    builder.add_edge(START, "slow")
    builder.add_edge("slow", END)
    x = int(uuid.uuid4().int % 1_000_000)  # inputs of our own: the cache table is shared
    graph = either(
        builder.compile(cache=cache_on(make_engine.for_mode(mode, backend)).target), mode
    )
    assert await graph.invoke({"x": x}) == {"x": x, "y": 2 * x}
    # A new cache object on a new engine: the hit comes from the database.
    engine2 = make_engine.for_mode(mode, backend)
    graph2 = either(builder.compile(cache=cache_on(engine2).target), mode)
    assert await graph2.invoke({"x": x}) == {"x": x, "y": 2 * x}
    assert await graph2.invoke({"x": x + 1}) == {"x": x + 1, "y": 2 * x + 2}
    assert calls == Counter({x: 1, x + 1: 1})  # the node ran once per distinct input


async def test_cache_get_set_ttl_and_clear(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    cache = cache_on(make_engine.for_mode(mode, backend))
    r = root()
    a, b = (r, "node_a"), (r, "node_b")
    value = {"nested": [1, "two", None], "bytes": b"\x00\xff"}
    await cache.set({(a, "k1"): (value, None), (a, "k2"): (2, 60), (b, "k1"): ("b", 1)})
    got = await cache.get([(a, "k1"), (a, "k2"), (b, "k1"), (a, "missing")])
    assert got == {(a, "k1"): value, (a, "k2"): 2, (b, "k1"): "b"}
    await cache.set({(a, "k2"): (3, 60)})  # overwrite
    assert await cache.get([(a, "k2")]) == {(a, "k2"): 3}
    age_cache_entries(backend, r, dt.timedelta(seconds=2))  # b's entry had a 1 s TTL
    assert await cache.get([(b, "k1")]) == {}
    await cache.clear([a])
    assert await cache.get([(a, "k1"), (a, "k2")]) == {}
    await cache.set({(b, "k9"): ("kept", None)})
    await cache.clear([(r, "other")])
    assert await cache.get([(b, "k9")]) == {(b, "k9"): "kept"}
    with pytest.raises(InvalidInputError, match="ttl"):
        await cache.set({(b, "bad"): (1, -5)})
    with pytest.raises(InvalidInputError, match="NUL"):
        await cache.get([((r, "a\x00"), "k")])
