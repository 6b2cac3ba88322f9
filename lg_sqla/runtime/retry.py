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

**The reconnect window** (``reconnect_window``, seconds, an option of the savers, the
store and the node cache): a database that goes away for a while (a primary crashed
and its standby promoted, a server restarted, a Galera node killed) is waited for,
with growing pauses (jittered, from ``RECONNECT_FIRST_PAUSE_S`` to
``RECONNECT_MAX_PAUSE_S``), until the window has passed since the call's first
failure; then the last error is raised. Only once the owner has connected at least
once (a wrong URL or password fails at once), and only for calls whose outcome is
known or whose effect is idempotent:

* **nothing ran**: the connection could not be made or set up (refused, no writable
  server among a multi-host URL's, ``57P03`` the database starting up): any call;
* **a dead connection** met again after the one immediate retry above, or **a
  connection lost at the COMMIT** (outcome unknown): only the idempotent calls,
  whose effect is the same whether the lost attempt committed or not
  (``idempotent=True`` from their owner): the checkpointer's reads and its
  ``put`` (insert-or-ignore of immutable blobs, keyed by channel and version, and an
  upsert of the checkpoint row with the same content), ``put_writes`` (regular writes
  insert-or-ignore keyed by task and index, special ones an upsert of the same
  value), ``delete_thread`` and the DeltaChannel history read; the store's reads
  (a TTL refresh included) and every node-cache call (entries are set whole). Every
  other call (a prune, a copy, a sweep, a store batch with a put) is never run again
  after an unknown outcome: its error reaches the caller.

``reconnect_window=0`` keeps the behaviour without it (one immediate retry).

Plans are generators and cannot be rewound: the executors retry by asking a plan
*factory* for a fresh plan (``runtime.executor``).
"""

from __future__ import annotations

import asyncio
import logging
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
# The reconnect window's default, and its pauses: uniform in [p/2, p], p doubling from
# the first to the last (a promotion takes seconds; a closer poll buys nothing).
DEFAULT_RECONNECT_WINDOW_S = 30.0
RECONNECT_FIRST_PAUSE_S = 0.05
RECONNECT_MAX_PAUSE_S = 1.0

_PARTLY_COMMITTED = "_lg_sqla_partly_committed"
_AT_COMMIT = "_lg_sqla_failed_at_commit"
_LOST = "_lg_sqla_connection_lost"
_NOT_STARTED = "_lg_sqla_not_started"
_RUN_AGAIN = "_lg_sqla_run_again"

T = TypeVar("T")

logger = logging.getLogger(__name__)


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


def mark_not_started(error: BaseException) -> None:
    """Record that ``error`` came before the call ran anything: the connection could
    not be made, or not set up (its outcome is known: nothing happened)."""
    setattr(error, _NOT_STARTED, True)


def mark_run_again(error: BaseException) -> None:
    """Record that ``error`` ran nothing and its cause is gone (a pooler refused a
    prepared statement, and the engine prepares nothing now): run the call again."""
    setattr(error, _RUN_AGAIN, True)


def check_window(seconds: float) -> float:
    """``reconnect_window`` as given, or ``InvalidInputError`` naming what is wrong."""
    from lg_sqla.errors import InvalidInputError

    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise InvalidInputError(
            f"reconnect_window must be a number of seconds >= 0 (0: no window), got {seconds!r}"
        )
    return float(seconds)


def _no_window() -> float:
    return 0.0


def retry_delay(
    error: DBAPIError | ConnectionError,
    attempt: int,
    dialect_ops: DialectOps,
    *,
    idempotent: bool = False,
    window_left: float = 0.0,
) -> float | None:
    """Seconds to wait before running the call again, or ``None`` to raise ``error``.

    ``attempt`` is the number of attempts made so far (1 after the first failure);
    ``window_left``: the seconds left of the reconnect window (see the module).
    """
    if getattr(error, _PARTLY_COMMITTED, False):
        return None
    if getattr(error, _RUN_AGAIN, False):
        return 0.0 if attempt < MAX_ATTEMPTS else None
    orig = error.orig if isinstance(error, DBAPIError) else None
    conflict = orig is not None and dialect_ops.is_lock_conflict(orig)
    lost = getattr(error, "connection_invalidated", False) or getattr(error, _LOST, False)
    if getattr(error, _AT_COMMIT, False) and not conflict:
        # The COMMIT's outcome is unknown: only an idempotent call may run again.
        return _reconnect_pause(error, attempt, window_left) if idempotent and lost else None
    if getattr(error, _NOT_STARTED, False) and window_left > 0:
        return _reconnect_pause(error, attempt, window_left)
    if lost:
        if attempt == 1:
            return 0.0
        return _reconnect_pause(error, attempt, window_left) if idempotent else None
    if attempt < MAX_ATTEMPTS and conflict:
        return random.uniform(0, BACKOFF_BASE_S * 2 ** (attempt - 1))
    return None


def _reconnect_pause(error: BaseException, attempt: int, window_left: float) -> float | None:
    if window_left <= 0:
        return None
    pause = min(RECONNECT_MAX_PAUSE_S, RECONNECT_FIRST_PAUSE_S * 2 ** min(attempt - 1, 16))
    pause = min(random.uniform(pause / 2, pause), window_left)
    # INFO: a failover makes one line per waiting call and attempt (operators who
    # want to see the database come back turn it on).
    logger.info(
        "lg_sqla: the database is away (attempt %d, %.1f s left of the reconnect window): %s",
        attempt,
        window_left,
        str(error).splitlines()[0] if str(error) else type(error).__name__,
    )
    return pause


class _Failures:
    """The failed attempts of one call, and its reconnect window, which starts at the
    call's first failure (``window()``: its seconds, asked at each failure)."""

    __slots__ = ("attempts", "dialect_ops", "first_failure", "idempotent", "pending", "window")

    def __init__(
        self,
        dialect_ops: DialectOps,
        idempotent: bool,
        window: Callable[[], float],
        failed: DBAPIError | ConnectionError | None,
    ) -> None:
        self.dialect_ops = dialect_ops
        self.idempotent = idempotent
        self.window = window
        self.first_failure: float | None = None
        self.attempts = 0
        # The failed attempt's error, not judged yet (see judge).
        self.pending: list[DBAPIError | ConnectionError] = [] if failed is None else [failed]

    def delay(self, error: DBAPIError | ConnectionError) -> float | None:
        """Seconds to wait before the next attempt after ``error``; None: raise it."""
        self.attempts += 1
        now = time.monotonic()
        if self.first_failure is None:
            self.first_failure = now
        window_left = self.window() - (now - self.first_failure)
        return retry_delay(
            error,
            self.attempts,
            self.dialect_ops,
            idempotent=self.idempotent,
            window_left=window_left,
        )

    def judge(self) -> float:
        """Seconds to wait before the next attempt after the pending error (taken out of
        ``pending``); raises that error when it may not be retried. (The error is held
        here, not in the retry loop's frame, and dropped before it propagates: a frame
        holding its own exception is a cycle only gc frees.)"""
        error: DBAPIError | ConnectionError | None = self.pending.pop()
        assert error is not None
        delay = self.delay(error)
        if delay is None:
            try:
                raise error
            finally:
                error = None
        return delay


def with_retries(
    attempt: Callable[[], T],
    dialect_ops: DialectOps,
    idempotent: bool = False,
    window: Callable[[], float] = _no_window,
    failed: DBAPIError | ConnectionError | None = None,
) -> T:
    """Call ``attempt`` (one whole transaction) again while :func:`retry_delay` allows.

    ``window``: the reconnect window's seconds, asked at each failure (none before).
    ``failed``: the error of a first attempt the caller made itself (the executors
    do, so that a call that succeeds pays none of this loop): it is judged first,
    as if ``attempt`` had raised it."""
    failures = _Failures(dialect_ops, idempotent, window, failed)
    failed = None  # (held by failures.pending only: see _Failures.judge)
    while True:
        if not failures.pending:
            try:
                return attempt()
            except (DBAPIError, ConnectionError) as error:
                failures.pending.append(error)
        time.sleep(failures.judge())


async def awith_retries(
    attempt: Callable[[], Awaitable[T]],
    dialect_ops: DialectOps,
    idempotent: bool = False,
    window: Callable[[], float] = _no_window,
    failed: DBAPIError | ConnectionError | None = None,
) -> T:
    """Async twin of :func:`with_retries`."""
    failures = _Failures(dialect_ops, idempotent, window, failed)
    failed = None  # (held by failures.pending only: see _Failures.judge)
    while True:
        if not failures.pending:
            try:
                return await attempt()
            except (DBAPIError, ConnectionError) as error:
                failures.pending.append(error)
        await asyncio.sleep(failures.judge())
