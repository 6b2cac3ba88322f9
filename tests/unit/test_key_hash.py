"""The key hash is stored (rows of namespaces and keys are found by it): whatever MD5
implementation computes it (CPython's own where there), it is hashlib's MD5 hex digest
of the name's UTF-8, as rows written before were keyed."""

from __future__ import annotations

import hashlib

import pytest

from lg_sqla.shared import key_hash


@pytest.mark.parametrize(
    "name",
    ["", "k1", "bench.users.u3", "clé-été", "名前\U0001f600", "x" * 1000, "a\x01b\x01c"],
)
def test_the_key_hash_is_the_md5_hex_digest_of_the_names_utf8(name: str) -> None:
    expected = hashlib.md5(name.encode("utf-8"), usedforsecurity=False).hexdigest()
    assert key_hash(name) == expected
    assert key_hash(name) == expected  # (again: from its cache)
