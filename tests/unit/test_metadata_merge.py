"""A put's metadata is LangGraph's ``get_serializable_checkpoint_metadata`` (merged with
the config's, NUL stripped, ``writes`` dropped), checked as JSON: ``checks.dump_metadata``
merges the common case in one walk of its own, which must give the very same dict (key
order included: the stored JSON text follows it) as LangGraph's merge, and refuse what
``check_json`` refuses, naming it."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

import pytest
from langgraph.checkpoint.base import get_serializable_checkpoint_metadata

from lg_sqla.checkpoint import checks
from lg_sqla.checkpoint.checks import check_json, strip_nul
from lg_sqla.errors import InvalidInputError


class Color(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


_GRAPH_CONFIG = {
    "configurable": {
        "thread_id": "t",
        "checkpoint_ns": "",
        "checkpoint_id": "1ef",
        "__pregel_send": object(),
        "checkpoint_map": {"": "1ef"},
        "user_id": "u-7",
        "limit": 5,
        "ratio": 0.5,
        "flag": True,
        "model": object(),  # (not a str, int, bool or float: not merged)
        "source": "from-config",  # (metadata has it: metadata's kept)
    },
    "metadata": {"team": "ops", "langgraph_step": 3, "writes": "from-config-metadata"},
}

CASES: list[tuple[dict[str, Any], Any]] = [
    ({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, {"source": "loop", "step": 1}),
    (_GRAPH_CONFIG, {"source": "loop", "step": 2, "parents": {}, "writes": {"node": object()}}),
    (_GRAPH_CONFIG, {"source": "input", "step": -1, "parents": {"": "1ef"}, "run_id": "r"}),
    ({}, {"nested": {"a": [1, "x", None, {"b": True}]}, "f": 1.5, "none": None}),
    ({"configurable": {"note": "a\x00b"}}, {"step": 1}),  # (a NUL in the config: stripped)
    ({"metadata": {"note": "a\x00b", "n": 2}}, {"step": 1, "text": "x\x00y"}),
    ({"configurable": {"color": Color.RED, "level": Level.HIGH}}, {"step": 1}),
    ({}, {"color": Color.RED, "level": Level.HIGH}),
    ({"configurable": {"é": "日本"}}, {"ключ": "значение", "tuple": (1, 2)}),
    ({"configurable": {"writes": "config's"}}, {"step": 1}),  # (merged, then dropped)
    ({}, {"step": 1, "deep": {"x": {"y": {"z": []}}}}),
]


def _langgraphs(config: dict[str, Any], metadata: Any) -> dict[str, Any]:
    merged: dict[str, Any] = get_serializable_checkpoint_metadata(config, metadata)  # type: ignore[arg-type,assignment]
    checked: dict[str, Any] = check_json("metadata", strip_nul(merged))
    return checked


@pytest.mark.parametrize(("config", "metadata"), CASES)
def test_the_merge_is_langgraphs_key_order_and_types_included(
    config: dict[str, Any], metadata: Any
) -> None:
    ours = checks.dump_metadata(config, metadata)  # type: ignore[arg-type]
    expected = _langgraphs(config, metadata)
    assert json.dumps(ours, default=str) == json.dumps(expected, default=str)
    assert [type(v) for v in ours.values()] == [type(v) for v in expected.values()]
    assert "writes" not in ours


@pytest.mark.parametrize(
    ("config", "metadata", "culprit"),
    [
        ({}, {"x": math.nan}, "metadata"),
        ({}, {"x": 2**64}, "outside the 64-bit integers"),
        ({}, {"x": {1: "non-str key"}}, "metadata"),
        ({"configurable": {"x": math.inf}}, {"step": 1}, "metadata"),
        ({"configurable": {"x": -(2**63) - 1}}, {"step": 1}, "outside the 64-bit integers"),
        ({}, {"x": "\ud800"}, "metadata"),
    ],
)
def test_what_json_cannot_hold_is_refused_naming_it(
    config: dict[str, Any], metadata: dict[str, Any], culprit: str
) -> None:
    with pytest.raises(InvalidInputError, match=culprit):
        checks.dump_metadata(config, metadata)  # type: ignore[arg-type]
