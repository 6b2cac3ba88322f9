"""The call timeout: no call waits on its database for ever.

A call can wait without end on a server that is up: a PostgreSQL COMMIT waits for
its synchronous standby (``synchronous_standby_names``) as long as none is
connected, which is what a promoted standby that still names one does after a
failover; a statement may wait on a lock a forgotten session holds. With
``call_timeout`` (seconds, an option of the savers, the store and the node cache),
one watchdog thread per process cuts the connection of a call that has held it that
long: it shuts the connection's socket down, the driver's wait ends with a dead
connection (invalidated, never pooled again), and the call raises
:class:`~lg_sqla.errors.CallTimeoutError`. That error is never retried: what a cut
COMMIT did is unknown (the server may have committed it locally), as the message
says.

The clock runs while the call holds a connection, not while it waits for one or
for the reconnect window (``runtime.retry``), which is bounded by itself. A cut
needs the connection's socket: psycopg 3 (``pgconn.socket``) and psycopg2
(``fileno()``), both public; other drivers refuse the option with a clear error
(``check_driver``). Without the option (the default) nothing of this runs.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from typing import Any, TypeGuard

from sqlalchemy.engine import Dialect
from sqlalchemy.pool import PoolProxiedConnection

from lg_sqla.errors import CallTimeoutError, InvalidInputError
from lg_sqla.runtime import forks

# The drivers whose connection's socket is public, by SQLAlchemy's dialect.driver.
_CUTTABLE_DRIVERS = frozenset({"psycopg", "psycopg_async", "psycopg2"})


def check_timeout(seconds: float | None) -> float | None:
    """``call_timeout`` as given, or ``InvalidInputError`` naming what is wrong."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise InvalidInputError(
            f"call_timeout must be a number of seconds > 0, or None for no limit; got {seconds!r}"
        )
    return float(seconds)


def check_driver(dialect: Dialect, seconds: float | None) -> None:
    """Refuse ``call_timeout`` on a driver whose connections cannot be cut."""
    if seconds is not None and dialect.driver not in _CUTTABLE_DRIVERS:
        raise InvalidInputError(
            f"call_timeout needs a driver whose socket lg_sqla can shut down "
            f"(psycopg, psycopg2); this engine uses {dialect.name}+{dialect.driver}"
        )


def _socket_fd(driver_connection: Any) -> int | None:
    pgconn = getattr(driver_connection, "pgconn", None)  # psycopg 3, sync and async
    if pgconn is not None:
        fd = pgconn.socket
        return fd if isinstance(fd, int) and fd >= 0 else None
    fileno = getattr(driver_connection, "fileno", None)  # psycopg2
    return fileno() if callable(fileno) else None


def _cut(fd: int) -> None:
    """Shut the socket down (for both directions, under every descriptor of it): the
    driver's pending read ends at once, and the server sees the client gone."""
    with contextlib.suppress(OSError):
        duplicate = socket.socket(fileno=os.dup(fd))
        try:
            duplicate.shutdown(socket.SHUT_RDWR)
        finally:
            duplicate.close()


class _Watch:
    __slots__ = ("deadline", "fd", "seconds", "state")

    def __init__(self, seconds: float, fd: int) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.fd = fd
        self.state = "watched"  # then "ended" (by the call) or "cut" (by the watchdog)


class _Watchdog:
    """One daemon thread, started at the first watched call, cutting the connections
    whose deadline passed."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._heap: list[tuple[float, int, _Watch]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, fd: int, seconds: float) -> _Watch:
        watch = _Watch(seconds, fd)
        with self._condition:
            heapq.heappush(self._heap, (watch.deadline, next(self._order), watch))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="lg_sqla-call-timeouts", daemon=True
                )
                self._thread.start()
            self._condition.notify()
        return watch

    def end(self, watch: _Watch) -> bool:
        """End the watch; True if the watchdog cut its connection first."""
        with self._condition:
            if watch.state == "watched":
                watch.state = "ended"
            return watch.state == "cut"

    def _run(self) -> None:
        with self._condition:
            while True:
                while self._heap and self._heap[0][2].state != "watched":
                    heapq.heappop(self._heap)  # (ended calls)
                if not self._heap:
                    self._condition.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._condition.wait(wait)
                    continue
                watch = heapq.heappop(self._heap)[2]
                watch.state = "cut"  # (under the lock: the call's end() sees it)
                _cut(watch.fd)


_WATCHDOG = _Watchdog()


def _forked() -> None:
    global _WATCHDOG
    _WATCHDOG = _Watchdog()  # the parent's thread does not exist in the child


forks.on_fork_in_child(_forked)


def watch(pooled: PoolProxiedConnection, seconds: float) -> _Watch | None:
    """Start the clock of a call on ``pooled`` (None: a connection with no socket to
    cut, which ``check_driver`` refuses up front)."""
    fd = _socket_fd(pooled.driver_connection)
    return None if fd is None else _WATCHDOG.watch(fd, seconds)


def ended(watch: _Watch | None) -> TypeGuard[_Watch]:
    """Stop the clock; True if the watchdog cut the connection first (then a call
    that ended by itself keeps its result, and its dead connection fails at its next
    use and is replaced, ``runtime.retry``)."""
    return watch is not None and _WATCHDOG.end(watch)


def timed_out(watch: _Watch) -> CallTimeoutError:
    """The error of a call whose connection the watchdog cut."""
    return CallTimeoutError(
        f"no answer from the database within call_timeout={watch.seconds:g} s: the connection "
        "was cut, and what the call did is unknown (a COMMIT may have been applied on the "
        "server, and not reached a synchronous standby: on PostgreSQL, a COMMIT waits "
        "while synchronous_standby_names names a standby that is not connected)"
    )
