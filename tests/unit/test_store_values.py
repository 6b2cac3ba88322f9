"""The store's JSON value check names its culprit, on its fast path for a dict of
plain scalars as on the full one (``store._validate.check_json_value``)."""

from __future__ import annotations

import enum
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lg_sqla.errors import InvalidInputError
from lg_sqla.store._validate import check_json_value


class Level(enum.IntEnum):
    LOW = 1


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ({"a\x00": 1}, "value key 'a\\x00' contains a NUL"),
        ({1: "x"}, "value key 1 must be a str, got int"),
        ({"a": "x\x00"}, "value['a'] contains a NUL"),
        ({"a": float("nan")}, "value['a'] is nan"),
        ({"a": {"b": [1, object()]}}, "value['a']['b'][1] is a object"),
    ],
)
def test_the_culprit_is_named(value: dict[Any, Any], named: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(named)):
        check_json_value("value", value)


def test_plain_values_and_int_subclasses_pass() -> None:
    check_json_value("value", {"a": 1, "b": True, "c": None, "d": "x", "e": 1.5, "f": Level.LOW})
    check_json_value("value", {"a": [{"b": "c"}], "d": {"e": [1, 2.5, None]}})


_FILTER_MEMBERS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=4)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.sampled_from(["a", "$eq", "$ne"]), st.integers(), max_size=2)
)


@given(wanted=st.dictionaries(st.text(max_size=3), _FILTER_MEMBERS, max_size=4))
def test_a_filters_shape_is_the_walks_whatever_its_members(wanted: dict[str, Any]) -> None:
    """Filters of plain members (text, 64-bit ints, None) take a shortcut to their shape
    and values: the same the full walk finds, so they share its statement."""
    from lg_sqla.store._sql import _walked_filter, flatten_filter

    shape, values = flatten_filter(wanted)
    walked_shape, walked_values = _walked_filter(wanted)
    assert shape == walked_shape
    assert [(type(v), v) for v in values] == [(type(v), v) for v in walked_values]
