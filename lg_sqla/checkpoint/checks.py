"""Checks of what a checkpoint stores: key text every database stores as given, and
metadata that survives as JSON on every dialect (with NUL characters stripped as
LangGraph does; ``dump_metadata``, LangGraph's merge of a put's metadata). Pure
functions, no I/O; ``codec`` builds rows with them."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    EXCLUDED_METADATA_KEYS,
    CheckpointMetadata,
    get_serializable_checkpoint_metadata,
)

from lg_sqla.errors import InvalidInputError
from lg_sqla.shared import json_text

# MariaDB refuses JSON with more than 31 nested objects/arrays (its depth limit, 32,
# counts the innermost value too; measured on 10.11 with JSON_VALID). Metadata is
# refused past that on every dialect, so a graph behaves the same wherever it runs
# (the metadata dict itself is level 1).
JSON_MAX_DEPTH = 31
# SQLite's JSON and MariaDB's compare integers as 64-bit; larger ones would be stored
# or matched as lossy floats, so they are refused everywhere.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def check_text(field: str, value: object) -> str:
    """``value`` if it is a str every database stores as given, else raise naming ``field``.

    Refused: non-str, NUL (PostgreSQL text cannot hold U+0000), and lone surrogates
    such as ``"\\ud800"`` (not Unicode text: no database encoding can store them).
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a str, got {type(value).__name__}: {value!r}")
    if "\x00" in value:
        raise InvalidInputError(f"{field} contains a NUL character (U+0000): {value!r}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(
                f"{field} contains a lone surrogate (not valid Unicode text): {value!r}"
            ) from None
    return value


def check_length(field: str, value: str, maximum: int) -> str:
    """Return ``value`` or raise naming the field: long keys are refused, never truncated."""
    check_text(field, value)
    if len(value) > maximum:
        raise InvalidInputError(
            f"{field} is {len(value)} characters long; lg_sqla stores at most {maximum} "
            f"(value starts {value[:40]!r})"
        )
    return value


# A graph names the same thread, namespace, task and checkpoint ids in several calls
# (put, then put_writes and get_tuple of what it returned): str values that passed
# their check are remembered, so a repeat costs one set lookup (a failed check raises
# orjson writes only what json.dumps writes the same way: Python's own str, int,
# float, bool, None, dict with str keys, list and tuple. Anything else (subclasses,
# dataclasses, datetimes...) is passed to its `default`, which has none, so it raises
# and json.dumps decides, as it always did.
def strip_nul(value: Any) -> Any:
    """PostgreSQL text and JSONB reject U+0000; LangGraph strips it from metadata too."""
    try:
        # The common case, checked in C: nothing to strip (JSON escapes U+0000 as
        # \u0000, and leaves no raw one).
        if "\\u0000" not in json_text(value):
            return value
    except (TypeError, ValueError):
        pass  # not JSON (check_json names it later): strip what can be walked
    return strip_nul_walk(value)


def strip_nul_walk(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {strip_nul_walk(k): strip_nul_walk(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strip_nul_walk(v) for v in value]
    return value


def plain_json(value: Any, depth: int) -> bool:
    """Whether ``value`` is JSON of Python's own types that :func:`check_json` accepts:
    the common case, checked in one walk that builds no names (``check_json`` walks
    again, naming the culprit, only when this says no). Scalars are checked in the
    loop, without a call each."""
    kind = type(value)
    if kind is dict:
        items: Iterable[Any] = value.values()
        for k in value:
            if type(k) is not str or "\x00" in k or not (k.isascii() or encodable(k)):
                return False
    elif kind is list or kind is tuple:
        items = value
    else:
        return plain_json_scalar(value)
    if depth >= JSON_MAX_DEPTH:
        return False
    for v in items:
        kind = type(v)
        if kind is str:
            if "\x00" in v or not (v.isascii() or encodable(v)):
                return False
        elif kind is int:
            if not INT64_MIN <= v <= INT64_MAX:
                return False
        elif v is None or kind is bool:
            continue
        elif not plain_json(v, depth + 1):
            return False
    return True


def plain_json_scalar(value: Any) -> bool:
    kind = type(value)
    if kind is str:
        return "\x00" not in value and (value.isascii() or encodable(value))
    if kind is int:
        return bool(INT64_MIN <= value <= INT64_MAX)
    if value is None or kind is bool:
        return True
    if kind is float:
        return math.isfinite(value)
    return False  # a subclass or another type: check_json decides


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_json(where: str, value: Any, depth: int = 0) -> Any:
    """Refuse what would not survive as JSON on every dialect, naming the culprit."""
    if plain_json(value, depth):
        return value
    return check_json_named(where, value, depth)


def check_json_named(where: str, value: Any, depth: int) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return check_text(where, value)
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise InvalidInputError(
                f"{where} is {value}, outside the 64-bit integers the databases' JSON holds"
            )
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{where} is {value!r}, which JSON cannot store")
        return value
    if isinstance(value, (dict, list, tuple)):
        depth += 1
        if depth > JSON_MAX_DEPTH:
            raise InvalidInputError(
                f"{where} is nested {depth} levels deep; lg_sqla stores JSON up to "
                f"{JSON_MAX_DEPTH} levels (MariaDB's limit, applied on every database)"
            )
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidInputError(f"{where} has a non-str key {k!r}")
            check_text(f"{where} key {k!r}", k)
            check_json_named(f"{where}[{k!r}]", v, depth)
        return value
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_json_named(f"{where}[{i}]", v, depth)
        return value
    raise InvalidInputError(
        f"{where} is a {type(value).__name__}; metadata must be JSON "
        "(str, int, float, bool, None, list, dict)"
    )


def dump_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict[str, Any]:
    """The metadata a put stores: LangGraph's ``get_serializable_checkpoint_metadata``
    (merged with the config's, NUL characters stripped, ``writes`` dropped), checked
    as JSON (``check_json``).

    The common case is merged and tested (``plain_json``'s test) in one walk here: the
    same merge as LangGraph's, key order included (metadata's items, then the config's
    ``metadata`` and ``configurable`` str, int, bool and float values under new keys,
    not excluded, not ``__``-prefixed; ``writes`` dropped last). Anything else (not a
    dict, a str with a NUL, which LangGraph strips, a subclass of a type it converts,
    a value ``plain_json`` refuses) takes ``_checked_metadata``, LangGraph's own merge.
    tests/unit/test_metadata_merge.py holds the two to the same result."""
    if type(metadata) is not dict:
        return _checked_metadata(config, metadata)
    given: dict[str, Any] = metadata  # type: ignore[assignment]  # (no cast: a call)
    merged: dict[str, Any] = {}
    known = _PLAIN_KEYS
    for key, value in given.items():
        if type(key) is not str or key not in known:
            if type(key) is not str or "\x00" in key or not (key.isascii() or encodable(key)):
                return _checked_metadata(config, metadata)
            _remember(known, key)
        kind = type(value)  # (plain_json's test of a member, scalars without a call)
        if kind is str:
            if "\x00" in value or not (value.isascii() or encodable(value)):
                return _checked_metadata(config, metadata)
        elif kind is int:
            if not INT64_MIN <= value <= INT64_MAX:
                return _checked_metadata(config, metadata)
        elif not (
            value is None
            or kind is bool
            or (kind is dict and not value)  # (LangGraph's "parents" of a root graph)
            or key == "writes"  # (dropped, unchecked)
            or _plain_member(value)
        ):
            return _checked_metadata(config, metadata)
        merged[key] = value
    skipped = _SKIPPED_KEYS
    for merged_from in (config.get("metadata"), config.get("configurable")):
        if not merged_from:
            continue
        for key, value in merged_from.items():
            if key in skipped or key in merged:
                continue
            if key in EXCLUDED_METADATA_KEYS or key.startswith("__"):
                _remember(skipped, key)
                continue
            kind = type(value)
            if kind is str or kind is int or kind is bool or kind is float:
                if not _plain_member(value):
                    return _checked_metadata(config, metadata)
                merged[key] = value
            elif isinstance(value, (str, int, float)):  # (a subclass: LangGraph converts)
                return _checked_metadata(config, metadata)
    merged.pop("writes", None)
    return merged


# The metadata keys that passed dump_metadata's test (str, no NUL, valid Unicode), and
# the config keys its merge leaves out (excluded, or ``__``-prefixed): a graph's
# metadata and config name the same few keys on every put, so a repeat costs one set
# lookup. Bounded (emptied when full), the same for every saver of the process.
_PLAIN_KEYS: set[str] = set()
_SKIPPED_KEYS: set[str] = set(EXCLUDED_METADATA_KEYS)
_KEYS_MAX = 4096


def _remember(keys: set[str], key: str) -> None:
    if len(keys) >= _KEYS_MAX:
        keys.clear()
        if keys is _SKIPPED_KEYS:
            keys.update(EXCLUDED_METADATA_KEYS)
    keys.add(key)


def _plain_member(value: Any) -> bool:
    """``plain_json``'s test of a top-level member (a container at depth 1)."""
    kind = type(value)
    if kind is dict or kind is list or kind is tuple:
        return plain_json(value, 1)
    return plain_json_scalar(value)


def _checked_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict[str, Any]:
    """``dump_metadata`` by LangGraph's merge, then ``check_json`` (stripping NUL)."""
    merged: dict[str, Any] = get_serializable_checkpoint_metadata(config, metadata)  # type: ignore[assignment]
    if plain_json(merged, 0):  # check_json's test, which finds no NUL to strip either
        return merged
    checked: dict[str, Any] = check_json("metadata", strip_nul(merged))
    return checked
