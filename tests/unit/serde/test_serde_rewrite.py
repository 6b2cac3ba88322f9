"""needs_rewrite / rewrite: the building blocks of key rotation."""

from __future__ import annotations

from typing import ClassVar

import ormsgpack
import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from lg_sqla.serde import (
    CompressedSerializer,
    EncryptedSerializer,
    MissingKeyError,
    PlaintextRejectedError,
    UnsupportedTagError,
    needs_rewrite,
    rewrite,
    target_encryption_layer,
)

K1, K2 = bytes(range(32)), bytes(range(100, 132))
EAX_KEY = b"0123456789abcdef"
BIG = {"text": "lorem ipsum dolor " * 200}

PLAIN = JsonPlusSerializer()
COMPRESSED = CompressedSerializer()
EAX = EncryptedSerializer.eax(EAX_KEY)
GCM_K1 = EncryptedSerializer.gcm({"k1": K1})
GCM_K2 = EncryptedSerializer.gcm({"k2": K2, "k1": K1}, CompressedSerializer(), eax_key=EAX_KEY)


@pytest.mark.parametrize(
    ("tag", "serializer", "expected"),
    [
        ("msgpack", PLAIN, False),
        ("msgpack+zstd", PLAIN, False),
        ("msgpack+aes", PLAIN, True),
        ("msgpack", COMPRESSED, False),
        ("msgpack+zlib", COMPRESSED, False),
        ("msgpack", EAX, True),
        ("msgpack+aes", EAX, False),
        ("msgpack+zstd+aes", EAX, False),
        ("msgpack+aesgcm:k1", EAX, True),
        ("msgpack", GCM_K2, True),
        ("null", GCM_K2, True),
        ("msgpack+zstd", GCM_K2, True),
        ("msgpack+aes", GCM_K2, True),
        ("msgpack+aesgcm:k1", GCM_K2, True),
        ("msgpack+aesgcm:k2", GCM_K2, False),
        ("msgpack+zstd+aesgcm:k2", GCM_K2, False),
        ("msgpack+aesgcm:k2", GCM_K1, True),
        ("msgpack+aesgcm:gone", GCM_K2, True),
    ],
)
def test_needs_rewrite(tag: str, serializer: object, expected: bool) -> None:
    assert needs_rewrite(tag, serializer) is expected  # type: ignore[arg-type]


def test_needs_rewrite_rejects_bad_tags() -> None:
    with pytest.raises(UnsupportedTagError):
        needs_rewrite("msgpack+rot13", GCM_K2)


def test_target_layer() -> None:
    assert target_encryption_layer(PLAIN) is None
    assert target_encryption_layer(COMPRESSED) is None
    assert target_encryption_layer(EAX) == "aes"
    assert target_encryption_layer(GCM_K2) == "aesgcm:k2"
    with pytest.raises(TypeError, match="LangGraph's EncryptedSerializer"):
        target_encryption_layer(LangGraphEncrypted.from_pycryptodome_aes(key=EAX_KEY))


@pytest.mark.parametrize(
    "writer",
    [PLAIN, COMPRESSED, EAX, GCM_K1, CompressedSerializer(algorithm="zlib")],
    ids=["plain", "compressed", "eax", "gcm-k1", "zlib"],
)
@pytest.mark.parametrize(
    "value", [None, b"raw", {"a": 1}, BIG], ids=["none", "bytes", "small", "big"]
)
def test_rewrite_to_current_primary(writer: object, value: object) -> None:
    type_tag, data = writer.dumps_typed(value)  # type: ignore[attr-defined]
    new_tag, new_data = rewrite(type_tag, data, GCM_K2)
    assert new_tag.endswith("+aesgcm:k2")
    assert not needs_rewrite(new_tag, GCM_K2)
    assert GCM_K2.loads_typed((new_tag, new_data)) == value
    # Same shape as a fresh write of the value (compression follows the size rule).
    assert new_tag == GCM_K2.dumps_typed(value)[0]


def test_rewrite_from_langgraph_eax_rows() -> None:
    row = LangGraphEncrypted.from_pycryptodome_aes(key=EAX_KEY).dumps_typed(BIG)
    new_row = rewrite(*row, GCM_K2)
    assert new_row[0] == "msgpack+zstd+aesgcm:k2"
    assert GCM_K2.loads_typed(new_row) == BIG


def test_rewrite_to_plaintext_with_a_source() -> None:
    row = GCM_K2.dumps_typed(BIG)
    with pytest.raises(MissingKeyError, match="key id 'k2'"):
        rewrite(*row, PLAIN)
    assert rewrite(*row, PLAIN, source=GCM_K2) == PLAIN.dumps_typed(BIG)


def test_rewrite_honours_allow_plaintext() -> None:
    strict = EncryptedSerializer.gcm({"k1": K1}, allow_plaintext=False)
    row = PLAIN.dumps_typed({"a": 1})
    with pytest.raises(PlaintextRejectedError):
        rewrite(*row, strict)
    migrated = rewrite(*row, strict, source=GCM_K1)
    assert strict.loads_typed(migrated) == {"a": 1}


class Tripwire:
    """Records construction: rewrite must never revive the objects in a row."""

    built: ClassVar[list[object]] = []

    def __init__(self, **kwargs: object) -> None:
        Tripwire.built.append(kwargs)


def test_rewrite_does_not_deserialize() -> None:
    # A row naming an arbitrary class (EXT_CONSTRUCTOR_KW_ARGS = 2) as a DB writer could plant.
    ext = ormsgpack.Ext(2, ormsgpack.packb((__name__, "Tripwire", {"x": 1})))
    row = ("msgpack", ormsgpack.packb({"payload": ext}))
    Tripwire.built.clear()
    new_row = rewrite(*row, GCM_K2)
    assert Tripwire.built == []
    # The bytes inside are carried over exactly.
    assert rewrite(*new_row, PLAIN, source=GCM_K2) == row
    # Loading it in permissive mode is what would construct it.
    permissive = EncryptedSerializer.gcm(
        {"k2": K2}, CompressedSerializer(JsonPlusSerializer(allowed_msgpack_modules=True))
    )
    permissive.loads_typed(new_row)
    assert Tripwire.built == [{"x": 1}]
