"""search and list_namespaces agree with LangGraph's InMemoryStore on random data,
every dialect, sync and async store.

Contract of the comparison: list_namespaces is sorted, so pages compare exactly;
search without a query orders by updated_at on the official stores and by
insertion on InMemoryStore, so a page's order is not compared across them, but
the items a filter selects are, and pages of ours partition that set exactly.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, MatchCondition
from langgraph.store.memory import InMemoryStore

from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

LABELS = st.sampled_from(["a", "b", "c", "A", "é", "x y"])
# "n" is always a number: InMemoryStore's ordering operators raise on anything else
# (a missing key included), where ours simply do not match.
VALUES = st.fixed_dictionaries(
    {"n": st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False)},
    optional={
        "tag": st.sampled_from(["red", "blue", "Red", "blue "]),
        "flag": st.booleans() | st.none(),
        "obj": st.fixed_dictionaries({"k": st.sampled_from(["v", "w"])}),
    },
)
ITEMS = st.lists(
    st.tuples(st.lists(LABELS, min_size=1, max_size=3), st.sampled_from("klm"), VALUES),
    max_size=8,
)
OPERATORS = st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"])
EQUALITY = st.dictionaries(
    st.sampled_from(["n", "tag", "flag", "obj"]),
    st.sampled_from(["red", "blue", 1, 0, True, None, {"k": "v"}]),
    max_size=2,
)
FILTERS = EQUALITY | st.builds(
    lambda eq, ops: {**eq, "n": ops},
    EQUALITY,
    st.dictionaries(OPERATORS, st.integers(-2, 2), min_size=1, max_size=2),
)
PATHS = st.lists(LABELS | st.just("*"), max_size=3)


def _store(backend: Backend, mode: str) -> tuple[BaseStore, Any]:
    if mode == "sync":
        engine = backend.engine()
        return SQLAlchemyStore(engine), engine.dispose
    # Each sync call of the async store runs its own event loop (asyncio.run): no
    # pooled connections may outlive one.
    aengine = backend.async_engine(poolclass=sa.NullPool)
    return AsyncSQLAlchemyStore(aengine), lambda: asyncio.run(aengine.dispose())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_search_and_list_namespaces_match_in_memory_store(backend: Backend, mode: str) -> None:
    store, close = _store(backend, mode)
    try:

        @settings(
            max_examples=10,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        )
        @given(
            items=ITEMS,
            prefix=st.lists(LABELS, max_size=2),
            filter_=FILTERS,
            page=st.integers(1, 5),
            paths=st.tuples(PATHS, PATHS),
            depth=st.none() | st.integers(1, 3),
            offset=st.integers(0, 3),
        )
        def check(
            items: list,
            prefix: list[str],
            filter_: dict,
            page: int,
            paths: tuple[list[str], list[str]],
            depth: int | None,
            offset: int,
        ) -> None:
            r = f"d{uuid.uuid4().hex[:10]}"
            memory = InMemoryStore()
            for labels, key, value in items:
                for s in (memory, store):
                    s.put((r, *labels), key, value)

            def everything(s: BaseStore) -> set:
                found = s.search((r, *prefix), filter=filter_, limit=1000)
                return {(i.namespace, i.key, repr(sorted(i.value.items()))) for i in found}

            expected = everything(memory)
            assert everything(store) == expected
            pages: list = []
            start = 0
            while True:
                chunk = store.search((r, *prefix), filter=filter_, limit=page, offset=start)
                pages += [(i.namespace, i.key, repr(sorted(i.value.items()))) for i in chunk]
                start += page
                if len(chunk) < page:
                    break
            assert len(pages) == len(expected) and set(pages) == expected

            prefix_path, suffix_path = paths
            conditions = (
                MatchCondition("prefix", (r, *prefix_path)),
                *([MatchCondition("suffix", tuple(suffix_path))] if suffix_path else []),
            )
            for s_limit in (100, 2):
                kwargs: dict[str, Any] = {"limit": s_limit, "offset": offset}
                want = memory.list_namespaces(
                    prefix=conditions[0].path,
                    suffix=conditions[1].path if len(conditions) > 1 else None,
                    max_depth=depth,
                    **kwargs,
                )
                got = store.list_namespaces(
                    prefix=conditions[0].path,
                    suffix=conditions[1].path if len(conditions) > 1 else None,
                    max_depth=depth,
                    **kwargs,
                )
                assert got == want

        check()
    finally:
        close()
