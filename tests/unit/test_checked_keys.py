"""Ids are checked once per distinct value (``codec.checked_key``): what passed is
remembered, what fails is refused every time, naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from lg_sqla.checkpoint import codec
from lg_sqla.errors import InvalidInputError


def test_a_refused_id_is_refused_every_time_naming_its_field() -> None:
    for _ in range(2):
        with pytest.raises(InvalidInputError, match="thread_id contains a NUL"):
            codec.thread_id_of({"configurable": {"thread_id": "a\x00b"}})
        with pytest.raises(InvalidInputError, match="task_id is 9 characters long"):
            codec.checked_key("task_id", "x" * 9, 8)


def test_a_value_that_passed_one_bound_is_checked_against_another() -> None:
    assert codec.checked_key("task_id", "x" * 9, 100) == "x" * 9
    with pytest.raises(InvalidInputError, match="checkpoint_id is 9 characters long"):
        codec.checked_key("checkpoint_id", "x" * 9, 8)


def test_non_str_values_are_refused_uncached() -> None:
    with pytest.raises(InvalidInputError, match="checkpoint_ns must be a str"):
        codec.checked_text("checkpoint_ns", b"ns")
    with pytest.raises(InvalidInputError, match="task_id must be a str"):
        codec.checked_key("task_id", 7, 8)


def test_the_memory_is_bounded() -> None:
    for n in range(codec._PASSED_KEYS_MAX + 10):
        codec.checked_key("task_id", f"task-{n}", 64)
    assert len(codec._PASSED_KEYS[64]) <= codec._PASSED_KEYS_MAX
    assert all(len(passed) <= codec._PASSED_KEYS_MAX for passed in codec._PASSED_KEYS.values())


def test_a_checkpoints_keys_are_checked_whether_or_not_they_passed_before() -> None:
    """``written_checkpoint`` (put_writes): keys that passed are taken as they are, and
    the same keys as ``thread_id_of``, ``namespace_of`` and ``checkpoint_id_of`` give;
    a key that did not pass is checked, every time."""
    config = {"configurable": {"thread_id": "t-w", "checkpoint_ns": "", "checkpoint_id": "c1"}}
    for _ in range(2):  # (unknown, then passed)
        assert codec.written_checkpoint(config) == ("t-w", "", "c1")  # type: ignore[arg-type]
    assert codec.written_checkpoint({"configurable": {"thread_id": 7}}) == ("7", "", None)
    assert codec.written_checkpoint(
        {"configurable": {"thread_id": "t-w", "checkpoint_ns": None, "checkpoint_id": ""}}
    ) == ("t-w", "", None)
    refused = [
        ({"thread_id": None, "checkpoint_id": "c1"}, "thread_id.. is required"),
        ({"thread_id": "t-w", "checkpoint_ns": "a\x00", "checkpoint_id": "c1"}, "checkpoint_ns"),
        ({"thread_id": "t-w", "checkpoint_id": "c" * 65}, "checkpoint_id is 65 characters"),
        ({"thread_id": "t" * 256, "checkpoint_id": "c1"}, "thread_id is 256 characters"),
    ]
    for _ in range(2):
        for configurable, message in refused:
            with pytest.raises(InvalidInputError, match=message):
                codec.written_checkpoint({"configurable": configurable})  # type: ignore[typeddict-item]


def test_parent_of_put_checks_what_it_has_not_seen() -> None:
    """A put's config: ids that passed before come back as they are; an int thread id
    as its str; an empty parent as None; a bad parent is refused under its own name."""
    config: Any = {"configurable": {"thread_id": "t-p", "checkpoint_ns": "", "checkpoint_id": ""}}
    assert codec.parent_of_put(config) == ("t-p", "", None)
    assert codec.parent_of_put(config) == ("t-p", "", None)  # (passed: the fast path)
    config["configurable"]["checkpoint_id"] = "c-p"
    assert codec.parent_of_put(config) == ("t-p", "", "c-p")
    assert codec.parent_of_put({"configurable": {"thread_id": 7}}) == ("7", "", None)
    config["configurable"]["checkpoint_id"] = "c\x00p"
    with pytest.raises(InvalidInputError, match="parent checkpoint_id contains a NUL"):
        codec.parent_of_put(config)
    with pytest.raises(InvalidInputError, match=r"thread_id\"\] is required"):
        codec.parent_of_put({"configurable": {"checkpoint_ns": ""}})
