"""Building blocks for re-encrypting stored rows (`python -m lg_sqla reencrypt`).

Both functions work on the stored `(type, bytes)` only. `rewrite` removes and
re-applies layers around the inner serializer's bytes without deserializing
them, so a rotation never imports or constructs anything from the database, and
values whose types are blocked by a strict msgpack allowlist pass through intact.

Rows that a saver stores without calling the serializer (such as its `empty`
channel marker with no bytes) are not serializer rows; callers must skip them.
"""

from __future__ import annotations

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncryptedSerializer

from lg_sqla.serde._base import LayeredSerializer, decode_layers
from lg_sqla.serde.tags import parse_type_tag

__all__ = ["needs_rewrite", "rewrite", "target_encryption_layer"]


def target_encryption_layer(serializer: SerializerProtocol) -> str | None:
    """The encryption layer `serializer` gives new rows (`aes`, `aesgcm:<id>`), or `None`.

    Raises:
        TypeError: for LangGraph's own `EncryptedSerializer`, whose cipher name is
            opaque; use `lg_sqla.serde.EncryptedSerializer`, which reads its rows.
    """
    if isinstance(serializer, LayeredSerializer):
        return serializer.encryption_layer
    if isinstance(serializer, LangGraphEncryptedSerializer):
        raise TypeError(
            "cannot plan re-encryption for LangGraph's EncryptedSerializer; use "
            "lg_sqla.serde.EncryptedSerializer.eax(...) (same format) or .gcm(...)"
        )
    return None


def needs_rewrite(type_tag: str, serializer: SerializerProtocol) -> bool:
    """Whether a stored row is not encrypted the way `serializer` encrypts new rows.

    True for a plaintext row when `serializer` encrypts; for a row under a GCM
    key id other than the primary; for an EAX row when GCM is primary (and the
    reverse); for an encrypted row when `serializer` does not encrypt.
    Compression is not considered: whether a payload gets compressed depends on
    its size, and every compression stays readable.

    Raises:
        UnsupportedTagError: `type_tag` does not follow `lg_sqla.serde.tags`.
    """
    return parse_type_tag(type_tag).encryption != target_encryption_layer(serializer)


def rewrite(
    type_tag: str,
    data: bytes,
    serializer: SerializerProtocol,
    *,
    source: SerializerProtocol | None = None,
) -> tuple[str, bytes]:
    """Decode a stored row's layers and re-encode them as `serializer` writes now.

    The result is what `serializer.dumps_typed(value)` would store for the same
    value (current primary key, current compression settings, fresh nonce);
    `serializer.loads_typed` of it gives the value back.

    Args:
        type_tag: the stored type.
        data: the stored bytes.
        serializer: the target configuration.
        source: the serializer that decrypts the row, if not `serializer` (for
            instance one holding keys that `serializer` no longer has, or with
            `allow_plaintext=True` while `serializer` refuses plaintext).

    Raises:
        MissingKeyError, DecryptionError, DecompressionError, UnsupportedTagError,
        PlaintextRejectedError: as `loads_typed` would for this row.
    """
    base, payload = decode_layers(source if source is not None else serializer, type_tag, data)
    if isinstance(serializer, LayeredSerializer):
        return serializer.encode_layers(base, payload)
    target_encryption_layer(serializer)  # refuses serializers it cannot plan for
    return base, payload
