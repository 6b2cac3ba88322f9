"""One pooled connection a saver keeps between its direct-path calls.

A checkout and check-in of SQLAlchemy's pool cost about a tenth of a small
``get_tuple`` or ``put_writes`` on a SQLite file (a fairy object, its
``weakref.finalize``, the queue's lock, both ways), about 59k instructions of a
PostgreSQL ``put_writes`` on psycopg: the official SqliteSaver and PostgresSaver
hold one connection and pay none of it. A :class:`KeptConnection` keeps one
connection checked out of the pool for whichever thread calls next, and hands it
over with one non-blocking lock: a call that finds it taken (another thread is in
a call) checks out of the pool as before, so threads never wait on each other here.

What it must not change, and how it does not:

* Only where the pool would hand out the same kind of connection anyway: a
  SQLite file on the pysqlite driver, PostgreSQL on sync psycopg or MySQL/MariaDB
  on PyMySQL, with a queue pool of two connections or more (``pool_size``: one at
  least stays pooled for calls on SQLAlchemy Core and for other threads; a pool of
  one keeps nothing), no pool event listeners (a ``checkout`` listener such as the
  store's sqlite-vec loader must see every call; lg_sqla's own, which switches a
  MySQL session the direct path left in autocommit back for the pool's other users,
  ``drivers.guard_sessions``, has nothing to do for the direct path), no
  ``pre_ping`` and no ``pool_recycle``. Anything else checks out per call, as before.
* Transactions: a kept connection is kept only after a call committed (the pool's
  check-in after a commit skips its reset too, ``internals.check_in_after_commit``), so
  it holds no transaction and no read snapshot between calls. A call that fails
  gives the connection back to the pool its usual way (rolled back, or invalidated
  when dead) and keeps none.
* Dead connections (a server restarted, an idle timeout, ``pg_terminate_backend``):
  the call on a dead kept connection fails as on a pooled one, through SQLAlchemy's
  handler, which invalidates it (and the pool's older connections); the call is
  retried once on a new connection (``runtime.retry``), and nothing is kept from the
  failed one. A kept connection older than a disconnect the pool saw elsewhere goes
  back to the pool before it is used, which replaces it as its checkout would.
* ``engine.dispose()``: a connection of a pool the engine no longer has is closed
  at the next call; the savers' ``from_conn_string`` give theirs back before they
  dispose their engines (``release``).
* Behind a pooler in transaction mode (PgBouncer): a kept connection is a client
  connection to the pooler, holding no transaction, lock, setting or server-side
  cursor between calls (the direct path's kept cursor is psycopg's client object),
  so it assumes nothing of the server session the next transaction gets
  (tests/integration/clusters/test_pgbouncer.py); an engine switched to unprepared
  statements at each checkout (``dialects.poolers.stop_preparing``) keeps none.
* A forked child (``runtime.forks``): the kept connection is the parent's. The child
  never uses, closes or gives it back (:meth:`KeptConnection.forget_parents`, run
  right after the fork; the pid it was kept by, checked at every take, catches a
  fork that ran no Python hook), and keeps one of its own from then on.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool, PoolProxiedConnection, QueuePool

from lg_sqla import internals
from lg_sqla.runtime import direct, drivers, forks

# The drivers whose connections are kept, by SQLAlchemy's (dialect.name, dialect.driver):
# a SQLite file's pysqlite, PostgreSQL's psycopg (sync, and async: SQLAlchemy's async
# dialect has the same name; an async PostgreSQL ``aput`` took 475k instructions with a
# checkout and check-in per call, 427k kept) and MySQL's PyMySQL.
_KEEPING_DRIVERS = frozenset(
    {
        ("sqlite", "pysqlite"),
        ("postgresql", "psycopg"),
        ("mysql", "pymysql"),
        ("mariadb", "pymysql"),
    }
)


def keeps_connections(engine: Engine) -> bool:
    """Whether a connection of ``engine`` may be kept between calls (see the module)."""
    if (engine.dialect.name, engine.dialect.driver) not in _KEEPING_DRIVERS:
        return False
    pool = engine.pool
    if not isinstance(pool, QueuePool):
        return False
    if pool.size() < 2:  # one connection stays pooled for everything else
        return False
    if internals.pool_checks_connections(pool):  # (unknown: keeps nothing)
        return False
    dispatch = pool.dispatch
    # (lg_sqla's own checkout listener, ``drivers.guard_sessions``, concerns the other
    # checkouts only: a kept connection is the direct path's)
    if dispatch.checkin or dispatch.reset:
        return False
    return drivers.session_guards_only(dispatch.checkout)


class KeptConnection:
    """One connection of one engine's pool, kept between calls (see the module)."""

    def __init__(self) -> None:
        self._in_use = threading.Lock()
        self._pooled: PoolProxiedConnection | None = None
        self._pool: Pool | None = None
        self._pid = 0  # the process that checked the kept connection out
        # internals.quiet_pool of the kept connection (what take's fast check compares)
        self._quiet: tuple[Any, ...] | None = None
        # release() found a call on the event loop's thread holding the connection:
        # that call gives it back when it ends (see release).
        self._release_pending = False

    def take(self, engine: Engine) -> PoolProxiedConnection | None:
        """The kept connection (checked out now if none is kept), for this call
        alone until :meth:`put_back`; None when another call has it or ``engine``
        must not keep one: then the caller checks out of the pool."""
        if not self._in_use.acquire(False):  # (not blocking; positional: cheaper)
            return None
        pooled, pool = self._pooled, engine.pool
        # The usual call: the connection kept by this process, of the engine's current
        # pool, still open and current, and nothing listening to the pool since. (The
        # rest of keeps_connections is fixed for a pool: checked when it was kept.)
        if (
            pooled is not None
            and self._pool is pool
            and self._pid == os.getpid()
            and internals.kept_still_current(pooled, pool, self._quiet)
        ):
            return pooled
        return self._take_checked(engine)

    def _take_checked(self, engine: Engine) -> PoolProxiedConnection | None:
        """:meth:`take` past its fast check, the lock held: every check made again."""
        try:
            pooled = self._pooled
            if pooled is not None and self._pid != os.getpid():
                self._set_aside()  # a fork that ran no hook: the parent's connection
                pooled = None
            elif pooled is not None and (self._pool is not engine.pool or not pooled.is_valid):
                self._drop_kept(same_pool=self._pool is engine.pool)
                pooled = None
            elif pooled is not None and internals.opened_before_invalidation(pooled, engine.pool):
                # The pool saw a disconnect on another connection since this one was
                # opened (a server restart ends them all): back to the pool, whose
                # checkout below replaces each connection older than that.
                self._give_back_kept()
                pooled = None
            # Asked at every call: a pool listener may have been added since. Then the
            # kept connection is closed, not given back: a listener sees every
            # checkout, check-in and reset from then on, none that belongs to an
            # earlier call.
            if not keeps_connections(engine):
                if pooled is not None:
                    self._drop_kept(same_pool=False)
                self._in_use.release()
                return None
            if pooled is None:
                pooled = direct.checkout(engine)
                self._pooled, self._pool, self._pid = pooled, engine.pool, os.getpid()
            # (after keeps_connections: a listener added since is seen by the next take)
            self._quiet = internals.quiet_pool(engine.pool, pooled)
            return pooled
        except BaseException:
            self._in_use.release()
            raise

    def put_back(self, *, committed: bool) -> None:
        """End the call that took the connection. ``committed``: it ended with a
        commit, so the connection is clean and stays kept; otherwise the caller gave
        it back to the pool (rolled back or invalidated) and none is kept."""
        if not committed:
            self._pooled = self._pool = None
        elif self._release_pending:
            self._close_kept()
        self._in_use.release()

    def release(self) -> None:
        """Give the kept connection back to its pool (before the engine is disposed);
        waits for a call that has it to end. On an event loop's thread, where an async
        saver's calls run (each in a greenlet of that thread), waiting would block the
        very call it waits for: that call closes the connection as it ends."""
        if not self._in_use.acquire(blocking=False):
            if _on_event_loop_thread():
                self._release_pending = True
                return
            self._in_use.acquire()
        try:
            self._release_pending = False
            if self._pooled is not None:
                self._give_back_kept()
        finally:
            self._in_use.release()

    def forget_parents(self) -> None:
        """In a forked child, right after the fork: the kept connection is the
        parent's, set aside untouched; the lock is new (a thread of the parent may
        have held it, and no thread of the child ever would release it)."""
        self._set_aside()
        self._in_use = threading.Lock()

    def _set_aside(self) -> None:
        pooled, self._pooled, self._pool = self._pooled, None, None
        if pooled is not None:
            forks.set_aside(pooled)

    def _give_back_kept(self) -> None:
        pooled, self._pooled, self._pool = self._pooled, None, None
        if pooled is not None:
            internals.check_in_after_commit(pooled)

    def _close_kept(self) -> None:
        """Close the kept connection (``release`` left it to this call: its owner is
        closing, its pool maybe disposed). Invalidated, which closes it on every pool:
        SQLAlchemy's async pools leave a detached connection open."""
        pooled, self._pooled, self._pool = self._pooled, None, None
        self._release_pending = False
        if pooled is not None:
            pooled.invalidate()

    def _drop_kept(self, *, same_pool: bool) -> None:
        """Stop keeping the connection. An invalidated one of the current pool goes
        back to it (which opens a new one in its place later); any other is detached
        from its pool and closed: one of a disposed pool would otherwise sit in that
        pool's queue, open, until collected."""
        pooled, self._pooled, self._pool = self._pooled, None, None
        if pooled is None:
            return
        if not same_pool and pooled.is_valid:
            pooled.detach()  # (then close() closes the DBAPI connection itself)
        pooled.close()


def _on_event_loop_thread() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
