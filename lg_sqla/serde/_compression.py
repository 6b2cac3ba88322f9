"""zstd and zlib codecs behind `CompressedSerializer` and the layer decoder."""

from __future__ import annotations

import threading
import zlib
from types import ModuleType
from typing import TYPE_CHECKING, Final

from lg_sqla.serde.errors import DecompressionError, MissingDependencyError
from lg_sqla.serde.tags import Compression

DEFAULT_MAX_DECOMPRESSED_BYTES: Final = 512 * 1024 * 1024
"""Refuse to inflate a single payload beyond this (512 MiB): a row is small, its
decompressed size is chosen by whoever wrote it."""

DEFAULT_LEVELS: Final[dict[Compression, int]] = {"zstd": 3, "zlib": 6}
_LEVEL_RANGES: Final[dict[Compression, tuple[int, int]]] = {
    "zstd": (-131072, 22),
    "zlib": (0, 9),
}

if TYPE_CHECKING:
    import zstandard as zstandard_module

_local = threading.local()


def _zstd(purpose: str) -> ModuleType:
    # Imported per call (a dict lookup once loaded) so that the package can be
    # absent, and so tests can hide it through sys.modules.
    try:
        import zstandard
    except ImportError:
        raise MissingDependencyError(
            f"{purpose} needs the 'zstandard' package, which is not installed: "
            "pip install zstandard (or lg_sqla[zstd])"
        ) from None
    return zstandard


def zstd_available() -> bool:
    """Whether the `zstandard` package can be imported."""
    try:
        _zstd("zstd")
    except MissingDependencyError:
        return False
    return True


def check_level(algorithm: Compression, level: int) -> int:
    low, high = _LEVEL_RANGES[algorithm]
    if not isinstance(level, int) or not low <= level <= high:
        raise ValueError(f"{algorithm} level must be an int from {low} to {high}, got {level!r}")
    return level


def compress(algorithm: Compression, data: bytes, level: int) -> bytes:
    """Compress `data` as one zstd frame (with its content size) or one zlib stream."""
    if algorithm == "zlib":
        return zlib.compress(data, level)
    zstandard = _zstd("writing zstd-compressed rows")
    # ZstdCompressor instances must not be shared between threads; keep one per
    # thread and level rather than paying for a new context per row.
    compressors: dict[int, zstandard_module.ZstdCompressor] | None = getattr(_local, "zstd", None)
    if compressors is None:
        compressors = _local.zstd = {}
    compressor = compressors.get(level)
    if compressor is None:
        compressor = compressors[level] = zstandard.ZstdCompressor(
            level=level, write_content_size=True
        )
    out: bytes = compressor.compress(data)
    return out


def decompress(algorithm: Compression, data: bytes, *, limit: int | None, tag: str) -> bytes:
    """Inverse of `compress`; raise `DecompressionError` if corrupt or over `limit` bytes."""
    if algorithm == "zlib":
        return _zlib_decompress(data, limit, tag)
    zstandard = _zstd(f"reading a row tagged {tag!r}")
    try:
        declared: int = zstandard.frame_content_size(data)
        if limit is not None and declared > limit:
            raise DecompressionError(
                f"zstd payload of row tagged {tag!r} declares {declared} bytes, over the "
                f"max_decompressed_bytes limit of {limit}"
            )
        decompressor = zstandard.ZstdDecompressor()
        if declared >= 0:
            out: bytes = decompressor.decompress(data)
        elif limit is not None:
            out = decompressor.decompress(data, max_output_size=limit)
        else:
            out = decompressor.decompressobj().decompress(data)
    except zstandard.ZstdError as exc:
        raise DecompressionError(
            f"zstd payload of row tagged {tag!r} is corrupt or over the size limit: {exc}"
        ) from None
    return out


def _zlib_decompress(data: bytes, limit: int | None, tag: str) -> bytes:
    inflater = zlib.decompressobj()
    try:
        # Ask for one byte more than allowed: getting it means the payload is too big,
        # and it was found without inflating the rest.
        out = inflater.decompress(data, 0 if limit is None else limit + 1)
    except zlib.error as exc:
        raise DecompressionError(f"zlib payload of row tagged {tag!r} is corrupt: {exc}") from None
    if limit is not None and len(out) > limit:
        raise DecompressionError(
            f"zlib payload of row tagged {tag!r} inflates beyond the max_decompressed_bytes "
            f"limit of {limit}"
        )
    if not inflater.eof or inflater.unused_data:
        raise DecompressionError(
            f"zlib payload of row tagged {tag!r} is truncated or has trailing bytes"
        )
    return out
