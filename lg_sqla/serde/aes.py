"""AES ciphers for `EncryptedSerializer`, built on the `cryptography` package.

* `AesEaxCipher`: AES in EAX mode, byte for byte what LangGraph's
  `EncryptedSerializer.from_pycryptodome_aes()` writes and reads (layer `aes`,
  stored bytes `nonce(16) || tag(16) || ciphertext`, key from `LANGGRAPH_AES_KEY`),
  without needing pycryptodome.
* `AesGcmCipher`: AES-256-GCM over an `AesKeyring` (layer `aesgcm:<key-id>`,
  stored bytes `nonce(12) || ciphertext || tag(16)`). Several keys decrypt, the
  primary one encrypts, so keys rotate without downtime.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping
from typing import Final, NoReturn, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.cmac import CMAC

from lg_sqla.serde.errors import DecryptionError, KeyConfigurationError, MissingKeyError
from lg_sqla.serde.tags import EAX_LAYER, GCM_LAYER_PREFIX, gcm_layer, validate_key_id

__all__ = [
    "GCM_KEY_BYTES",
    "GCM_NONCE_BYTES",
    "GCM_TAG_BYTES",
    "KEYS_ENV",
    "LANGGRAPH_KEY_ENV",
    "AesEaxCipher",
    "AesGcmCipher",
    "AesKeyring",
    "generate_key_spec",
]

LANGGRAPH_KEY_ENV: Final = "LANGGRAPH_AES_KEY"
"""LangGraph's variable: the EAX key as text, whose UTF-8 bytes are the key."""

KEYS_ENV: Final = "LG_SQLA_AES_KEYS"
"""`id1:base64key,id2:base64key`: AES-256-GCM keys; the first one encrypts."""

EAX_NONCE_BYTES: Final = 16
EAX_TAG_BYTES: Final = 16
GCM_KEY_BYTES: Final = 32
GCM_NONCE_BYTES: Final = 12
GCM_TAG_BYTES: Final = 16

_BLOCK: Final = 16

_NO_PICKLE: Final = (
    "{what} holds secret key material and cannot be pickled; build it again in the "
    "other process (from {source})"
)


# --- AES-EAX ------------------------------------------------------------------
#
# EAX (Bellare, Rogaway, Wagner) is CTR encryption plus three CMACs told apart by
# a one-block prefix: OMAC_t(X) = CMAC(0^15 || t || X). cryptography has CTR and
# CMAC but no EAX, so it is assembled here; pycryptodome implements the same
# construction, which the tests check in both directions.


def _omac(key: bytes, t: int, data: bytes) -> bytes:
    mac = CMAC(algorithms.AES(key))
    mac.update(bytes(_BLOCK - 1) + bytes((t,)))
    mac.update(data)
    return mac.finalize()


def _ctr(key: bytes, counter_block: bytes, data: bytes) -> bytes:
    # cryptography's CTR treats the whole 16-byte block as one big-endian counter,
    # which is what EAX specifies (no nonce/counter split).
    encryptor = Cipher(algorithms.AES(key), modes.CTR(counter_block)).encryptor()
    return encryptor.update(data) + encryptor.finalize()


def _xor(*blocks: bytes) -> bytes:
    out = 0
    for block in blocks:
        out ^= int.from_bytes(block, "big")
    return out.to_bytes(_BLOCK, "big")


def _eax_encrypt(
    key: bytes, nonce: bytes, plaintext: bytes, header: bytes = b""
) -> tuple[bytes, bytes]:
    """EAX-encrypt; return `(ciphertext, 16-byte tag)`."""
    n = _omac(key, 0, nonce)
    ciphertext = _ctr(key, n, plaintext)
    tag = _xor(n, _omac(key, 1, header), _omac(key, 2, ciphertext))
    return ciphertext, tag


def _eax_decrypt(
    key: bytes, nonce: bytes, ciphertext: bytes, tag: bytes, header: bytes = b""
) -> bytes | None:
    """EAX-decrypt, or return `None` when the tag does not verify."""
    n = _omac(key, 0, nonce)
    expected = _xor(n, _omac(key, 1, header), _omac(key, 2, ciphertext))
    # Verify before decrypting so unauthenticated plaintext never exists.
    if not hmac.compare_digest(expected, tag):
        return None
    return _ctr(key, n, ciphertext)


def _eax_key(key: bytes | str, source: str) -> bytes:
    # LangGraph takes the variable's text and uses its UTF-8 bytes as the key.
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    if len(raw) not in (16, 24, 32):
        raise KeyConfigurationError(
            f"{source} must be 16, 24 or 32 bytes long, got {len(raw)} bytes"
        )
    return raw


_Holder = TypeVar("_Holder", bound="_KeyMaterial")


class _KeyMaterial:
    """Holds secret keys, read from ``_source``. Immutable: copies may share it.
    Pickling would write the keys out, so it refuses."""

    _source: str

    def __copy__(self: _Holder) -> _Holder:
        return self

    def __deepcopy__(self: _Holder, memo: dict[int, object]) -> _Holder:
        return self

    def __reduce__(self) -> NoReturn:
        raise TypeError(_NO_PICKLE.format(what=type(self).__name__, source=self._source))


class AesEaxCipher(_KeyMaterial):
    """AES-EAX, compatible with LangGraph's `EncryptedSerializer.from_pycryptodome_aes()`.

    Rows it writes are tagged `<inner>+aes` and hold `nonce(16) || tag(16) ||
    ciphertext`; LangGraph's serializer reads them, and rows LangGraph wrote are
    read here. For that compatibility the type tag is not authenticated (EAX
    header left empty, as LangGraph does).

    It also implements LangGraph's `CipherProtocol` (`encrypt`/`decrypt`), so it
    can be given to LangGraph's own `EncryptedSerializer` in place of pycryptodome.

    Args:
        key: 16, 24 or 32 bytes. A `str` is encoded as UTF-8, as LangGraph does
            with `LANGGRAPH_AES_KEY`.
        source: where the key came from, named in error messages.
    """

    write_layer: Final = EAX_LAYER
    """The layer this cipher appends when encrypting: `aes`."""

    def __init__(self, key: bytes | str, *, source: str = "the AES-EAX key") -> None:
        self._source = source
        self._key = _eax_key(key, source)

    @classmethod
    def from_env(cls, var: str = LANGGRAPH_KEY_ENV) -> AesEaxCipher:
        """Read the key from environment variable `var` (default `LANGGRAPH_AES_KEY`).

        Raises:
            MissingKeyError: the variable is unset or empty.
            KeyConfigurationError: its UTF-8 form is not 16, 24 or 32 bytes.
        """
        value = os.environ.get(var)
        if not value:
            raise MissingKeyError(
                f"environment variable {var} is not set: it must hold the AES-EAX key "
                "(16, 24 or 32 characters, as for LangGraph's EncryptedSerializer)"
            )
        return cls(value, source=var)

    def encrypt_payload(self, plaintext: bytes, inner_tag: str) -> tuple[str, bytes]:
        """Encrypt a payload whose type is `inner_tag`; return `(layer, stored bytes)`."""
        del inner_tag  # Not authenticated: LangGraph's format has no room for it.
        nonce = secrets.token_bytes(EAX_NONCE_BYTES)
        ciphertext, tag = _eax_encrypt(self._key, nonce, plaintext)
        return EAX_LAYER, nonce + tag + ciphertext

    def decrypt_payload(self, layer: str, data: bytes, inner_tag: str) -> bytes:
        """Decrypt stored bytes written with `layer`; raise `DecryptionError` on failure."""
        del inner_tag
        if layer != EAX_LAYER:
            raise MissingKeyError(f"AES-EAX cipher cannot decrypt layer {layer!r}")
        header = EAX_NONCE_BYTES + EAX_TAG_BYTES
        if len(data) < header:
            raise DecryptionError(
                f"AES-EAX payload is {len(data)} bytes, shorter than its {header}-byte "
                "nonce and tag: the row was truncated or altered"
            )
        nonce, tag, ciphertext = data[:EAX_NONCE_BYTES], data[EAX_NONCE_BYTES:header], data[header:]
        plaintext = _eax_decrypt(self._key, nonce, ciphertext, tag)
        if plaintext is None:
            raise DecryptionError(
                f"AES-EAX ('+aes') decryption failed: {self._source} is not the key this "
                "row was written with, or the row's bytes were altered"
            )
        return plaintext

    # LangGraph's CipherProtocol.
    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        """Encrypt `plaintext`; return `("aes", nonce || tag || ciphertext)`."""
        return self.encrypt_payload(plaintext, "")

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        """Decrypt bytes produced by `encrypt` (or by LangGraph's pycryptodome cipher)."""
        return self.decrypt_payload(ciphername, ciphertext, "")

    def __repr__(self) -> str:
        return f"AesEaxCipher(key=<{len(self._key)} bytes from {self._source}>)"


# --- AES-256-GCM keyring ------------------------------------------------------


def _decode_base64_key(text: str, key_id: str, source: str) -> bytes:
    # Accept standard and URL-safe alphabets, padded or not; never echo the text,
    # it is secret.
    cleaned = text.strip().replace("-", "+").replace("_", "/")
    cleaned += "=" * (-len(cleaned) % 4)
    try:
        return base64.b64decode(cleaned, validate=True)
    except (binascii.Error, ValueError):
        raise KeyConfigurationError(f"key {key_id!r} in {source} is not valid base64") from None


def generate_key_spec(key_id: str) -> str:
    """Return `"<key_id>:<base64 of 32 random bytes>"`, one entry for `LG_SQLA_AES_KEYS`."""
    validate_key_id(key_id)
    return f"{key_id}:{base64.b64encode(secrets.token_bytes(GCM_KEY_BYTES)).decode('ascii')}"


class AesKeyring(_KeyMaterial):
    """AES-256 keys by id: all of them decrypt, the primary one encrypts.

    Rotation: put a new key first (it becomes the primary), keep the old ones so
    existing rows still load, re-encrypt (`python -m lg_sqla reencrypt`), then drop
    the old keys.

    Args:
        keys: key id -> 32-byte key, or `(key id, key)` pairs. Ids follow
            `lg_sqla.serde.tags.validate_key_id`.
        primary: the id that encrypts; defaults to the first key.
        source: where the keys came from, named in error messages.

    Raises:
        KeyConfigurationError: no keys, a bad id, a duplicate id, a key that is
            not 32 bytes, or a `primary` that is not among the ids.
    """

    def __init__(
        self,
        keys: Mapping[str, bytes] | Iterable[tuple[str, bytes]],
        *,
        primary: str | None = None,
        source: str = "the keyring",
    ) -> None:
        pairs = list(keys.items()) if isinstance(keys, Mapping) else list(keys)
        self._source = source
        self._aead: dict[str, AESGCM] = {}
        for key_id, key in pairs:
            validate_key_id(key_id)
            if key_id in self._aead:
                raise KeyConfigurationError(f"key id {key_id!r} appears twice in {source}")
            if len(key) != GCM_KEY_BYTES:
                raise KeyConfigurationError(
                    f"key {key_id!r} in {source} is {len(key)} bytes; AES-256-GCM keys "
                    f"are {GCM_KEY_BYTES} bytes (base64 of 32 random bytes)"
                )
            self._aead[key_id] = AESGCM(bytes(key))
        if not self._aead:
            raise KeyConfigurationError(f"{source} holds no keys")
        if primary is None:
            primary = pairs[0][0]
        elif primary not in self._aead:
            raise KeyConfigurationError(
                f"primary key id {primary!r} is not in {source} (ids: {self._ids_text()})"
            )
        self._primary = primary

    @classmethod
    def parse(cls, spec: str, *, source: str = "the key spec") -> AesKeyring:
        """Build a keyring from `"id1:base64key,id2:base64key"`; the first id is primary.

        Whitespace around entries is ignored, as is a trailing comma.
        """
        pairs: list[tuple[str, bytes]] = []
        for position, entry in enumerate(spec.split(","), start=1):
            entry = entry.strip()
            if not entry:
                continue
            key_id, sep, encoded = entry.partition(":")
            if not sep:
                raise KeyConfigurationError(
                    f"entry {position} of {source} has no ':'; expected "
                    "'id1:base64key,id2:base64key'"
                )
            key_id = key_id.strip()
            validate_key_id(key_id)
            pairs.append((key_id, _decode_base64_key(encoded, key_id, source)))
        return cls(pairs, source=source)

    @classmethod
    def from_env(cls, var: str = KEYS_ENV) -> AesKeyring:
        """Read `"id1:base64key,id2:base64key"` from environment variable `var`.

        Raises:
            MissingKeyError: the variable is unset or empty.
            KeyConfigurationError: its value is malformed.
        """
        value = os.environ.get(var, "")
        if not value.strip():
            raise MissingKeyError(
                f"environment variable {var} is not set: it must hold AES-256-GCM keys "
                "as 'id1:base64key,id2:base64key' (the first one encrypts)"
            )
        return cls.parse(value, source=var)

    @property
    def primary_id(self) -> str:
        """The id of the key that encrypts."""
        return self._primary

    @property
    def key_ids(self) -> tuple[str, ...]:
        """All ids, primary first."""
        return (self._primary, *(k for k in self._aead if k != self._primary))

    @property
    def source(self) -> str:
        """Where the keys came from (an environment variable name, or a description)."""
        return self._source

    def with_primary(self, key_id: str) -> AesKeyring:
        """Return a keyring with the same keys and `key_id` as the primary."""
        if key_id not in self._aead:
            raise KeyConfigurationError(
                f"key id {key_id!r} is not in {self._source} (ids: {self._ids_text()})"
            )
        clone = object.__new__(AesKeyring)
        clone._source = self._source
        clone._aead = self._aead
        clone._primary = key_id
        return clone

    def _aead_for(self, key_id: str) -> AESGCM:
        try:
            return self._aead[key_id]
        except KeyError:
            raise MissingKeyError(
                f"row is encrypted with AES-GCM key id {key_id!r}, which is not in "
                f"{self._source} (ids: {self._ids_text()}); add that key back to decrypt it"
            ) from None

    def _ids_text(self) -> str:
        return ", ".join(repr(k) for k in self._aead)

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._aead

    def __iter__(self) -> Iterator[str]:
        return iter(self.key_ids)

    def __len__(self) -> int:
        return len(self._aead)

    def __repr__(self) -> str:
        return f"AesKeyring(ids={list(self.key_ids)!r}, primary={self._primary!r})"


class AesGcmCipher:
    """AES-256-GCM over an `AesKeyring`.

    Rows are tagged `<inner>+aesgcm:<key-id>` with the primary key's id and hold
    `nonce(12) || ciphertext || tag(16)`, with a random nonce per row. The inner
    tag (e.g. `msgpack+zstd`) is authenticated as associated data, so neither the
    bytes nor the type can be changed without the key.

    Random 96-bit nonces are safe for about 2**32 rows per key; rotate well
    before that.

    Args:
        keyring: the keys, or a mapping key id -> 32-byte key (first is primary).
    """

    def __init__(self, keyring: AesKeyring | Mapping[str, bytes]) -> None:
        self._keyring = keyring if isinstance(keyring, AesKeyring) else AesKeyring(keyring)

    @classmethod
    def from_env(cls, var: str = KEYS_ENV) -> AesGcmCipher:
        """Build from `AesKeyring.from_env(var)`."""
        return cls(AesKeyring.from_env(var))

    @property
    def keyring(self) -> AesKeyring:
        """The keys this cipher decrypts with."""
        return self._keyring

    @property
    def write_layer(self) -> str:
        """The layer this cipher appends when encrypting: `aesgcm:<primary id>`."""
        return gcm_layer(self._keyring.primary_id)

    def encrypt_payload(self, plaintext: bytes, inner_tag: str) -> tuple[str, bytes]:
        """Encrypt with the primary key; return `(layer, stored bytes)`."""
        key_id = self._keyring.primary_id
        nonce = secrets.token_bytes(GCM_NONCE_BYTES)
        sealed = self._keyring._aead_for(key_id).encrypt(
            nonce, plaintext, inner_tag.encode("utf-8")
        )
        return gcm_layer(key_id), nonce + sealed

    def decrypt_payload(self, layer: str, data: bytes, inner_tag: str) -> bytes:
        """Decrypt stored bytes written with `layer` (`aesgcm:<id>`).

        Raises:
            MissingKeyError: the key id is not in the keyring.
            DecryptionError: wrong key, altered bytes or altered type tag.
        """
        if not layer.startswith(GCM_LAYER_PREFIX):
            raise MissingKeyError(f"AES-GCM cipher cannot decrypt layer {layer!r}")
        key_id = layer[len(GCM_LAYER_PREFIX) :]
        aead = self._keyring._aead_for(key_id)
        if len(data) < GCM_NONCE_BYTES + GCM_TAG_BYTES:
            raise DecryptionError(
                f"AES-GCM payload for key id {key_id!r} is {len(data)} bytes, shorter than "
                f"its {GCM_NONCE_BYTES + GCM_TAG_BYTES}-byte nonce and tag: the row was "
                "truncated or altered"
            )
        try:
            return aead.decrypt(
                data[:GCM_NONCE_BYTES], data[GCM_NONCE_BYTES:], inner_tag.encode("utf-8")
            )
        except InvalidTag:
            raise DecryptionError(
                f"AES-GCM decryption failed for key id {key_id!r} (from "
                f"{self._keyring.source}): the key under that id is not the one the row "
                "was written with, or the row's bytes or type tag were altered"
            ) from None

    def __repr__(self) -> str:
        return f"AesGcmCipher({self._keyring!r})"
