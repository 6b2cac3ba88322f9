"""Which values a put keeps in the checkpoint document (``codec.dump_values``).

Only under LangGraph's own plain serializer, only the exact types JSON stores
unchanged on every database, and the same decision in ``dump_values``' inlined
checks as in ``fits_inline``.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from lg_sqla.checkpoint import codec
from lg_sqla.serde import CompressedSerializer, EncryptedSerializer

PRIMITIVES = frozenset({type(None), bool, int, str})


class Mine(JsonPlusSerializer):
    """A user's own serializer (a subclass may store anything under any tag)."""


class Level(enum.IntEnum):
    HIGH = 3


def test_only_the_plain_serializer_inlines_values_carrying_data() -> None:
    assert codec.inline_types(JsonPlusSerializer()) == PRIMITIVES
    assert codec.inline_types(JsonPlusSerializer(allowed_msgpack_modules=None)) == PRIMITIVES
    for serde in (
        Mine(),
        EncryptedSerializer.gcm({"k1": bytes(range(32))}),
        CompressedSerializer(),
    ):
        kinds = codec.inline_types(serde)
        assert not kinds & {bool, int, str}, (serde, kinds)
    assert codec.inline_types(EncryptedSerializer.gcm({"k1": bytes(range(32))})) == frozenset()


@pytest.mark.parametrize(
    ("value", "inline"),
    [
        (True, True),
        (0, True),
        (2**63 - 1, True),
        (-(2**63), True),
        (2**63, False),
        ("", True),
        ("x" * codec.INLINE_STR_MAX, True),
        ("x" * (codec.INLINE_STR_MAX + 1), False),
        ("a\x00", False),
        ("\ud800", False),
        (1.0, False),
        (float("nan"), False),
        (Level.HIGH, False),
        (b"x", False),
        ([1], False),
        (None, True),
    ],
)
def test_fits_inline(value: Any, inline: bool) -> None:
    assert codec.fits_inline(value, PRIMITIVES) is inline


@given(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.text(max_size=codec.INLINE_STR_MAX + 2)
    | st.floats()
)
def test_dump_values_inlines_what_fits_inline(value: Any) -> None:
    serde = JsonPlusSerializer()
    try:
        serde.dumps_typed(value)
    except Exception:  # (what the serializer refuses, a put refuses too)
        return
    inline, rows = codec.dump_values(serde, {"c": value}, {"c": "1"}, {"c": "1"})
    if codec.fits_inline(value, PRIMITIVES):
        assert inline == {"c": [value]} and rows == []
    else:
        assert inline == {} and [r["channel"] for r in rows] == ["c"]
