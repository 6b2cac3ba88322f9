"""What the inspection calls return: frozen dataclasses, no behaviour beyond sums."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ThreadInfo:
    """One thread: its status, how many checkpoints, namespaces, when written, how large."""

    thread_id: str
    status: str  # one of THREAD_STATUSES
    checkpoints: int
    namespaces: int
    first_write: dt.datetime
    last_write: dt.datetime
    value_bytes: int  # serialized channel values (checkpoint_blobs)
    write_bytes: int  # serialized pending writes (checkpoint_writes)
    # When the latest root checkpoint was made (None: the thread has none).
    state_updated: dt.datetime | None = None
    # ``extract``'s aliases and the values found at their paths (None where none).
    extracted: dict[str, Any] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return self.value_bytes + self.write_bytes

    def fields(self, select: tuple[str, ...] | None = None) -> dict[str, Any]:
        """The fields named by ``select`` (all without it), ``bytes`` included."""
        every = {
            "thread_id": self.thread_id,
            "status": self.status,
            "checkpoints": self.checkpoints,
            "namespaces": self.namespaces,
            "first_write": self.first_write,
            "last_write": self.last_write,
            "state_updated": self.state_updated,
            "value_bytes": self.value_bytes,
            "write_bytes": self.write_bytes,
            "bytes": self.bytes,
            "extracted": self.extracted,
        }
        return every if select is None else {name: every[name] for name in select}


@dataclass(frozen=True)
class ThreadPage:
    threads: list[ThreadInfo]
    # Pass as ``offset`` for the next page; None on the last one. With a ``values``
    # filter it counts candidates examined, not threads listed (see ``threads``).
    next_offset: int | None
    total: int | None = None  # threads matching the filters, when asked for (``count=True``)
    select: tuple[str, ...] | None = None  # the fields asked for (None: all)
    decoded: int = 0  # threads whose latest values were decoded (values filter, extract)

    def rows(self) -> list[dict[str, Any]]:
        """The threads as dicts of the selected fields."""
        return [t.fields(self.select) for t in self.threads]


@dataclass(frozen=True)
class HistoryEntry:
    """One checkpoint of a thread's history, as ``get_state_history`` would list it."""

    checkpoint_id: str
    parent_id: str | None
    step: int | None
    source: str | None
    created_at: dt.datetime
    next: tuple[str, ...]  # nodes whose trigger channels changed since they last ran
    sends: int  # Send packets queued for the next step (their node is in the packet)
    pending_writes: int


@dataclass(frozen=True)
class ValueView:
    """A channel value: the value itself, and for humans its type and a bounded preview."""

    type: str
    preview: str
    size: int | None = None  # len() of strings, bytes and collections
    value: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class CheckpointView:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    metadata: dict[str, Any]
    channel_versions: dict[str, str]
    values: dict[str, ValueView]
    pending_writes: list[tuple[str, str, ValueView]]  # (task_id, channel, value)


@dataclass(frozen=True)
class ListChange:
    """How a list value changed: items appended (or inserted), removed, replaced.

    LangChain messages are matched by ``id`` (``add_messages`` replaces a message
    by id); other items by position, aligned as difflib aligns sequences.
    """

    appended: list[Any]
    removed: list[Any]
    replaced: list[tuple[Any, Any]]  # (old, new)


@dataclass(frozen=True)
class ChannelChange:
    channel: str
    old_version: str | None
    new_version: str | None
    old: ValueView | None
    new: ValueView | None
    items: ListChange | None = None  # when both values are lists


@dataclass(frozen=True)
class WriteInfo:
    """One pending write, without its value unless asked for."""

    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    bytes: int
    created_at: dt.datetime
    value: ValueView | None = None


@dataclass(frozen=True)
class WriteStats:
    key: str  # the node, channel or thread, per ``by``
    writes: int
    bytes: int
    threads: int
    first_write: dt.datetime | None
    last_write: dt.datetime | None

    @property
    def avg_bytes(self) -> float:
        return self.bytes / self.writes if self.writes else 0.0


@dataclass(frozen=True)
class LatestValue:
    thread_id: str
    checkpoint_id: str
    version: str
    value: Any


@dataclass(frozen=True)
class TableUsage:
    rows: int
    bytes: int  # payload bytes: JSON documents of checkpoints, serialized values/writes


@dataclass
class StorageReport:
    tables: dict[str, TableUsage] = field(default_factory=dict)

    @property
    def writes_to_values(self) -> float | None:
        """Writes volume over values volume (above 1: several tasks wrote the same channel)."""
        values, writes = self.tables.get("checkpoint_blobs"), self.tables.get("checkpoint_writes")
        if values is None or writes is None or not values.bytes:
            return None
        return writes.bytes / values.bytes

    @property
    def bytes(self) -> int:
        """Payload bytes of every table reported."""
        return sum(t.bytes for t in self.tables.values())


@dataclass
class DiskUsage:
    """Bytes on disk (``table_sizes.disk_usage``); None where the database cannot tell."""

    tables: dict[str, int] | None = None  # per table, its indexes included
    file_bytes: int | None = None  # the database file (SQLite)
    free_bytes: int | None = None  # free pages in that file, which VACUUM gives back
