"""AES-256-GCM with a keyring: layout, rotation, key errors, tampering, env config."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from lg_sqla.serde import (
    AesGcmCipher,
    AesKeyring,
    DecryptionError,
    EncryptedSerializer,
    KeyConfigurationError,
    MissingKeyError,
    PlaintextRejectedError,
    generate_key_spec,
)

K1, K2, K3 = bytes(range(32)), bytes(range(100, 132)), bytes(range(200, 232))
EAX_KEY = b"0123456789abcdef"


def spec(**keys: bytes) -> str:
    return ",".join(f"{k}:{base64.b64encode(v).decode()}" for k, v in keys.items())


def test_type_tag_and_stored_layout() -> None:
    serde = EncryptedSerializer.gcm({"k1": K1})
    type_tag, data = serde.dumps_typed({"a": "b"})
    assert type_tag == "msgpack+aesgcm:k1"
    inner_type, inner_bytes = JsonPlusSerializer().dumps_typed({"a": "b"})
    # nonce(12) || ciphertext || tag(16), the inner type authenticated as AAD.
    assert len(data) == 12 + len(inner_bytes) + 16
    assert AESGCM(K1).decrypt(data[:12], data[12:], inner_type.encode()) == inner_bytes


def test_every_row_gets_a_fresh_nonce() -> None:
    serde = EncryptedSerializer.gcm({"k1": K1})
    rows = {serde.dumps_typed("same value")[1] for _ in range(50)}
    assert len(rows) == 50
    assert len({row[:12] for row in rows}) == 50


def test_null_and_bytes_are_encrypted_too() -> None:
    serde = EncryptedSerializer.gcm({"k1": K1})
    assert serde.dumps_typed(None)[0] == "null+aesgcm:k1"
    type_tag, data = serde.dumps_typed(b"secret bytes")
    assert type_tag == "bytes+aesgcm:k1"
    assert b"secret bytes" not in data
    assert serde.loads_typed(serde.dumps_typed(None)) is None
    assert serde.loads_typed((type_tag, data)) == b"secret bytes"


def test_rotation_old_key_decrypts_new_key_encrypts() -> None:
    old = EncryptedSerializer.gcm({"k1": K1})
    old_row = old.dumps_typed({"v": 1})
    rotated = EncryptedSerializer.gcm({"k2": K2, "k1": K1})
    assert rotated.encryption_layer == "aesgcm:k2"
    assert rotated.loads_typed(old_row) == {"v": 1}
    new_row = rotated.dumps_typed({"v": 2})
    assert new_row[0] == "msgpack+aesgcm:k2"
    # The old configuration cannot read what the new primary wrote, and says why.
    with pytest.raises(MissingKeyError, match=r"key id 'k2', which is not in"):
        old.loads_typed(new_row)


def test_rotation_through_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LG_SQLA_AES_KEYS", spec(k1=K1))
    old_row = EncryptedSerializer.from_env().dumps_typed("x")
    monkeypatch.setenv("LG_SQLA_AES_KEYS", spec(k2=K2, k1=K1))
    serde = EncryptedSerializer.from_env()
    assert serde.loads_typed(old_row) == "x"
    assert serde.dumps_typed("y")[0] == "msgpack+aesgcm:k2"


def test_unknown_key_id_names_the_id_and_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    row = EncryptedSerializer.gcm({"retired-2024": K3}).dumps_typed("x")
    monkeypatch.setenv("LG_SQLA_AES_KEYS", spec(k1=K1, k2=K2))
    with pytest.raises(MissingKeyError) as excinfo:
        EncryptedSerializer.from_env().loads_typed(row)
    message = str(excinfo.value)
    assert "'retired-2024'" in message
    assert "LG_SQLA_AES_KEYS" in message
    assert "'k1', 'k2'" in message


def test_same_id_different_key_is_a_decryption_error() -> None:
    row = EncryptedSerializer.gcm({"k1": K1}).dumps_typed("x")
    with pytest.raises(DecryptionError, match=r"key id 'k1'.*not the one the row was written"):
        EncryptedSerializer.gcm({"k1": K2}).loads_typed(row)


@pytest.mark.parametrize(
    "offset", [0, 11, 12, -17, -1], ids=["nonce", "nonce-end", "ct", "ct-end", "tag"]
)
def test_tampered_bytes(offset: int) -> None:
    serde = EncryptedSerializer.gcm({"k1": K1})
    type_tag, data = serde.dumps_typed({"secret": "value"})
    tampered = bytearray(data)
    tampered[offset] ^= 0x80
    with pytest.raises(DecryptionError, match="bytes or type tag were altered"):
        serde.loads_typed((type_tag, bytes(tampered)))


def test_relabelled_type_is_detected() -> None:
    serde = EncryptedSerializer.gcm({"k1": K1})
    _, data = serde.dumps_typed(b"raw bytes")
    # An attacker without the key swaps the inner type: the AAD no longer matches.
    for forged in ("msgpack+aesgcm:k1", "pickle+aesgcm:k1", "bytes+zlib+aesgcm:k1"):
        with pytest.raises(DecryptionError):
            serde.loads_typed((forged, data))


def test_truncated_row() -> None:
    with pytest.raises(DecryptionError, match="shorter than its 28-byte nonce and tag"):
        EncryptedSerializer.gcm({"k1": K1}).loads_typed(("msgpack+aesgcm:k1", b"\x00" * 27))


def test_plaintext_rows_load_after_enabling_encryption() -> None:
    plain = JsonPlusSerializer()
    old_rows = [plain.dumps_typed(v) for v in ({"a": 1}, None, b"b", "s")]
    serde = EncryptedSerializer.gcm({"k1": K1})
    assert [serde.loads_typed(r) for r in old_rows] == [{"a": 1}, None, b"b", "s"]


def test_plaintext_rejected_when_disallowed() -> None:
    serde = EncryptedSerializer.gcm({"k1": K1}, allow_plaintext=False)
    with pytest.raises(PlaintextRejectedError, match=r"'msgpack' is not encrypted"):
        serde.loads_typed(JsonPlusSerializer().dumps_typed({"a": 1}))
    assert serde.loads_typed(serde.dumps_typed({"a": 1})) == {"a": 1}


def test_langgraph_eax_rows_load_when_eax_key_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    legacy_row = LangGraphEncrypted.from_pycryptodome_aes(key=EAX_KEY).dumps_typed({"v": 1})
    with_eax = EncryptedSerializer.gcm({"k1": K1}, eax_key=EAX_KEY)
    assert with_eax.loads_typed(legacy_row) == {"v": 1}
    assert with_eax.dumps_typed({"v": 1})[0] == "msgpack+aesgcm:k1"

    without_eax = EncryptedSerializer.gcm({"k1": K1})
    with pytest.raises(MissingKeyError, match=r"AES-EAX.*set LANGGRAPH_AES_KEY"):
        without_eax.loads_typed(legacy_row)

    monkeypatch.setenv("LG_SQLA_AES_KEYS", spec(k1=K1))
    monkeypatch.setenv("LANGGRAPH_AES_KEY", EAX_KEY.decode())
    from_env = EncryptedSerializer.from_env()
    assert from_env.encryption_layer == "aesgcm:k1"
    assert from_env.legacy_eax is not None
    assert from_env.loads_typed(legacy_row) == {"v": 1}


def test_eax_only_serializer_cannot_read_gcm_rows() -> None:
    row = EncryptedSerializer.gcm({"k1": K1}).dumps_typed("x")
    with pytest.raises(MissingKeyError, match=r"key id 'k1'.*only has an AES-EAX key"):
        EncryptedSerializer.eax(EAX_KEY).loads_typed(row)


def test_langgraph_refuses_gcm_rows_instead_of_misreading() -> None:
    row = EncryptedSerializer.gcm({"k1": K1}).dumps_typed("x")
    with pytest.raises(AssertionError, match="Unsupported cipher: aesgcm:k1"):
        LangGraphEncrypted.from_pycryptodome_aes(key=EAX_KEY).loads_typed(row)


def test_no_env_names_both_variables() -> None:
    with pytest.raises(MissingKeyError, match="neither LG_SQLA_AES_KEYS nor LANGGRAPH_AES_KEY"):
        EncryptedSerializer.from_env()
    with pytest.raises(MissingKeyError, match="environment variable LG_SQLA_AES_KEYS is not set"):
        EncryptedSerializer.gcm()
    with pytest.raises(MissingKeyError, match="LG_SQLA_AES_KEYS is not set"):
        AesKeyring.from_env()


def test_keyring_parsing() -> None:
    ring = AesKeyring.parse(f" {spec(a=K1)} , {spec(b=K2)},", source="TEST")
    assert ring.key_ids == ("a", "b")
    assert ring.primary_id == "a"
    assert "b" in ring and "c" not in ring
    assert len(ring) == 2
    assert ring.with_primary("b").primary_id == "b"
    assert ring.with_primary("b").key_ids == ("b", "a")
    # URL-safe alphabet and missing padding are accepted.
    urlsafe = base64.urlsafe_b64encode(b"\xfb" * 32).decode().rstrip("=")
    assert "-" in urlsafe or "_" in urlsafe
    assert AesKeyring.parse(f"u:{urlsafe}").key_ids == ("u",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no keys"),
        ("k1", "entry 1 of LG_SQLA_AES_KEYS has no ':'"),
        ("k1:!!!!", "key 'k1' in LG_SQLA_AES_KEYS is not valid base64"),
        (f"k1:{base64.b64encode(b'x' * 16).decode()}", "'k1' in LG_SQLA_AES_KEYS is 16 bytes"),
        (f"{spec(k1=K1)},{spec(k1=K2)}", "'k1' appears twice in LG_SQLA_AES_KEYS"),
        (f"bad+id:{base64.b64encode(K1).decode()}", "invalid key id 'bad\\+id'"),
        (f"a:b:{base64.b64encode(K1).decode()}", "not valid base64"),
    ],
)
def test_keyring_errors(text: str, message: str) -> None:
    with pytest.raises(KeyConfigurationError, match=message):
        AesKeyring.parse(text, source="LG_SQLA_AES_KEYS")


def test_keyring_errors_never_echo_key_material() -> None:
    secret = base64.b64encode(b"s" * 16).decode()
    with pytest.raises(KeyConfigurationError) as excinfo:
        AesKeyring.parse(f"k1:{secret}")
    assert secret not in str(excinfo.value)
    with pytest.raises(KeyConfigurationError) as excinfo:
        AesKeyring.parse(f"k1{secret}")
    assert secret not in str(excinfo.value)


def test_explicit_primary() -> None:
    ring = AesKeyring({"a": K1, "b": K2}, primary="b")
    assert AesGcmCipher(ring).write_layer == "aesgcm:b"
    with pytest.raises(KeyConfigurationError, match="primary key id 'c' is not in"):
        AesKeyring({"a": K1}, primary="c")


def test_generate_key_spec_round_trips() -> None:
    text = generate_key_spec("2025-06")
    ring = AesKeyring.parse(text)
    assert ring.key_ids == ("2025-06",)
    row = EncryptedSerializer.gcm(text).dumps_typed(1)
    assert EncryptedSerializer.gcm(ring).loads_typed(row) == 1
    assert generate_key_spec("k") != generate_key_spec("k")


def test_repr_lists_ids_only() -> None:
    serde = EncryptedSerializer.gcm({"k1": K1, "k2": K2}, eax_key=EAX_KEY)
    text = repr(serde)
    assert "['k1', 'k2']" in text
    for secret in (K1, K2):
        assert secret.hex() not in text and repr(secret) not in text
    assert EAX_KEY.decode() not in text


def test_serializers_copy_but_do_not_pickle() -> None:
    import copy
    import pickle

    serde = EncryptedSerializer.gcm({"k1": K1}, eax_key=EAX_KEY)
    clone = copy.deepcopy(serde)
    assert clone.loads_typed(serde.dumps_typed({"a": 1})) == {"a": 1}
    assert clone.cipher.keyring is serde.cipher.keyring  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="AesKeyring holds secret key material"):
        pickle.dumps(serde.cipher.keyring)  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="AesEaxCipher holds secret key material"):
        pickle.dumps(EncryptedSerializer.eax(EAX_KEY).cipher)
