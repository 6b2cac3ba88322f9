"""What the checkpoint plans need from their saver (``Context``), and the saver's small
rules they share (versions, page sizes). A module of its own: the plans import it,
and ``base.SaverBase`` imports the plans."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.serde.base import SerializerProtocol

from lg_sqla.checkpoint import codec
from lg_sqla.dialects import DialectOps
from lg_sqla.errors import InvalidInputError

if TYPE_CHECKING:
    from lg_sqla.checkpoint.state_migrations import StateMigrations

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
    # The writing saver's default_ttl: a put stamps its checkpoint's expires_at with
    # it (None: the checkpoint never expires by itself).
    stamp_ttl: dt.timedelta | None = None
    # The application's state revisions (``state_migrations``): reads return the newest
    # shape, writes stamp ``state_head``. None: every row read must be revision zero.
    state: StateMigrations | None = None
    state_head: str | None = None
    # Whether a write stamps its rows with the clock read as its columns' text
    # (``DialectOps.stamps_text``; ``types.naive_utc_text_now``): not when a TTL is
    # added to the stamp (``stamp_ttl``), which takes a datetime. Set from the two
    # (``__post_init__``). Plain attributes, not cached properties: put and put_writes
    # read these on every call, and an attribute the class also names as a descriptor
    # is looked up the slow way each time.
    stamps_text: bool = field(init=False, compare=False, repr=False)
    # The statements (``DialectOps.cached`` ones, and ``get_tuple``'s with its layout)
    # that the hot calls (put, put_writes, get_tuple) ask for on every call, by a key
    # of their own: a dict lookup, not ``cached``'s frame. A few keys, fixed by code.
    hot_statements: dict[Hashable, Any] = field(
        init=False, compare=False, repr=False, default_factory=dict
    )

    # The types of the values kept in the checkpoint document (``codec.inline_types``
    # of ``serde``): asked once per context (a context lives as long as its saver's
    # serializer), in ``__post_init__``.
    inline_types: frozenset[type] = field(init=False, compare=False, repr=False)
    # Whether put_writes packs int and ASCII str values itself (``codec.packs_plainly``).
    packs_plain: bool = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        stamps_text = self.dialect_ops.stamps_text and self.stamp_ttl is None
        object.__setattr__(self, "stamps_text", stamps_text)  # (frozen)
        object.__setattr__(self, "inline_types", codec.inline_types(self.serde))
        object.__setattr__(self, "packs_plain", codec.packs_plainly(self.serde))


def checked_migrations(
    state_migrations: StateMigrations | None, dialect_ops: DialectOps
) -> StateMigrations | None:
    """``state_migrations`` as a saver takes it: a ``StateMigrations`` on a dialect that
    has them, or None."""
    if state_migrations is None:
        return None
    from lg_sqla.checkpoint.state_migrations import StateMigrations

    if not isinstance(state_migrations, StateMigrations):
        raise InvalidInputError(
            "state_migrations must be a lg_sqla.checkpoint.state_migrations.StateMigrations, "
            f"got {type(state_migrations).__name__}"
        )
    if not dialect_ops.joins_channel_versions:
        raise InvalidInputError(
            f"state_migrations: not supported on the {dialect_ops.name} dialect (lg_sqla's "
            "portable fallback); they are on PostgreSQL, SQLite and MySQL/MariaDB"
        )
    return state_migrations
