# mypy: disable-error-code="arg-type"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""The canonical JSON text lg_sqla writes to MySQL/MariaDB (dialects.mysql_json_text)."""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lg_sqla.dialects import mysql_json_text, mysql_member_path
from lg_sqla.dialects.mysql import _canonical_strings

text = st.text(st.characters(blacklist_categories=("Cs",)))
documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


@given(documents)
def test_reads_back_as_the_same_value(value: Any) -> None:
    assert json.loads(mysql_json_text(value)) == value


@given(documents)
def test_only_spellings_mariadb_reads_like_mysql(value: Any) -> None:
    """ASCII only; no string holds an escaped quote or starts with "-"."""
    out = mysql_json_text(value)
    assert out.isascii()
    for token in STRING.findall(out):
        assert not token.startswith('"-')
        assert not re.search(r'(?<!\\)(\\\\)*\\"', token[1:-1]), token


@given(text)
def test_a_key_is_spelled_the_same_in_a_path_and_in_a_document(key: str) -> None:
    document = mysql_json_text({key: 1})
    path = mysql_member_path(key)
    # (orjson's compact text, or json.dumps' with a space after the colon)
    assert document in ("{" + path[2:] + ":1}", "{" + path[2:] + ": 1}")


@given(
    documents
    | st.floats(allow_nan=True)
    | st.dictionaries(text, st.none() | st.floats() | st.lists(st.floats()), max_size=3)
)
def test_strings_are_spelled_as_json_dumps_canonical_form(value: Any) -> None:
    """Whichever encoder wrote it (orjson where it is plain ASCII), every string is
    spelled byte for byte as the canonical form of json.dumps' text: documents written
    by earlier releases and paths built now match in MariaDB; NaN and infinities are
    written as json.dumps writes them (the server refuses them), not nulled."""
    out = mysql_json_text(value)
    canonical = _canonical_strings(json.dumps(value, ensure_ascii=True))
    assert STRING.findall(out) == STRING.findall(canonical)
    # (numbers may be spelled otherwise, 1e-08 as 1e-8: the same value; NaN as it was)
    assert out == canonical or json.loads(out) == json.loads(canonical)


def test_a_null_beside_a_nan_is_not_taken_for_none() -> None:
    """orjson writes None and NaN alike (null): a document with a None (every checkpoint
    document: ``updated_channels``) is written by orjson only when no null stands for
    anything else; NaN and infinities stay as json.dumps writes them."""
    assert mysql_json_text({"u": None, "v": [1.5]}) == '{"u":null,"v":[1.5]}'
    assert mysql_json_text({"u": None, "v": [float("nan")]}) == '{"u": null, "v": [NaN]}'
    assert mysql_json_text({"u": None, "v": float("-inf")}) == '{"u": null, "v": -Infinity}'
    assert mysql_json_text({"u": None, "v": (1, None)}) == '{"u": null, "v": [1, null]}'


def test_the_delete_character_is_escaped_as_json_dumps_escapes_it() -> None:
    # U+007F is ASCII, which orjson writes as it is; json.dumps (earlier releases'
    # documents, and every path) writes \u007f: MariaDB compares the two spellings
    # byte for byte, so a key holding it must be spelled json.dumps' way.
    document = {"a\x7fb": "c\x7f"}
    assert mysql_json_text(document) == json.dumps(document, ensure_ascii=True)
    assert mysql_member_path("a\x7fb") == '$."a\\u007fb"'
