"""CompressedSerializer: threshold, algorithms, limits, and stacking with encryption."""

from __future__ import annotations

import os
import sys
import zlib

import pytest
import zstandard
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from lg_sqla.serde import (
    CompressedSerializer,
    DecompressionError,
    EncryptedSerializer,
    MissingDependencyError,
    parse_type_tag,
)

K1 = bytes(range(32))
COMPRESSIBLE = {"messages": [{"role": "user", "content": "the same sentence again. " * 40}] * 50}


def raw_size(value: object) -> int:
    return len(JsonPlusSerializer().dumps_typed(value)[1])


def test_defaults() -> None:
    serde = CompressedSerializer()
    assert serde.algorithm == "zstd"  # zstandard is installed in the test environment
    assert serde.level == 3
    assert serde.threshold_bytes == 1024
    assert isinstance(serde.inner, JsonPlusSerializer)


@pytest.mark.parametrize("algorithm", ["zstd", "zlib"])
def test_threshold_is_exclusive(algorithm: str) -> None:
    value = "a" * 200
    size = raw_size(value)
    at = CompressedSerializer(threshold_bytes=size, algorithm=algorithm)  # type: ignore[arg-type]
    assert at.dumps_typed(value) == JsonPlusSerializer().dumps_typed(value)
    below = CompressedSerializer(threshold_bytes=size - 1, algorithm=algorithm)  # type: ignore[arg-type]
    type_tag, data = below.dumps_typed(value)
    assert type_tag == f"msgpack+{algorithm}"
    assert len(data) < size
    assert below.loads_typed((type_tag, data)) == value


@pytest.mark.parametrize("algorithm", ["zstd", "zlib"])
def test_size_reduction_on_compressible_payload(algorithm: str) -> None:
    serde = CompressedSerializer(algorithm=algorithm)  # type: ignore[arg-type]
    type_tag, data = serde.dumps_typed(COMPRESSIBLE)
    assert type_tag == f"msgpack+{algorithm}"
    assert len(data) * 20 < raw_size(COMPRESSIBLE)
    assert serde.loads_typed((type_tag, data)) == COMPRESSIBLE


def test_stored_bytes_are_a_plain_frame_or_stream() -> None:
    inner = JsonPlusSerializer().dumps_typed(COMPRESSIBLE)[1]
    _, zstd_data = CompressedSerializer(algorithm="zstd").dumps_typed(COMPRESSIBLE)
    assert zstandard.ZstdDecompressor().decompress(zstd_data) == inner
    _, zlib_data = CompressedSerializer(algorithm="zlib").dumps_typed(COMPRESSIBLE)
    assert zlib.decompress(zlib_data) == inner


def test_incompressible_payload_is_stored_raw() -> None:
    noise = os.urandom(10_000)
    assert CompressedSerializer(threshold_bytes=0).dumps_typed(noise) == ("bytes", noise)


def test_small_and_null_payloads_untouched() -> None:
    serde = CompressedSerializer()
    assert serde.dumps_typed(None) == ("null", b"")
    assert serde.dumps_typed({"a": 1}) == JsonPlusSerializer().dumps_typed({"a": 1})


def test_reads_both_tags_and_plain_rows_whatever_it_writes() -> None:
    rows = [
        CompressedSerializer(algorithm="zstd").dumps_typed(COMPRESSIBLE),
        CompressedSerializer(algorithm="zlib").dumps_typed(COMPRESSIBLE),
        JsonPlusSerializer().dumps_typed(COMPRESSIBLE),
    ]
    assert [parse_type_tag(t).compression for t, _ in rows] == ["zstd", "zlib", None]
    for reader in (CompressedSerializer(algorithm="zstd"), CompressedSerializer(algorithm="zlib")):
        assert all(reader.loads_typed(row) == COMPRESSIBLE for row in rows)
    # Turning compression off keeps compressed rows readable.
    assert EncryptedSerializer.gcm({"k1": K1}).loads_typed(rows[0]) == COMPRESSIBLE


def test_falls_back_to_zlib_without_zstandard(monkeypatch: pytest.MonkeyPatch) -> None:
    zstd_row = CompressedSerializer(algorithm="zstd").dumps_typed(COMPRESSIBLE)
    monkeypatch.setitem(sys.modules, "zstandard", None)  # makes `import zstandard` fail
    serde = CompressedSerializer()
    assert serde.algorithm == "zlib"
    assert serde.dumps_typed(COMPRESSIBLE)[0] == "msgpack+zlib"
    with pytest.raises(MissingDependencyError, match=r"'msgpack\+zstd'.*'zstandard' package"):
        serde.loads_typed(zstd_row)
    with pytest.raises(MissingDependencyError, match="'zstandard' package, which is not installed"):
        CompressedSerializer(algorithm="zstd")
    # The error is also an ImportError, the type callers expect for a missing package.
    assert issubclass(MissingDependencyError, ImportError)


def test_zlib_level_is_used() -> None:
    fast = CompressedSerializer(algorithm="zlib", level=1).dumps_typed(COMPRESSIBLE)[1]
    best = CompressedSerializer(algorithm="zlib", level=9).dumps_typed(COMPRESSIBLE)[1]
    inner = JsonPlusSerializer().dumps_typed(COMPRESSIBLE)[1]
    assert fast == zlib.compress(inner, 1)
    assert best == zlib.compress(inner, 9)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"threshold_bytes": -1}, "threshold_bytes must be >= 0"),
        ({"algorithm": "zlib", "level": 10}, "zlib level must be an int from 0 to 9"),
        ({"algorithm": "zstd", "level": 23}, "zstd level must be an int from -131072 to 22"),
        ({"algorithm": "lz4"}, "algorithm must be 'zstd' or 'zlib'"),
        ({"max_decompressed_bytes": -5}, "max_decompressed_bytes must be >= 0"),
    ],
)
def test_bad_settings(kwargs: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        CompressedSerializer(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("algorithm", ["zstd", "zlib"])
def test_decompression_limit(algorithm: str) -> None:
    bomb = "\x00" * 5_000_000
    row = CompressedSerializer(algorithm=algorithm).dumps_typed(bomb)  # type: ignore[arg-type]
    assert len(row[1]) < 5_000
    limited = CompressedSerializer(max_decompressed_bytes=1_000_000)
    with pytest.raises(DecompressionError, match="max_decompressed_bytes limit of 1000000"):
        limited.loads_typed(row)
    assert CompressedSerializer(max_decompressed_bytes=None).loads_typed(row) == bomb


@pytest.mark.parametrize("algorithm", ["zstd", "zlib"])
def test_corrupt_payload(algorithm: str) -> None:
    type_tag, data = CompressedSerializer(algorithm=algorithm).dumps_typed(COMPRESSIBLE)  # type: ignore[arg-type]
    for broken in (data[: len(data) // 2], b"\x00" + data[1:], b""):
        with pytest.raises(DecompressionError, match=f"{algorithm} payload of row tagged"):
            CompressedSerializer().loads_typed((type_tag, broken))


def test_compress_then_encrypt() -> None:
    serde = EncryptedSerializer.gcm({"k1": K1}, CompressedSerializer())
    type_tag, data = serde.dumps_typed(COMPRESSIBLE)
    assert type_tag == "msgpack+zstd+aesgcm:k1"
    assert len(data) * 20 < raw_size(COMPRESSIBLE)
    assert serde.loads_typed((type_tag, data)) == COMPRESSIBLE
    # The encrypted payload is the compressed payload, sealed with the inner tag as AAD.
    inner_tag, inner_data = CompressedSerializer().dumps_typed(COMPRESSIBLE)
    assert inner_tag == "msgpack+zstd"
    assert len(data) == 12 + len(inner_data) + 16
    # Small values are encrypted but not compressed.
    assert serde.dumps_typed({"a": 1})[0] == "msgpack+aesgcm:k1"


def test_compress_then_eax_is_ours_only() -> None:
    serde = EncryptedSerializer.eax(b"0123456789abcdef", CompressedSerializer())
    row = serde.dumps_typed(COMPRESSIBLE)
    assert row[0] == "msgpack+zstd+aes"
    assert serde.loads_typed(row) == COMPRESSIBLE
    # LangGraph splits at the first '+', so it cannot read stacked tags.
    with pytest.raises(AssertionError, match="Unsupported cipher: zstd"):
        LangGraphEncrypted.from_pycryptodome_aes(key=b"0123456789abcdef").loads_typed(row)


@pytest.mark.parametrize(
    "build",
    [
        lambda: CompressedSerializer(EncryptedSerializer.gcm({"k1": K1})),
        lambda: CompressedSerializer(CompressedSerializer()),
        lambda: EncryptedSerializer.gcm({"k1": K1}, EncryptedSerializer.gcm({"k1": K1})),
        lambda: CompressedSerializer(LangGraphEncrypted.from_pycryptodome_aes(key=b"k" * 16)),
        lambda: EncryptedSerializer.gcm(
            {"k1": K1}, LangGraphEncrypted.from_pycryptodome_aes(key=b"k" * 16)
        ),
    ],
    ids=["compress-encrypted", "compress-twice", "encrypt-twice", "compress-lg", "encrypt-lg"],
)
def test_invalid_stacking_refused(build: object) -> None:
    with pytest.raises(TypeError, match="compression inside encryption"):
        build()  # type: ignore[operator]
