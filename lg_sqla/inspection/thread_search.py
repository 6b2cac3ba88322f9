"""What ``threads`` filters on and extracts beyond SQL: JSON paths into a thread's
values and metadata, the value filter's matching, and the sort and field names.

A path is how LangGraph Platform's ``threads.search`` names a part of a thread:
``messages[-1].content`` (into values: the channel first), or with a root,
``values.messages[-1]`` / ``metadata.tenant.name`` (``extract``). Steps are
``.key``, ``[index]`` (negative from the end) and ``["any key"]``. Values are the
decoded channel values: a step into an object that is neither a mapping nor a list
(a LangChain message, a dataclass, a Pydantic model) reads its attribute.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lg_sqla.errors import InvalidInputError
from lg_sqla.limits import THREAD_FIELDS, THREAD_ORDERS, THREAD_SORT_KEYS

Path = tuple[str | int, ...]

# sort_by (Platform's names) -> the plan's own order names.
_SORT_ORDERS = {
    "thread_id": "thread_id",
    "created_at": "first_write",
    "updated_at": "last_write",
    "state_updated_at": "state_update",
    "checkpoints": "checkpoints",
}
_STEP = re.compile(r'\.?([^.\[\]"]+)|\[(-?\d+)\]|\[("(?:[^"\\]|\\.)*")\]')
_ROOTS = ("values", "metadata")


@dataclass(frozen=True)
class _Sort:
    """A page order: the plan's order name and its direction."""

    order: str
    descending: bool


def _resolve_sort(order: str | None, sort_by: str | None, sort_order: str | None) -> _Sort:
    """The order from ``order`` (the former names) or ``sort_by``/``sort_order``."""
    if sort_order is not None and sort_order not in ("asc", "desc"):
        raise InvalidInputError(f"sort_order must be 'asc' or 'desc', got {sort_order!r}")
    if sort_by is None:
        if sort_order is not None:
            raise InvalidInputError("sort_order needs sort_by")
        name = order or "last_write"
        if name not in THREAD_ORDERS:
            raise InvalidInputError(
                f"order must be one of {', '.join(THREAD_ORDERS)}, got {name!r}"
            )
        return _Sort(name, name != "thread_id")
    if order is not None:
        raise InvalidInputError("give order or sort_by, not both")
    if sort_by not in THREAD_SORT_KEYS:
        raise InvalidInputError(
            f"sort_by must be one of {', '.join(THREAD_SORT_KEYS)}, got {sort_by!r}"
        )
    descending = (sort_order or ("asc" if sort_by == "thread_id" else "desc")) == "desc"
    return _Sort(_SORT_ORDERS[sort_by], descending)


def _parse_path(text: Any, where: str) -> Path:
    """``messages[-1].content`` as ``("messages", -1, "content")``; InvalidInputError
    naming ``where`` and the character where the path stops making sense."""
    if not isinstance(text, str) or not text:
        raise InvalidInputError(f"{where}: a path must be a non-empty string, got {text!r}")
    steps: list[str | int] = []
    position = 0
    while position < len(text):
        found = _STEP.match(text, position)
        dotted = text.startswith(".", position)
        if found is None or (found.group(1) is not None and dotted == (position == 0)):
            raise InvalidInputError(
                f"{where}: malformed path {text!r} at character {position + 1} "
                f"({text[position:]!r}); write key.key[index], e.g. messages[-1].content"
            )
        key, index, quoted = found.groups()
        steps.append(int(index) if index is not None else json.loads(quoted) if quoted else key)
        position = found.end()
    if not isinstance(steps[0], str):
        raise InvalidInputError(f"{where}: path {text!r} must begin with a key")
    return tuple(steps)


def _rooted_path(text: Any, where: str) -> Path:
    """A path beginning with ``values.<channel>`` or ``metadata``."""
    path = _parse_path(text, where)
    if path[0] not in _ROOTS:
        raise InvalidInputError(
            f"{where}: path {text!r} must begin with values.<channel> or metadata"
        )
    if path[0] == "values" and (len(path) < 2 or not isinstance(path[1], str)):
        raise InvalidInputError(f"{where}: path {text!r} must name a channel: values.<channel>")
    return path


def _leaves(prefix: Path, expected: Any) -> list[tuple[Path, Any]]:
    """A filter as (path, value) pairs: a mapping matches by containment (each of its
    keys must match), anything else by equality."""
    if isinstance(expected, Mapping) and expected:
        out: list[tuple[Path, Any]] = []
        for key, value in expected.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"filter keys must be strings, got {key!r}")
            out.extend(_leaves((*prefix, key), value))
        return out
    return [(prefix, expected)]


def _value_leaves(values: Mapping[str, Any]) -> list[tuple[Path, Any]]:
    """``values={"order_id": 3, "messages[-1].type": "ai"}`` as (path, value) pairs."""
    if not isinstance(values, Mapping):
        raise InvalidInputError(f"values must be a mapping of path to value, got {values!r}")
    out: list[tuple[Path, Any]] = []
    for text, expected in values.items():
        out.extend(_leaves(_parse_path(text, f"values filter {text!r}"), expected))
    return out


_MISSING = object()


def _step_into(value: Any, step: str | int) -> Any:
    """One step of a path; ``_MISSING`` when there is nothing there."""
    if isinstance(step, int):
        if isinstance(value, (list, tuple)) and -len(value) <= step < len(value):
            return value[step]
        return _MISSING
    if isinstance(value, Mapping):
        return value.get(step, _MISSING)
    if isinstance(value, (str, bytes, int, float, list, tuple)) or value is None:
        return _MISSING
    if step.startswith("_"):
        return _MISSING
    found = getattr(value, step, _MISSING)
    return _MISSING if callable(found) else found


def _value_at(root: Any, path: Sequence[str | int]) -> Any:
    for step in path:
        root = _step_into(root, step)
        if root is _MISSING:
            break
    return root


def _equal(actual: Any, expected: Any) -> bool:
    """JSON equality: a boolean equals only a boolean (Python's ``True == 1`` does not
    hold in JSON); None also matches a missing member (as metadata filters)."""
    if expected is None:
        return actual is None or actual is _MISSING
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and bool(actual == expected)
    if isinstance(expected, list) and isinstance(actual, (list, tuple)):
        return len(actual) == len(expected) and all(map(_equal, actual, expected))
    return bool(actual == expected)


def _matches(values: Mapping[str, Any], wanted: Sequence[tuple[Path, Any]]) -> bool:
    """Whether decoded channel ``values`` meet every (path, value) pair."""
    return all(_equal(_value_at(values, path), expected) for path, expected in wanted)


def _extract_paths(
    values: Mapping[str, Any], metadata: Mapping[str, Any], paths: Mapping[str, Path]
) -> dict[str, Any]:
    """Each alias's value at its rooted path (None where there is none)."""
    roots = {"values": values, "metadata": metadata}
    out = {}
    for alias, path in paths.items():
        found = _value_at(roots[str(path[0])], path[1:])
        out[alias] = None if found is _MISSING else found
    return out


def _check_select(select: Sequence[str] | None) -> tuple[str, ...] | None:
    if select is None:
        return None
    if isinstance(select, str) or not select:
        raise InvalidInputError(f"select must be a non-empty list of field names, got {select!r}")
    unknown = [f for f in select if f not in THREAD_FIELDS]
    if unknown:
        raise InvalidInputError(
            f"select: unknown field(s) {', '.join(map(repr, unknown))}; "
            f"fields: {', '.join(THREAD_FIELDS)}"
        )
    return tuple(dict.fromkeys(select))


def _check_extract(extract: Mapping[str, str] | None) -> dict[str, Path]:
    if not extract:
        return {}
    if not isinstance(extract, Mapping):
        raise InvalidInputError(f"extract must be a mapping of alias to path, got {extract!r}")
    return {str(alias): _rooted_path(path, f"extract {alias!r}") for alias, path in extract.items()}


def _channels_of(paths: Sequence[Path]) -> list[str]:
    """The channels whose values the paths read (paths into values, unrooted)."""
    return sorted({str(p[0]) for p in paths})
