"""What a read rebuilds from the load statement's rows, whatever their layout.

The load statement's branches share columns by position (``statements.LoadLayout``:
a get_tuple row carries no keys, its thread and namespace are the query's; each
database shares columns its own way) and, on SQLite, a get_tuple reads the page by
scalar subqueries. Every part of a tuple must come back from every shape: the pending
writes of the checkpoint, and, for a checkpoint written before format v4, its parent's
pending sends as the TASKS channel, by get_tuple (latest and by id) and list.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from modes import Either, saver_on

TASKS = "__pregel_tasks"  # LangGraph's channel for Send packets


@pytest.fixture
def api(make_engine: EngineFactory, backend: Backend, mode: str) -> Either[Any]:
    return saver_on(make_engine.for_mode(mode, backend))


def _at_format(version: int, values: dict[str, Any], step: int) -> Any:
    cp = checkpoint(values, {channel: f"{step:032}.0" for channel in values})
    cp["v"] = version
    return cp


async def _put(api: Either[Any], parent: Any, cp: Any, metadata: dict[str, Any]) -> Any:
    return await api.put(parent, cp, metadata, cp["channel_versions"])


async def _parent_and_child(api: Either[Any], child_format: int, ns: str) -> tuple[Any, Any]:
    """A parent with Send packets and another pending write, then its child."""
    thread = new_thread()
    parent = await _put(api, config(thread, ns), _at_format(3, {"a": 1}, 1), {"step": 0})
    await api.put_writes(parent, [(TASKS, "send-2"), ("a", 5)], task_id="task-b")
    await api.put_writes(parent, [(TASKS, "send-1")], task_id="task-a")
    # ("b" a list: a blob row, read again at its version by the later checkpoints
    # that do not repeat it; a str this short would be kept inline in the document.)
    child = await _put(api, parent, _at_format(child_format, {"a": 2, "b": ["x"]}, 2), {"step": 1})
    await api.put_writes(child, [("b", "y"), ("a", 3)], task_id="task-c")
    return parent, child


@pytest.mark.parametrize("ns", ["", "inner:1"])
async def test_a_checkpoint_before_format_4_reads_its_parents_sends(
    api: Either[Any], ns: str
) -> None:
    parent, child = await _parent_and_child(api, 3, ns)
    thread = child["configurable"]["thread_id"]
    latest = await api.get_tuple(config(thread, ns))
    by_id = await api.get_tuple(child)
    [listed, listed_parent] = await api.list(config(thread, ns))
    for found in (latest, by_id, listed):
        assert found is not None
        assert found.config == child
        assert found.parent_config == parent
        values = found.checkpoint["channel_values"]
        # The parent's sends in task order; its other write is not a send.
        assert values == {"a": 2, "b": ["x"], TASKS: ["send-1", "send-2"]}
        assert found.checkpoint["channel_versions"][TASKS] == max(
            v for channel, v in found.checkpoint["channel_versions"].items() if channel != TASKS
        )
        assert found.pending_writes == [("task-c", "b", "y"), ("task-c", "a", 3)]
        assert found.metadata["step"] == 1
    assert listed_parent.config == parent
    assert sorted(listed_parent.pending_writes or ()) == [
        ("task-a", TASKS, "send-1"),
        ("task-b", TASKS, "send-2"),
        ("task-b", "a", 5),
    ]


async def test_a_checkpoint_at_format_4_keeps_its_own_channels(api: Either[Any]) -> None:
    _, child = await _parent_and_child(api, 4, "")
    for found in (await api.get_tuple(config(child["configurable"]["thread_id"])),):
        assert found is not None
        assert found.checkpoint["channel_values"] == {"a": 2, "b": ["x"]}
        assert found.pending_writes == [("task-c", "b", "y"), ("task-c", "a", 3)]


@pytest.mark.parametrize("child_format", [3, 4, 12])
async def test_a_checkpoint_naming_no_blob_reads_its_parents_sends_by_its_format(
    api: Either[Any], child_format: int
) -> None:
    """A child whose values are all in its document (SQLite records that before its
    format, which it reads from the document's first bytes): the parent's sends are
    its TASKS channel below format 4 only (12: two digits)."""
    thread = new_thread()
    parent = await _put(api, config(thread), _at_format(3, {"a": 1}, 1), {"step": 0})
    await api.put_writes(parent, [(TASKS, "send-1")], task_id="task-a")
    child = await _put(api, parent, _at_format(child_format, {"a": 2, "b": "x"}, 2), {})
    sends = {TASKS: ["send-1"]} if child_format < 4 else {}
    latest, by_id = await api.get_tuple(config(thread)), await api.get_tuple(child)
    [listed, _] = await api.list(config(thread))
    for found in (latest, by_id, listed):
        assert found is not None and found.config == child
        assert found.checkpoint["channel_values"] == {"a": 2, "b": "x", **sends}


async def test_a_page_of_one_across_threads_keeps_its_writes(api: Either[Any]) -> None:
    """``list(limit=1)`` without a thread: one checkpoint, read with its keys."""
    _, child = await _parent_and_child(api, 4, "")
    marker = uuid.uuid4().hex
    thread = child["configurable"]["thread_id"]
    latest = await api.get_tuple(child)
    assert latest is not None
    cp = _at_format(4, {"a": 9}, 3)
    cp["channel_versions"]["b"] = latest.checkpoint["channel_versions"]["b"]
    last = await api.put(
        child, cp, {"step": 2, "marker": marker}, {"a": cp["channel_versions"]["a"]}
    )
    await api.put_writes(last, [("a", 10)], task_id="task-d")
    [found] = await api.list(None, filter={"marker": marker}, limit=1)
    assert found.config == last
    assert found.config["configurable"]["thread_id"] == thread
    assert found.checkpoint["channel_values"] == {"a": 9, "b": ["x"]}
    assert found.pending_writes == [("task-d", "a", 10)]
