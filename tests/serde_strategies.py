"""Hypothesis strategies of LangGraph-typical values, and serializer combinations.

Shared by the serde unit tests and the saver-level round trips on every dialect.
"""

from __future__ import annotations

import dataclasses
import enum
from collections import deque
from datetime import datetime, timezone
from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Interrupt, Send
from pydantic import BaseModel

from lg_sqla.serde import CompressedSerializer, EncryptedSerializer, with_msgpack_allowlist

EAX_KEY = b"0123456789abcdef0123456789abcdef"
K1, K2 = bytes(range(32)), bytes(range(100, 132))


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str
    tags: list[str]


class Profile(BaseModel):
    name: str
    count: int
    tags: list[str]
    seen: datetime | None = None


CUSTOM_TYPES = [Color, Point, Profile]


def strict() -> JsonPlusSerializer:
    # Strict msgpack plus an allowlist for this module's types: the recommended setup,
    # and a check that the allowlist reaches the innermost serializer of each stack.
    return JsonPlusSerializer(allowed_msgpack_modules=None)


COMBINATIONS: dict[str, SerializerProtocol] = {
    name: with_msgpack_allowlist(serde, CUSTOM_TYPES)
    for name, serde in {
        "plain": strict(),
        "compressed": CompressedSerializer(strict(), threshold_bytes=64),
        "compressed-zlib": CompressedSerializer(strict(), threshold_bytes=64, algorithm="zlib"),
        "eax": EncryptedSerializer.eax(EAX_KEY, strict()),
        "gcm": EncryptedSerializer.gcm({"k1": K1}, strict()),
        "compressed+gcm": EncryptedSerializer.gcm(
            {"k1": K1}, CompressedSerializer(strict(), threshold_bytes=64)
        ),
        "compressed+eax": EncryptedSerializer.eax(
            EAX_KEY, CompressedSerializer(strict(), threshold_bytes=64)
        ),
    }.items()
}

# --- strategies ---------------------------------------------------------------

texts = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
    st.sampled_from(["", "\x00", "a\x00b\x00", "\u65e5\u672c\u8a9e", "\U0001f600", "\u202e\ufeff"]),
)
ids = st.none() | st.uuids().map(str)
aware_or_naive = st.datetimes(timezones=st.none() | st.just(timezone.utc) | st.timezones())

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    texts,
    st.binary(max_size=64),
    st.uuids(),
    st.decimals(allow_nan=False),
    aware_or_naive,
    st.dates(),
    st.timedeltas(),
    st.sampled_from(Color),
)

messages = st.one_of(
    st.builds(HumanMessage, content=texts, id=ids),
    st.builds(SystemMessage, content=texts, id=ids),
    st.builds(ToolMessage, content=texts, tool_call_id=texts, id=ids),
    st.builds(
        AIMessage,
        content=texts,
        id=ids,
        tool_calls=st.lists(
            st.fixed_dictionaries(
                {"name": texts, "args": st.dictionaries(texts, texts, max_size=3), "id": texts}
            ),
            max_size=2,
        ),
    ),
)

objects = st.one_of(
    messages,
    st.builds(
        Point,
        x=st.integers(-1000, 1000),
        y=st.floats(allow_nan=False),
        label=texts,
        tags=st.lists(texts, max_size=3),
    ),
    st.builds(
        Profile,
        name=texts,
        count=st.integers(-(2**31), 2**31),
        tags=st.lists(texts, max_size=3),
        seen=st.none() | st.datetimes(),
    ),
    st.sets(st.integers(-100, 100) | texts, max_size=5),
    st.frozensets(texts, max_size=5),
    st.lists(st.integers(-1000, 1000), max_size=5).map(deque),
    st.builds(Send, node=texts, arg=st.dictionaries(texts, st.integers(-1000, 1000), max_size=3)),
    st.builds(Interrupt, value=texts, id=st.uuids().map(lambda u: u.hex)),
)

values = st.recursive(
    scalars | objects,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=12,
)
top_level = values | st.binary(max_size=2000).map(bytearray) | st.text(max_size=3000)


def canon(value: Any) -> Any:
    """A comparable form that also checks types (so 1 vs 1.0 vs True differ).

    Aware datetimes come back with a fixed-offset tzinfo (LangGraph stores the ISO
    string), and Python compares datetimes in a DST gap or fold unequal across
    zones; what is preserved is the wall time and the UTC offset.
    """
    if isinstance(value, datetime):
        return (datetime, value.replace(tzinfo=None), value.utcoffset())
    if isinstance(value, dict):
        return (dict, {k: canon(v) for k, v in value.items()})
    if isinstance(value, list):
        return (list, [canon(v) for v in value])
    return (type(value), value)
