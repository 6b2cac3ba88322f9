"""The JSON text lg_sqla writes to SQLite's JSON and PostgreSQL's JSONB (json_text).

It is written by orjson where orjson writes the same JSON value as ``json.dumps``
and by ``json.dumps`` otherwise: whatever the value, reading the text back gives
what reading ``json.dumps``'s text gives, and what ``json.dumps`` refuses is refused
(except UUIDs and enums, which orjson writes as their str and value: metadata and
store values never bring them, ``check_json`` and the store's ``check_json_value``
refuse them first, and LangGraph's checkpoint document holds none).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lg_sqla.shared import json_text

# Every str (lone surrogates included), integers past 64 bits, non-str keys.
keys = st.text() | st.integers() | st.booleans() | st.none()
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**64 - 2, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=4)
    ),
    max_leaves=12,
)


@given(values)
def test_reads_back_as_json_dumps_does(value: Any) -> None:
    assert json.loads(json_text(value)) == json.loads(json.dumps(value))


class Label(str):
    pass


class Count(int):
    pass


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    "value",
    [
        {Label("k"): Label("v")},
        {"n": Count(3)},
        {"nested": [{"k": Label("v")}], "big": -(2**70)},
        {"\ud800": "lone surrogate key", "v": "\udfff"},
        {1.5: "float key", None: "null key"},
    ],
)
def test_subclasses_and_what_orjson_refuses_are_written_as_json_dumps_writes(value: Any) -> None:
    assert json_text(value) == json.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {"at": dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)},
        {"point": Point(1)},
        {"amount": decimal.Decimal("1.5")},
        {"tags": {"a", "b"}},
    ],
)
def test_what_json_dumps_refuses_is_refused(value: Any) -> None:
    with pytest.raises(TypeError):
        json.dumps(value)
    with pytest.raises(TypeError):
        json_text(value)
