"""The JSON paths and value matching of thread search (no database)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from lg_sqla import InvalidInputError
from lg_sqla.inspection.thread_search import (
    _extract_paths,
    _leaves,
    _matches,
    _parse_path,
    _resolve_sort,
    _rooted_path,
    _value_leaves,
)


def test_paths_parse_keys_indexes_and_quoted_keys() -> None:
    assert _parse_path("messages[-1].content", "p") == ("messages", -1, "content")
    assert _parse_path('doc["a.b"][0].c d', "p") == ("doc", "a.b", 0, "c d")
    assert _parse_path("order_id", "p") == ("order_id",)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "non-empty"),
        ("a..b", "character 2"),
        (".a", "character 1"),
        ("a[", "character 2"),
        ("a[x]", "character 2"),
        ("[0]", "must begin with a key"),
        ("a.", "character 2"),
    ],
)
def test_malformed_paths_name_the_place(text: str, where: str) -> None:
    with pytest.raises(InvalidInputError, match=where):
        _parse_path(text, "values filter")


def test_rooted_paths_need_values_channel_or_metadata() -> None:
    assert _rooted_path("values.messages[-1]", "x") == ("values", "messages", -1)
    assert _rooted_path("metadata", "x") == ("metadata",)
    for bad in ("values", "values[0]", "state.a"):
        with pytest.raises(InvalidInputError, match="extract"):
            _rooted_path(bad, "extract 'x'")


@dataclass
class Order:
    id: int
    lines: list[str]


def test_matching_steps_into_messages_objects_and_mappings() -> None:
    values = {
        "messages": [HumanMessage("hi"), AIMessage("bye")],
        "order": Order(3, ["a", "b"]),
        "customer": {"tier": "gold", "vip": True, "n": 1},
    }
    assert _matches(values, _value_leaves({"messages[-1].content": "bye"}))
    assert _matches(values, _value_leaves({"messages[0].type": "human"}))
    assert _matches(values, _value_leaves({"order.id": 3, "order.lines": ["a", "b"]}))
    assert _matches(values, _value_leaves({"customer": {"tier": "gold"}}))  # containment
    assert not _matches(values, _value_leaves({"customer": {"tier": "gold", "x": 1}}))
    assert _matches(values, _value_leaves({"customer.x": None}))  # None: missing too
    assert not _matches(values, _value_leaves({"customer.n": True}))  # true is not 1
    assert not _matches(values, _value_leaves({"customer.vip": 1}))
    assert not _matches(values, _value_leaves({"messages[5].content": "bye"}))
    assert not _matches(values, _value_leaves({"order.__class__": "x"}))  # no private steps
    found = _extract_paths(values, {"user": "ada"}, {"m": ("values", "messages", -1, "content")})
    assert found == {"m": "bye"}
    assert _extract_paths(values, {"user": "ada"}, {"u": ("metadata", "user")}) == {"u": "ada"}
    assert _extract_paths(values, {}, {"u": ("metadata", "nope")}) == {"u": None}


def test_leaves_and_sorts() -> None:
    assert _leaves((), {"a": {"b": 1, "c": [1]}, "d": {}}) == [
        (("a", "b"), 1),
        (("a", "c"), [1]),
        (("d",), {}),
    ]
    assert _resolve_sort(None, None, None).order == "last_write"
    assert _resolve_sort(None, "thread_id", None).descending is False
    assert _resolve_sort(None, "state_updated_at", "asc").order == "state_update"
    with pytest.raises(InvalidInputError, match="sort_order needs sort_by"):
        _resolve_sort(None, None, "asc")
