"""Values made readable without a database: previews, list changes, next nodes, task nodes."""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any

from lg_sqla.errors import InvalidInputError
from lg_sqla.inspection.checks import PUSH_PREFIX, SEND_TASK
from lg_sqla.inspection.results import ListChange, ValueView


def _repr_of(width: int) -> reprlib.Repr:
    """A ``reprlib.Repr`` whose nested strings and objects get ``width`` characters too."""
    shortener = reprlib.Repr()
    shortener.maxstring = shortener.maxother = max(width, 12)
    shortener.maxlist = shortener.maxtuple = shortener.maxdict = shortener.maxset = 6
    shortener.maxlevel = 3
    return shortener


def summarize(value: Any, width: int = 120) -> ValueView:
    """A view of a value: its type, length and a preview of at most ``width`` chars
    (nested strings are cut at ``width`` too); the value itself in ``value``."""
    if not isinstance(width, int) or width < 1:
        raise InvalidInputError(f"width must be an int >= 1, got {width!r}")
    size = len(value) if isinstance(value, (str, bytes, list, tuple, dict, set)) else None
    text = _repr_of(width).repr(value)
    if len(text) > width:
        text = text[: width - 1] + "…"
    return ValueView(type(value).__name__, text, size, value)


def _message_id(item: Any) -> str | None:
    """The id of a LangChain message (``add_messages`` keys messages by it), else None."""
    from langchain_core.messages import BaseMessage

    return item.id if isinstance(item, BaseMessage) and item.id else None


def list_change(old: Sequence[Any], new: Sequence[Any]) -> ListChange:
    """What turned list ``old`` into list ``new``: by message id when every item of
    both is an identified message, else by position (a ``difflib`` alignment)."""
    old_ids = [_message_id(m) for m in old]
    new_ids = [_message_id(m) for m in new]
    if None not in old_ids and None not in new_ids:
        before = dict(zip(old_ids, old, strict=True))
        after = dict(zip(new_ids, new, strict=True))
        return ListChange(
            [m for i, m in after.items() if i not in before],
            [m for i, m in before.items() if i not in after],
            [(before[i], m) for i, m in after.items() if i in before and before[i] != m],
        )
    appended: list[Any] = []
    removed: list[Any] = []
    replaced: list[tuple[Any, Any]] = []
    # Items compared by repr: list items need not be hashable (dicts, lists).
    matcher = difflib.SequenceMatcher(None, list(map(repr, old)), list(map(repr, new)), False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        gone, came = list(old[i1:i2]), list(new[j1:j2])
        paired = min(len(gone), len(came))
        replaced.extend(zip(gone[:paired], came[:paired], strict=True))
        removed.extend(gone[paired:])
        appended.extend(came[paired:])
    return ListChange(appended, removed, replaced)


def _version_key(version: Any) -> tuple[float, str]:
    text = str(version)
    try:
        return (float(text.split(".")[0]), text)
    except ValueError:
        return (float("-inf"), text)


def next_nodes(document: Mapping[str, Any]) -> tuple[str, ...]:
    """Nodes a checkpoint would run next, from its versions only (no value decoded).

    LangGraph runs a node when one of its trigger channels (``branch:to:<node>``,
    or ``__start__`` for the input node) holds a value newer than the node last
    saw. A trigger is consumed by the step that follows its write, so it holds
    a value exactly when the step that made this checkpoint updated it
    (``updated_channels``, format v4); older checkpoints fall back to versions.
    """
    versions: Mapping[str, Any] = document.get("channel_versions") or {}
    seen: Mapping[str, Mapping[str, Any]] = document.get("versions_seen") or {}
    updated = document.get("updated_channels")
    out = []
    for channel, version in versions.items():
        if channel.startswith("branch:to:"):
            node = channel[len("branch:to:") :]
        elif channel == "__start__":
            node = "__start__"
        else:
            continue
        if updated is not None and channel not in updated:
            continue
        last = (seen.get(node) or {}).get(channel)
        if last is None or _version_key(last) < _version_key(version):
            out.append(node)
    return tuple(sorted(out))


def node_of(task_path: str) -> str:
    """The node of a task from its path: ``"~__pregel_pull, agent"`` -> ``agent``."""
    parts = [p.strip() for p in (task_path or "").split(",")]
    if len(parts) >= 2 and parts[0] == "~__pregel_pull":
        return parts[1]
    if parts and parts[0] == PUSH_PREFIX:
        return SEND_TASK
    return task_path or "?"
