"""Channel values as the read commands show them: conversations as chats, other
values pretty-printed, ids shortened; and as JSON, the values themselves.

LangChain messages print as ``role  text``: an AI message's tool calls as
``-> tool(args) [call id]``, a tool message with its tool and call id. Every text
is cut at ``width`` characters, or shown whole when ``width`` is None (``--full``).
"""

from __future__ import annotations

import itertools
import json
import pprint
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MIN_SHORT_ID = 8
_VERSION = re.compile(r"^0*(\d+)(\.|$)")


def cut(text: str, width: int | None) -> str:
    """``text`` on one line, at most ``width`` characters (None: whole, lines kept)."""
    if width is None:
        return text
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 1)] + "…"


def _is_message(value: Any) -> bool:
    from langchain_core.messages import BaseMessage

    return isinstance(value, BaseMessage)


def is_conversation(value: Any) -> bool:
    """A message, or a non-empty list of messages (what ``add_messages`` channels hold)."""
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_is_message(m) for m in value)
    return _is_message(value)


def _content_text(content: Any) -> str:
    """A message's content as text: its text blocks, other blocks as ``[type]``."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif isinstance(block, Mapping):
            parts.append(f"[{block.get('type', 'block')}]")
        else:
            parts.append(str(block))
    return " ".join(parts)


def _are_interrupts(value: Any) -> bool:
    """The value of an ``__interrupt__`` write: ``interrupt()``'s payloads."""
    from langgraph.types import Interrupt

    return (
        isinstance(value, (list, tuple))
        and bool(value)
        and all(isinstance(i, Interrupt) for i in value)
    )


def message_lines(message: Any, width: int | None) -> list[str]:
    """One message as ``role  text`` lines (tool calls and results included)."""
    role = str(getattr(message, "type", type(message).__name__))
    texts: list[str] = []
    content = _content_text(message.content)
    if role == "tool":
        name = getattr(message, "name", None) or "tool"
        call_id = getattr(message, "tool_call_id", "")
        status = getattr(message, "status", "success")
        failed = " (error)" if status == "error" else ""
        texts.append(f"{name} [{call_id}]{failed}: {cut(content, width)}")
    elif content or not getattr(message, "tool_calls", None):
        texts.append(cut(content, width))
    for call in getattr(message, "tool_calls", None) or ():
        args = json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
        texts.append(f"-> {call.get('name')}({cut(args, width)}) [{call.get('id')}]")
    lines = []
    for text in texts:
        first, *rest = text.splitlines() or [""]
        lines.append(f"{role:<6} {first}")
        lines.extend(f"{'':<6} {line}" for line in rest)
    return lines


def value_lines(value: Any, preview: str, width: int | None) -> list[str]:
    """A value for humans: a chat for messages; else ``preview`` (already cut at the
    width), or the whole value pretty-printed when ``width`` is None."""
    if is_conversation(value):
        messages = value if isinstance(value, (list, tuple)) else [value]
        return [line for m in messages for line in message_lines(m, width)]
    if _are_interrupts(value):
        return [
            f"interrupt {cut(json.dumps(jsonable_value(i.value), ensure_ascii=False), width)}"
            for i in value
        ]
    if value is None:
        return ["None"]
    if width is None:
        return pprint.pformat(jsonable_value(value), width=100, sort_dicts=False).splitlines()
    return [preview]


def jsonable_value(value: Any) -> Any:
    """What a value is in JSON: messages as LangChain's ``message_to_dict`` (type and
    data), other LangChain objects as ``dumpd``, models, dataclasses, containers
    converted member by member; strings, numbers, booleans and None as they are."""
    import dataclasses

    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if _is_message(value):
        from langchain_core.messages import message_to_dict

        return jsonable_value(message_to_dict(value))
    if isinstance(value, Mapping):
        return {str(k): jsonable_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable_value(v) for v in value]
    from langchain_core.load import dumpd
    from langchain_core.load.serializable import Serializable

    if isinstance(value, Serializable):
        return jsonable_value(dumpd(value))
    from langgraph.types import Send

    if isinstance(value, Send):  # a push task's packet: the node and its input
        return {"node": value.node, "arg": jsonable_value(value.arg)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable_value({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    from lg_sqla.cli.output import jsonable

    converted = jsonable(value)
    return converted if isinstance(converted, str) else jsonable_value(converted)


def short_version(version: str | None) -> str:
    """A channel version for tables: ``00…0003.0.5128`` -> ``3``; ``-`` when absent."""
    if version is None:
        return "-"
    match = _VERSION.match(version)
    return match.group(1) if match else version


def short_ids(ids: Iterable[str | None]) -> dict[str, str]:
    """Each id cut to the shortest prefix (at least ``MIN_SHORT_ID`` characters) that
    tells the given ids apart: what tables show; the commands take any unique prefix."""
    unique = sorted({i for i in ids if i})
    length = MIN_SHORT_ID
    for a, b in itertools.pairwise(unique):
        common = 0
        while common < min(len(a), len(b)) and a[common] == b[common]:
            common += 1
        length = max(length, common + 1)
    out = {}
    for i in unique:
        short = i[:length]
        if short.endswith("-") and len(short) < len(i):  # 1f1e9a40- reads as cut off
            short = i[: length + 1]
        out[i] = short
    return out


def shortened(ids: Sequence[str | None], known: Mapping[str, str]) -> list[str]:
    return [known.get(i, i) if i else "-" for i in ids]
