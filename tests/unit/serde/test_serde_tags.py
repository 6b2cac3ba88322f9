"""The type-tag grammar."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lg_sqla.serde import KeyConfigurationError, TypeTag, UnsupportedTagError, parse_type_tag
from lg_sqla.serde.tags import gcm_layer, validate_key_id


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("msgpack", TypeTag("msgpack")),
        ("null", TypeTag("null")),
        ("json", TypeTag("json")),
        ("msgpack+zstd", TypeTag("msgpack", "zstd")),
        ("bytes+zlib", TypeTag("bytes", "zlib")),
        ("msgpack+aes", TypeTag("msgpack", None, "aes")),
        ("msgpack+aesgcm:k1", TypeTag("msgpack", None, "aesgcm:k1")),
        ("msgpack+zstd+aesgcm:2025-01.a_b", TypeTag("msgpack", "zstd", "aesgcm:2025-01.a_b")),
        ("msgpack+zlib+aes", TypeTag("msgpack", "zlib", "aes")),
        ("msgpack+aesgcm:aes", TypeTag("msgpack", None, "aesgcm:aes")),
        ("empty", TypeTag("empty")),
    ],
)
def test_parse(tag: str, expected: TypeTag) -> None:
    parsed = parse_type_tag(tag)
    assert parsed == expected
    assert str(parsed) == tag


def test_properties() -> None:
    parsed = parse_type_tag("msgpack+zstd+aesgcm:k1")
    assert parsed.key_id == "k1"
    assert parsed.unencrypted == "msgpack+zstd"
    assert parse_type_tag("msgpack+aes").key_id is None
    assert parse_type_tag("msgpack+aes").unencrypted == "msgpack"


@pytest.mark.parametrize(
    "tag",
    [
        "",
        "+aes",
        "msgpack+",
        "msgpack+gzip",
        "msgpack+aes+zstd",  # encryption must be outermost
        "msgpack+zstd+zstd",
        "msgpack+zstd+zlib",
        "msgpack+aes+aes",
        "msgpack+aesgcm:",  # empty key id
        "msgpack+aesgcm:a b",
        "msgpack+aesgcm:" + "k" * 33,
        "msgpack+AES",
        "msgpack+aesgcm:k1+aesgcm:k2",
        "msgpack+kms",  # a custom LangGraph cipher name
    ],
)
def test_rejects(tag: str) -> None:
    with pytest.raises(UnsupportedTagError):
        parse_type_tag(tag)


def test_rejects_non_str() -> None:
    with pytest.raises(UnsupportedTagError, match="must be a str"):
        parse_type_tag(b"msgpack")  # type: ignore[arg-type]


@pytest.mark.parametrize("key_id", ["", "a:b", "a+b", "a,b", " a", "\u00e9", "k" * 33])
def test_invalid_key_ids(key_id: str) -> None:
    with pytest.raises(KeyConfigurationError, match="invalid key id"):
        validate_key_id(key_id)
    with pytest.raises(KeyConfigurationError):
        gcm_layer(key_id)


_BASE = st.text(st.characters(blacklist_characters="+"), min_size=1, max_size=12)
_KEY_ID = st.text("abcXYZ019_.-", min_size=1, max_size=32)


@settings(max_examples=100, deadline=None)
@given(
    base=_BASE,
    compression=st.sampled_from([None, "zstd", "zlib"]),
    encryption=st.one_of(st.none(), st.just("aes"), _KEY_ID.map(gcm_layer)),
)
def test_format_parse_round_trip(
    base: str, compression: str | None, encryption: str | None
) -> None:
    tag = TypeTag(base, compression, encryption)  # type: ignore[arg-type]
    assert parse_type_tag(str(tag)) == tag


def test_longest_tag_fits_the_type_column() -> None:
    from lg_sqla import limits
    from lg_sqla.serde import CompressedSerializer, EncryptedSerializer
    from lg_sqla.serde.tags import KEY_ID_MAX_LENGTH

    longest_id = "k" * KEY_ID_MAX_LENGTH
    serde = EncryptedSerializer.gcm(
        {longest_id: bytes(32)}, CompressedSerializer(threshold_bytes=0)
    )
    type_tag, _ = serde.dumps_typed(bytearray(b"a" * 1000))
    assert type_tag == f"bytearray+zstd+aesgcm:{longest_id}"
    assert len(type_tag) == 54 <= limits.BLOB_TYPE_MAX


def test_error_hierarchy() -> None:
    from lg_sqla import LgSqlaError
    from lg_sqla.serde import (
        DecompressionError,
        DecryptionError,
        KeyConfigurationError,
        MissingDependencyError,
        MissingKeyError,
        PlaintextRejectedError,
        SerdeError,
    )

    for error in (
        DecompressionError,
        DecryptionError,
        KeyConfigurationError,
        MissingDependencyError,
        MissingKeyError,
        PlaintextRejectedError,
        UnsupportedTagError,
    ):
        assert issubclass(error, SerdeError)
    assert issubclass(SerdeError, LgSqlaError)
    assert issubclass(MissingKeyError, LookupError)
    assert issubclass(MissingDependencyError, ImportError)
    assert issubclass(KeyConfigurationError, ValueError)
