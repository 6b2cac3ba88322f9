"""How the store's calls reach the database: its hot calls (a lone put, get, filtered
search, and a batch of mixed ops) run on the direct path (lg_sqla.runtime.direct) in
one plan each, the statements SQLite executes for them are the ones the plan holds
(no BEGIN/COMMIT around reads), and an engine with a cursor listener keeps every call
on Core, where the listener sees every statement."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
from backends import Backend
from helpers import DirectRuns, count_statements
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, Op, PutOp, SearchOp
from store_helpers import Stores, open_store, root

from lg_sqla.runtime import routing


def _mixed(r: str, n: int) -> list[Op]:
    """A node's memory batch: a write, a read, a filtered search, a namespace list (one
    key per statement, so it compiles for the direct path on every dialect)."""
    return [
        PutOp((r, "u"), f"b{n}", {"tag": n % 2, "n": n}),
        GetOp((r, "u"), "k0"),
        SearchOp((r, "u"), filter={"tag": 0}, limit=10),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", (r,)),), max_depth=2),
    ]


async def _hot_calls(s: Stores, r: str) -> list[Any]:
    """put, get, search (filter, limit), mixed batch: each call's results."""
    await s.put((r, "u"), "k0", {"tag": 0, "n": 0})
    got = await s.get((r, "u"), "k0")
    found = await s.search((r, "u"), filter={"tag": 0}, limit=10)
    batched = await s.batch(_mixed(r, 1))
    return [got, found, batched]


async def test_hot_calls_take_the_direct_path_one_plan_each(
    backend: Backend, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = DirectRuns(monkeypatch)
    async with open_store(backend, mode) as s:
        r = root()
        got, found, batched = await _hot_calls(s, r)
        assert got is not None and got.value == {"tag": 0, "n": 0}
        assert [item.key for item in found] == ["k0"]
        assert batched[0] is None and batched[1] is not None and batched[1].key == "k0"
        assert [item.key for item in batched[2]] == ["k0"]
        assert batched[3] == [(r, "u")]
        assert runs.count == 4


async def test_a_cursor_listener_sees_every_statement_of_every_call(
    backend: Backend, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instrumentation keeps the store on Core: the listener sees each statement the
    plans hold: one for a put, a get, a search; the batch's four (get, search, list,
    upsert), and nothing runs on the direct path."""
    runs = DirectRuns(monkeypatch)
    async with open_store(backend, mode) as s:
        r = root()
        await s.put((r, "u"), "warm", {"tag": 1})  # first call: schema check on its own
        direct_before = runs.count
        with count_statements(s.engine) as counter:
            counts = []
            calls: list[Callable[[], Any]] = [
                lambda: s.put((r, "u"), "k0", {"tag": 0, "n": 0}),
                lambda: s.get((r, "u"), "k0"),
                lambda: s.search((r, "u"), filter={"tag": 0}, limit=10),
                lambda: s.batch(_mixed(r, 1)),
            ]
            for call in calls:
                before = counter.count
                await call()
                counts.append(counter.count - before)
        assert counts == [1, 1, 1, 4]
        assert runs.count == direct_before


async def test_the_path_decision_is_remembered_and_follows_the_engine(
    backend: Backend, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's runtime asks ``choose_path`` once per statement while nothing it
    reads changes (routing.Router.path_of); the direct path turned off on the engine later,
    INFO logging of ``sqlalchemy.engine`` turned on later, or a cursor listener added
    later, each takes the next get to Core (the listener sees its statement); the first
    two undone, back to the direct path."""
    asked: list[Any] = []
    real_choose = routing.choose_path

    def choose(*args: Any, **kwargs: Any) -> Any:
        asked.append(args[1].statement)
        return real_choose(*args, **kwargs)

    monkeypatch.setattr(routing, "choose_path", choose)
    runs = DirectRuns(monkeypatch)
    async with open_store(backend, mode) as s:
        r = root()
        await s.put((r, "u"), "k0", {"n": 0})
        await s.get((r, "u"), "k0")
        asked.clear()
        before = runs.count
        for _ in range(5):
            assert (await s.get((r, "u"), "k0")) is not None
        assert (asked, runs.count - before) == ([], 5)

        def on_core(changed: str) -> None:
            assert runs.count == before, f"{changed}: the get ran on the direct path"

        s.engine.update_execution_options(lg_sqla_direct_path=False)
        before = runs.count
        assert (await s.get((r, "u"), "k0")) is not None
        on_core("direct path turned off on the engine")
        s.engine.update_execution_options(lg_sqla_direct_path=True)
        before = runs.count
        assert (await s.get((r, "u"), "k0")) is not None
        assert runs.count == before + 1  # undone: direct again
        engine_logger = logging.getLogger("sqlalchemy.engine")
        level = engine_logger.level
        try:
            engine_logger.setLevel(logging.INFO)
            before = runs.count
            assert (await s.get((r, "u"), "k0")) is not None
            on_core("INFO logging turned on")
            engine_logger.setLevel(logging.WARNING)
            before = runs.count
            assert (await s.get((r, "u"), "k0")) is not None
            assert runs.count == before + 1  # undone: direct again
        finally:
            engine_logger.setLevel(level)
        # Last: SQLAlchemy leaves an engine marked as having events once it had one.
        with count_statements(s.engine) as counter:
            before = runs.count
            assert (await s.get((r, "u"), "k0")) is not None
            on_core("listener added")
            assert counter.count == 1


@pytest.mark.sqlite
def test_sqlite_executes_the_plans_statements_only(tmp_path: Any) -> None:
    """What SQLite itself executes for the hot calls on the direct path: a read is its
    one SELECT, a lone put its one INSERT (no BEGIN/COMMIT: one statement is atomic,
    and sqlite3's connection is back at its own isolation level after it); a batch
    writing after its reads is BEGIN, its statement, COMMIT."""
    from lg_sqla.store import SQLAlchemyStore

    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    with SQLAlchemyStore.from_conn_string(url, pool_size=1) as store:
        store.setup()
        store.put(("w",), "warm", {"tag": 1})
        executed: list[str] = []
        with store.engine.connect() as connection:
            raw = connection.connection.dbapi_connection
            assert isinstance(raw, sqlite3.Connection)
            raw.set_trace_callback(executed.append)
            level = raw.isolation_level
        try:
            kinds, levels = [], []
            for call in (
                lambda: store.put(("u",), "k0", {"tag": 0}),
                lambda: store.get(("u",), "k0"),
                lambda: store.search(("u",), filter={"tag": 0}, limit=10),
                lambda: store.batch(_mixed("r", 1)),
            ):
                executed.clear()
                call()
                kinds.append([s.split()[0].upper() for s in executed])
                levels.append(raw.isolation_level)
        finally:
            raw.set_trace_callback(None)
    reads = {"SELECT", "WITH"}
    assert kinds[:3] == [["INSERT"], ["SELECT"], ["SELECT"]], kinds
    assert level is not None and levels == [level] * 4, (level, levels)
    # the batch: its three reads (get, search, namespace list), then its write
    assert set(kinds[3][:3]) <= reads and kinds[3][3:] == ["BEGIN", "INSERT", "COMMIT"], kinds


async def test_gets_of_several_keys_take_the_direct_path_in_one_statement(
    backend: Backend, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch reading up to ``FIXED_KEYS_MAX`` keys (a put, gets of several keys, a
    search: a node's memory batch) runs on the direct path as one plan, its gets one
    SELECT of that many keys (no expanding ``IN`` list, which only Core runs on SQLite
    and MySQL); more keys than that still read every item, on whichever path, in one
    SELECT too (the statement counts: on Core, with a listener)."""
    from lg_sqla.store._read import FIXED_KEYS_MAX

    runs = DirectRuns(monkeypatch)
    async with open_store(backend, mode) as s:
        r = root()
        keys = [f"k{n}" for n in range(FIXED_KEYS_MAX + 2)]
        await s.batch([PutOp((r, "u"), key, {"n": n}) for n, key in enumerate(keys)])
        for count in (1, FIXED_KEYS_MAX - 1):  # (and a missing key)
            ops: list[Op] = [PutOp((r, "w"), f"b{count}", {"n": count})]
            ops += [GetOp((r, "u"), key) for key in [*keys[:count], "missing"]]
            ops.append(SearchOp((r, "u"), filter={"n": 1}, limit=10))
            before = runs.count
            results = await s.batch(ops)
            assert runs.count == before + 1, f"{count} keys: not one direct plan"
            got = results[1 : count + 2]
            assert [item.key if item else None for item in got] == [*keys[:count], None]
            assert [item.key for item in results[-1]] == ["k1"]
        with count_statements(s.engine) as counter:
            for count in (3, FIXED_KEYS_MAX + 1):
                before = counter.count
                got = await s.batch([GetOp((r, "u"), key) for key in keys[:count]])
                assert [item.value["n"] if item else None for item in got] == list(range(count))
                assert counter.count - before == 1, f"{count} keys: one SELECT"
