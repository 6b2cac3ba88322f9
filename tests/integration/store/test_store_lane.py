"""The store's lean lane for a lone get (lg_sqla/store/_lane.py) gives what the batch
plan gives: the same Item (value, timestamps), expiry honoured, the TTL refreshed on
read when asked and only then; an engine with a cursor listener still sees each of
its statements; and a SQLite store of ``from_conn_string`` keeps one connection
between calls (runtime.kept), given back on exit."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from helpers import count_statements
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import GetOp, InvalidNamespaceError, Item
from sqlalchemy.pool import QueuePool
from store_helpers import Stores, open_store, root

from lg_sqla import InvalidInputError
from lg_sqla.models import store_items
from lg_sqla.shared import key_hash
from lg_sqla.store._common import parse_json

TTL = {"default_ttl": 60.0, "refresh_on_read": True}


def _on_own_engine(s: Stores, statement: Any) -> Any:
    """Run ``statement`` on an engine of the test's own (the store's may be async)."""
    engine = s.backend.engine()
    try:
        with engine.begin() as conn:
            result = conn.execute(statement)
            return result.scalar_one() if result.returns_rows else None
    finally:
        engine.dispose()


def _of_item(namespace: tuple[str, ...], key: str) -> Any:
    return sa.and_(
        store_items.c.prefix_hash == key_hash(".".join(namespace)),
        store_items.c.key_hash == key_hash(key),
    )


def _expires_at(s: Stores, namespace: tuple[str, ...], key: str) -> Any:
    return _on_own_engine(s, sa.select(store_items.c.expires_at).where(_of_item(namespace, key)))


def _expire(s: Stores, namespace: tuple[str, ...], key: str) -> None:
    past = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
    _on_own_engine(
        s, sa.update(store_items).where(_of_item(namespace, key)).values(expires_at=past)
    )


def _same(a: Item | None, b: Item | None) -> None:
    assert a is not None and b is not None
    assert (a.namespace, a.key, a.value, a.created_at, a.updated_at) == (
        b.namespace,
        b.key,
        b.value,
        b.created_at,
        b.updated_at,
    )
    assert a.created_at.tzinfo is not None and a.updated_at.utcoffset() == dt.timedelta(0)


async def test_a_lone_get_reads_what_the_batch_plan_reads(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode, ttl=TTL) as s:  # type: ignore[arg-type]
        ns = (root(), "u")
        value = {"n": 1, "s": "é\u2028", "f": 0.1, "l": [None, True, {"x": "y"}]}
        await s.put(ns, "k", value)
        await s.put(ns, "other", {"n": 2})
        lone = await s.get(ns, "k")  # the lean lane
        # Two gets: the batch plan (one statement of both keys)
        batched = await s.batch([GetOp(ns, "k"), GetOp(ns, "other")])
        _same(lone, batched[0])
        assert lone is not None and lone.value == value
        assert await s.get(ns, "absent") is None
        # Expired: gone for both, though the row is still there.
        _expire(s, ns, "k")
        assert await s.get(ns, "k") is None
        assert (await s.batch([GetOp(ns, "k"), GetOp(ns, "other")]))[0] is None


async def test_the_lanes_check_every_namespace_and_value_as_before_once_seen(
    backend: Backend, mode: str
) -> None:
    """put and get keep each namespace LangGraph's own check passed (``_lane.named``),
    one map per check: a namespace get reads (a root "langgraph") is still refused by
    put after a get of it, a bad one is refused every time, and a bad value's error
    still names its member (``check_put_values``' inline loop)."""
    async with open_store(backend, mode) as s:
        r = root()
        assert await s.get(("langgraph", r), "k") is None  # a get may read it
        for _ in range(2):  # (the second time: each namespace seen before)
            for bad_ns in [("langgraph", r), (r, "a.b"), (r, ""), ()]:
                with pytest.raises(InvalidNamespaceError):
                    await s.put(bad_ns, "k", {"a": 1})
            with pytest.raises(InvalidNamespaceError):
                await s.get((r, "a.b"), "k")
            await s.put((r, "u"), "k", {"a": 1})
        assert (await s.get((r, "u"), "k")).value == {"a": 1}
        culprits = [
            ({"a": float("nan")}, "value['a']"),
            ({"ok": 1, "a": "x\x00"}, "value['a']"),
            ({1: "x"}, "value key 1"),
            ({"a": [1, {"b": float("inf")}]}, "value['a'][1]['b']"),
            ({"a": {"b\x00": 1}}, "value['a'] key 'b\\x00'"),
        ]
        for bad, culprit in culprits:
            with pytest.raises(InvalidInputError, match=re.escape(culprit)):
                await s.put((r, "u"), "bad", bad)
        assert await s.get((r, "u"), "bad") is None  # nothing written


async def test_a_row_of_the_ops_hashes_but_other_names_is_no_answer(
    backend: Backend, mode: str
) -> None:
    """Items are found by the hashes of their names: a row holding the op's hashes but
    other names (what an MD5 collision would store) is not the op's item, for a lone get
    (on MySQL/MariaDB the names are compared in SQL: binary, NO PAD) as for the batch
    plan."""
    async with open_store(backend, mode) as s:
        ns = (root(), "u")
        await s.put(ns, "other", {"n": 2})
        prefix = ".".join(ns)
        for names in (
            {"key": "k "},
            {"key": "K"},
            {"prefix": prefix + " "},
            {"prefix": prefix.upper()},
        ):
            await s.put(ns, "k", {"n": 1})
            assert (await s.get(ns, "k")) is not None
            _on_own_engine(s, sa.update(store_items).where(_of_item(ns, "k")).values(**names))
            assert await s.get(ns, "k") is None, names
            assert await s.get(ns, "k", refresh_ttl=False) is None, names
            got, other = await s.batch([GetOp(ns, "k"), GetOp(ns, "other")])
            assert got is None and other is not None and other.value == {"n": 2}, names
            _on_own_engine(s, sa.delete(store_items).where(_of_item(ns, "k")))


async def test_a_lone_get_refreshes_the_ttl_only_when_asked(backend: Backend, mode: str) -> None:
    async with open_store(backend, mode, ttl=TTL) as s:  # type: ignore[arg-type]
        ns = (root(), "u")
        await s.put(ns, "k", {"n": 1})
        await s.put(ns, "forever", {"n": 2}, ttl=None)
        stored = _expires_at(s, ns, "k")
        assert await s.get(ns, "k", refresh_ttl=False) is not None
        assert _expires_at(s, ns, "k") == stored
        assert await s.get(ns, "k") is not None  # the TTLConfig's refresh_on_read
        refreshed = _expires_at(s, ns, "k")
        assert refreshed > stored
        with count_statements(s.engine) as counter:  # a listener: every statement seen
            assert await s.get(ns, "k") is not None
            assert counter.count == 2  # SELECT, then the UPDATE of its expiry
            assert await s.get(ns, "forever") is not None
            assert counter.count == 3  # no TTL: nothing to refresh
        assert _expires_at(s, ns, "k") >= refreshed
        assert _expires_at(s, ns, "forever") is None


async def test_a_lone_get_reads_neither_the_key_hashes_nor_on_mysql_the_names(
    backend: Backend, mode: str
) -> None:
    """The lone get's SELECT leaves out the two key hashes (it knows them: each column
    costs the driver per row), on MySQL/MariaDB the names too (compared in SQL: PyMySQL
    parses each column in Python), and still refreshes the item it found by them."""
    widths: list[int] = []

    def width(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            widths.append(len(cursor.description))

    async with open_store(backend, mode, ttl=TTL) as s:  # type: ignore[arg-type]
        ns = (root(), "u")
        await s.put(ns, "k", {"n": 1})
        stored = _expires_at(s, ns, "k")
        sa.event.listen(s.engine, "after_cursor_execute", width)
        try:
            item = await s.get(ns, "k")
        finally:
            sa.event.remove(s.engine, "after_cursor_execute", width)
        assert item is not None and item.value == {"n": 1}
        assert item.namespace == ns and item.key == "k"
        assert widths == [4 if backend.name == "mysql" else 6]
        assert _expires_at(s, ns, "k") > stored


async def test_bad_input_fails_as_basestore_get_does(backend: Backend, mode: str) -> None:
    from langgraph.store.base import InvalidNamespaceError

    async with open_store(backend, mode) as s:
        with pytest.raises(InvalidNamespaceError, match="periods"):
            await s.get(("a.b",), "k")
        with pytest.raises(InvalidNamespaceError, match="empty"):
            await s.get(("",), "k")


def test_parse_json_reads_as_json_loads() -> None:
    import json

    for text in (
        '{"a": 1, "b": [1.5, null, true], "c": "x"}',
        "[123456789012345678901234567890]",  # beyond 64 bits: an int, not a float
        "[18446744073709551615, -9223372036854775808]",
        '"\\ud800"',  # a lone surrogate (orjson refuses it)
        "[NaN, Infinity]",
        '{"phone": "123456789012345678901"}',
        '{"a": {"b": [1, {"c": -123456789012345678901}]}}',  # deep, negative
        '{"a": [1e20, 9.3e18, -9223372036854775809]}',
        "18446744073709551616",
        "1e300",
    ):
        assert repr(parse_json(text)) == repr(json.loads(text)), text
        assert repr(parse_json(text.encode())) == repr(json.loads(text)), text


def test_read_timestamps_are_the_same_instant_in_utc() -> None:
    """A session zone that is UTC (psycopg's ZoneInfo of the server's TimeZone) is kept
    as it is; any other zone's time is converted; naive and text times are UTC."""
    from zoneinfo import ZoneInfo

    from lg_sqla.store._common import utc

    moment = dt.datetime(2026, 3, 29, 1, 30, 0, 7, tzinfo=dt.timezone.utc)
    for zone in ("Etc/UTC", "UTC", "Europe/Paris", "America/New_York"):
        local = moment.astimezone(ZoneInfo(zone))
        for _ in range(2):  # (the second time, the zone is one already seen)
            read = utc(local)
            assert read == moment and read.utcoffset() == dt.timedelta(0), zone
    assert utc(moment.replace(tzinfo=None)) == moment
    assert utc("2026-03-29 01:30:00.000007") == moment


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(value=_JSON_VALUES)
def test_parse_json_reads_any_value_as_json_loads(value: Any) -> None:
    """Integers beyond 64 bits at any depth (orjson's floats) read as json.loads reads
    them, and every other value as orjson reads it: the same."""
    import json

    text = json.dumps(value)
    assert repr(parse_json(text)) == repr(json.loads(text)), text


@pytest.mark.sqlite
def test_a_sqlite_store_keeps_one_connection_between_calls(tmp_path: Any) -> None:
    from lg_sqla.store import SQLAlchemyStore

    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    with SQLAlchemyStore.from_conn_string(url) as store:
        store.setup()
        store.put(("u",), "k", {"n": 1})
        assert store.get(("u",), "k") is not None
        pool = store.engine.pool
        assert isinstance(pool, QueuePool)
        assert pool.checkedout() == 1  # kept for the next call
    assert pool.checkedout() == 0  # given back before the engine was disposed
