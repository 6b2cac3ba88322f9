"""What `CompressedSerializer` and `EncryptedSerializer` share.

Both wrap an inner serializer and add one layer to its type tag. Reading is
driven by the tag (see `lg_sqla.serde.tags`), not by the wrapping order: a layered
serializer peels whatever layers the row has, decrypting with any key in its
stack and decompressing statelessly, then hands `(base, bytes)` to the innermost
serializer. So rows written under an older configuration (plaintext, or not
compressed, or compressed while compression is now off) keep loading.
"""

from __future__ import annotations

import copy
import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, TypeAlias, TypeVar

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from lg_sqla.serde import _compression
from lg_sqla.serde.errors import MissingKeyError
from lg_sqla.serde.tags import EAX_LAYER, TypeTag, parse_type_tag

__all__ = [
    "AllowlistEntries",
    "LayeredSerializer",
    "decode_layers",
    "reject_layered_inner",
    "with_msgpack_allowlist",
]

logger = logging.getLogger("lg_sqla.serde")

AllowlistEntries: TypeAlias = Iterable[tuple[str, ...] | type]
"""What `JsonPlusSerializer.with_msgpack_allowlist` accepts: `(module, name)` or classes."""

_L = TypeVar("_L", bound="LayeredSerializer")


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    # JsonPlusSerializer returns a bytearray as-is for bytearray values.
    return data if isinstance(data, bytes) else bytes(data)


class LayeredSerializer(SerializerProtocol, ABC):
    """Base class of `lg_sqla`'s wrapping serializers (not meant to be subclassed).

    Args:
        inner: the serializer whose output is transformed; when omitted, a
            `JsonPlusSerializer()` built now, so it follows the strict-msgpack
            setting (`LANGGRAPH_STRICT_MSGPACK`) in force at this moment.
    """

    def __init__(self, inner: SerializerProtocol | None = None) -> None:
        self._inner: SerializerProtocol = inner if inner is not None else JsonPlusSerializer()

    @property
    def inner(self) -> SerializerProtocol:
        """The wrapped serializer."""
        return self._inner

    @property
    def innermost(self) -> SerializerProtocol:
        """The first serializer in the stack that is not an `lg_sqla` layer."""
        serde: SerializerProtocol = self
        while isinstance(serde, LayeredSerializer):
            serde = serde._inner
        return serde

    @property
    def encryption_layer(self) -> str | None:
        """The encryption layer new rows get (`aes`, `aesgcm:<id>`), or `None`."""
        inner = self._inner
        return inner.encryption_layer if isinstance(inner, LayeredSerializer) else None

    # --- SerializerProtocol ---------------------------------------------------

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Serialize `obj` with the inner serializer, then apply this layer."""
        tag, data = self._inner.dumps_typed(obj)
        return self._apply(tag, _as_bytes(data))

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Remove every layer the row's tag names, then load with the innermost serializer.

        Raises:
            UnsupportedTagError: the tag does not follow `lg_sqla.serde.tags`.
            MissingKeyError: the row is encrypted with a key this stack lacks.
            DecryptionError: wrong key, or the row was altered.
            DecompressionError: corrupt or oversized compressed payload.
            MissingDependencyError: a `+zstd` row and no `zstandard` package.
            PlaintextRejectedError: an unencrypted row and `allow_plaintext=False`.
        """
        base, payload = self.decode_layers(data[0], _as_bytes(data[1]))
        return self.innermost.loads_typed((base, payload))

    # --- layer plumbing -------------------------------------------------------

    def encode_layers(self, tag: str, data: bytes) -> tuple[str, bytes]:
        """Apply this stack's layers to an already serialized `(base type, bytes)`.

        `dumps_typed(obj)` equals `encode_layers(*innermost.dumps_typed(obj))`; this
        form lets rows be re-encrypted without reviving the objects inside them.
        """
        inner = self._inner
        if isinstance(inner, LayeredSerializer):
            tag, data = inner.encode_layers(tag, data)
        return self._apply(tag, data)

    def decode_layers(self, tag: str, data: bytes) -> tuple[str, bytes]:
        """Remove every layer named by `tag`; return `(base type, bytes)` without loading."""
        parsed = parse_type_tag(tag)
        if parsed.encryption is None:
            self._check_plaintext(parsed)
        else:
            data = self._decrypt(parsed, data)
        if parsed.compression is not None:
            data = _compression.decompress(
                parsed.compression, data, limit=self._decompression_limit(), tag=tag
            )
        return parsed.base, data

    def with_msgpack_allowlist(self: _L, extra_allowlist: AllowlistEntries) -> _L:
        """Return a copy whose innermost `JsonPlusSerializer` also allows `extra_allowlist`.

        LangGraph's `BaseCheckpointSaver.with_allowlist` only knows its own
        serializers; savers holding an `lg_sqla` serializer call this instead
        (or `lg_sqla.serde.with_msgpack_allowlist`). Returns `self` when nothing
        changes, e.g. when msgpack is in permissive mode (every type allowed).
        """
        updated = with_msgpack_allowlist(self._inner, tuple(extra_allowlist))
        if updated is self._inner:
            return self
        clone = copy.copy(self)
        clone._inner = updated
        return clone

    @abstractmethod
    def _apply(self, tag: str, data: bytes) -> tuple[str, bytes]:
        """Apply this layer to the inner serializer's output."""

    def _decrypt(self, parsed: TypeTag, data: bytes) -> bytes:
        inner = self._inner
        if isinstance(inner, LayeredSerializer):
            return inner._decrypt(parsed, data)
        raise MissingKeyError(_no_cipher_message(parsed))

    def _check_plaintext(self, parsed: TypeTag) -> None:
        inner = self._inner
        if isinstance(inner, LayeredSerializer):
            inner._check_plaintext(parsed)

    def _decompression_limit(self) -> int | None:
        inner = self._inner
        if isinstance(inner, LayeredSerializer):
            return inner._decompression_limit()
        return _compression.DEFAULT_MAX_DECOMPRESSED_BYTES


def _no_cipher_message(parsed: TypeTag) -> str:
    if parsed.encryption == EAX_LAYER:
        return (
            f"row tagged {str(parsed)!r} is encrypted with LangGraph's AES-EAX, but this "
            "serializer has no EAX key: set LANGGRAPH_AES_KEY and use "
            "EncryptedSerializer.from_env(), or pass the key to EncryptedSerializer.eax()"
        )
    return (
        f"row tagged {str(parsed)!r} is encrypted with AES-GCM key id {parsed.key_id!r}, but "
        "this serializer has no AES-GCM keyring: set LG_SQLA_AES_KEYS (with that id) and "
        "use EncryptedSerializer.from_env()"
    )


def decode_layers(serde: SerializerProtocol, tag: str, data: bytes) -> tuple[str, bytes]:
    """`serde.decode_layers(tag, data)` for any serializer.

    A serializer that is not an `lg_sqla` layer has no keys: plaintext and
    compressed rows decode, encrypted ones raise `MissingKeyError`.
    """
    if isinstance(serde, LayeredSerializer):
        return serde.decode_layers(tag, data)
    parsed = parse_type_tag(tag)
    if parsed.encryption is not None:
        raise MissingKeyError(_no_cipher_message(parsed))
    if parsed.compression is not None:
        data = _compression.decompress(
            parsed.compression,
            data,
            limit=_compression.DEFAULT_MAX_DECOMPRESSED_BYTES,
            tag=tag,
        )
    return parsed.base, data


def with_msgpack_allowlist(
    serde: SerializerProtocol, extra_allowlist: AllowlistEntries
) -> SerializerProtocol:
    """Return `serde` with `extra_allowlist` merged into its innermost msgpack allowlist.

    Works for `lg_sqla` serializers, LangGraph's `JsonPlusSerializer` and
    `EncryptedSerializer`, and anything with a `with_msgpack_allowlist` method.
    Returns `serde` itself when nothing changes; for other serializers it logs a
    warning (as LangGraph does) and returns `serde` unchanged.
    """
    extra = tuple(extra_allowlist)
    if isinstance(serde, (LayeredSerializer, JsonPlusSerializer)):
        return serde.with_msgpack_allowlist(extra)
    if isinstance(serde, LangGraphEncryptedSerializer):
        updated = with_msgpack_allowlist(serde.serde, extra)
        if updated is serde.serde:
            return serde
        return LangGraphEncryptedSerializer(serde.cipher, updated)
    method = getattr(serde, "with_msgpack_allowlist", None)
    if callable(method):
        result: SerializerProtocol = method(extra)
        return result
    logger.warning(
        "Serializer %s does not support a msgpack allowlist; strict msgpack "
        "deserialization will not be enforced for it.",
        type(serde).__name__,
    )
    return serde


def reject_layered_inner(
    inner: SerializerProtocol | None, *, outer: str, forbidden: tuple[type, ...]
) -> None:
    """Raise `TypeError` if `inner` is one of `forbidden` (a stacking the grammar excludes)."""
    if inner is not None and isinstance(inner, forbidden):
        raise TypeError(
            f"{outer} cannot wrap {type(inner).__module__}.{type(inner).__qualname__}: "
            "lg_sqla stacks are [EncryptedSerializer(] [CompressedSerializer(] inner [)] [)], "
            "each layer at most once, compression inside encryption"
        )
