# mypy: disable-error-code="attr-defined,misc,type-arg,union-attr"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""lg_sqla.store on every dialect, sync and async: each op and its edges, TTL,
semantic search, statement counts per batch, hostile input."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from helpers import count_statements
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from store_helpers import DIMS, age_store_items, fake_embed, fake_index, open_store, root

from lg_sqla import InvalidInputError, SchemaError, migrate
from lg_sqla.runtime import DIRECT_PATH_OPTION, direct
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

pytestmark = pytest.mark.parametrize("mode", ["sync", "async"])


async def test_put_get_update_delete(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode) as s:
        ns = (root(), "users", "42")
        assert await s.get(ns, "prefs") is None
        await s.put(ns, "prefs", {"theme": "dark", "n": [1, 2, {"x": None}]})
        first = await s.get(ns, "prefs")
        assert first is not None
        assert first.value == {"theme": "dark", "n": [1, 2, {"x": None}]}
        assert first.namespace == ns and first.key == "prefs"
        assert first.created_at.tzinfo is not None
        while dt.datetime.now(dt.timezone.utc) <= first.updated_at:  # the clock's next tick
            await asyncio.sleep(0)
        await s.put(ns, "prefs", {"theme": "light"})
        second = await s.get(ns, "prefs")
        assert second.value == {"theme": "light"}
        assert second.created_at == first.created_at  # an update keeps the creation time
        assert second.updated_at > first.updated_at
        await s.delete(ns, "prefs")
        assert await s.get(ns, "prefs") is None
        await s.delete(ns, "never-there")  # deleting a missing key is no error


async def test_keys_and_namespaces_are_exact(backend: Backend, mode: str) -> None:
    """Case, trailing spaces, non-ASCII and very long names are distinct keys everywhere
    (binary NO PAD on MySQL/MariaDB; hashed keys of any length)."""
    async with open_store(backend, mode) as s:
        r = root()
        keys = ["a", "A", "a ", "ä", "a\u0301", "x" * 5000, "'; DROP TABLE store_items; --"]
        for i, key in enumerate(keys):
            await s.put((r, "k"), key, {"i": i})
        for i, key in enumerate(keys):
            item = await s.get((r, "k"), key)
            assert item is not None and item.value == {"i": i} and item.key == key
        long_ns = (r, *(f"label{i}" * 20 for i in range(40)))
        await s.put(long_ns, "k", {"deep": True})
        assert (await s.get(long_ns, "k")).value == {"deep": True}
        assert await s.list_namespaces(prefix=(r, "label0" * 20)) == [long_ns]


async def test_batch_mixed_ops_in_constant_statements(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode) as s:
        r = root()
        await s.put((r, "a"), "warm", {"v": 0})  # schema check done before counting

        def ops(n: int) -> list:
            batch: list = []
            for i in range(n):
                batch += [
                    PutOp((r, "a", str(i)), f"k{i}", {"v": i}),
                    GetOp((r, "a", str(i)), f"k{i}"),
                    SearchOp((r, "a", str(i)), limit=5),
                    ListNamespacesOp(match_conditions=(MatchCondition("prefix", (r,)),)),
                    PutOp((r, "a"), f"gone{i}", None),
                ]
            return batch

        counts = []
        for n in (1, 10, 40):
            with count_statements(s.engine) as counter:
                results = await s.batch(ops(n))
            counts.append(counter.count)
            # Reads see the state before the batch's puts (as InMemoryStore).
            assert results[1] is None or results[1].value == {"v": 0}
            assert len(results) == 5 * n
        # select gets, select search, select namespaces, delete, upsert + BEGIN/COMMIT
        # bookkeeping the driver may send: the same whatever n is.
        assert counts[0] == counts[1] == counts[2], counts
        assert counts[0] <= 6, counts


async def test_single_op_batches_are_one_statement_without_a_transaction(
    backend: Backend, mode: str
) -> None:
    """A lone get, put or delete is one statement; where the dialect gains from it
    (PostgreSQL: BEGIN and COMMIT are round trips of their own) it runs in autocommit.
    A batch that reads and writes stays one transaction."""
    async with open_store(backend, mode) as s:
        r = root()
        await s.put((r,), "warm", {"v": 0})  # schema check done before counting
        levels: list[object] = []

        def isolation(
            conn: object, cursor: object, statement: str, p: object, ctx: Any, *_: object
        ) -> None:
            levels.append(ctx.execution_options.get("isolation_level"))

        autocommit = s.store.dialect_ops.autocommit_single_statements
        sa.event.listen(s.engine, "before_cursor_execute", isolation)
        try:
            for call in (
                s.put((r,), "k", {"v": 1}),
                s.get((r,), "k"),
                s.search((r,), filter={"v": 1}),
                s.list_namespaces(prefix=(r,)),
                s.delete((r,), "k"),
            ):
                levels.clear()
                await call
                assert levels == (["AUTOCOMMIT"] if autocommit else [None])
            levels.clear()
            await s.batch([GetOp((r,), "warm"), PutOp((r,), "k2", {"v": 2})])
            assert levels == [None, None]  # SELECT, upsert: one transaction
        finally:
            sa.event.remove(s.engine, "before_cursor_execute", isolation)
        assert (await s.get((r,), "k2")).value == {"v": 2}
        assert await s.get((r,), "k") is None


async def test_batches_beyond_the_bound_parameter_limit(backend: Backend, mode: str) -> None:
    """33,000 distinct keys (66,000 values) exceed SQLite's 32,766 and MySQL's 65,535
    bound parameters per statement: gets and deletes are split there, results
    unchanged (PostgreSQL sends two arrays instead: one statement)."""
    async with open_store(backend, mode) as s:
        r = root()
        n = 33_000
        stored = {f"k{i}" for i in range(0, n, 330)}
        await s.batch([PutOp((r,), key, {"key": key}) for key in sorted(stored)])
        with count_statements(s.engine) as counter:
            results = await s.batch([GetOp((r,), f"k{i}") for i in range(n)])
        assert len(results) == n
        found = {item.key for item in results if item is not None}
        assert found == stored
        assert all(item.value == {"key": item.key} for item in results if item is not None)
        per_statement = s.store.sql.keys_per_statement  # SQLite 16375, MySQL 32759
        assert counter.count == -(-n // per_statement)  # ceil: one statement per chunk
        await s.batch([PutOp((r,), f"k{i}", None) for i in range(n)])
        assert s.stored_items(r) == 0


async def test_lone_get_and_put_skip_core_with_the_same_results(
    backend: Backend, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both stores run a lone get or put on the DBAPI cursor (lg_sqla.runtime.direct, as the
    savers' hot calls; the async store in one greenlet) when nothing listens to the
    engine; its items are those the Core path returns (JSON parsed, aware UTC
    timestamps), TTL refresh included."""
    runs = 0
    real = direct.run

    def spy(*args: Any, **kwargs: Any) -> Any:
        nonlocal runs
        runs += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(direct, "run", spy)
    core_only = {DIRECT_PATH_OPTION: False}
    async with (
        open_store(backend, mode, ttl={"default_ttl": 1}) as s,
        open_store(backend, mode, execution_options=core_only) as core,
    ):
        r = root()
        value = {"ñ": "😀", "n": [1, 2.5, None, True], "o": {"k": "v"}}
        await s.put((r,), "a", value)  # direct
        await s.put((r,), "b", {"v": 1}, ttl=None)  # direct
        lone = await s.get((r,), "a")  # direct, refreshes the TTL
        together = await core.batch([GetOp((r,), "a"), GetOp((r,), "b")])  # Core
        assert lone is not None and lone.value == value
        assert lone.created_at.tzinfo is not None and lone.created_at.utcoffset() == dt.timedelta()
        assert together[0] is not None
        assert (lone.value, lone.created_at, lone.updated_at) == (
            together[0].value,
            together[0].created_at,
            together[0].updated_at,
        )
        assert await s.get((r,), "missing") is None  # direct
        assert runs == 4


async def test_batch_last_put_wins_and_results_in_order(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode) as s:
        r = root()
        results = await s.batch(
            [
                PutOp((r,), "k", {"v": 1}),
                PutOp((r,), "k", {"v": 2}),
                GetOp((r,), "k"),
                PutOp((r,), "d", {"v": 3}),
                PutOp((r,), "d", None),
            ]
        )
        assert results == [None, None, None, None, None]
        assert (await s.get((r,), "k")).value == {"v": 2}
        assert await s.get((r,), "d") is None


async def test_search_prefix_filters_order_and_pages(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode) as s:
        r = root()
        docs = {
            "a": {"n": 1, "tag": "x", "nested": {"k": "v"}},
            "b": {"n": 2, "tag": "y", "list": [1, 2]},
            "c": {"n": 3, "tag": "x"},
            "d": {"n": "4", "tag": "z"},
            "e": {"tag": "x"},
        }
        for key, value in docs.items():
            await s.put((r, "docs"), key, value)
            await asyncio.sleep(0.002)  # distinct updated_at: newest first is defined
        await s.put((r, "other"), "z", {"n": 1, "tag": "x"})
        await s.put((r + "x", "docs"), "y", {"n": 1})  # a sibling root is no prefix match

        async def keys(prefix: tuple, **kw: object) -> list[str]:
            return [i.key for i in await s.search(prefix, **kw)]

        assert await keys((r, "docs")) == ["e", "d", "c", "b", "a"]
        assert await keys((r,)) == ["z", "e", "d", "c", "b", "a"]
        assert await keys((r, "doc")) == []  # labels match whole, not by string prefix
        assert await keys((r, "docs"), limit=2) == ["e", "d"]
        assert await keys((r, "docs"), limit=2, offset=2) == ["c", "b"]
        assert await keys((r, "docs"), offset=10) == []
        assert await keys((r, "docs"), filter={"tag": "x"}) == ["e", "c", "a"]
        assert await keys((r, "docs"), filter={"tag": {"$eq": "x"}}) == ["e", "c", "a"]
        assert await keys((r, "docs"), filter={"tag": {"$ne": "x"}}) == ["d", "b"]
        assert await keys((r, "docs"), filter={"n": {"$gt": 1}}) == ["d", "c", "b"]
        assert await keys((r, "docs"), filter={"n": {"$gte": 2, "$lt": 4}}) == ["c", "b"]
        assert await keys((r, "docs"), filter={"n": {"$lte": 1}}) == ["a"]
        assert await keys((r, "docs"), filter={"nested": {"k": "v"}}) == ["a"]
        assert await keys((r, "docs"), filter={"list": [1, 2]}) == ["b"]
        assert await keys((r, "docs"), filter={"tag": "x", "n": 3}) == ["c"]
        assert await keys((r, "docs"), filter={"missing": "x"}) == []
        assert await keys((r, "docs"), filter={"tag": "x"}, limit=1, offset=1) == ["c"]


async def test_search_and_list_find_subtrees_around_the_indexed_head(
    backend: Backend, mode: str
) -> None:
    """A search reads the index range of its namespace's subtree (``prefix_head``, the
    first 200 characters): namespaces longer than that, at its edges, and neighbours
    that share its head or sort right next to it ("a-", "a/", "a0": "." < "/" < "0")
    give the same items as a scan of everything."""
    async with open_store(backend, mode) as s:
        r = root()
        pad = 200 - len(r) - 2  # (r, label): the joined namespace is len(r) + 1 + len(label)
        namespaces = [(r, "a"), (r, "a", "b"), (r, "a-"), (r, "a/"), (r, "a0"), (r, "ab")]
        for width in (pad - 2, pad - 1, pad, pad + 1, pad + 40):
            long = (r, "x" * width)
            namespaces += [long, (*long, "c"), (r, "x" * width + "y"), (r, "x" * (width - 1))]
        namespaces += [(r, "y" * 300, "deep"), (r, "y" * 299 + "z", "deep")]  # same head
        for n, namespace in enumerate(namespaces):
            await s.put(namespace, f"k{n}", {"n": n})
        for prefix in {ns[:depth] for ns in namespaces for depth in range(1, len(ns) + 1)}:
            expected = sorted(
                f"k{n}" for n, ns in enumerate(namespaces) if ns[: len(prefix)] == prefix
            )
            found = await s.search(prefix, limit=100)
            assert sorted(item.key for item in found) == expected, prefix
            listed = await s.list_namespaces(prefix=prefix, limit=100)
            assert listed == sorted({ns for ns in namespaces if ns[: len(prefix)] == prefix})


async def test_search_reads_only_its_page(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """Filter, order and page are SQL: the search statement returns the page's rows, not
    every match (re-run here exactly as the store sent it)."""
    async with open_store(backend, mode) as s:
        r = root()
        await s.batch([PutOp((r, "p"), f"k{i}", {"n": i, "even": i % 2 == 0}) for i in range(60)])
        sent: list[tuple[str, object]] = []

        def capture(
            conn: object, cursor: object, statement: str, params: object, *_: object
        ) -> None:
            if "ORDER BY" in statement:
                sent.append((statement, params))

        sa.event.listen(s.engine, "before_cursor_execute", capture)
        try:
            page = await s.search((r,), filter={"even": True, "n": {"$gte": 10}}, limit=4, offset=3)
        finally:
            sa.event.remove(s.engine, "before_cursor_execute", capture)
        assert len(page) == 4
        assert all(i.value["even"] and i.value["n"] >= 10 for i in page)
        ((statement, params),) = sent
        engine = make_engine(backend)
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(statement, params).all()  # type: ignore[arg-type]
        assert len(rows) == 4  # of 25 matches


async def test_ordering_reads_json_number_strings_the_same_on_every_dialect(
    backend: Backend, mode: str
) -> None:
    """Ordering filters read a string as a number when it has JSON number syntax (with
    whitespace around it, an exponent of at most 4 digits): one grammar on every
    dialect (PostgreSQL and MySQL by regular expression, SQLite by json_valid)."""
    async with open_store(backend, mode) as s:
        r = root()
        numbers = ["2", " 2.5 ", "\t-0\n", "3e0", "1E+2", "-1.5e-1", "1e1234", "0.0"]
        others = ["+1", "1.", ".5", "01", "1e12345", "inf", "NaN", "1_0", "٣", "0x1", "", "1 2"]
        for i, text in enumerate(numbers + others):
            await s.put((r,), f"k{i}", {"n": text})
        found = await s.search((r,), filter={"n": {"$gte": -1e9}}, limit=100)
        assert sorted(item.value["n"] for item in found) == sorted(numbers)
        small = await s.search((r,), filter={"n": {"$lt": 2.5, "$gt": -1}}, limit=100)
        assert sorted(item.value["n"] for item in small) == sorted(
            ["2", "\t-0\n", "-1.5e-1", "0.0"]
        )


@pytest.mark.parametrize(
    "hostile",
    ["it's", 'a"b', "a.b", "$.x", "a\\b", "ünï €", "%_", "x' OR '1'='1", "[0]", "a b "],
)
async def test_hostile_filter_keys_and_values(backend: Backend, mode: str, hostile: str) -> None:
    async with open_store(backend, mode) as s:
        r = root()
        await s.put((r,), "hit", {hostile: hostile})
        await s.put((r,), "miss", {hostile: hostile + "!", "other": hostile})
        hits = await s.search((r,), filter={hostile: hostile})
        assert [i.key for i in hits] == ["hit"]
        assert [i.key for i in await s.search((r,), filter={hostile: {"$ne": hostile}})] == ["miss"]
        for bad in ({hostile + "\x00": 1}, {hostile: "\x00"}, {hostile: {"$eq": "a\x00"}}):
            with pytest.raises(InvalidInputError, match="NUL"):
                await s.search((r,), filter=bad)
        with pytest.raises(InvalidInputError, match="operator"):
            await s.search((r,), filter={hostile: {"$regex": "x"}})


async def test_invalid_input_names_the_field_and_writes_nothing(
    backend: Backend, mode: str
) -> None:
    async with open_store(backend, mode) as s:
        r = root()
        cases = [
            ([PutOp((r,), "k\x00", {"a": 1})], "key"),
            ([PutOp((r,), "k", {"a": "\x00"})], "value"),
            ([PutOp((r,), "k", {"a": float("nan")})], "value"),
            ([PutOp((r,), "k", {"a": object()})], "value"),
            ([PutOp((r,), "k", {"a": 1}, ttl=-1)], "ttl"),
            ([SearchOp((r,), limit=-1)], "limit"),
            ([ListNamespacesOp(max_depth=0)], "max_depth"),
        ]
        for ops, field in cases:
            with pytest.raises(InvalidInputError, match=field):
                await s.batch([PutOp((r,), "ok", {"fine": True}), *ops])
        assert await s.get((r,), "ok") is None  # a bad op fails its whole batch
        for bad_ns in [(r, "a.b"), (r, ""), (r, "x\x00")]:
            with pytest.raises((InvalidInputError, InvalidNamespaceError)):
                await s.batch([PutOp(bad_ns, "k", {"a": 1})])
            with pytest.raises((InvalidInputError, InvalidNamespaceError)):
                await s.batch([GetOp(bad_ns, "k")])
        with pytest.raises(InvalidNamespaceError):
            await s.put(("langgraph", "x"), "k", {"a": 1})


async def test_list_namespaces(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode) as s:
        r = root()
        spaces = [
            (r, "users", "1", "prefs"),
            (r, "users", "2", "prefs"),
            (r, "users", "2", "history"),
            (r, "docs", "a"),
            (r, "docs", "b", "prefs"),
        ]
        for ns in spaces:
            await s.put(ns, "k", {"v": 1})
        mine = (r,)
        assert await s.list_namespaces(prefix=mine) == sorted(spaces)
        assert await s.list_namespaces(prefix=(r, "users")) == sorted(spaces[:3])
        assert await s.list_namespaces(prefix=mine, suffix=("prefs",)) == sorted(
            [spaces[0], spaces[1], spaces[4]]
        )
        assert await s.list_namespaces(prefix=(r, "*", "2")) == sorted(spaces[1:3])
        assert await s.list_namespaces(prefix=mine, suffix=("*", "prefs")) == sorted(
            [spaces[0], spaces[1], spaces[4]]
        )
        assert await s.list_namespaces(prefix=mine, max_depth=2) == [(r, "docs"), (r, "users")]
        assert await s.list_namespaces(prefix=mine, max_depth=3) == [
            (r, "docs", "a"),
            (r, "docs", "b"),
            (r, "users", "1"),
            (r, "users", "2"),
        ]
        assert await s.list_namespaces(prefix=mine, limit=2) == sorted(spaces)[:2]
        assert await s.list_namespaces(prefix=mine, limit=2, offset=4) == sorted(spaces)[4:]
        assert await s.list_namespaces(prefix=(r, "nope")) == []
        await s.delete(spaces[3], "k")
        assert spaces[3] not in await s.list_namespaces(prefix=mine)


async def test_ttl_expiry_refresh_and_sweep(backend: Backend, mode: str) -> None:
    """Items are aged by moving their expiry back (age_store_items), never by sleeping."""
    minute = dt.timedelta(minutes=1)
    async with open_store(backend, mode, ttl={"default_ttl": 1}) as s:
        r = root()
        await s.put((r,), "short", {"v": 1})
        await s.put((r,), "forever", {"v": 2}, ttl=None)
        await s.put((r,), "long", {"v": 3}, ttl=60)
        await s.put((r,), "kept-alive", {"v": 4})
        assert {i.key for i in await s.search((r,))} == {"short", "forever", "long", "kept-alive"}
        assert age_store_items(backend, r, 0.75 * minute) == 3  # "forever" has no expiry
        # A read refreshes the expiry of what it returns: a full minute from now.
        assert await s.get((r,), "kept-alive") is not None
        age_store_items(backend, r, 0.5 * minute)  # "short" is 1.25 min old: expired
        assert await s.get((r,), "short") is None  # expired: invisible to every read
        assert await s.get((r,), "short", refresh_ttl=False) is None
        assert {i.key for i in await s.search((r,))} == {"forever", "long", "kept-alive"}
        # The search refreshed what it returned: a minute left; half a minute later ...
        age_store_items(backend, r, 0.5 * minute)
        # ... a read without refresh leaves the expiry as it is (half a minute left) ...
        assert await s.get((r,), "kept-alive", refresh_ttl=False) is not None
        age_store_items(backend, r, 0.75 * minute)
        # ... so it has expired 0.75 min later, where a refreshing read would have kept it.
        assert await s.get((r,), "kept-alive") is None
        assert (r,) in await s.list_namespaces(prefix=(r,))
        await s.delete((r,), "forever")
        await s.delete((r,), "long")
        assert await s.list_namespaces(prefix=(r,)) == []  # only expired items left
        assert await s.sweep_ttl() >= 2  # short and kept-alive (and other tests' expired)
        assert s.stored_items(r) == 0


async def test_ttl_sweeper_runs_and_stops(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode, ttl={"sweep_interval_minutes": 1}) as s:
        r = root()
        await s.put((r,), "k", {"v": 1}, ttl=1)
        age_store_items(backend, r, dt.timedelta(minutes=2))  # expired, still stored
        assert s.stored_items(r) == 1
        store = s.store

        def stored() -> int:
            return s.stored_items(r)

        interval = 0.2 / 60
        # Waits for the sweeper's effect (the row gone), polling with a generous
        # deadline: a loaded machine delays the pass, never changes its outcome.
        deadline = time.monotonic() + 60
        if isinstance(store, AsyncSQLAlchemyStore):
            task = await store.start_ttl_sweeper(interval)
            while stored() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert stored() == 0
            assert await store.stop_ttl_sweeper(timeout=30)
            assert task.done()
        else:
            assert isinstance(store, SQLAlchemyStore)
            future = store.start_ttl_sweeper(interval)
            while stored() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert stored() == 0
            assert store.stop_ttl_sweeper(timeout=30)
            assert future.done()


async def test_semantic_search(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode, index=fake_index(["text"])) as s:
        r = root()
        texts = {f"k{i}": f"memory number {i}" for i in range(6)}
        for key, text in texts.items():
            await s.put((r, "m"), key, {"text": text, "even": int(key[1:]) % 2 == 0})
        await s.put((r, "m"), "unindexed", {"text": "memory number 3"}, index=False)
        await s.put(
            (r, "m"), "other-field", {"body": "x", "text": "memory number 4"}, index=["body"]
        )
        hits = await s.search((r, "m"), query="memory number 3", limit=3)
        assert hits[0].key == "k3" and hits[0].score == pytest.approx(1.0, abs=1e-6)
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        # Filters apply before ranking: k3 is odd.
        even = await s.search((r, "m"), query="memory number 3", filter={"even": True}, limit=10)
        assert {h.key for h in even} == {"k0", "k2", "k4"}
        # The item indexed on "body" only is found by its body, not its text.
        body = await s.search((r, "m"), query="x", limit=1)
        assert body[0].key == "other-field" and body[0].score == pytest.approx(1.0, abs=1e-6)
        # Re-putting with index=False removes the vectors: no score any more.
        await s.put((r, "m"), "k3", {"text": "memory number 3"}, index=False)
        again = await s.search((r, "m"), query="memory number 3", limit=20)
        by_key = {h.key: h.score for h in again}
        assert by_key["k3"] is None and by_key["unindexed"] is None
        # The expected score is the cosine of the fake vectors.
        query, doc = fake_embed(["memory number 3", "memory number 5"])
        dot = sum(a * b for a, b in zip(query, doc, strict=True))
        norm = sum(a * a for a in query) ** 0.5 * sum(b * b for b in doc) ** 0.5
        assert by_key["k5"] == pytest.approx(dot / norm, abs=1e-5)
        assert len(query) == DIMS


async def test_embedding_with_wrong_dims_is_refused(backend: Backend, mode: str) -> None:
    bad = {"dims": DIMS + 1, "embed": fake_embed}
    async with open_store(backend, mode, index=bad) as s:  # type: ignore[arg-type]
        r = root()
        with pytest.raises(InvalidInputError, match="dims"):
            await s.put((r,), "k", {"text": "t"})
        assert await s.get((r,), "k") is None


async def test_store_on_old_schema_names_the_fix(
    make_engine: EngineFactory, fresh_database: Backend, mode: str
) -> None:
    engine = make_engine(fresh_database)
    migrate.upgrade(engine, "0001_initial")
    async with open_store(fresh_database, mode) as s:
        with pytest.raises(SchemaError, match="behind"):
            await s.get(("a",), "k")
        if isinstance(s.store, AsyncSQLAlchemyStore):
            await s.store.setup()
        else:
            s.store.setup()
        await s.put(("a",), "k", {"v": 1})
        assert (await s.get(("a",), "k")).value == {"v": 1}


async def test_from_conn_string_owns_its_engine(backend: Backend, mode: str) -> None:
    r = root()
    if mode == "sync":
        with SQLAlchemyStore.from_conn_string(backend.sync_url) as store:
            store.setup()
            store.put((r,), "k", {"v": 1})
            engine = store.engine
        assert engine.pool.checkedout() == 0
        with SQLAlchemyStore.from_conn_string(backend.sync_url) as store:
            assert store.get((r,), "k").value == {"v": 1}
    else:
        async with AsyncSQLAlchemyStore.from_conn_string(backend.async_url) as astore:
            await astore.setup()
            await astore.aput((r,), "k", {"v": 1})
        async with AsyncSQLAlchemyStore.from_conn_string(backend.async_url) as astore:
            item = await astore.aget((r,), "k")
            assert item is not None and item.value == {"v": 1}


async def test_refresh_on_read_false_and_the_other_twin(backend: Backend, mode: str) -> None:
    """TTLConfig(refresh_on_read=False): reads leave the expiry alone unless asked; and
    the twin API of each store (abatch of the sync store, batch of the async one from
    a worker thread) reads and writes the same rows."""
    minute = dt.timedelta(minutes=1)
    ttl = {"default_ttl": 1, "refresh_on_read": False}
    async with open_store(backend, mode, ttl=ttl) as s:  # type: ignore[arg-type]
        r = root()
        await s.put((r,), "k", {"v": 1})
        for _ in range(4):  # 4 x 0.3 min: past the 1 min TTL though read on the way
            age_store_items(backend, r, 0.3 * minute)
            await s.get((r,), "k")  # no refresh by default
        assert await s.get((r,), "k") is None
        await s.put((r,), "j", {"v": 2})
        for _ in range(4):  # each read asked to refresh: a minute from now again
            age_store_items(backend, r, 0.3 * minute)
            assert await s.get((r,), "j", refresh_ttl=True) is not None
        store = s.store
        if isinstance(store, SQLAlchemyStore):
            results = await store.abatch([GetOp((r,), "j"), PutOp((r,), "x", {"v": 3})])
            assert results[0] is not None and results[0].value == {"v": 2}
        else:
            results = await asyncio.to_thread(
                store.batch, [GetOp((r,), "j"), PutOp((r,), "x", {"v": 3})]
            )
            assert results[0] is not None and results[0].value == {"v": 2}
        assert (await s.get((r,), "x")).value == {"v": 3}


async def test_concurrent_writers_of_one_database_all_land(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """Threads and tasks writing the same database at once, through stores on several
    engines (on SQLite: one file; the async store both on an engine passed in and
    from ``from_conn_string``), sync and async together: every write lands, none
    fails (SQLite: "database is locked"), and each batch stays atomic.

    On SQLite every connection runs with ``busy_timeout=0``: two writers of this
    process that met in SQLite would fail at once instead of waiting, so the test
    proves that they all queue on the per-file writer lock first, async ones included.
    """
    r = root()
    writes = 12

    def no_busy_wait(engine: sa.Engine | None) -> None:
        if backend.name == "sqlite" and engine is not None:  # after lg_sqla's 30 s
            sa.event.listen(engine, "connect", lambda c, _: c.execute("PRAGMA busy_timeout=0"))

    def ops(who: str, i: int) -> list[Any]:
        # A read-then-write batch (one transaction) and, every other time, a delete.
        batch: list[Any] = [GetOp((r, who), f"k{i - 1}"), PutOp((r, who), f"k{i}", {"i": i})]
        if i % 2:
            batch += [PutOp((r, who), f"gone{i}", {"i": i}), PutOp((r, who), f"gone{i}", None)]
        return batch

    def sync_writer(store: SQLAlchemyStore, who: str) -> None:
        for i in range(writes):
            store.batch(ops(who, i))
            store.put((r, who), f"lone{i}", {"i": i})

    async def async_writer(store: AsyncSQLAlchemyStore, who: str) -> None:
        for i in range(writes):
            await store.abatch(ops(who, i))
            await store.aput((r, who), f"lone{i}", {"i": i})

    writers: list[str] = []
    engine = make_engine(backend)
    other = SQLAlchemyStore(engine)
    async with (
        open_store(backend, mode) as s,
        AsyncSQLAlchemyStore.from_conn_string(backend.async_url) as owned,
    ):
        for each in (engine, s.engine, owned.engine.sync_engine, owned._threaded):
            no_busy_wait(each)  # before any connection is opened
        await owned.aput((r, "warm"), "k", {})  # schema checks done
        other.put((r, "warm"), "k", {})
        threads = [(other, f"other{n}") for n in range(3)]
        tasks: list[Any] = []
        if isinstance(s.store, AsyncSQLAlchemyStore):
            tasks += [async_writer(s.store, f"task{n}") for n in range(4)]
        else:
            threads += [(s.store, f"thread{n}") for n in range(4)]
        tasks += [async_writer(owned, f"owned{n}") for n in range(3)]
        writers = [who for _, who in threads] + [f"task{n}" for n in range(4) if s.is_async]
        writers += [f"owned{n}" for n in range(3)]
        await asyncio.gather(
            *(asyncio.to_thread(sync_writer, store, who) for store, who in threads), *tasks
        )
        for who in writers:
            found = await owned.asearch((r, who), limit=100)
            assert sorted(item.key for item in found) == sorted(
                [f"k{i}" for i in range(writes)] + [f"lone{i}" for i in range(writes)]
            ), who
