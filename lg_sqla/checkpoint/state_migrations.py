"""Declared state revisions: how an application's graph state changed shape, in code.

Alembic versions lg_sqla's tables; this versions what is *in* them. An application
lists its state revisions in order, each naming its parent, like Alembic's::

    from lg_sqla.checkpoint.state_migrations import (
        RenameChannel, StateMigrations, StateRevision, TransformChannel,
    )

    MIGRATIONS = StateMigrations([
        StateRevision("0001_chat", parent=None, operations=[RenameChannel("messages", "chat")]),
        StateRevision("0002_score_str", parent="0001_chat",
                      operations=[TransformChannel("score", str, down=int)]),
    ])
    saver = SQLAlchemySaver(engine, state_migrations=MIGRATIONS)

A saver given them reads every checkpoint in the newest shape (each stored row says
the revision it was written at: ``state_revision``, NULL for revision zero) and
writes the newest revision; ``lg-sqla state upgrade`` rewrites the stored rows
(``state_upgrade``). What a state change touches: a renamed state key is a renamed
*channel* (``channel_versions``, ``versions_seen``, blobs, pending writes); a retyped
field transforms the *values* of one channel (blobs and pending writes); a renamed
node changes ``versions_seen`` keys, its ``branch:to:<node>`` channel and the targets
of pending ``Send`` s. See docs/state-migrations.md.

This module is pure: the operations on names and decoded values, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.types import TASKS

from lg_sqla import internals, limits
from lg_sqla.errors import InvalidInputError, LgSqlaError

__all__ = [
    "DropChannel",
    "MissingDowngradeError",
    "Operation",
    "RenameChannel",
    "RenameNode",
    "StateMigrationError",
    "StateMigrations",
    "StateRevision",
    "StateRevisionError",
    "TransformChannel",
]

# LangGraph's channel that triggers a node: one per node, named after it.
BRANCH_PREFIX = "branch:to:"


class StateRevisionError(LgSqlaError, RuntimeError):
    """A stored row was written at a state revision this code does not know (code
    older than the data); the message names the revision and the fix."""


class MissingDowngradeError(InvalidInputError):
    """A downgrade crosses an operation that has no way back (a ``DropChannel``, a
    ``TransformChannel`` without ``down``); nothing was changed."""


class StateMigrationError(LgSqlaError, RuntimeError):
    """A migration function raised on a stored value; names the channel, the
    revision and the row."""


@dataclass(frozen=True)
class RenameChannel:
    """A state key renamed: channel ``old`` is called ``new`` from this revision on."""

    old: str
    new: str


@dataclass(frozen=True)
class TransformChannel:
    """A field retyped: each value of ``channel`` (its stored value and its pending
    writes) becomes ``value(old)``.

    Args:
        channel: The channel, by its name at this revision.
        value: Old stored value -> new one (a DeltaChannel snapshot's value is passed
            unwrapped and wrapped again).
        down: The way back (``lg-sqla state downgrade``); None: this revision cannot
            be undone.
        write: Old pending write -> new one, where a write is not shaped like the
            value (a reducer's update, e.g. one message where the value is a list);
            default: ``value``.
        down_write: The way back for writes; default: ``down``.
    """

    channel: str
    value: Callable[[Any], Any]
    down: Callable[[Any], Any] | None = None
    write: Callable[[Any], Any] | None = None
    down_write: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class DropChannel:
    """A state key removed: its values and writes are dropped (no way back)."""

    channel: str


@dataclass(frozen=True)
class RenameNode:
    """A node renamed: its ``versions_seen`` entry, its ``branch:to:`` trigger channel
    and the ``Send`` s addressed to it follow. Task ids are derived from node names by
    LangGraph: pending writes of a task of the old name are not reused by the renamed
    node (it runs again)."""

    old: str
    new: str


Operation = RenameChannel | TransformChannel | DropChannel | RenameNode


@dataclass(frozen=True)
class StateRevision:
    """One revision: its id (stored in ``state_revision``, at most 64 characters), its
    parent (None for the first) and the operations that lead from the parent's shape
    to this one, applied in order."""

    id: str
    parent: str | None
    operations: Sequence[Operation] = field(default_factory=tuple)
    description: str = ""


# A step of a path between two revisions: the operation and its direction.
Step = tuple[Operation, bool]  # (operation, upward)
# What migrate_value returns for a dropped channel.
DROPPED: Any = object()


def _check_name(where: str, name: object, maximum: int = limits.CHANNEL_MAX) -> str:
    if not isinstance(name, str) or not name or "\x00" in name or len(name) > maximum:
        raise InvalidInputError(
            f"{where} must be a non-empty str of at most {maximum} characters without NUL, "
            f"got {name!r}"
        )
    return name


def _check_operation(where: str, op: object) -> None:
    if isinstance(op, (RenameChannel, RenameNode)):
        _check_name(f"{where}.old", op.old)
        _check_name(f"{where}.new", op.new)
        if op.old == op.new:
            raise InvalidInputError(f"{where} renames {op.old!r} to itself")
    elif isinstance(op, TransformChannel):
        _check_name(f"{where}.channel", op.channel)
        for name in ("value", "down", "write", "down_write"):
            fn = getattr(op, name)
            if (fn is not None or name == "value") and not callable(fn):
                raise InvalidInputError(f"{where}.{name} must be callable, got {fn!r}")
    elif isinstance(op, DropChannel):
        _check_name(f"{where}.channel", op.channel)
    else:
        raise InvalidInputError(
            f"{where} is a {type(op).__name__}; operations are RenameChannel, "
            "TransformChannel, DropChannel and RenameNode"
        )


class StateMigrations:
    """An application's state revisions: an ordered chain, checked when built.

    Raises:
        InvalidInputError: an id is repeated, too long or empty; a revision's parent
            is not the revision before it (the first's is None); an operation is
            malformed. Nothing is half-built.
    """

    def __init__(self, revisions: Iterable[StateRevision]) -> None:
        chain = list(revisions)
        parent: str | None = None
        seen: set[str] = set()
        for n, revision in enumerate(chain):
            if not isinstance(revision, StateRevision):
                raise InvalidInputError(
                    f"state revision #{n} is a {type(revision).__name__}, not a StateRevision"
                )
            _check_name(f"state revision #{n} id", revision.id, limits.STATE_REVISION_MAX)
            if revision.id in seen:
                raise InvalidInputError(f"state revision id {revision.id!r} is declared twice")
            if revision.parent != parent:
                raise InvalidInputError(
                    f"state revision {revision.id!r} has parent {revision.parent!r}, but the "
                    f"revision before it is {parent!r}: list the revisions in order, each "
                    "naming the one before it (the first: parent=None)"
                )
            for i, op in enumerate(revision.operations):
                _check_operation(f"state revision {revision.id!r} operation #{i}", op)
            seen.add(revision.id)
            parent = revision.id
        self.revisions: tuple[StateRevision, ...] = tuple(chain)
        self._position = {r.id: n + 1 for n, r in enumerate(chain)}
        # Asked for every value read: the few (start, end) pairs of a database, kept.
        self._steps: dict[tuple[str | None, str | None], list[Step]] = {}

    @property
    def head(self) -> str | None:
        """The newest revision's id (None: no revision, every row is revision zero)."""
        return self.revisions[-1].id if self.revisions else None

    def __repr__(self) -> str:
        return f"StateMigrations({[r.id for r in self.revisions]!r})"

    def position(self, revision: str | None, *, row: str = "a row") -> int:
        """0 for revision zero (NULL), n for the n-th revision; raise for one unknown."""
        if revision is None:
            return 0
        found = self._position.get(revision)
        if found is None:
            raise unknown_revision(revision, row, self)
        return found

    def known(self, revision: str | None) -> bool:
        return revision is None or revision in self._position

    def resolve(self, revision: str | None) -> str | None:
        """A target named by the user: an id, or "base"/None for revision zero."""
        if revision in (None, "base"):
            return None
        self.position(revision, row="the target")
        return revision

    def steps(self, start: str | None, end: str | None) -> list[Step]:
        """The operations from ``start``'s shape to ``end``'s: upward in order, or downward
        (each reversed) in reverse order."""
        kept = self._steps.get((start, end))
        if kept is not None:
            return kept
        a, b = self.position(start), self.position(end)
        if a <= b:
            steps = [(op, True) for r in self.revisions[a:b] for op in r.operations]
        else:
            steps = [
                (op, False) for r in reversed(self.revisions[b:a]) for op in reversed(r.operations)
            ]
        self._steps[(start, end)] = steps
        return steps

    def missing_downgrades(self, start: str | None, end: str | None) -> list[str]:
        """What cannot go back between ``start`` and ``end`` (``end`` older): one line
        per operation, naming its revision; empty when the way down is complete."""
        a, b = self.position(start), self.position(end)
        missing = []
        for revision in self.revisions[b:a]:
            for op in revision.operations:
                if isinstance(op, DropChannel):
                    missing.append(f"{revision.id}: DropChannel({op.channel!r}) cannot be undone")
                elif isinstance(op, TransformChannel) and op.down is None:
                    missing.append(
                        f"{revision.id}: TransformChannel({op.channel!r}) has no down function"
                    )
        return missing


def unknown_revision(
    revision: str, row: str, migrations: StateMigrations | None
) -> StateRevisionError:
    """The error for a row at a revision this code does not know."""
    if migrations is None or not migrations.revisions:
        known = "this saver was given no state migrations, so it knows revision zero only"
    else:
        known = f"this saver's state migrations end at {migrations.head!r}"
    return StateRevisionError(
        f"{row} was written at state revision {revision!r}, which this code does not know "
        f"({known}): it was written by a newer version of the application. Run that version, "
        "or pass it state_migrations=... declaring the revision; to go back, run "
        "`lg-sqla state downgrade --to <revision> --migrations <module:attribute>` with the "
        "newer application's migrations first"
    )


# --- names -------------------------------------------------------------------------


def channel_through(steps: Sequence[Step], channel: str) -> str | None:
    """``channel``'s name after ``steps`` (None: dropped)."""
    name: str | None = channel
    for op, up in steps:
        if name is None:
            return None
        name = _rename_channel(op, up, name)
    return name


def _rename_channel(op: Operation, up: bool, name: str) -> str | None:
    if isinstance(op, RenameChannel):
        old, new = (op.old, op.new) if up else (op.new, op.old)
        return new if name == old else name
    if isinstance(op, RenameNode):
        old, new = (op.old, op.new) if up else (op.new, op.old)
        return BRANCH_PREFIX + new if name == BRANCH_PREFIX + old else name
    if isinstance(op, DropChannel) and up and name == op.channel:
        return None
    return name


def node_through(steps: Sequence[Step], node: str) -> str:
    for op, up in steps:
        if isinstance(op, RenameNode):
            old, new = (op.old, op.new) if up else (op.new, op.old)
            node = new if node == old else node
    return node


def _renamed_keys(versions: Mapping[str, Any], steps: Sequence[Step]) -> dict[str, Any]:
    renamed = {}
    for channel, version in versions.items():
        name = channel_through(steps, channel)
        if name is not None:
            renamed[name] = version
    return renamed


def migrate_names(document: Mapping[str, Any], steps: Sequence[Step]) -> dict[str, Any]:
    """A checkpoint (or its stored document) with its channel and node names after
    ``steps``: ``channel_versions``, ``versions_seen``, ``updated_channels``; its values
    (``channel_values``, the stored document's inline ones) are left to the caller."""
    if not steps:
        return dict(document)
    migrated = dict(document)
    migrated["channel_versions"] = _renamed_keys(document.get("channel_versions") or {}, steps)
    migrated["versions_seen"] = {
        node_through(steps, node): _renamed_keys(seen, steps)
        for node, seen in (document.get("versions_seen") or {}).items()
    }
    updated = document.get("updated_channels")
    if updated is not None:
        names = (channel_through(steps, ch) for ch in updated)
        migrated["updated_channels"] = [name for name in names if name is not None]
    return migrated


# LangGraph's per-DeltaChannel snapshot counters, in checkpoint metadata, by channel name.
DELTA_COUNTERS = "counters_since_delta_snapshot"


def migrate_metadata(metadata: Mapping[str, Any], steps: Sequence[Step]) -> dict[str, Any]:
    """Checkpoint metadata with the channel names it holds (the DeltaChannel snapshot
    counters) after ``steps``: a renamed DeltaChannel keeps its snapshot cadence."""
    migrated = dict(metadata)
    counters = metadata.get(DELTA_COUNTERS)
    if steps and isinstance(counters, Mapping):
        migrated[DELTA_COUNTERS] = _renamed_keys(counters, steps)
    return migrated


# --- values ------------------------------------------------------------------------


def migrate_value(
    steps: Sequence[Step], channel: str, value: Any, *, write: bool = False
) -> tuple[str, Any]:
    """(name, value) of a channel's stored value (``write``: a pending write) after
    ``steps``; the value is ``DROPPED`` when the channel was dropped. A migration
    function's error propagates (the caller names the row)."""
    name = channel
    for op, up in steps:
        if isinstance(op, TransformChannel) and name == op.channel:
            value = _apply(_function(op, up, write), value)
        elif isinstance(op, RenameNode) and name == TASKS:
            value = _renamed_sends(value, *((op.old, op.new) if up else (op.new, op.old)))
        renamed = _rename_channel(op, up, name)
        if renamed is None:
            return name, DROPPED
        name = renamed
    return name, value


def _function(op: TransformChannel, up: bool, write: bool) -> Callable[[Any], Any]:
    if up:
        return (op.write or op.value) if write else op.value
    down = (op.down_write or op.down) if write else op.down
    if down is None:  # (refused before any downgrade starts: missing_downgrades)
        raise MissingDowngradeError(f"TransformChannel({op.channel!r}) has no down function")
    return down


def _apply(fn: Callable[[Any], Any], value: Any) -> Any:
    # A DeltaChannel snapshot holds the channel's value: the function sees that value.
    snapshot = internals.langgraph_delta_snapshot()
    if snapshot is not None and isinstance(value, snapshot):
        return snapshot(fn(value[0]))
    return fn(value)


def _renamed_sends(value: Any, old: str, new: str) -> Any:
    """Send packets addressed to ``old`` (one, or the TASKS channel's list) sent to ``new``."""
    try:  # (langgraph itself, not only langgraph-checkpoint: a graph's TASKS hold its Sends)
        from langgraph.types import Send
    except ImportError:  # pragma: no cover
        return value
    if isinstance(value, Send):
        return Send(new, value.arg) if value.node == old else value
    if isinstance(value, list):
        return [_renamed_sends(item, old, new) for item in value]
    return value
