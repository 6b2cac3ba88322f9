"""What a forked child (gunicorn ``--preload``, Celery prefork, multiprocessing's
``fork``) must not take over from its parent, and what it gets instead.

A child starts with a copy of the parent's memory: its pooled connections (the same
sockets and SQLite handles the parent keeps using), the connection a saver keeps
between calls (``runtime.kept``), and every lock as it was at the fork, held ones
included (the forking process's other threads do not exist in the child, so nothing
would ever release them). Right after a fork, in the child
(``os.register_at_fork(after_in_child=...)``, which ``os.fork`` and multiprocessing run):

* each kept connection becomes the parent's: it is set aside, never used, closed,
  rolled back or checked in from the child (a close would end the parent's session,
  PostgreSQL's ``Terminate``), and the lock that hands it over is new;
* each engine lg_sqla created (``from_conn_string``) gets a new pool, as SQLAlchemy's
  recipe for forked processes does by hand (``engine.dispose(close=False)``): the
  parent's pooled connections are left alone, the child connects anew. An engine a
  user made is the user's: SQLAlchemy documents that recipe for it;
* the SQLite writer locks and the runtimes' handles on them are new
  (``runtime.locks``).

The parent is not touched. Forks that bypass Python's fork hooks (a C library's own
``fork()`` without ``PyOS_AfterFork_Child``) are caught for kept connections by the
pid each one records (:data:`kept.KeptConnection` checks it at every take).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable

from sqlalchemy.engine import Engine

# Engines lg_sqla created: each gets a new pool in a forked child.
_OWN_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()
# What runs in a child right after a fork, in registration order (each module that
# holds per-process state registers its reset once, at import).
_IN_CHILD: list[Callable[[], None]] = []
# The parent's connections a child found kept: held here for the child's lifetime so
# that nothing of the child ever closes or resets them (a garbage-collected pooled
# connection is rolled back and checked in by SQLAlchemy's finalizer). One per kept
# connection per fork.
_PARENTS_CONNECTIONS: list[object] = []
_GUARD = threading.Lock()


def renew_pool_in_children(engine: Engine) -> None:
    """In a process forked from this one, ``engine`` gets a new pool before anything
    uses it (for the engines lg_sqla creates and disposes itself)."""
    with _GUARD:
        _OWN_ENGINES.add(engine)


def on_fork_in_child(reset: Callable[[], None]) -> None:
    """Run ``reset`` in every child forked from this process, right after the fork."""
    _IN_CHILD.append(reset)


def set_aside(connection: object) -> None:
    """Keep a connection of the parent process out of the child's hands for good."""
    _PARENTS_CONNECTIONS.append(connection)


def _after_fork_in_child() -> None:
    global _GUARD
    _GUARD = threading.Lock()  # (it may have been held by a thread of the parent)
    for reset in _IN_CHILD:
        reset()
    for engine in list(_OWN_ENGINES):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork_in_child)
