"""The limits and input checks every inspection plan applies, and their constants."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy.sql.elements import ColumnElement

from lg_sqla import limits
from lg_sqla.checkpoint.checks import check_length
from lg_sqla.errors import InvalidInputError
from lg_sqla.shared import key_hash

MAX_PAGE = 1000
ROOT_NS_HASH = key_hash("")
STAT_GROUPS = ("node", "channel", "thread")
EMPTY_TYPE = "empty"
PUSH_PREFIX = "~__pregel_push"
SEND_TASK = "<send>"  # stats group of Send (push) tasks: their node is inside the packet


def _check_page(limit: int, offset: int = 0) -> None:
    if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit must be an int from 1 to {MAX_PAGE}, got {limit!r}")
    if not isinstance(offset, int) or offset < 0:
        raise InvalidInputError(f"offset must be an int >= 0, got {offset!r}")


def _thread(thread_id: Any, field_name: str = "thread_id") -> str:
    if not isinstance(thread_id, str):
        raise InvalidInputError(f"{field_name} must be a string, got {thread_id!r}")
    return check_length(field_name, thread_id, limits.THREAD_ID_MAX)


def _checkpoint_id(checkpoint_id: Any, field_name: str = "checkpoint_id") -> str:
    if not isinstance(checkpoint_id, str) or not checkpoint_id:
        raise InvalidInputError(f"{field_name} must be a non-empty string, got {checkpoint_id!r}")
    return check_length(field_name, checkpoint_id, limits.CHECKPOINT_ID_MAX)


def _window(
    column: ColumnElement[Any], since: dt.datetime | None, until: dt.datetime | None
) -> list[ColumnElement[bool]]:
    out = []
    for name, value in (("since", since), ("until", until)):
        if value is None:
            continue
        if not isinstance(value, dt.datetime) or value.tzinfo is None:
            raise InvalidInputError(f"{name} must be a timezone-aware datetime, got {value!r}")
        out.append(column >= value if name == "since" else column < value)
    return out


def _int(value: Any) -> int:
    return int(value or 0)  # SUM over no rows is NULL; PostgreSQL sums bigints as numeric
