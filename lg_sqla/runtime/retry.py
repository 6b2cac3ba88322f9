"""Which database errors a saver call may run again from scratch, and when.

Two kinds of failure are normal on a busy or restarted database, and callers
should never see them:

* **Lock conflicts**: InnoDB picks a deadlock victim (MySQL/MariaDB 1213) or gives
  up waiting for a lock (1205); PostgreSQL aborts a transaction with a
  serialization failure (40001) or a deadlock (40P01); SQLite answers
  ``SQLITE_BUSY`` ("database is locked") when two transactions both want to write
  and waiting cannot help. The database rolled the transaction back, so running
  the whole call again is correct. Retried a bounded number of times, after a
  short jittered pause so the two contenders do not collide again.
* **A dead pooled connection** (server restarted, connection killed): SQLAlchemy
  flags it ``connection_invalidated`` and drops the pool's older connections, so
  the next checkout opens a new one. Retried once, which avoids paying a
  ``pool_pre_ping`` round trip on every checkout.

Both only when nothing of the call was committed: an error raised after a plan's
``COMMIT`` step, or by the final commit itself (whose outcome is unknown), is
marked with :func:`mark_after_commit` and re-raised as it is. Multi-transaction
plans (``prune`` of several threads, ``sweep``, ``reencrypt``) are therefore
retried only while their first transaction runs; each of them is idempotent, so
calling it again after such an error finishes the work.

Plans are generators and cannot be rewound: the shells retry by asking a plan
*factory* for a fresh plan (see ``SQLAlchemySaver._run``).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError

# Attempts in all (the first included) for lock conflicts; a disconnect is retried once.
MAX_ATTEMPTS = 6
# The pause before retry n is uniform in [0, BASE * 2**(n-1)] seconds ("full jitter").
BACKOFF_BASE_S = 0.01

_MYSQL_LOCK_CONFLICTS = frozenset({1213, 1205})  # deadlock, lock wait timeout
_POSTGRES_LOCK_CONFLICTS = frozenset({"40001", "40P01"})  # serialization failure, deadlock
_AFTER_COMMIT = "_lg_sqla_after_commit"

T = TypeVar("T")


def mark_after_commit(error: BaseException) -> None:
    """Record that part of the call may be committed: it must not run again."""
    setattr(error, _AFTER_COMMIT, True)


def is_lock_conflict(error: DBAPIError) -> bool:
    """A deadlock, lock timeout, serialization failure or SQLITE_BUSY, on any dialect."""
    orig = error.orig
    sqlstate = getattr(orig, "sqlstate", None)  # psycopg
    if sqlstate is not None:
        return sqlstate in _POSTGRES_LOCK_CONFLICTS
    args = getattr(orig, "args", ())
    if args and isinstance(args[0], int):  # PyMySQL, asyncmy, mysqlclient: (code, message)
        return args[0] in _MYSQL_LOCK_CONFLICTS
    # sqlite3 / aiosqlite: SQLITE_BUSY and SQLITE_LOCKED carry no code on older Pythons.
    message = str(orig)
    return "database is locked" in message or "database table is locked" in message


def retry_delay(error: DBAPIError, attempt: int) -> float | None:
    """Seconds to wait before running the call again, or ``None`` to raise ``error``.

    ``attempt`` is the number of attempts made so far (1 after the first failure).
    """
    if getattr(error, _AFTER_COMMIT, False):
        return None
    if error.connection_invalidated:
        return 0.0 if attempt == 1 else None
    if attempt < MAX_ATTEMPTS and is_lock_conflict(error):
        return random.uniform(0, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return None


def with_retries(attempt: Callable[[], T]) -> T:
    """Call ``attempt`` (one whole transaction) again while :func:`retry_delay` allows."""
    attempts = 0
    while True:
        try:
            return attempt()
        except DBAPIError as error:
            attempts += 1
            delay = retry_delay(error, attempts)
            if delay is None:
                raise
            time.sleep(delay)


async def awith_retries(attempt: Callable[[], Awaitable[T]]) -> T:
    """Async twin of :func:`with_retries`."""
    attempts = 0
    while True:
        try:
            return await attempt()
        except DBAPIError as error:
            attempts += 1
            delay = retry_delay(error, attempts)
            if delay is None:
                raise
            await asyncio.sleep(delay)
