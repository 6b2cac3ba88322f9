"""`CompressedSerializer`: compress large payloads, tag them `+zstd` or `+zlib`."""

from __future__ import annotations

from typing import Literal

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncryptedSerializer

from lg_sqla.serde import _compression
from lg_sqla.serde._base import LayeredSerializer, reject_layered_inner
from lg_sqla.serde.encrypted import EncryptedSerializer
from lg_sqla.serde.tags import Compression, parse_type_tag

__all__ = ["DEFAULT_THRESHOLD_BYTES", "CompressedSerializer"]

DEFAULT_THRESHOLD_BYTES = 1024
"""Payloads up to this size are stored as they are: below it, savings are a few bytes."""


class CompressedSerializer(LayeredSerializer):
    """Serializer that compresses payloads larger than a threshold.

    A compressed row's type gets `+zstd` (with the `zstandard` package, the
    default when it is installed) or `+zlib` (standard library), e.g.
    `msgpack+zstd`. Small payloads, and payloads that would not shrink, are
    stored unchanged. Reading handles both tags and uncompressed rows whatever
    the current settings; a `+zstd` row without `zstandard` installed raises
    `MissingDependencyError`.

    To encrypt as well, wrap this in an `EncryptedSerializer`: compression must
    happen before encryption, so the reverse stacking is refused.

    Args:
        inner: the serializer to compress the output of (default `JsonPlusSerializer()`).
        threshold_bytes: compress payloads longer than this many bytes.
        level: compression level; defaults to 3 for zstd and 6 for zlib.
        algorithm: `"zstd"` or `"zlib"`; by default zstd if importable, else zlib.
        max_decompressed_bytes: refuse to inflate a payload beyond this size
            (`None`: no limit); guards against decompression bombs planted by
            someone with write access to the database.

    Raises:
        MissingDependencyError: `algorithm="zstd"` and `zstandard` is not installed.
        TypeError: `inner` is an encrypting or compressing serializer.
        ValueError: a negative threshold or limit, or a level out of range.
    """

    def __init__(
        self,
        inner: SerializerProtocol | None = None,
        *,
        threshold_bytes: int = DEFAULT_THRESHOLD_BYTES,
        level: int | None = None,
        algorithm: Compression | None = None,
        max_decompressed_bytes: int | None = _compression.DEFAULT_MAX_DECOMPRESSED_BYTES,
    ) -> None:
        reject_layered_inner(
            inner,
            outer="CompressedSerializer",
            forbidden=(CompressedSerializer, EncryptedSerializer, LangGraphEncryptedSerializer),
        )
        super().__init__(inner)
        if threshold_bytes < 0:
            raise ValueError(f"threshold_bytes must be >= 0, got {threshold_bytes}")
        if max_decompressed_bytes is not None and max_decompressed_bytes < 0:
            raise ValueError(
                f"max_decompressed_bytes must be >= 0 or None, got {max_decompressed_bytes}"
            )
        if algorithm is None:
            algorithm = "zstd" if _compression.zstd_available() else "zlib"
        elif algorithm == "zstd":
            _compression._zstd("CompressedSerializer(algorithm='zstd')")
        elif algorithm != "zlib":
            raise ValueError(f"algorithm must be 'zstd' or 'zlib', got {algorithm!r}")
        self._algorithm: Compression = algorithm
        self._level = _compression.check_level(
            algorithm, _compression.DEFAULT_LEVELS[algorithm] if level is None else level
        )
        self._threshold = threshold_bytes
        self._max_decompressed = max_decompressed_bytes

    @property
    def algorithm(self) -> Literal["zstd", "zlib"]:
        """The compression new rows get."""
        return self._algorithm

    @property
    def level(self) -> int:
        """The compression level."""
        return self._level

    @property
    def threshold_bytes(self) -> int:
        """Payloads longer than this are compressed."""
        return self._threshold

    @property
    def max_decompressed_bytes(self) -> int | None:
        """The largest payload reading will inflate to (`None`: unlimited)."""
        return self._max_decompressed

    def _apply(self, tag: str, data: bytes) -> tuple[str, bytes]:
        parsed = parse_type_tag(tag)
        if parsed.compression is not None or parsed.encryption is not None:
            raise TypeError(
                f"the inner serializer returned type {tag!r}, which already has layers; "
                "CompressedSerializer expects a plain serializer such as JsonPlusSerializer"
            )
        if len(data) <= self._threshold:
            return tag, data
        packed = _compression.compress(self._algorithm, data, self._level)
        # Incompressible input (already-compressed bytes, say) grows slightly;
        # keeping it raw costs nothing to read.
        if len(packed) >= len(data):
            return tag, data
        return f"{tag}+{self._algorithm}", packed

    def _decompression_limit(self) -> int | None:
        return self._max_decompressed

    def __repr__(self) -> str:
        return (
            f"CompressedSerializer({self._inner!r}, threshold_bytes={self._threshold}, "
            f"level={self._level}, algorithm={self._algorithm!r})"
        )
