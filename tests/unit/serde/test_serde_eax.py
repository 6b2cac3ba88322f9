"""AES-EAX: byte compatibility with LangGraph's pycryptodome EncryptedSerializer."""

from __future__ import annotations

import os
from typing import Any

import pytest
from Crypto.Cipher import AES
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted

from lg_sqla.serde import (
    AesEaxCipher,
    DecryptionError,
    EncryptedSerializer,
    KeyConfigurationError,
    MissingKeyError,
)
from lg_sqla.serde.aes import _ctr, _eax_decrypt, _eax_encrypt

KEY = b"0123456789abcdef0123456789abcdef"
ONE_MB = 1024 * 1024

PAYLOADS: list[Any] = [
    None,
    b"",
    "",
    0,
    b"\x00" * 7,
    bytearray(b"abc"),
    "h\x00\u00e9llo \U0001f600",
    {"messages": [{"role": "user", "content": "hi"}], "n": 3, "f": 1.5, "ok": True},
    os.urandom(ONE_MB),
    "x" * ONE_MB,
    {"big": list(range(100_000))},
]
PAYLOAD_IDS = [
    "none",
    "empty-bytes",
    "empty-str",
    "zero",
    "nul-bytes",
    "bytearray",
    "unicode",
    "dict",
    "1mb-random-bytes",
    "1mb-str",
    "100k-int-list",
]


@pytest.mark.parametrize("value", PAYLOADS, ids=PAYLOAD_IDS)
def test_langgraph_writes_we_read(value: Any) -> None:
    theirs = LangGraphEncrypted.from_pycryptodome_aes(key=KEY)
    ours = EncryptedSerializer.eax(KEY)
    type_tag, data = theirs.dumps_typed(value)
    assert type_tag.endswith("+aes")
    assert ours.loads_typed((type_tag, data)) == value


@pytest.mark.parametrize("value", PAYLOADS, ids=PAYLOAD_IDS)
def test_we_write_langgraph_reads(value: Any) -> None:
    theirs = LangGraphEncrypted.from_pycryptodome_aes(key=KEY)
    ours = EncryptedSerializer.eax(KEY)
    type_tag, data = ours.dumps_typed(value)
    assert type_tag == theirs.dumps_typed(value)[0]
    assert theirs.loads_typed((type_tag, data)) == value


def test_stored_layout_is_nonce_tag_ciphertext() -> None:
    type_tag, data = EncryptedSerializer.eax(KEY).dumps_typed(b"payload")
    assert type_tag == "bytes+aes"
    nonce, tag, ciphertext = data[:16], data[16:32], data[32:]
    assert len(ciphertext) == len(b"payload")
    cipher = AES.new(KEY, AES.MODE_EAX, nonce=nonce)
    assert cipher.decrypt_and_verify(ciphertext, tag) == b"payload"


@pytest.mark.parametrize("key", [b"k" * 16, b"k" * 24, b"k" * 32, "s" * 16, "\u00e9" * 8])
def test_all_key_sizes_interoperate(key: bytes | str) -> None:
    raw = key.encode() if isinstance(key, str) else key
    theirs = LangGraphEncrypted.from_pycryptodome_aes(key=raw)
    ours = EncryptedSerializer.eax(key)
    assert theirs.loads_typed(ours.dumps_typed({"a": 1})) == {"a": 1}
    assert ours.loads_typed(theirs.dumps_typed({"a": 1})) == {"a": 1}


def test_env_key_matches_langgraph_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY.decode())
    theirs = LangGraphEncrypted.from_pycryptodome_aes()
    for ours in (EncryptedSerializer.eax(), EncryptedSerializer.from_env()):
        assert ours.encryption_layer == "aes"
        assert ours.loads_typed(theirs.dumps_typed([1, "two"])) == [1, "two"]
        assert theirs.loads_typed(ours.dumps_typed([1, "two"])) == [1, "two"]


def test_our_cipher_plugs_into_langgraph_serializer() -> None:
    # AesEaxCipher implements LangGraph's CipherProtocol: pycryptodome is optional.
    theirs_on_cryptography = LangGraphEncrypted(AesEaxCipher(KEY))
    theirs_on_pycryptodome = LangGraphEncrypted.from_pycryptodome_aes(key=KEY)
    row = theirs_on_cryptography.dumps_typed({"x": b"\x00"})
    assert theirs_on_pycryptodome.loads_typed(row) == {"x": b"\x00"}
    row = theirs_on_pycryptodome.dumps_typed({"x": b"\x00"})
    assert theirs_on_cryptography.loads_typed(row) == {"x": b"\x00"}


# EAX paper (Bellare, Rogaway, Wagner 2004), appendix test vectors 1 and 2.
@pytest.mark.parametrize(
    ("key", "nonce", "header", "message", "expected"),
    [
        (
            "233952DEE4D5ED5F9B9C6D6FF80FF478",
            "62EC67F9C3A4A407FCB2A8C49031A8B3",
            "6BFB914FD07EAE6B",
            "",
            "E037830E8389F27B025A2D6527E79D01",
        ),
        (
            "91945D3F4DCBEE0BF45EF52255F095A4",
            "BECAF043B0A23D843194BA972C66DEBD",
            "FA3BFD4806EB53FA",
            "F7FB",
            "19DD5C4C9331049D0BDAB0277408F67967E5",
        ),
    ],
)
def test_eax_paper_vectors(key: str, nonce: str, header: str, message: str, expected: str) -> None:
    k, n, h, m = (bytes.fromhex(x) for x in (key, nonce, header, message))
    ciphertext, tag = _eax_encrypt(k, n, m, h)
    assert (ciphertext + tag).hex().upper() == expected
    assert _eax_decrypt(k, n, ciphertext, tag, h) == m


@settings(max_examples=60, deadline=None)
@given(
    key=st.sampled_from([16, 24, 32]).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
    nonce=st.binary(min_size=1, max_size=40),
    header=st.binary(max_size=40),
    message=st.binary(max_size=300),
)
def test_eax_matches_pycryptodome(key: bytes, nonce: bytes, header: bytes, message: bytes) -> None:
    # Odd lengths exercise CMAC padding and the CTR counter across block boundaries.
    reference = AES.new(key, AES.MODE_EAX, nonce=nonce)
    reference.update(header)
    expected_ct, expected_tag = reference.encrypt_and_digest(message)
    assert _eax_encrypt(key, nonce, message, header) == (expected_ct, expected_tag)


@pytest.mark.parametrize(
    "counter_block",
    [
        bytes(16),
        bytes(8) + b"\xff" * 7 + b"\xf0",  # carry out of the low 64 bits
        b"\xff" * 15 + b"\xf0",  # wrap of the whole 128-bit block
    ],
    ids=["zero", "carry-64", "wrap-128"],
)
def test_ctr_uses_one_128_bit_counter(counter_block: bytes) -> None:
    # EAX counts with the whole block (pycryptodome: CTR, empty nonce); a 64-bit
    # nonce/counter split would diverge exactly at these boundaries.
    message = os.urandom(64 * 16 + 5)
    reference = AES.new(KEY, AES.MODE_CTR, nonce=b"", initial_value=counter_block)
    assert _ctr(KEY, counter_block, message) == reference.encrypt(message)


@pytest.mark.parametrize("region", ["nonce", "tag", "ciphertext"])
def test_tampering_is_detected(region: str) -> None:
    serde = EncryptedSerializer.eax(KEY)
    type_tag, data = serde.dumps_typed({"secret": "value"})
    offset = {"nonce": 3, "tag": 20, "ciphertext": 40}[region]
    tampered = bytearray(data)
    tampered[offset] ^= 0x01
    with pytest.raises(DecryptionError, match=r"AES-EAX \('\+aes'\) decryption failed"):
        serde.loads_typed((type_tag, bytes(tampered)))


def test_langgraph_detects_our_tampered_rows_too() -> None:
    type_tag, data = EncryptedSerializer.eax(KEY).dumps_typed("v")
    with pytest.raises(ValueError, match="MAC check failed"):
        LangGraphEncrypted.from_pycryptodome_aes(key=KEY).loads_typed(
            (type_tag, data[:-1] + bytes([data[-1] ^ 1]))
        )


def test_truncated_row() -> None:
    with pytest.raises(DecryptionError, match="shorter than its 32-byte nonce and tag"):
        EncryptedSerializer.eax(KEY).loads_typed(("msgpack+aes", b"\x00" * 31))


def test_wrong_key_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    row = EncryptedSerializer.eax(KEY).dumps_typed("v")
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "another key 16 b")
    with pytest.raises(DecryptionError, match="LANGGRAPH_AES_KEY is not the key this row"):
        EncryptedSerializer.from_env().loads_typed(row)


def test_missing_env_var_is_named() -> None:
    with pytest.raises(MissingKeyError, match="environment variable LANGGRAPH_AES_KEY is not set"):
        EncryptedSerializer.eax()
    with pytest.raises(MissingKeyError, match="LANGGRAPH_AES_KEY is not set"):
        AesEaxCipher.from_env()


@pytest.mark.parametrize("key", [b"", b"short", b"k" * 17, "k" * 33])
def test_bad_key_length(key: bytes | str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KeyConfigurationError, match="must be 16, 24 or 32 bytes long"):
        AesEaxCipher(key)
    if isinstance(key, str):
        monkeypatch.setenv("LANGGRAPH_AES_KEY", key)
        with pytest.raises(KeyConfigurationError, match=r"^LANGGRAPH_AES_KEY must be"):
            EncryptedSerializer.from_env()


def test_repr_does_not_leak_the_key() -> None:
    text = repr(EncryptedSerializer.eax(KEY))
    assert KEY.decode() not in text
    assert "32 bytes" in text
