"""JSON as the databases hand it back, read to exactly the values it holds.

Drivers return JSON columns parsed, or as text (SQLite's; MariaDB's JSON is
LONGTEXT) on some paths; :func:`json_loads` reads text by orjson where that gives
the values ``json.loads`` gives. :func:`json_equal` and :func:`metadata_matches`
compare JSON values as JSON does (``list``'s metadata filter where it runs in
Python). Pure functions, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import orjson


def json_object(value: Any) -> dict[str, Any]:
    # Drivers hand JSON back parsed, except a few (SQLite's text; MariaDB JSON is
    # LONGTEXT) in some paths.
    if isinstance(value, (str, bytes)):
        value = json_loads(value)
    return cast(dict[str, Any], value)


# orjson reads JSON text about 3x faster than json.loads and to the same values, but
# for integers beyond 64 bits (from 19 digits: -9223372036854775809), which it reads
# as lossy floats: text that may hold one (a run of 19 digits after a character that
# can precede a number) is read by json.loads, as is what orjson refuses (NaN, lone
# surrogates).
_DIGITS_AS_NINES = bytes.maketrans(b"0123456789", b"9" * 10)
_LONG_NUMBER = b"9" * 19


def json_loads(text: str | bytes) -> Any:
    """``json.loads(text)``, by orjson where that reads the same values."""
    try:
        raw = text.encode() if isinstance(text, str) else text
        digits = raw.translate(_DIGITS_AS_NINES)
        # (find, not `in`: bytes.__contains__ tries the operand as an integer first,
        # raising and clearing a TypeError: 1.8k instructions of every get_tuple)
        if digits.find(_LONG_NUMBER) < 0 or not _has_long_number(digits):
            return orjson.loads(raw)
    except (UnicodeEncodeError, orjson.JSONDecodeError):
        pass
    return json.loads(text)


_LONG_NUMBER_STARTS = tuple(bytes((lead,)) + _LONG_NUMBER for lead in b":,[- \n\r\t")


def _has_long_number(digits: bytes) -> bool:
    return digits.startswith(_LONG_NUMBER) or any(digits.find(s) >= 0 for s in _LONG_NUMBER_STARTS)


def json_equal(a: Any, b: Any) -> bool:
    """Equality of two JSON values as JSON sees them: ``true`` is not ``1``, object
    key order does not matter, ``1`` equals ``1.0`` (as PostgreSQL's jsonb does)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def metadata_matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """``list``'s metadata filter in Python: every key equal (None also matches a missing key)."""
    return all(
        json_equal(metadata.get(key), value) if key in metadata else value is None
        for key, value in wanted.items()
    )
