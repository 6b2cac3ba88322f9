"""A saver's retention policy (``ttl=``): its keys, their checks, and defaults.

Pure and I/O-free; what it means is in ``lg_sqla.checkpoint.retention``.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any, TypedDict

from lg_sqla.errors import InvalidInputError

DEFAULT_SWEEP_MINUTES = 5.0
DEFAULT_MAX_RUN_MINUTES = 24 * 60.0


class CheckpointTTL(TypedDict, total=False):
    """The retention policy of a saver (``ttl=``), in the shape of LangGraph's store
    ``TTLConfig``; every key is optional.

    default_ttl: Minutes a thread this saver writes lives after its last write (or
        refreshing read): every put stamps its checkpoint with it, so the thread keeps
        this TTL whoever reads or sweeps it, until another saver writes it. None or
        absent: puts stamp none (a thread written so never expires unless given one).
    refresh_on_read: A read of a live thread restarts its clock (an extra write per read).
    sweep_interval_minutes: How often ``start_ttl_sweeper``'s sweeper runs (default 5).
    keep_last: Keep only the newest N checkpoints of each namespace, pruned in the
        same transaction as every put (DeltaChannel ancestry is kept).
    max_run_minutes: How long after its last write a thread mid-run is still taken
        for running, never expired (default 1440: a day).
    """

    default_ttl: float | None
    refresh_on_read: bool
    sweep_interval_minutes: float
    keep_last: int | None
    max_run_minutes: float


@dataclass(frozen=True)
class Policy:
    """A validated ``CheckpointTTL``."""

    default_ttl: dt.timedelta | None = None
    refresh_on_read: bool = False
    sweep_interval_minutes: float = DEFAULT_SWEEP_MINUTES
    keep_last: int | None = None
    max_run: dt.timedelta = dt.timedelta(minutes=DEFAULT_MAX_RUN_MINUTES)


def positive_minutes(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInputError(f"ttl {name} must be a positive number of minutes, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidInputError(f"ttl {name} must be a positive number of minutes, got {value!r}")
    return float(value)


def policy_from(ttl: CheckpointTTL | None) -> Policy | None:
    """Validate a ``ttl=`` argument (a clear error naming the bad key)."""
    if ttl is None:
        return None
    if not isinstance(ttl, dict):
        raise InvalidInputError(f"ttl must be a dict (CheckpointTTL), got {type(ttl).__name__}")
    unknown = set(ttl) - set(CheckpointTTL.__annotations__)
    if unknown:
        raise InvalidInputError(
            f"ttl: unknown key(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(CheckpointTTL.__annotations__)}"
        )
    default = ttl.get("default_ttl")
    keep_last = ttl.get("keep_last")
    if keep_last is not None and (
        isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1
    ):
        raise InvalidInputError(f"ttl keep_last must be an int >= 1, got {keep_last!r}")
    refresh = ttl.get("refresh_on_read", False)
    if not isinstance(refresh, bool):
        raise InvalidInputError(f"ttl refresh_on_read must be a bool, got {refresh!r}")
    return Policy(
        default_ttl=None
        if default is None
        else dt.timedelta(minutes=positive_minutes("default_ttl", default)),
        refresh_on_read=refresh,
        sweep_interval_minutes=positive_minutes(
            "sweep_interval_minutes", ttl.get("sweep_interval_minutes", DEFAULT_SWEEP_MINUTES)
        ),
        keep_last=keep_last,
        max_run=dt.timedelta(
            minutes=positive_minutes(
                "max_run_minutes", ttl.get("max_run_minutes", DEFAULT_MAX_RUN_MINUTES)
            )
        ),
    )


def check_ttl_minutes(minutes: Any) -> float | None:
    """A per-thread TTL: positive minutes, or None (back to the TTL stamped by its writes)."""
    return None if minutes is None else positive_minutes("ttl_minutes", minutes)
