"""`EncryptedSerializer`: AES-GCM with rotating keys, reading LangGraph's AES-EAX rows."""

from __future__ import annotations

import os
from collections.abc import Mapping

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncryptedSerializer

from lg_sqla.serde._base import LayeredSerializer, reject_layered_inner
from lg_sqla.serde.aes import (
    KEYS_ENV,
    LANGGRAPH_KEY_ENV,
    AesEaxCipher,
    AesGcmCipher,
    AesKeyring,
)
from lg_sqla.serde.errors import MissingKeyError, PlaintextRejectedError
from lg_sqla.serde.tags import EAX_LAYER, TypeTag, parse_type_tag

__all__ = ["EncryptedSerializer"]


class EncryptedSerializer(LayeredSerializer):
    """Serializer that encrypts the inner serializer's bytes and tags the type.

    New rows are encrypted with `cipher`: `AesGcmCipher` (type
    `<inner>+aesgcm:<key-id>`) or `AesEaxCipher` (`<inner>+aes`, readable by
    LangGraph's `EncryptedSerializer.from_pycryptodome_aes()`). Reading accepts:

    * rows encrypted under any key id in the GCM keyring;
    * LangGraph AES-EAX rows (`+aes`), when `cipher` is EAX or `legacy_eax` is set;
    * plaintext rows (no encryption layer), unless `allow_plaintext=False`;
    * compressed rows (`+zstd`, `+zlib`), inside or outside encryption's reach.

    Failures raise `MissingKeyError` (key id or EAX key not configured) or
    `DecryptionError` (wrong key, altered bytes or tag); never a wrong value.

    Plaintext rows are accepted by default so that encryption can be switched on
    for an existing database; but then anyone who can write the database can
    still plant a plaintext row. Once every row is encrypted (`python -m lg_sqla
    reencrypt`), pass `allow_plaintext=False`.

    Compose with compression as `EncryptedSerializer(CompressedSerializer(...))`.

    Args:
        inner: the serializer to encrypt the output of (default `JsonPlusSerializer()`).
        cipher: encrypts new rows and decrypts rows of its kind.
        legacy_eax: decrypts LangGraph `+aes` rows while `cipher` is AES-GCM.
        allow_plaintext: whether unencrypted rows load.
    """

    def __init__(
        self,
        inner: SerializerProtocol | None = None,
        *,
        cipher: AesGcmCipher | AesEaxCipher,
        legacy_eax: AesEaxCipher | None = None,
        allow_plaintext: bool = True,
    ) -> None:
        reject_layered_inner(
            inner,
            outer="EncryptedSerializer",
            forbidden=(EncryptedSerializer, LangGraphEncryptedSerializer),
        )
        if not isinstance(cipher, (AesGcmCipher, AesEaxCipher)):
            raise TypeError(
                f"cipher must be an AesGcmCipher or AesEaxCipher, got {type(cipher).__name__}"
            )
        super().__init__(inner)
        self._cipher = cipher
        self._legacy_eax = legacy_eax
        self._allow_plaintext = allow_plaintext

    @classmethod
    def from_env(
        cls,
        inner: SerializerProtocol | None = None,
        *,
        allow_plaintext: bool = True,
        keys_var: str = KEYS_ENV,
        eax_var: str = LANGGRAPH_KEY_ENV,
    ) -> EncryptedSerializer:
        """Build from environment variables.

        * `LG_SQLA_AES_KEYS="id1:base64key,id2:base64key"` set: AES-256-GCM, the
          first id encrypts, all decrypt. If `LANGGRAPH_AES_KEY` is also set, it
          only decrypts LangGraph's `+aes` rows.
        * only `LANGGRAPH_AES_KEY` set: AES-EAX exactly as LangGraph writes it.

        Raises:
            MissingKeyError: neither variable is set; the message names both.
            KeyConfigurationError: a variable is malformed; the message names it.
        """
        spec = os.environ.get(keys_var, "")
        eax_text = os.environ.get(eax_var, "")
        if spec.strip():
            return cls(
                inner,
                cipher=AesGcmCipher(AesKeyring.parse(spec, source=keys_var)),
                legacy_eax=AesEaxCipher(eax_text, source=eax_var) if eax_text else None,
                allow_plaintext=allow_plaintext,
            )
        if eax_text:
            return cls(
                inner,
                cipher=AesEaxCipher(eax_text, source=eax_var),
                allow_plaintext=allow_plaintext,
            )
        raise MissingKeyError(
            f"neither {keys_var} nor {eax_var} is set: set {keys_var} to "
            "'id1:base64key,...' (AES-256-GCM, 32-byte keys) or "
            f"{eax_var} to a 16, 24 or 32 character key (LangGraph's AES-EAX)"
        )

    @classmethod
    def eax(
        cls,
        key: bytes | str | None = None,
        inner: SerializerProtocol | None = None,
        *,
        allow_plaintext: bool = True,
    ) -> EncryptedSerializer:
        """AES-EAX, interchangeable with LangGraph's `from_pycryptodome_aes(key=...)`.

        Args:
            key: 16, 24 or 32 bytes (a `str` is UTF-8 encoded); default: the
                `LANGGRAPH_AES_KEY` environment variable.
        """
        cipher = AesEaxCipher.from_env() if key is None else AesEaxCipher(key)
        return cls(inner, cipher=cipher, allow_plaintext=allow_plaintext)

    @classmethod
    def gcm(
        cls,
        keys: AesKeyring | Mapping[str, bytes] | str | None = None,
        inner: SerializerProtocol | None = None,
        *,
        eax_key: bytes | str | None = None,
        allow_plaintext: bool = True,
    ) -> EncryptedSerializer:
        """AES-256-GCM over a keyring.

        Args:
            keys: an `AesKeyring`, a mapping key id -> 32-byte key (first is
                primary), an `"id1:base64key,..."` string, or by default the
                `LG_SQLA_AES_KEYS` environment variable.
            eax_key: a LangGraph AES-EAX key, to keep reading `+aes` rows.
        """
        if keys is None:
            keyring = AesKeyring.from_env()
        elif isinstance(keys, str):
            keyring = AesKeyring.parse(keys, source="the keys given to EncryptedSerializer.gcm()")
        elif isinstance(keys, AesKeyring):
            keyring = keys
        else:
            keyring = AesKeyring(keys, source="the keys given to EncryptedSerializer.gcm()")
        return cls(
            inner,
            cipher=AesGcmCipher(keyring),
            legacy_eax=None if eax_key is None else AesEaxCipher(eax_key),
            allow_plaintext=allow_plaintext,
        )

    @property
    def cipher(self) -> AesGcmCipher | AesEaxCipher:
        """The cipher new rows are encrypted with."""
        return self._cipher

    @property
    def legacy_eax(self) -> AesEaxCipher | None:
        """The read-only AES-EAX cipher for LangGraph rows, if any."""
        return self._legacy_eax

    @property
    def allow_plaintext(self) -> bool:
        """Whether rows without an encryption layer load."""
        return self._allow_plaintext

    @property
    def encryption_layer(self) -> str:
        """The layer new rows get: `aes` or `aesgcm:<primary key id>`."""
        return self._cipher.write_layer

    def _apply(self, tag: str, data: bytes) -> tuple[str, bytes]:
        parsed = parse_type_tag(tag)
        if parsed.encryption is not None:
            raise TypeError(
                f"the inner serializer returned type {tag!r}, which is already encrypted"
            )
        layer, sealed = self._cipher.encrypt_payload(data, tag)
        return f"{tag}+{layer}", sealed

    def _decrypt(self, parsed: TypeTag, data: bytes) -> bytes:
        layer = parsed.encryption
        assert layer is not None
        if layer == EAX_LAYER:
            eax = self._cipher if isinstance(self._cipher, AesEaxCipher) else self._legacy_eax
            if eax is None:
                raise MissingKeyError(
                    f"row tagged {str(parsed)!r} is encrypted with LangGraph's AES-EAX, but "
                    f"this serializer only has AES-GCM keys: set {LANGGRAPH_KEY_ENV} as well "
                    "(EncryptedSerializer.from_env()) or pass eax_key= to "
                    "EncryptedSerializer.gcm()"
                )
            return eax.decrypt_payload(layer, data, parsed.unencrypted)
        if not isinstance(self._cipher, AesGcmCipher):
            raise MissingKeyError(
                f"row tagged {str(parsed)!r} is encrypted with AES-GCM key id "
                f"{parsed.key_id!r}, but this serializer only has an AES-EAX key: set "
                f"{KEYS_ENV} (with that id) and use EncryptedSerializer.from_env()"
            )
        return self._cipher.decrypt_payload(layer, data, parsed.unencrypted)

    def _check_plaintext(self, parsed: TypeTag) -> None:
        if not self._allow_plaintext:
            raise PlaintextRejectedError(
                f"row tagged {str(parsed)!r} is not encrypted, and this serializer was "
                "built with allow_plaintext=False; re-encrypt old rows with "
                "`python -m lg_sqla reencrypt`, or allow plaintext while migrating"
            )

    def __repr__(self) -> str:
        legacy = f", legacy_eax={self._legacy_eax!r}" if self._legacy_eax is not None else ""
        return (
            f"EncryptedSerializer({self._inner!r}, cipher={self._cipher!r}{legacy}, "
            f"allow_plaintext={self._allow_plaintext})"
        )
