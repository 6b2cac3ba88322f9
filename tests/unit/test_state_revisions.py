"""The declared state revisions: a chain checked when built, and the pure operations on
checkpoint names and values (lg_sqla.checkpoint.state_migrations)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.serde.types import TASKS, _DeltaSnapshot
from langgraph.types import Send

from lg_sqla import InvalidInputError
from lg_sqla.checkpoint.state_migrations import (
    DROPPED,
    DropChannel,
    RenameChannel,
    RenameNode,
    StateMigrations,
    StateRevision,
    StateRevisionError,
    TransformChannel,
    migrate_names,
    migrate_value,
)

CHAIN = StateMigrations(
    [
        StateRevision("r1", None, [RenameChannel("messages", "chat")]),
        StateRevision("r2", "r1", [TransformChannel("score", str, down=int)]),
        StateRevision("r3", "r2", [RenameNode("agent", "assistant"), DropChannel("scratch")]),
    ]
)


@pytest.mark.parametrize(
    ("revisions", "error"),
    [
        ([StateRevision("r1", "r0")], "parent 'r0', but the revision before it is None"),
        (
            [StateRevision("r1", None), StateRevision("r2", None)],
            "'r2' has parent None, but the revision before it is 'r1'",
        ),
        ([StateRevision("r1", None), StateRevision("r1", "r1")], "'r1' is declared twice"),
        ([StateRevision("x" * 65, None)], "at most 64 characters"),
        ([StateRevision("", None)], "non-empty str"),
        ([StateRevision("r1", None, [RenameChannel("a", "a")])], "renames 'a' to itself"),
        ([StateRevision("r1", None, [TransformChannel("a", 3)])], r"\.value must be callable"),  # type: ignore[arg-type]
        ([StateRevision("r1", None, ["rename"])], "operations are RenameChannel"),  # type: ignore[list-item]
        (["r1"], "not a StateRevision"),
    ],
)
def test_a_malformed_chain_is_refused_naming_the_fault(revisions: list[Any], error: str) -> None:
    with pytest.raises(InvalidInputError, match=error):
        StateMigrations(revisions)


def test_steps_go_up_in_order_and_down_reversed() -> None:
    assert CHAIN.head == "r3"
    up = CHAIN.steps(None, "r2")
    assert [(type(op).__name__, upward) for op, upward in up] == [
        ("RenameChannel", True),
        ("TransformChannel", True),
    ]
    down = CHAIN.steps("r3", "r1")
    assert [type(op).__name__ for op, _ in down] == [
        "DropChannel",
        "RenameNode",
        "TransformChannel",
    ]
    assert not any(upward for _, upward in down)
    assert CHAIN.steps("r2", "r2") == []


def test_an_unknown_revision_is_named_with_what_the_code_knows() -> None:
    with pytest.raises(StateRevisionError, match=r"'r9'.*migrations end at 'r3'"):
        CHAIN.position("r9", row="checkpoint 'c' of thread 't'")
    assert CHAIN.resolve("base") is None and CHAIN.resolve("r1") == "r1"


def test_missing_downgrades_name_each_operation_without_a_way_back() -> None:
    assert CHAIN.missing_downgrades("r2", None) == []
    assert CHAIN.missing_downgrades("r3", "r1") == ["r3: DropChannel('scratch') cannot be undone"]
    no_down = StateMigrations([StateRevision("t", None, [TransformChannel("x", str)])])
    assert no_down.missing_downgrades("t", None) == [
        "t: TransformChannel('x') has no down function"
    ]


def test_names_follow_renames_of_channels_and_nodes_and_drops() -> None:
    document = {
        "v": 4,
        "channel_versions": {"messages": "2", "scratch": "1", "branch:to:agent": "3"},
        "versions_seen": {"agent": {"messages": "1", "branch:to:agent": "2"}, "__input__": {}},
        "updated_channels": ["messages", "scratch"],
    }
    migrated = migrate_names(document, CHAIN.steps(None, "r3"))
    assert migrated["channel_versions"] == {"chat": "2", "branch:to:assistant": "3"}
    assert migrated["versions_seen"] == {
        "assistant": {"chat": "1", "branch:to:assistant": "2"},
        "__input__": {},
    }
    assert migrated["updated_channels"] == ["chat"]
    back = migrate_names(migrated, CHAIN.steps("r3", None))
    assert back["channel_versions"] == {"messages": "2", "branch:to:agent": "3"}


def test_values_transform_through_snapshots_and_writes_and_sends_follow_nodes() -> None:
    steps = CHAIN.steps(None, "r3")
    assert migrate_value(steps, "score", 7) == ("score", "7")
    name, snapshot = migrate_value(steps, "messages", _DeltaSnapshot(["hi"]))
    assert name == "chat" and snapshot == _DeltaSnapshot(["hi"])
    transformed = StateMigrations([StateRevision("t", None, [TransformChannel("log", len)])])
    assert migrate_value(transformed.steps(None, "t"), "log", _DeltaSnapshot(["a", "b"])) == (
        "log",
        _DeltaSnapshot(2),
    )
    assert migrate_value(steps, "scratch", "x")[1] is DROPPED
    sends = [Send("agent", {"q": 1}), Send("other", {})]
    assert migrate_value(steps, TASKS, sends)[1] == [Send("assistant", {"q": 1}), Send("other", {})]
    writes = StateMigrations(
        [StateRevision("w", None, [TransformChannel("n", str, write=lambda v: f"w{v}")])]
    )
    assert migrate_value(writes.steps(None, "w"), "n", 1, write=True) == ("n", "w1")
    assert migrate_value(CHAIN.steps("r2", None), "score", "7") == ("score", 7)
