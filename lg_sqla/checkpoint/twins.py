"""The two faces of every checkpointer call, from one table.

Each call is written once where its I/O happens: ``SQLAlchemySaver.get_tuple`` on a
sync engine, ``AsyncSQLAlchemySaver.aget_tuple`` on an async one. The other face is
a bridge: a sync saver's ``a*`` method runs the sync one in a worker thread; an async
saver's sync method runs the ``a*`` one on the saver's event loop from another
thread. ``FACES`` names them; the class decorators below check that both classes
have every one and give each bridge its docstring, pointing at the documented face.
"""

from __future__ import annotations

from typing import TypeVar

# The calls that have both a sync and an ``a``-prefixed async face on both savers.
FACES: tuple[str, ...] = (
    "run",
    "get_tuple",
    "list",
    "put",
    "put_writes",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
    "sweep",
    "thread_ttl",
    "set_thread_ttl",
    "pin_thread",
    "unpin_thread",
    "sweep_ttl",
    "set_threads_ttl",
    "get_delta_channel_history",
    "reencrypt",
)

SaverClass = TypeVar("SaverClass", bound=type)


def _document(cls: type, bridge: str, documented: str, how: str) -> None:
    for face in (bridge, documented):
        if face not in vars(cls):  # the table and the class drifted apart
            raise TypeError(f"{cls.__name__} has no {face!r} of its own (checkpoint/twins.py)")
    method = vars(cls)[bridge]
    if method.__doc__ is None:
        method.__doc__ = f"``{documented}`` {how}; see ``{cls.__name__}.{documented}``."


def sync_bridged(cls: SaverClass) -> SaverClass:
    """The sync saver: each ``a*`` method runs the sync one in a worker thread."""
    for name in FACES:
        _document(cls, "a" + name, name, "in a worker thread, never blocking the event loop")
    return cls


def async_bridged(cls: SaverClass) -> SaverClass:
    """The async saver: each sync method runs the ``a*`` one on the saver's loop."""
    for name in FACES:
        _document(
            cls,
            name,
            "a" + name,
            "for sync code: run on the saver's event loop, from another thread than the loop's own",
        )
    return cls
