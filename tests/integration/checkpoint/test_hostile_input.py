"""Hostile input ends as InvalidInputError naming the field, with nothing written:
lone surrogates, NUL, integers past 64 bits, JSON nested past MariaDB's limit,
``None`` where a str is due. Every dialect, sync and async, one body."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from langchain_core.runnables import RunnableConfig
from modes import saver_on

from lg_sqla import InvalidInputError
from lg_sqla.checkpoint.checks import JSON_MAX_DEPTH

SURROGATE = "\ud800"
BIG = 2**64


def _nested(levels: int) -> Any:
    """A list nested ``levels`` deep (``[]`` is one level)."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _stored(thread_id: str = "") -> RunnableConfig:
    cfg = config(thread_id or new_thread())
    cfg["configurable"]["checkpoint_id"] = "1ef00000-0000-6000-8000-000000000001"
    return cfg


# (field the error must name, method, args, kwargs). Each call must be refused.
Call = tuple[str, str, tuple[Any, ...], dict[str, Any]]


def _cases() -> list[Call]:
    cp = checkpoint({"a": 1})
    cases: list[Call] = []
    for bad in (SURROGATE, "x" + SURROGATE + "y"):
        cases += [
            ("thread_id", "put", (config(bad), cp, {}, {}), {}),
            ("checkpoint_ns", "put", (config(new_thread(), bad), cp, {}, {}), {}),
            ("checkpoint id", "put", (config(new_thread()), {**cp, "id": bad}, {}, {}), {}),
            ("parent checkpoint_id", "put", (_parent(bad), cp, {}, {}), {}),
            ("channel name", "put", (config(new_thread()), checkpoint({bad: 1}), {}, {bad: 1}), {}),
            ("metadata key", "put", (config(new_thread()), cp, {bad: 1}, {}), {}),
            (r"metadata\['k'\]", "put", (config(new_thread()), cp, {"k": [bad]}, {}), {}),
            ("task_id", "put_writes", (_stored(), [("a", 1)], bad), {}),
            ("task_path", "put_writes", (_stored(), [("a", 1)], "t", bad), {}),
            ("channel name", "put_writes", (_stored(), [(bad, 1)], "t"), {}),
            ("checkpoint_id", "put_writes", (config(new_thread(), "", bad), [("a", 1)], "t"), {}),
            ("thread_id", "get_tuple", (config(bad),), {}),
            ("checkpoint_id", "get_tuple", (config(new_thread(), "", bad),), {}),
            ("filter key", "list", (None,), {"filter": {bad: 1}}),
            ("filter", "list", (None,), {"filter": {"k": bad}}),
            ("thread_id", "delete_thread", (bad,), {}),
        ]
    nul = "a\x00b"
    cases += [
        ("checkpoint id", "put", (config(new_thread()), {**cp, "id": nul}, {}, {}), {}),
        ("task_path", "put_writes", (_stored(), [("a", 1)], "t", nul), {}),
        ("checkpoint_id", "get_tuple", (config(new_thread(), "", nul),), {}),
        ("checkpoint_id", "list", (config(new_thread(), "", nul),), {}),
        ("before checkpoint_id", "list", (None,), {"before": config("t", "", nul)}),
        ("filter key", "list", (None,), {"filter": {nul: 1}}),
        ("filter", "list", (None,), {"filter": {"k": nul}}),
        ("filter", "list", (None,), {"filter": {"k": [nul]}}),
        # Integers past 64 bits: SQLite's and MariaDB's JSON cannot hold them exactly.
        ("filter", "list", (None,), {"filter": {"k": BIG}}),
        ("filter", "list", (None,), {"filter": {"k": -BIG}}),
        (r"metadata\['k'\]", "put", (config(new_thread()), cp, {"k": BIG}, {}), {}),
        (r"metadata\['k'\]\[0\]", "put", (config(new_thread()), cp, {"k": [-(2**63) - 1]}, {}), {}),
        # JSON deeper than MariaDB's limit is refused on every dialect alike.
        (
            f"nested {JSON_MAX_DEPTH + 1} levels",
            "put",
            (config(new_thread()), cp, {"k": _nested(JSON_MAX_DEPTH)}, {}),
            {},
        ),
        ("nested", "list", (None,), {"filter": {"k": _nested(JSON_MAX_DEPTH + 1)}}),
        # None where an id is due: stored as "None" it would merge every such caller.
        ("thread_id", "put", ({"configurable": {"thread_id": None}}, cp, {}, {}), {}),
        ("thread_id", "put", ({"configurable": {"thread_id": object()}}, cp, {}, {}), {}),
        ("thread_id", "put", ({"configurable": {"thread_id": 1.5}}, cp, {}, {}), {}),
        ("thread_id", "get_tuple", ({"configurable": {"thread_id": None}},), {}),
        ("thread_id", "delete_thread", (None,), {}),
        ("thread_id", "prune", ([None],), {}),
        ("thread_id", "copy_thread", (None, new_thread()), {}),
        ("task_path", "put_writes", (_stored(), [("a", 1)], "t", None), {}),
        ("task_id", "put_writes", (_stored(), [("a", 1)], None), {}),
    ]
    return cases


def _parent(checkpoint_id: str) -> RunnableConfig:
    return config(new_thread(), "", checkpoint_id)


CASES = _cases()
IDS = [f"{i}-{method}-{field}" for i, (field, method, _, _) in enumerate(CASES)]


def _row_counts(engine: sa.Engine) -> tuple[int, ...]:
    with engine.connect() as conn:
        return tuple(
            conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
            for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
        )


@pytest.mark.parametrize(("field", "method", "args", "kwargs"), CASES, ids=IDS)
async def test_hostile_input_is_refused_by_name(
    make_engine: EngineFactory,
    backend: Backend,
    mode: str,
    field: str,
    method: str,
    args: Any,
    kwargs: Any,
) -> None:
    saver = saver_on(make_engine.for_mode(mode, backend))
    counting = make_engine(backend)  # counts rows with a sync engine on the same database
    before = _row_counts(counting)
    with pytest.raises(InvalidInputError, match=field):
        await getattr(saver, method)(*args, **kwargs)  # a list is read to its end
    assert _row_counts(counting) == before


# --- what is accepted at the edges, stored and read back the same everywhere ------------

EDGE_METADATA = {
    "deep": _nested(JSON_MAX_DEPTH - 1),  # the metadata dict is level 1
    "max": 2**63 - 1,
    "min": -(2**63),
    "text": "ñandú 😀",
}


def _int_thread() -> int:
    return uuid.uuid4().int % 10**15


async def test_edges_round_trip(make_engine: EngineFactory, backend: Backend, mode: str) -> None:
    """Metadata 32 levels deep and at the 64-bit bounds is stored, read and filtered
    on every dialect; an int thread id is the thread of its str()."""
    saver = saver_on(make_engine.for_mode(mode, backend))
    int_id = _int_thread()
    stored = await saver.put(
        {"configurable": {"thread_id": int_id}}, checkpoint({"a": 1}), EDGE_METADATA, {"a": 1}
    )
    assert stored["configurable"]["thread_id"] == str(int_id)
    for key in (int_id, str(int_id)):
        got = await saver.get_tuple({"configurable": {"thread_id": key}})
        assert got is not None
        assert {k: got.metadata[k] for k in EDGE_METADATA} == EDGE_METADATA
    for key in ("max", "min"):
        found = await saver.list(config(str(int_id)), filter={key: EDGE_METADATA[key]})
        assert len(found) == 1
    assert await saver.list(config(str(int_id)), filter={"max": 2**63 - 2}) == []
