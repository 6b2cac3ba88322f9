"""Checkpoints older than format v4 kept their pending Send packets as writes on the
parent's TASKS channel; LangGraph 4.x reads them as the TASKS channel's value.
``codec.build_tuple`` rebuilds that value (pure code, no database)."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import TASKS

from lg_sqla.checkpoint.codec import StoredWrite, build_tuple

SERDE = JsonPlusSerializer()


def _row(version: int, parent: str | None, versions: dict[str, str]) -> dict[str, Any]:
    document = {"v": version, "id": "c2", "ts": "", "channel_versions": versions}
    document |= {"versions_seen": {}, "updated_channels": None}
    return {
        "thread_id": "t",
        "checkpoint_ns": "",
        "checkpoint_id": "c2",
        "parent_checkpoint_id": parent,
        "checkpoint": document,
        "metadata": {"step": 1},
    }


def _send(task_id: str, idx: int, value: Any) -> StoredWrite:
    type_, blob = SERDE.dumps_typed(value)
    return (TASKS, task_id, "~__pregel_pull, node", idx, type_, blob)


def test_a_v3_checkpoint_gets_its_parents_sends_in_write_order() -> None:
    sends = [_send("task-b", 0, "second"), _send("task-a", 1, "first b"), _send("task-a", 0, "a")]
    found = build_tuple(
        SERDE,
        _row(3, "c1", {"x": "00002.5", "y": "00003.1"}),
        [],
        [],
        sends,
        next_version=lambda: "unused",
    )
    assert found.checkpoint["channel_values"][TASKS] == ["a", "first b", "second"]
    # The TASKS channel gets the newest version the checkpoint knows.
    assert found.checkpoint["channel_versions"][TASKS] == "00003.1"


def test_a_v3_checkpoint_without_versions_asks_for_a_new_one() -> None:
    found = build_tuple(
        SERDE, _row(3, "c1", {}), [], [], [_send("t", 0, 1)], next_version=lambda: "v-next"
    )
    assert found.checkpoint["channel_versions"] == {TASKS: "v-next"}
    assert found.checkpoint["channel_values"] == {TASKS: [1]}


def test_v4_checkpoints_and_roots_are_left_alone() -> None:
    sends = [_send("t", 0, "ignored")]
    for row in (_row(4, "c1", {"x": "1"}), _row(3, None, {"x": "1"})):
        found = build_tuple(SERDE, row, [], [], sends, next_version=lambda: "unused")
        assert TASKS not in found.checkpoint["channel_values"]
        assert found.checkpoint["channel_versions"] == {"x": "1"}
