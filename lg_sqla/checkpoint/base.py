"""What the sync and async savers share: construction, versions, serde handling."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol, maybe_add_typed_methods
from sqlalchemy.engine import Dialect

from lg_sqla.checkpoint.policy import CheckpointTTL, Policy, policy_from, positive_minutes
from lg_sqla.dialects import DialectOps, ops_for
from lg_sqla.errors import InvalidInputError, ReadOnlyError
from lg_sqla.runtime import Runtime
from lg_sqla.serde import with_msgpack_allowlist

DEFAULT_LIST_PAGE_SIZE = 100


def next_version(current: str | int | float | None) -> str:
    """Zero-padded, so string order is version order; the random suffix tells forks apart."""
    if current is None:
        number = 0
    elif isinstance(current, (int, float)):
        number = int(current)
    else:
        number = int(current.split(".")[0])
    return f"{number + 1:032}.{random.random():016}"


def check_page_size(page_size: int) -> None:
    if not isinstance(page_size, int) or page_size < 1:
        raise InvalidInputError(f"list_page_size must be an int >= 1, got {page_size!r}")


@dataclass(frozen=True)
class Context:
    """What the checkpoint plans (and inspection's, the importer's) need from their saver."""

    dialect_ops: DialectOps
    serde: SerializerProtocol
    # The saver's get_next_version(None, None), called only where a tuple needs it
    # (a v<4 checkpoint with pending sends and no versions).
    next_version: Callable[[], Any] = lambda: None  # (callers that build no tuples)


class SaverBase(BaseCheckpointSaver[str]):
    """State and helpers common to SQLAlchemySaver and AsyncSQLAlchemySaver."""

    dialect_ops: DialectOps
    list_page_size: int

    def _init_common(
        self,
        dialect: Dialect,
        serde: SerializerProtocol | None,
        list_page_size: int,
        check_schema: bool,
        direct_path: bool,
        read_only: bool = False,
        ttl: CheckpointTTL | None = None,
    ) -> None:
        # First: a bad policy is refused before anything else is set up.
        self.retention: Policy | None = policy_from(ttl)
        self.ttl_config = ttl
        # Reads check expiry unless the policy only prunes on write (keep_last alone):
        # with no policy, and in that case, a read costs what it did.
        self._expiry: Policy | None = self.retention
        if self.retention is not None and set(ttl or ()) == {"keep_last"}:
            self._expiry = None
        # refresh_on_read is a write: never on a read-only saver.
        self._refresh = bool(self.retention and self.retention.refresh_on_read and not read_only)
        BaseCheckpointSaver.__init__(self, serde=serde)
        check_page_size(list_page_size)
        self.dialect_ops = ops_for(dialect)
        self._runtime = Runtime(
            self.dialect_ops, check_schema=check_schema, direct_path=direct_path
        )
        self.list_page_size = list_page_size
        self.read_only = read_only

    @property
    def context(self) -> Context:
        """What this saver's plans need (dialect, serializer), for ``run``/``arun``."""
        # Built again when the serializer changed: `with_allowlist` clones carry
        # another serde (and a copy of this attribute).
        context: Context | None = self.__dict__.get("_context")
        if context is None or context.serde is not self.serde:
            context = self._context = Context(self.dialect_ops, self.serde, self._first_version)
        return context

    def _writing(self, call: str) -> None:
        """Refuse ``call`` on a read-only saver, before anything reaches the database."""
        if self.read_only:
            raise ReadOnlyError(
                f"{call}: this saver was opened read_only=True (for a replica: inspection, "
                "dashboards, history); run graphs and maintenance on a saver of the primary"
            )

    def _keep_last(self) -> int | None:
        return None if self.retention is None else self.retention.keep_last

    def _policy(self) -> Policy:
        """The policy a TTL call works under; a saver without one has per-thread TTLs only."""
        return self.retention or Policy()

    def _sweep_minutes(self, minutes: float | None) -> float:
        if minutes is None:
            return self._policy().sweep_interval_minutes
        return positive_minutes("sweep_interval_minutes", minutes)

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        return next_version(current)

    def _first_version(self) -> str:
        return self.get_next_version(None, None)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> SaverBase:
        """A shallow clone whose serializer also allows these msgpack types.

        Unlike the base class, this reaches through lg_sqla's encrypting and
        compressing serializers to the JsonPlusSerializer inside them.
        """
        serde = with_msgpack_allowlist(self.serde, tuple(extra_allowlist))
        if serde is self.serde:
            return self
        clone = copy.copy(self)
        clone.serde = maybe_add_typed_methods(serde)
        return clone
