"""Property tests: LangGraph-typical values survive every serializer combination."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from serde_strategies import (
    COMBINATIONS,
    CUSTOM_TYPES,
    EAX_KEY,
    K1,
    K2,
    canon,
    strict,
    top_level,
)

from lg_sqla.serde import CompressedSerializer, EncryptedSerializer, parse_type_tag, rewrite


@pytest.mark.parametrize("name", list(COMBINATIONS))
@settings(max_examples=60, deadline=None)
@given(value=top_level)
def test_round_trip(name: str, value: Any) -> None:
    serde = COMBINATIONS[name]
    type_tag, data = serde.dumps_typed(value)
    parsed = parse_type_tag(type_tag)
    assert (parsed.encryption is not None) == ("gcm" in name or "eax" in name)
    assert canon(serde.loads_typed((type_tag, data))) == canon(value)


ROTATION_TARGET = EncryptedSerializer.gcm(
    {"k2": K2, "k1": K1}, CompressedSerializer(strict(), threshold_bytes=64), eax_key=EAX_KEY
).with_msgpack_allowlist(CUSTOM_TYPES)


@pytest.mark.parametrize("name", list(COMBINATIONS))
@settings(max_examples=25, deadline=None)
@given(value=top_level)
def test_rewrite_preserves_value(name: str, value: Any) -> None:
    row = COMBINATIONS[name].dumps_typed(value)
    new_tag, new_data = rewrite(*row, ROTATION_TARGET)
    assert parse_type_tag(new_tag).key_id == "k2"
    assert canon(ROTATION_TARGET.loads_typed((new_tag, new_data))) == canon(value)


LANGGRAPH_EAX = LangGraphEncrypted.from_pycryptodome_aes(
    JsonPlusSerializer(allowed_msgpack_modules=True), key=EAX_KEY
)


@settings(max_examples=40, deadline=None)
@given(value=top_level)
def test_eax_interop_with_langgraph(value: Any) -> None:
    ours = COMBINATIONS["eax"]
    assert canon(LANGGRAPH_EAX.loads_typed(ours.dumps_typed(value))) == canon(value)
    assert canon(ours.loads_typed(LANGGRAPH_EAX.dumps_typed(value))) == canon(value)
