"""Ids are checked once per distinct value (``codec.checked_key``): what passed is
remembered, what fails is refused every time, naming the field."""

from __future__ import annotations

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
    assert len(codec._PASSED_KEYS) <= codec._PASSED_KEYS_MAX
