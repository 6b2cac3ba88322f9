"""Serializers for LangGraph checkpoints: encryption, compression, key rotation.

All of them implement LangGraph's `SerializerProtocol` and wrap a
`JsonPlusSerializer` by default:

```python
from lg_sqla.serde import CompressedSerializer, EncryptedSerializer

serde = EncryptedSerializer.from_env(CompressedSerializer())  # msgpack+zstd+aesgcm:<id>
```

The stored type tag records every layer; its grammar is in `lg_sqla.serde.tags`.
Rows written by LangGraph's `EncryptedSerializer.from_pycryptodome_aes()` and
plaintext rows keep loading. See docs/security.md for the threat model.
"""

from lg_sqla.serde._base import AllowlistEntries, LayeredSerializer, with_msgpack_allowlist
from lg_sqla.serde.aes import (
    KEYS_ENV,
    LANGGRAPH_KEY_ENV,
    AesEaxCipher,
    AesGcmCipher,
    AesKeyring,
    generate_key_spec,
)
from lg_sqla.serde.compressed import DEFAULT_THRESHOLD_BYTES, CompressedSerializer
from lg_sqla.serde.encrypted import EncryptedSerializer
from lg_sqla.serde.errors import (
    DecompressionError,
    DecryptionError,
    KeyConfigurationError,
    MissingDependencyError,
    MissingKeyError,
    PlaintextRejectedError,
    SerdeError,
    UnsupportedTagError,
    WrongSerializerError,
)
from lg_sqla.serde.rewrite import needs_rewrite, rewrite, target_encryption_layer
from lg_sqla.serde.tags import TypeTag, parse_type_tag

__all__ = [
    "DEFAULT_THRESHOLD_BYTES",
    "KEYS_ENV",
    "LANGGRAPH_KEY_ENV",
    "AesEaxCipher",
    "AesGcmCipher",
    "AesKeyring",
    "AllowlistEntries",
    "CompressedSerializer",
    "DecompressionError",
    "DecryptionError",
    "EncryptedSerializer",
    "KeyConfigurationError",
    "LayeredSerializer",
    "MissingDependencyError",
    "MissingKeyError",
    "PlaintextRejectedError",
    "SerdeError",
    "TypeTag",
    "UnsupportedTagError",
    "WrongSerializerError",
    "generate_key_spec",
    "needs_rewrite",
    "parse_type_tag",
    "rewrite",
    "target_encryption_layer",
    "with_msgpack_allowlist",
]
