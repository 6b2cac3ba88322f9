"""The type-tag grammar: the one place that says what a stored `type` means.

A serializer returns `(type, bytes)`; the savers store both. `lg_sqla`'s
serializers wrap an inner serializer and append one *layer* to its type per
transformation they apply, so the tag alone says how to get back to the inner
serializer's bytes:

```text
tag         = base [ "+" compression ] [ "+" encryption ]
base        = 1*( any character except "+" )     ; the inner serializer's type:
                                                 ; "msgpack", "json", "bytes",
                                                 ; "bytearray", "null", "pickle"
compression = "zstd" / "zlib"
encryption  = "aes"                              ; LangGraph's AES-EAX
            / "aesgcm:" key-id                   ; lg_sqla's AES-256-GCM
key-id      = 1*32( ALPHA / DIGIT / "_" / "-" / "." )
```

Examples: `msgpack`, `msgpack+zstd`, `msgpack+aes`, `msgpack+aesgcm:2025-01`,
`msgpack+zstd+aesgcm:2025-01`, `null+aesgcm:k1`.

Layers are written innermost first, so the rightmost layer was applied last when
writing and is removed first when reading. The order is fixed (compress, then
encrypt: ciphertext does not compress) and each kind appears at most once, so
every tag has exactly one reading. A tag with no layer is a plaintext row, which
is how rows written before encryption was enabled keep loading.

`aes` is exactly the tag LangGraph's `EncryptedSerializer.from_pycryptodome_aes()`
appends, so rows it wrote are read here. LangGraph's reader splits the tag at the
first `+` and only knows `aes`, so it can read `msgpack+aes` rows written by
`lg_sqla` but not compressed or AES-GCM rows (`aesgcm:...` never equals `aes`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from lg_sqla.serde.errors import KeyConfigurationError, UnsupportedTagError

__all__ = [
    "COMPRESSION_LAYERS",
    "EAX_LAYER",
    "GCM_LAYER_PREFIX",
    "KEY_ID_MAX_LENGTH",
    "TypeTag",
    "gcm_layer",
    "parse_type_tag",
    "validate_key_id",
]

Compression = Literal["zstd", "zlib"]

COMPRESSION_LAYERS: Final[frozenset[str]] = frozenset({"zstd", "zlib"})
"""Layer names of the compressions `lg_sqla` reads and writes."""

EAX_LAYER: Final = "aes"
"""Layer of LangGraph's AES-EAX `EncryptedSerializer` (and of `AesEaxCipher`)."""

GCM_LAYER_PREFIX: Final = "aesgcm:"
"""Prefix of an AES-256-GCM layer; the key id follows it."""

KEY_ID_MAX_LENGTH: Final = 32
"""Longest key id accepted. The savers' type column holds 64 characters; the longest
tag over `JsonPlusSerializer`, `bytearray+zstd+aesgcm:<id>`, is then 54."""

_KEY_ID_RE: Final = re.compile(rf"[A-Za-z0-9_.\-]{{1,{KEY_ID_MAX_LENGTH}}}")


def validate_key_id(key_id: str) -> str:
    """Return `key_id` if it is a valid key id, else raise `KeyConfigurationError`.

    Key ids appear inside type tags and inside `LG_SQLA_AES_KEYS`, so they may
    not contain `+`, `:`, `,` or whitespace.
    """
    if not isinstance(key_id, str) or _KEY_ID_RE.fullmatch(key_id) is None:
        raise KeyConfigurationError(
            f"invalid key id {key_id!r}: use 1 to {KEY_ID_MAX_LENGTH} characters "
            "from A-Z a-z 0-9 _ - ."
        )
    return key_id


def gcm_layer(key_id: str) -> str:
    """The AES-GCM layer for `key_id`, e.g. `aesgcm:k1`."""
    return GCM_LAYER_PREFIX + validate_key_id(key_id)


@dataclass(frozen=True)
class TypeTag:
    """A parsed type tag. `str(tag)` gives the stored form back."""

    base: str
    """The inner serializer's type, e.g. `msgpack`."""
    compression: Compression | None = None
    """`zstd`, `zlib`, or `None` when the payload is not compressed."""
    encryption: str | None = None
    """`aes`, `aesgcm:<key-id>`, or `None` for a plaintext row."""

    @property
    def key_id(self) -> str | None:
        """The AES-GCM key id, or `None` for EAX and plaintext rows."""
        if self.encryption is not None and self.encryption.startswith(GCM_LAYER_PREFIX):
            return self.encryption[len(GCM_LAYER_PREFIX) :]
        return None

    @property
    def unencrypted(self) -> str:
        """The tag without its encryption layer: what the cipher was given.

        AES-GCM authenticates this string as associated data, so a row cannot be
        relabelled (say from `msgpack` to `pickle`) without failing decryption.
        """
        return self.base if self.compression is None else f"{self.base}+{self.compression}"

    def __str__(self) -> str:
        if self.encryption is None:
            return self.unencrypted
        return f"{self.unencrypted}+{self.encryption}"


def parse_type_tag(tag: str) -> TypeTag:
    """Parse a stored type tag; raise `UnsupportedTagError` if it breaks the grammar."""
    if not isinstance(tag, str):
        raise UnsupportedTagError(f"type tag must be a str, got {type(tag).__name__}")
    base, *layers = tag.split("+")
    if not base:
        raise UnsupportedTagError(f"type tag {tag!r} has an empty base type")
    compression: Compression | None = None
    encryption: str | None = None
    position = 0
    if position < len(layers) and layers[position] in COMPRESSION_LAYERS:
        compression = "zstd" if layers[position] == "zstd" else "zlib"
        position += 1
    if position < len(layers) and _is_encryption_layer(layers[position]):
        encryption = layers[position]
        position += 1
    if position != len(layers):
        raise UnsupportedTagError(
            f"type tag {tag!r}: unexpected layer {layers[position]!r}; lg_sqla reads "
            "'<base>[+zstd|+zlib][+aes|+aesgcm:<key-id>]' (see lg_sqla.serde.tags)"
        )
    return TypeTag(base, compression, encryption)


def _is_encryption_layer(layer: str) -> bool:
    if layer == EAX_LAYER:
        return True
    if layer.startswith(GCM_LAYER_PREFIX):
        try:
            validate_key_id(layer[len(GCM_LAYER_PREFIX) :])
        except KeyConfigurationError:
            return False
        return True
    return False
