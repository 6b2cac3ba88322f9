"""Exceptions raised by `lg_sqla.serde`.

Every failure to turn a stored row back into a value raises one of these; the
serializers never return garbage or `None` in place of a value they could not
decrypt or decompress.
"""

from __future__ import annotations

from lg_sqla.errors import LgSqlaError

__all__ = [
    "DecompressionError",
    "DecryptionError",
    "KeyConfigurationError",
    "MissingDependencyError",
    "MissingKeyError",
    "PlaintextRejectedError",
    "SerdeError",
    "UnsupportedTagError",
    "WrongSerializerError",
]


class SerdeError(LgSqlaError):
    """Base class for errors raised by `lg_sqla.serde` (an `lg_sqla.LgSqlaError`)."""


class KeyConfigurationError(SerdeError, ValueError):
    """Key material or a key id is malformed (wrong length, bad base64, bad id)."""


class MissingKeyError(SerdeError, LookupError):
    """A key that is needed is not configured.

    Raised when an environment variable holding keys is unset, and when a row is
    encrypted with a key id (or with LangGraph's AES-EAX) that the serializer has
    no key for. The message names the variable or the key id.
    """


class DecryptionError(SerdeError):
    """Authenticated decryption failed.

    The key is wrong or the stored bytes (or, for AES-GCM, the type tag) were
    altered or truncated.
    """


class UnsupportedTagError(SerdeError, ValueError):
    """A type tag does not follow the grammar in `lg_sqla.serde.tags`."""


class PlaintextRejectedError(SerdeError):
    """An unencrypted row was read by a serializer with `allow_plaintext=False`."""


class DecompressionError(SerdeError):
    """A compressed payload is corrupt or would decompress beyond the size limit."""


class MissingDependencyError(SerdeError, ImportError):
    """An optional package needed for this row or setting is not installed."""


class WrongSerializerError(SerdeError, LookupError):
    """A stored row is compressed or encrypted and the saver's serializer cannot read it.

    The message names the serializer (and key id) to configure.
    """
