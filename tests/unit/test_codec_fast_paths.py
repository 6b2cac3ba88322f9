"""The codec's fast paths decide as its slow ones do.

``json_values.json_loads`` reads stored JSON by orjson where that gives the values
``json.loads`` gives (integers past 64 bits, NaN, lone surrogates: by ``json.loads``);
``checks.check_json`` accepts plain JSON in one walk without names and refuses, naming
the culprit, exactly what the named walk refuses.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lg_sqla.checkpoint import checks, codec, json_values
from lg_sqla.errors import InvalidInputError

keys = st.text() | st.integers() | st.booleans() | st.none()
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 2, max_value=2**70)
    | st.integers(min_value=-(2**70), max_value=-(2**63) + 2)
    | st.floats()
    | st.text()
    | st.text(alphabet="0123456789", min_size=18, max_size=40)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(keys, inner, max_size=4)
    ),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equal as read JSON: same types (an int is not a float), NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@given(values, st.sampled_from([(", ", ": "), (",", ":")]))
def test_json_loads_reads_what_json_loads_reads(value: Any, separators: Any) -> None:
    try:
        text = json.dumps(value, separators=separators)
    except (TypeError, ValueError):
        return  # (keys json.dumps cannot write)
    assert _same(json_values.json_loads(text), json.loads(text))
    assert _same(json_values.json_loads(text.encode("utf-8")), json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        '{"n": 123456789012345678901234567890}',
        '{"n":-18446744073709551616}',
        "[18446744073709551616, 1]",
        '{"n": NaN, "m": -Infinity}',
        '{"s": "\\ud800"}',
        '{"version": "00000000000000000000000000000002.0.5", "n": 9223372036854775807}',
    ],
)
def test_json_loads_keeps_what_orjson_would_not(text: str) -> None:
    assert _same(json_values.json_loads(text), json.loads(text))


def _named_walk_refuses(value: Any, depth: int) -> bool:
    try:
        checks.check_json_named("metadata", value, depth)
    except InvalidInputError:
        return True
    return False


@given(values, st.integers(min_value=0, max_value=2))
def test_check_json_refuses_what_the_named_walk_refuses(value: Any, depth: int) -> None:
    refused = _named_walk_refuses(value, depth)
    if refused:
        with pytest.raises(InvalidInputError, match="metadata"):
            checks.check_json("metadata", value, depth)
    else:
        assert checks.check_json("metadata", value, depth) is value


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for n in range(levels):
        value = {"k": value} if n % 2 else [value]
    return value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": [1, {"b": 2**63}]}, r"metadata\['a'\]\[1\]\['b'\] is 9223372036854775808"),
        ({"a": float("nan")}, r"metadata\['a'\] is nan"),
        ({"a": "x\x00"}, "NUL"),
        ({"a": {1: "int key"}}, "non-str key 1"),
        ({"a": "\ud800"}, "lone surrogate"),
        ({"a": {1, 2}}, "is a set"),
        ({"deep": _nested(31)}, "nested 32 levels deep"),
    ],
)
def test_check_json_names_the_culprit(value: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        checks.check_json("metadata", value)


def test_check_json_accepts_json_up_to_the_depth_limit_and_str_subclasses() -> None:
    class Label(str):
        pass

    assert checks.check_json("metadata", {"deep": _nested(30)}) is not None
    labelled = {Label("k"): [Label("v"), True, None, 1.5]}
    assert checks.check_json("metadata", labelled) is labelled


def test_json_loads_reads_pretty_printed_long_integers_exactly() -> None:
    text = json.dumps({"n": [-(2**63) - 1, 2**64]}, indent=2)
    assert json_values.json_loads(text) == {"n": [-(2**63) - 1, 2**64]}


@pytest.mark.parametrize(
    ("part", "value", "stored"),
    [
        ("ts", "2026\x00-01", "2026-01"),
        ("updated_channels", ["a\x00", "b"], ["a", "b"]),
        ("pending_sends", [{"k": "x\x00"}], [{"k": "x"}]),
        ("extra", {"n\x00": 1.5}, {"n": 1.5}),
        ("updated_channels", ["a", "b"], ["a", "b"]),
        ("v", 4, 4),
    ],
)
def test_checkpoint_document_strips_nul_outside_channels(
    part: str, value: Any, stored: Any
) -> None:
    """The loop that checks the common members without serializing them strips
    exactly what strip_nul stripped (PostgreSQL refuses U+0000)."""
    checkpoint: Any = {
        "v": 4,
        "id": "c1",
        "ts": "2026-01",
        "channel_values": {},
        "channel_versions": {"a": 1},
        "versions_seen": {},
        "updated_channels": None,
        "pending_sends": [],
    }
    checkpoint[part] = value
    document = codec.dump_checkpoint_document(checkpoint)
    assert document[part] == stored
    assert "\\u0000" not in json.dumps(document)


def _document_with(versions_seen: dict[Any, Any]) -> Any:
    checkpoint: Any = {
        "v": 4,
        "id": "c1",
        "ts": "2026-01",
        "channel_values": {},
        "channel_versions": {"a": "0001.5", "b": 2},
        "versions_seen": versions_seen,
        "updated_channels": None,
    }
    return codec.dump_checkpoint_document(checkpoint)


@pytest.mark.parametrize(
    ("seen", "stored"),
    [
        ({"a": "0001.5", "b": "2"}, {"a": "0001.5", "b": "2"}),  # every key passed before
        ({"a": "0001.5", "b": 2}, {"a": "0001.5", "b": "2"}),  # an int version
        ({"a": 2.5, "b": "2"}, {"a": "2.5", "b": "2"}),  # a float version
        ({"new channel": "0001.5"}, {"new channel": "0001.5"}),  # a name not seen yet
        ({"a": "a version not seen yet"}, {"a": "a version not seen yet"}),
        ({"a": ["unhashable"]}, {"a": "['unhashable']"}),  # (its str(), as ever)
        ({}, {}),
    ],
)
def test_versions_seen_are_stored_as_strings_whether_or_not_they_passed_before(
    seen: dict[Any, Any], stored: dict[str, str]
) -> None:
    """A node's versions_seen is copied as it is where its channel names and versions
    passed their checks before (the document's channel_versions are checked first),
    else stringified and checked one by one: the same stored strings either way."""
    for _ in range(2):  # (not passed yet, then passed)
        document = _document_with({"node": seen})
        assert document["versions_seen"] == {"node": stored}
        assert all(type(v) is str for v in document["versions_seen"]["node"].values())


@pytest.mark.parametrize(
    ("seen", "error"),
    [
        ({"a": "v\x00"}, "channel version"),
        ({"a": "v" * 200}, "channel version"),
        ({"a\x00": "0001.5"}, "channel name"),
        ({"x" * 300: "0001.5"}, "channel name"),
    ],
)
def test_versions_seen_refuse_what_channel_versions_refuse(
    seen: dict[Any, Any], error: str
) -> None:
    """A bad channel name or version in versions_seen is refused, naming it, even
    beside names and versions that passed before."""
    _document_with({"node": {"a": "0001.5"}})  # (these passed)
    with pytest.raises(InvalidInputError, match=error):
        _document_with({"node": {"b": "2", **seen}})


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "__error__", "__resume__"]), values)))
def test_write_rows_packed_by_the_codec_are_the_serializers_rows(writes: Any) -> None:
    """put_writes packs int and ASCII str values itself under LangGraph's plain
    serializer (``codec.packs_plainly``): the rows, stored type and bytes included,
    are those its own ``dumps_typed`` gives for every value (or the same error)."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()
    assert codec.packs_plainly(serde)
    shared = ("t", "ns", "c", "2026-01-01 00:00:00.000000", None)

    def rows(packs_plain: bool) -> Any:
        try:
            return codec.dump_writes(serde, writes, "task", "", shared, packs_plain)
        except Exception as error:  # (an int past 64 bits: refused by both)
            return type(error), str(error)

    assert rows(True) == rows(False)


def test_only_langgraphs_plain_serializer_has_its_writes_packed_by_the_codec() -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    class Tagged(JsonPlusSerializer):
        pass

    assert not codec.packs_plainly(Tagged())
    assert not codec.packs_plainly(EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16))
