# mypy: disable-error-code="arg-type,type-arg,union-attr"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""search and list_namespaces agree with LangGraph's InMemoryStore on random data,
every dialect, sync and async store.

Contract of the comparison: list_namespaces is sorted, so pages compare exactly;
search without a query orders by updated_at on the official stores and by
insertion on InMemoryStore, so a page's order is not compared across them, but
the items a filter selects are, and pages of ours partition that set exactly.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, assert_no_leaked_connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, ListNamespacesOp, MatchCondition, SearchOp
from langgraph.store.memory import InMemoryStore

from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

LABELS = st.sampled_from(["a", "b", "c", "A", "é", "x y"])
# "n" is always a number for InMemoryStore's float(): its ordering operators raise on
# anything else (a missing key included), where ours simply do not match. Booleans
# (1/0) and strings in JSON number syntax are numbers to both.
NUMBERS = (
    st.integers(-3, 3)
    | st.floats(-3, 3, allow_nan=False)
    | st.booleans()
    | st.sampled_from(["2", "-1.5", " 1 ", "0", "3e0", "-0"])
)
SCALARS = st.sampled_from([1, 0, True, False, "a", None, 1.0])
VALUES = st.fixed_dictionaries(
    {"n": NUMBERS},
    optional={
        "tag": st.sampled_from(["red", "blue", "Red", "blue ", "1"]),
        "flag": st.booleans() | st.none(),
        "obj": st.fixed_dictionaries(
            {"k": st.sampled_from(["v", "w"])},
            optional={"z": st.integers(0, 1) | st.booleans() | st.none()},
        ),
        "l": st.lists(SCALARS, max_size=2),
    },
)
ITEMS = st.lists(
    st.tuples(st.lists(LABELS, min_size=1, max_size=3), st.sampled_from("klm"), VALUES),
    max_size=8,
)
OPERATORS = st.sampled_from(["$gt", "$gte", "$lt", "$lte"])
# Values an equality (plain, $eq or $ne) compares with: Python's == decides for
# InMemoryStore (True == 1 == 1.0, a missing key == None, a plain nested object is a
# subset match, an $eq object an exact one).
OPERANDS = st.sampled_from(
    [
        "red",
        "blue",
        "1",
        1,
        0,
        True,
        False,
        None,
        1.0,
        {"k": "v"},
        {"z": True},
        {"k": "v", "z": 1},
        {},
        [1],
        [True, "a"],
        [],
    ]
)
KEYS = st.sampled_from(["n", "tag", "flag", "obj", "l", "missing"])
EQUALITY = st.dictionaries(
    KEYS,
    OPERANDS | st.dictionaries(st.sampled_from(["$eq", "$ne"]), OPERANDS, min_size=1),
    max_size=2,
)
FILTERS = EQUALITY | st.builds(
    lambda eq, ops: {**eq, "n": ops},
    EQUALITY,
    st.dictionaries(
        OPERATORS, st.integers(-2, 2) | st.booleans() | st.sampled_from(["1", "-0.5"]), min_size=1
    ),
)
PATHS = st.lists(LABELS | st.just("*"), max_size=3)


def _canonical(value: Any) -> str:
    """A value's JSON with sorted keys and -0.0 as 0.0: PostgreSQL's jsonb keeps
    neither key order nor the sign of a zero (numeric has no -0), Python's == neither."""

    def fix(v: Any) -> Any:
        if isinstance(v, float):
            return v + 0.0
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v

    return json.dumps(fix(value), sort_keys=True)


def _store(backend: Backend, mode: str) -> tuple[BaseStore, Any]:
    if mode == "sync":
        engine = backend.engine()

        def close() -> None:
            assert_no_leaked_connections(engine)
            engine.dispose()

        return SQLAlchemyStore(engine), close
    # Each sync call of the async store runs its own event loop (asyncio.run): no
    # pooled connections may outlive one.
    aengine = backend.async_engine(poolclass=sa.NullPool)
    return AsyncSQLAlchemyStore(aengine), lambda: asyncio.run(aengine.dispose())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_search_and_list_namespaces_match_in_memory_store(backend: Backend, mode: str) -> None:
    store, close = _store(backend, mode)
    try:

        @settings(
            max_examples=25,
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

            def everything_of(s: BaseStore, op: SearchOp) -> set:
                found = s.search(op.namespace_prefix, filter=op.filter, limit=op.limit)
                return {(i.namespace, i.key, _canonical(i.value)) for i in found}

            def everything(s: BaseStore) -> set:
                found = s.search((r, *prefix), filter=filter_, limit=1000)
                return {(i.namespace, i.key, _canonical(i.value)) for i in found}

            expected = everything(memory)
            assert everything(store) == expected
            # Several searches in one batch (one statement): each gets its own results.
            ops = [SearchOp((r, *prefix), filter=f, limit=1000) for f in (filter_, {}, filter_)]
            for want_ops, got in zip(ops, store.batch(ops), strict=True):
                found = {(i.namespace, i.key, _canonical(i.value)) for i in got}
                assert found == everything_of(memory, want_ops)
            pages: list = []
            start = 0
            while True:
                chunk = store.search((r, *prefix), filter=filter_, limit=page, offset=start)
                pages += [(i.namespace, i.key, _canonical(i.value)) for i in chunk]
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


# Every semantic edge of the filters, each on data where it decides the result.
CORPUS = {
    "int1": {"n": 1, "tag": "red", "obj": {"k": "v"}, "l": [1, "a"]},
    "float1": {"n": 1.0, "tag": "Red", "obj": {"k": "v", "z": 1}, "l": [True, "a"]},
    "true": {"n": True, "tag": "red ", "obj": {"k": "w", "z": None}, "l": []},
    "false": {"n": False, "flag": None, "obj": {"k": "v", "z": {"deep": [1, {"x": "y"}]}}},
    "zero": {"n": 0, "flag": True, "l": [None], "obj": "not an object"},
    "str2": {"n": "2", "tag": "1", "l": [[1], {"k": "v"}]},
    "strsp": {"n": " 2.5 ", "tag": "", "obj": {}},
    "strexp": {"n": "-3e0", "tag": "ünï"},
    "big": {"n": 12345678901234567, "tag": 'say "hi"', "l": [1, 2]},
    "neg": {"n": -0.5, "obj": {"k": ["v"]}},
    # Member names no SQLite path label can spell (non-ASCII, quote, backslash, newline),
    # with look-alike siblings: each step must pick its own member.
    "hostile": {
        "n": 7,
        'ké"y': {"x\\": [2, {"\n": "y", "m": "z"}], "w\\": [1, {"\n": "z"}]},
        "tag": "ü",
    },
}
SEMANTIC_FILTERS = [
    {"n": 1},
    {"n": True},
    {"n": 0},
    {"n": False},
    {"n": 1.0},
    {"n": "2"},
    {"n": 2},
    {"tag": "red"},
    {"tag": "1"},
    {"tag": ""},
    {"tag": "ünï"},
    {"tag": 'say "hi"'},
    {"tag": None},
    {"flag": None},
    {"missing": None},
    {"tag": {"$ne": "red"}},
    {"missing": {"$ne": None}},
    {"missing": {"$ne": 1}},
    {"obj": {"k": "v"}},
    {"obj": {"z": None}},
    {"obj": {"z": 1}},
    {"obj": {}},
    {"obj": {"$eq": {"k": "v"}}},
    {"obj": {"$eq": {"k": "v", "z": True}}},
    {"obj": {"$ne": {"k": "v"}}},
    {"obj": {"$eq": {}}},
    {"obj": {"z": {"deep": [1, {"x": "y"}]}}},
    {"obj": {"z": {"deep": [True, {}]}}},
    {"obj": {"k": ["v"]}},
    {"l": [1, "a"]},
    {"l": []},
    {"l": [None]},
    {"l": {"$eq": [1, "a"]}},
    {"l": [[1], {}]},
    {"l": {"$eq": [[1], {}]}},
    {"l": {"$ne": []}},
    {"n": {"$gt": 0}},
    {"n": {"$gte": 1}},
    {"n": {"$lt": 1}},
    {"n": {"$lte": 0, "$gt": -1}},
    {"n": {"$gt": "1.5"}},
    {"n": {"$gte": True}},
    {"n": {"$lt": -1}},
    {"n": {"$gt": 12345678901234566}},
    {"n": {"$gt": "inf"}},
    {"n": {"$lt": "Infinity"}},
    {"n": {"$gt": "-inf"}},
    {"n": {"$lt": float("inf")}},
    {"n": {"$gte": float("-inf")}},
    {"n": {"$gt": float("inf")}},
    {"n": {"$lte": float("nan")}},
    {"n": float("inf")},
    {"n": {"$ne": float("nan")}},
    {"n": {"$eq": 2.5}},
    {"n": 1, "tag": "red"},
    {'ké"y': {"x\\": [2, {"\n": "y"}]}},
    {'ké"y': {"x\\": [1, {"\n": "z"}]}},
    {'ké"y': {"w\\": [1, {"\n": "z"}]}},
    {'ké"y': {"w\\": [True, {"\n": "y"}]}},
    {'ké"y': {"$eq": {"x\\": [2, {"\n": "y", "m": "z"}], "w\\": [1, {"\n": "z"}]}}},
    {'ké"y': {"$ne": {"x\\": [2, {"\n": "y"}], "w\\": [1, {"\n": "z"}]}}},
    {'ké"y': None},
    {"tag": "ü"},
]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_filter_semantics_match_in_memory_store(backend: Backend, mode: str) -> None:
    store, close = _store(backend, mode)
    try:
        r = f"d{uuid.uuid4().hex[:10]}"
        memory = InMemoryStore()
        for s in (memory, store):
            for key, value in CORPUS.items():
                s.put((r, "c"), key, value)
        # All filters in one batch as well as one by one: the same answers.
        ops = [SearchOp((r,), filter=f, limit=100) for f in SEMANTIC_FILTERS]
        batched = store.batch(ops)
        for f, together in zip(SEMANTIC_FILTERS, batched, strict=True):
            want = sorted(i.key for i in memory.search((r,), filter=f, limit=100))
            assert sorted(i.key for i in store.search((r,), filter=f, limit=100)) == want, f
            assert sorted(i.key for i in together) == want, f
        # The corpus tells the filters apart: nearly every one selects its own set.
        answers = {
            frozenset(i.key for i in memory.search((r,), filter=f, limit=100))
            for f in SEMANTIC_FILTERS
        }
        assert len(answers) >= 25, len(answers)
    finally:
        close()


# Labels whose order or matching a naive SQL version gets wrong: "a" < "a-" < "a.x"
# as joined text but ("a", "x") < ("a-",) as tuples; LIKE/GLOB/regex metacharacters,
# quotes, backslashes, control and non-ASCII characters, spaces at the end.
HOSTILE_LABELS = [
    "a",
    "a-",
    "A",
    "x y",
    "x",
    "%",
    "_",
    "*x",
    "'",
    '"',
    "\\",
    "\n",
    "é",
    "ü ",
    "[0]",
]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_list_namespaces_edges_match_in_memory_store(backend: Backend, mode: str) -> None:
    store, close = _store(backend, mode)
    try:
        r = f"d{uuid.uuid4().hex[:10]}"
        memory = InMemoryStore()
        labels = HOSTILE_LABELS
        spaces = {
            (r, *(labels[(i * k + j) % len(labels)] for j in range(1 + (i * k) % 4)))
            for i in range(len(labels))
            for k in (1, 2, 5)
        }
        for s in (memory, store):
            for ns in spaces:
                s.put(ns, "k", {"v": 1})
        conditions: list[tuple[tuple[str, ...], tuple[str, ...] | None]] = [
            ((r,), None),
            ((r, "a"), None),
            ((r, "*"), None),
            ((r, "*", "a"), None),
            ((r, "%"), None),
            ((r, "*", "%"), None),
            ((r,), ("a",)),
            ((r,), ("x",)),
            ((r,), ("*", "a-")),
            ((r,), ("\n", "*")),
            ((r, "é"), ("*",)),
            ((r,), ("'", '"')),
            ((r, "*", "*", "*"), None),
            ((r, "*", "*"), ("a",)),
        ]
        ops = []
        for prefix, suffix in conditions:
            for depth in (None, 1, 2, 3):
                for limit, offset in ((1000, 0), (3, 2)):
                    match = [MatchCondition("prefix", prefix)]
                    if suffix:
                        match.append(MatchCondition("suffix", suffix))
                    ops.append(
                        ListNamespacesOp(tuple(match), max_depth=depth, limit=limit, offset=offset)
                    )
        wants = memory.batch(ops)
        # One op at a time, and all of them in one batch (one statement).
        for op, want in zip(ops, wants, strict=True):
            assert store.batch([op]) == [want], op
        assert store.batch(ops) == wants
        assert sum(1 for want in wants if want) > len(ops) // 2  # the cases select something
    finally:
        close()
