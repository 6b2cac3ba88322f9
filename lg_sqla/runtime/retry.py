"""Which database errors a call may run again from scratch, and when.

Two kinds of failure are normal on a busy or restarted database, and callers
should never see them:

* **Lock conflicts**: InnoDB picks a deadlock victim (MySQL/MariaDB 1213) or gives
  up waiting for a lock (1205); PostgreSQL aborts a transaction with a
  serialization failure (40001) or a deadlock (40P01); SQLite answers
  ``SQLITE_BUSY`` ("database is locked") when two transactions both want to write
  and waiting cannot help. The database rolled the transaction back, so running
  the whole call again is correct. Which error is which is each database's own
  knowledge: ``DialectOps.is_lock_conflict`` (lg_sqla.dialects). Retried a bounded
  number of times, after a short jittered pause so the two contenders do not
  collide again.
* **A dead pooled connection** (server restarted, connection killed): SQLAlchemy
  flags it ``connection_invalidated`` and drops the pool's older connections, so
  the next checkout opens a new one. Retried once, which avoids paying a
  ``pool_pre_ping`` round trip on every checkout. The executors count as such a
  connection one they found unusable after the error (``runtime.drivers.
  left_unusable``) and one whose driver raised its socket's ``ConnectionError``
  unwrapped (pg8000), invalidating it first (:func:`mark_connection_lost`).

Both only when nothing of the call was committed:

* an error raised after a plan's ``COMMIT`` step is marked with
  :func:`mark_partly_committed` and never retried. Multi-transaction plans
  (``prune`` of several threads, ``sweep``, ``reencrypt``) are therefore retried
  only while their first transaction runs; each of them is idempotent, so calling
  it again after such an error finishes the work;
* an error raised by the final ``COMMIT`` itself is marked with
  :func:`mark_failed_at_commit`. A lock conflict there (a Galera certification
  failure or an InnoDB deadlock reported at COMMIT, a PostgreSQL serialization
  failure of a SERIALIZABLE transaction) is the server's answer that it rolled the
  transaction back: the outcome is known, and the call is retried like any other
  conflict. Anything else there (above all a lost connection) leaves the outcome
  unknown: raised as it is, never run again.

Plans are generators and cannot be rewound: the executors retry by asking a plan
*factory* for a fresh plan (``runtime.executor``).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.exc import DBAPIError

if TYPE_CHECKING:
    from lg_sqla.dialects import DialectOps


# Attempts in all (the first included) for lock conflicts; a disconnect is retried once.
MAX_ATTEMPTS = 6
# The pause before retry n is uniform in [0, BASE * 2**(n-1)] seconds ("full jitter").
BACKOFF_BASE_S = 0.01

_PARTLY_COMMITTED = "_lg_sqla_partly_committed"
_AT_COMMIT = "_lg_sqla_failed_at_commit"
_LOST = "_lg_sqla_connection_lost"

T = TypeVar("T")


def mark_partly_committed(error: BaseException) -> None:
    """Record that part of the call was committed (a COMMIT step went through): it
    must not run again."""
    setattr(error, _PARTLY_COMMITTED, True)


def mark_failed_at_commit(error: BaseException) -> None:
    """Record that the call's final COMMIT raised ``error``."""
    setattr(error, _AT_COMMIT, True)


def mark_connection_lost(error: BaseException) -> None:
    """Record that ``error``, a socket error a driver raised unwrapped (pg8000's
    ``ConnectionResetError``), came from a connection now invalidated: retried as a
    dead pooled connection."""
    setattr(error, _LOST, True)


def retry_delay(
    error: DBAPIError | ConnectionError, attempt: int, dialect_ops: DialectOps
) -> float | None:
    """Seconds to wait before running the call again, or ``None`` to raise ``error``.

    ``attempt`` is the number of attempts made so far (1 after the first failure).
    """
    if getattr(error, _PARTLY_COMMITTED, False):
        return None
    orig = error.orig if isinstance(error, DBAPIError) else None
    conflict = orig is not None and dialect_ops.is_lock_conflict(orig)
    if getattr(error, _AT_COMMIT, False) and not conflict:
        return None  # the COMMIT's outcome is unknown
    if getattr(error, "connection_invalidated", False) or getattr(error, _LOST, False):
        return 0.0 if attempt == 1 else None
    if attempt < MAX_ATTEMPTS and conflict:
        return random.uniform(0, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return None


def with_retries(attempt: Callable[[], T], dialect_ops: DialectOps) -> T:
    """Call ``attempt`` (one whole transaction) again while :func:`retry_delay` allows."""
    attempts = 0
    while True:
        try:
            return attempt()
        except (DBAPIError, ConnectionError) as error:
            attempts += 1
            delay = retry_delay(error, attempts, dialect_ops)
            if delay is None:
                raise
            time.sleep(delay)


async def awith_retries(attempt: Callable[[], Awaitable[T]], dialect_ops: DialectOps) -> T:
    """Async twin of :func:`with_retries`."""
    attempts = 0
    while True:
        try:
            return await attempt()
        except (DBAPIError, ConnectionError) as error:
            attempts += 1
            delay = retry_delay(error, attempts, dialect_ops)
            if delay is None:
                raise
            await asyncio.sleep(delay)
