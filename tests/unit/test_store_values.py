"""The store's JSON value check names its culprit, on its fast path for a dict of
plain scalars as on the full one (``store._validate.check_json_value``)."""

from __future__ import annotations

import enum
import re
from typing import Any

import pytest

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
