# mypy: disable-error-code="type-arg,typeddict-item,typeddict-unknown-key"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Inputs at and past the limits: long keys, big values, odd characters, bad input.

Over-long input is refused with an error naming the field, never truncated;
a refused or failed put leaves nothing behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa
from backends import EngineFactory
from helpers import checkpoint, config, new_thread, table_counts

from lg_sqla import InvalidInputError, SQLAlchemySaver
from lg_sqla.dialects import GenericOps
from lg_sqla.limits import THREAD_ID_MAX


@pytest.fixture
def saver(sync_saver: SQLAlchemySaver) -> SQLAlchemySaver:
    return sync_saver


def test_long_thread_id_and_deep_namespace(saver: SQLAlchemySaver) -> None:
    thread_id = (new_thread() + "x" * THREAD_ID_MAX)[:THREAD_ID_MAX]
    # A deeply nested subgraph namespace: far beyond any index key limit.
    namespace = "|".join(f"node_{i}:{'a' * 20}" for i in range(100))
    assert len(namespace) > 2000
    stored = saver.put(config(thread_id, namespace), checkpoint({"v": "x"}), {}, {"v": 1})
    got = saver.get_tuple(stored)
    assert got is not None
    assert got.config["configurable"] == {
        "thread_id": thread_id,
        "checkpoint_ns": namespace,
        "checkpoint_id": stored["configurable"]["checkpoint_id"],
    }
    assert got.checkpoint["channel_values"] == {"v": "x"}
    # Two namespaces that differ only at the very end stay apart.
    other = namespace[:-1] + "b"
    saver.put(config(thread_id, other), checkpoint({"v": "y"}), {}, {"v": 1})
    assert saver.get_tuple(config(thread_id, other)).checkpoint["channel_values"] == {"v": "y"}  # type: ignore[union-attr]
    assert saver.get_tuple(config(thread_id, namespace)).checkpoint["channel_values"] == {"v": "x"}  # type: ignore[union-attr]


def test_too_long_thread_id_is_refused_and_nothing_written(saver: SQLAlchemySaver) -> None:
    thread_id = new_thread() + "y" * THREAD_ID_MAX
    with pytest.raises(
        InvalidInputError, match=r"thread_id is \d+ characters long; .* at most 255"
    ):
        saver.put(config(thread_id), checkpoint({"v": 1}), {}, {"v": 1})
    assert table_counts(saver.engine, thread_id) == {
        "checkpoints": 0,
        "checkpoint_writes": 0,
        "checkpoint_blobs": 0,
    }


def test_failed_put_leaves_no_partial_checkpoint(saver: SQLAlchemySaver) -> None:
    """A value that cannot be serialized fails the put before anything is written."""
    thread_id = new_thread()

    class Unserializable:
        def __reduce__(self) -> str:
            raise TypeError("nope")

    values = {"ok": "fine", "bad": Unserializable()}
    with pytest.raises(Exception):  # noqa: B017 - the serializer's own error type
        saver.put(config(thread_id), checkpoint(values), {}, {"ok": 1, "bad": 1})
    assert table_counts(saver.engine, thread_id)["checkpoint_blobs"] == 0
    assert saver.get_tuple(config(thread_id)) is None


def test_metadata_that_is_not_json_is_refused_and_nothing_written(saver: SQLAlchemySaver) -> None:
    """NaN metadata is refused in Python, before any statement (a failure inside the
    database is test_atomicity's subject)."""
    thread_id = new_thread()
    bad_metadata = {"step": 1, "nested": {"deep": float("nan")}}
    with pytest.raises(InvalidInputError, match=r"metadata\['nested'\]\['deep'\] is nan"):
        saver.put(config(thread_id), checkpoint({"v": [1]}), bad_metadata, {"v": 1})  # type: ignore[arg-type]
    assert table_counts(saver.engine, thread_id) == {
        "checkpoints": 0,
        "checkpoint_writes": 0,
        "checkpoint_blobs": 0,
    }


def test_large_value_round_trip(saver: SQLAlchemySaver) -> None:
    """10 MB (over MySQL's 64 KiB BLOB and 16 MiB MEDIUMBLOB thinking) round-trips."""
    thread_id = new_thread()
    payload = os.urandom(10 * 1024 * 1024)
    stored = saver.put(config(thread_id), checkpoint({"big": payload}), {}, {"big": 1})
    saver.put_writes(stored, [("big_write", payload)], task_id="task")
    got = saver.get_tuple(stored)
    assert got is not None
    assert got.checkpoint["channel_values"]["big"] == payload
    assert got.pending_writes is not None and got.pending_writes[0][2] == payload


def test_unicode_case_and_nul(saver: SQLAlchemySaver) -> None:
    base = new_thread()
    emoji = base + "-🦜🔗-ünï"
    upper, lower = base + "-CASE", base + "-case"
    for t in (emoji, upper, lower):
        saver.put(config(t), checkpoint({"who": t}), {"note": "a\x00b", "who": t}, {"who": 1})
    for t in (emoji, upper, lower):
        got = saver.get_tuple(config(t))
        assert got is not None
        assert got.checkpoint["channel_values"]["who"] == t  # distinct: binary collation
        assert got.metadata["note"] == "ab"  # NUL stripped, like LangGraph's own savers
        assert got.config["configurable"]["thread_id"] == t
    # Trailing spaces matter too (MySQL PAD SPACE collations would merge these).
    saver.put(config(base + "-pad "), checkpoint({"who": "pad"}), {}, {"who": 1})
    assert saver.get_tuple(config(base + "-pad")) is None


def test_values_with_nul_and_unicode_round_trip(saver: SQLAlchemySaver) -> None:
    thread_id = new_thread()
    values = {"s": "nul\x00inside", "u": "ユニコード 🎉", "n": None, "f": 1.5, "b": True}
    stored = saver.put(config(thread_id), checkpoint(values), {}, {k: 1 for k in values})
    got = saver.get_tuple(stored)
    assert got is not None and got.checkpoint["channel_values"] == values


def test_filter_keys_are_bound_not_interpolated(saver: SQLAlchemySaver) -> None:
    """A hostile filter key is just a key that matches nothing (CVE-2025-67644 class)."""
    thread_id = new_thread()
    saver.put(config(thread_id), checkpoint({}), {"source": "input"}, {})
    hostile = "source') OR 1=1 --"
    for key in (hostile, 'a"b', "$.x", "x' || '1"):
        assert list(saver.list(config(thread_id), filter={key: "input"})) == []
    assert len(list(saver.list(config(thread_id), filter={"source": "input"}))) == 1


@pytest.mark.parametrize(
    ("stored", "query", "matches"),
    [
        ({"k": "1"}, {"k": 1}, False),
        ({"k": 1}, {"k": "1"}, False),
        ({"k": 1}, {"k": 1}, True),
        ({"k": 1.5}, {"k": 1.5}, True),
        ({"k": True}, {"k": True}, True),
        ({"k": True}, {"k": 1}, False),
        ({"k": False}, {"k": False}, True),
        ({"k": None}, {"k": None}, True),
        ({}, {"k": None}, True),
        ({"k": "Abc"}, {"k": "abc"}, False),
        ({"k": {"a": 1, "b": [1, 2]}}, {"k": {"a": 1, "b": [1, 2]}}, True),
        ({"k": {"a": 1}}, {"k": {"a": 2}}, False),
        ({"k": [1, 2]}, {"k": [1, 2]}, True),
    ],
)
def test_metadata_filter_semantics(
    saver: SQLAlchemySaver, stored: dict, query: dict, matches: bool
) -> None:
    """Top-level equality with JSON types, like InMemorySaver (None also matches absent)."""
    thread_id = new_thread()
    saver.put(config(thread_id), checkpoint({}), stored, {})  # type: ignore[arg-type]
    found = list(saver.list(config(thread_id), filter=query))
    assert (len(found) == 1) is matches


def test_bad_input_errors_name_the_problem(saver: SQLAlchemySaver) -> None:
    with pytest.raises(InvalidInputError, match="thread_id"):
        saver.get_tuple({"configurable": {}})
    with pytest.raises(InvalidInputError, match="thread_id contains a NUL"):
        saver.put(config("bad\x00id"), checkpoint({}), {}, {})
    with pytest.raises(InvalidInputError, match="checkpoint_ns contains a NUL"):
        saver.put(config(new_thread(), "ns\x00x"), checkpoint({}), {}, {})
    with pytest.raises(InvalidInputError, match="checkpoint_id"):
        saver.put_writes(config(new_thread()), [("a", 1)], task_id="t")
    with pytest.raises(InvalidInputError, match="limit"):
        list(saver.list(None, limit=-1))
    with pytest.raises(InvalidInputError, match="list_page_size must be an int >= 1"):
        SQLAlchemySaver(saver.engine, list_page_size=0)
    with pytest.raises(InvalidInputError, match=r"filter\['when'\] is a datetime"):
        import datetime as dt

        list(saver.list(None, filter={"when": dt.datetime.now()}))
    with pytest.raises(InvalidInputError, match="channel name is 300 characters"):
        saver.put(config(new_thread()), checkpoint({"c" * 300: 1}), {}, {"c" * 300: 1})
    with pytest.raises(InvalidInputError, match="metadata\\['when'\\] is a datetime"):
        import datetime as dt

        saver.put(config(new_thread()), checkpoint({}), {"when": dt.datetime.now()}, {})


def test_generic_dialect_fallback(make_engine: EngineFactory, tmp_path: Path) -> None:
    """The portable path (no JSON row expansion, no native upsert), run on a SQLite file."""
    engine = make_engine.track(sa.create_engine(f"sqlite:///{tmp_path / 'generic.sqlite'}"))
    SQLAlchemySaver(engine).setup()
    saver = SQLAlchemySaver(engine)
    saver.dialect_ops = GenericOps()
    thread_id = new_thread()
    first = saver.put(
        config(thread_id), checkpoint({"a": [1], "b": "x"}), {"step": 0}, {"a": 1, "b": 1}
    )
    saver.put_writes(first, [("a", [2]), ("b", "y")], task_id="t1")
    saver.put_writes(first, [("a", [3])], task_id="t1")  # first write wins
    second = saver.put(
        first, checkpoint({"a": [1, 2], "b": "x"}, {"a": 2, "b": 1}), {"step": 1}, {"a": 2}
    )
    got = saver.get_tuple(config(thread_id))
    assert got is not None and got.config == second
    assert got.checkpoint["channel_values"] == {"a": [1, 2], "b": "x"}
    old = saver.get_tuple(first)
    assert old is not None and old.pending_writes == [("t1", "a", [2]), ("t1", "b", "y")]
    assert [t.metadata["step"] for t in saver.list(config(thread_id))] == [1, 0]


def test_in_memory_sqlite_works_across_threads() -> None:
    """`sqlite://` is one shared connection, so LangGraph's worker threads see the tables."""
    import threading

    with SQLAlchemySaver.from_conn_string("sqlite://") as saver:
        saver.setup()
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"v": [1]}), {}, {"v": 1})
        seen: list[object] = []
        worker = threading.Thread(target=lambda: seen.append(saver.get_tuple(stored)))
        worker.start()
        worker.join()
        assert seen and seen[0] is not None


def test_mariadb_scheme_urls_get_the_mysql_dialect_ops() -> None:
    """`mariadb+pymysql://` reports dialect name "mariadb": same ops and key types."""
    from lg_sqla.dialects import MySQLOps, ops_for
    from lg_sqla.models import checkpoints

    engine = sa.create_engine("mariadb+pymysql://u@localhost/db")
    assert engine.dialect.name == "mariadb"
    assert isinstance(ops_for(engine.dialect), MySQLOps)
    ddl = str(sa.schema.CreateTable(checkpoints).compile(dialect=engine.dialect))
    assert "utf8mb4_nopad_bin" in ddl and "DATETIME(6)" in ddl


def test_repeated_special_write_in_one_call_keeps_the_last(saver: SQLAlchemySaver) -> None:
    """Two writes to one special channel share a key (fixed idx): the later one wins,
    as two separate calls would; nothing fails half-way."""
    from langgraph.checkpoint.base import WRITES_IDX_MAP

    # (LangGraph's interrupt channel, named as the savers' table of special channels
    # names it: langgraph.constants.INTERRUPT is deprecated since LangGraph 1.0)
    INTERRUPT = "__interrupt__"
    assert INTERRUPT in WRITES_IDX_MAP
    stored = saver.put(config(new_thread()), checkpoint({}), {}, {})
    saver.put_writes(stored, [(INTERRUPT, "first"), (INTERRUPT, "second")], task_id="t")
    got = saver.get_tuple(stored)
    assert got is not None and got.pending_writes == [("t", INTERRUPT, "second")]
    saver.put_writes(stored, [(INTERRUPT, "third")], task_id="t")
    got = saver.get_tuple(stored)
    assert got is not None and got.pending_writes == [("t", INTERRUPT, "third")]
