"""MySQL/MariaDB on the direct path: a one-statement call is one round trip (no
COMMIT, as PyMySQLSaver and PyMySQLStore in autocommit), a call of several statements
is still one transaction (``BEGIN`` first), and whatever else checks a connection out
of the pool gets it back out of autocommit (``runtime.drivers.guard_sessions``).

Counted by the server itself (``SHOW SESSION STATUS`` of the session the calls ran
on: every statement it received, and its BEGINs, COMMITs and ``SET autocommit``),
proven atomic by ending the session with ``KILL`` from another connection between a
put's two statements, sync (PyMySQL) and async (asyncmy).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from faults import Proxy
from helpers import checkpoint, config, new_thread, table_counts
from langgraph.checkpoint.base import ChannelVersions
from modes import Either, saver_on, store_on, sync_engine
from sqlalchemy.ext.asyncio import AsyncEngine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.runtime.drivers import guard_sessions

pytestmark = pytest.mark.parametrize("backend", ["mysql"], indirect=True)

_COUNTERS = ("Questions", "Com_begin", "Com_commit", "Com_set_option")


class Session:
    """The pool's only connection, read between calls on the driver's own connection
    (no checkout: that would switch it out of autocommit)."""

    def __init__(self, dbapi_connection: Any, mode: str) -> None:
        self.driver = getattr(dbapi_connection, "driver_connection", dbapi_connection)
        self.mode = mode

    async def counters(self) -> dict[str, int]:
        sql = "SHOW SESSION STATUS WHERE Variable_name IN ('" + "', '".join(_COUNTERS) + "')"
        if self.mode == "async":
            async with self.driver.cursor() as cursor:
                await cursor.execute(sql)
                rows = await cursor.fetchall()
        else:
            with self.driver.cursor() as cursor:
                cursor.execute(sql)
                rows = cursor.fetchall()
        values = {str(name): int(value) for name, value in rows}
        values["Questions"] += 1  # (this SHOW itself, counted as it runs)
        return values

    async def sent_by(self, call: Any) -> dict[str, int]:
        """What the server received for ``call``: its statements, BEGINs, COMMITs, SETs."""
        before = await self.counters()
        await call()
        after = await self.counters()
        return {
            "statements": after["Questions"] - before["Questions"] - 1,
            "begin": after["Com_begin"] - before["Com_begin"],
            "commit": after["Com_commit"] - before["Com_commit"],
            "set": after["Com_set_option"] - before["Com_set_option"],
        }


async def _only_connection(engine: sa.Engine | AsyncEngine, mode: str) -> Session:
    if isinstance(engine, AsyncEngine):
        async with engine.connect() as connection:
            raw = await connection.get_raw_connection()
            return Session(raw.dbapi_connection, mode)
    with engine.connect() as sync_connection:
        return Session(sync_connection.connection.dbapi_connection, mode)


def _new_checkpoint(
    saver: Either[SQLAlchemySaver | AsyncSQLAlchemySaver], step: int
) -> tuple[Any, dict[str, Any], ChannelVersions]:
    """A checkpoint of two channels at ``step``, its metadata, its new versions."""
    versions: ChannelVersions = {"a": f"{step:032}.0", "b": f"{step:032}.0"}
    return checkpoint({"a": step, "b": [step]}, versions), {"step": step}, versions


async def test_one_statement_calls_send_no_commit(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    engine = make_engine.for_mode(mode, backend, pool_size=1, max_overflow=0)
    saver = saver_on(engine)
    store = store_on(engine)
    thread_id = new_thread()
    await saver.get_tuple(config(thread_id))  # the schema check (through Core)
    session = await _only_connection(engine, mode)
    stored = await saver.put(config(thread_id), *_new_checkpoint(saver, 1))
    await store.put(("rt",), "warm", {"v": 0})  # (the session switched to autocommit)

    one = {"statements": 1, "begin": 0, "commit": 0, "set": 0}
    assert await session.sent_by(lambda: saver.put_writes(stored, [("a", 2)], "t1")) == one
    assert await session.sent_by(lambda: saver.get_tuple(stored)) == one
    assert await session.sent_by(lambda: store.put(("rt",), "k", {"v": 1})) == one
    assert await session.sent_by(lambda: store.get(("rt",), "k")) == one
    # A put is two statements (blobs, checkpoint): one transaction, BEGIN to COMMIT.
    second = _new_checkpoint(saver, 2)
    put = await session.sent_by(lambda: saver.put(stored, *second))
    assert put == {"statements": 4, "begin": 1, "commit": 1, "set": 0}
    found = await saver.get_tuple(config(thread_id))
    assert found is not None and found.checkpoint["channel_values"] == {"a": 2, "b": [2]}
    assert found.pending_writes == []  # (the writes were the first checkpoint's)
    item = await store.get(("rt",), "k")
    assert item is not None and item.value == {"v": 1}


async def test_a_put_of_inline_values_sends_no_begin_or_commit(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """Small primitives are kept in the checkpoint document: a put of only those is the
    checkpoint's upsert alone, sent in autocommit (one round trip), and durable."""
    engine = make_engine.for_mode(mode, backend, pool_size=1, max_overflow=0)
    saver = saver_on(engine)
    thread_id = new_thread()
    await saver.get_tuple(config(thread_id))  # the schema check (through Core)
    session = await _only_connection(engine, mode)
    values = {"count": 1, "name": "x", "done": False, "branch": None}
    versions: ChannelVersions = dict.fromkeys(values, "1")
    stored = await saver.put(config(thread_id), checkpoint(values, versions), {}, versions)
    child = {**values, "count": 2}
    child_versions: ChannelVersions = {**versions, "count": "2"}
    put = await session.sent_by(
        lambda: saver.put(stored, checkpoint(child, child_versions), {}, {"count": "2"})
    )
    assert put == {"statements": 1, "begin": 0, "commit": 0, "set": 0}
    # Committed: another connection reads it, and no blob row was written.
    assert table_counts(_plain_engine(backend), thread_id) == {
        "checkpoints": 2,
        "checkpoint_writes": 0,
        "checkpoint_blobs": 0,
    }
    found = await saver.get_tuple(config(thread_id))
    assert found is not None and found.checkpoint["channel_values"] == child


async def test_a_connection_checked_out_elsewhere_is_out_of_autocommit(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """An application's transaction on the engine's pool is one, after lg_sqla's
    one-statement calls left its only connection in autocommit; the next call switches
    it back on once (one SET), the ones after it send their statement alone."""
    engine = make_engine.for_mode(mode, backend, pool_size=1, max_overflow=0)
    saver = saver_on(engine)
    thread_id = new_thread()
    stored = await saver.put(config(thread_id), *_new_checkpoint(saver, 1))
    await saver.put_writes(stored, [("a", 1)], "t1")  # one statement: autocommit
    await _delete_rolled_back(engine, "checkpoint_writes", thread_id, 1)
    assert table_counts(_plain_engine(backend), thread_id)["checkpoint_writes"] == 1
    session = await _only_connection(engine, mode)
    write = lambda: saver.put_writes(stored, [("b", 2)], "t2")  # noqa: E731
    assert await session.sent_by(write) == {"statements": 2, "begin": 0, "commit": 0, "set": 1}
    read = lambda: saver.get_tuple(stored)  # noqa: E731
    assert await session.sent_by(read) == {"statements": 1, "begin": 0, "commit": 0, "set": 0}


def _a_pool_where_a_guarded_one_was(
    make_engine: EngineFactory, backend: Backend, mode: str, engine: sa.Engine
) -> None:
    """Give ``engine`` a new pool (``pool.recreate()``, as ``engine.dispose()`` makes one)
    at the address of a freed pool whose engine lg_sqla guarded and ``dispose()``d:
    SQLAlchemy's event registry knows a listener by its target's ``id()``, and the
    disposed engine's new pool keeps the freed pool's ``id()`` there. (CPython hands a
    freed block to the next object of its size: the first try lands on it, nearly always.)"""
    for _ in range(50):
        earlier = sync_engine(make_engine.for_mode(mode, backend))
        guard_sessions(earlier)  # (what a saver's setup() or first call does)
        freed = earlier.pool
        earlier.pool = freed.recreate()  # engine.dispose(), its connections aside
        address, gone = id(freed), weakref.ref(freed)
        del freed
        assert gone() is None, "the disposed pool is still referenced"
        new_pool = engine.pool.recreate()
        if id(new_pool) == address:
            engine.pool = new_pool
            return
        new_pool.dispose()
    raise AssertionError("no new pool was allocated at a freed pool's address in 50 tries")


async def test_a_new_pool_at_a_disposed_guarded_pools_address_is_guarded(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """An application's transaction is one on a pool lg_sqla's one-statement calls ran on,
    wherever in memory that pool is. The checkout guard was once taken for installed on
    a new pool that sat where a disposed engine's old pool had been (the registry above):
    its sessions stayed in autocommit, and an application's DELETE, rolled back, was
    committed (seen in full test runs only, where engines come and go)."""
    engine = make_engine.for_mode(mode, backend, pool_size=1, max_overflow=0)
    _a_pool_where_a_guarded_one_was(make_engine, backend, mode, sync_engine(engine))
    saver = saver_on(engine)
    thread_id = new_thread()
    values = {"count": 1}  # (kept in the checkpoint document: a put of one statement)
    versions: ChannelVersions = {"count": "1"}
    stored = await saver.put(config(thread_id), checkpoint(values, versions), {}, versions)
    await saver.put_writes(stored, [("count", 2)], "t1")  # one statement: autocommit
    await _delete_rolled_back(engine, "checkpoints", thread_id, 1)
    counts = table_counts(_plain_engine(backend), thread_id)
    assert counts["checkpoints"] == 1, "the rolled-back DELETE was autocommitted"


async def test_the_guard_holds_through_an_engine_copy_and_dispose(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """The other routes to one pool: a saver on a copy of the engine with its own
    execution options (what ``schema=`` makes), the pool ``engine.dispose()`` puts in
    place of the old one, a second saver on the disposed engine; an application's
    transaction on the original engine is still one."""
    engine = make_engine.for_mode(mode, backend, pool_size=1, max_overflow=0)
    copy = engine.execution_options(logging_token="lg_sqla")  # (shares the pool)
    saver = saver_on(copy)
    thread_id = new_thread()
    values = {"count": 1}  # (kept in the checkpoint document: a put of one statement)
    versions: ChannelVersions = {"count": "1"}
    stored = await saver.put(config(thread_id), checkpoint(values, versions), {}, versions)
    if isinstance(engine, AsyncEngine):
        await engine.dispose()
    else:
        engine.dispose()
    again = saver_on(copy)
    await again.put_writes(stored, [("count", 2)], "t1")  # one statement: autocommit
    await saver.put_writes(stored, [("count", 3)], "t2")
    await _delete_rolled_back(engine, "checkpoint_writes", thread_id, 2)
    counts = table_counts(_plain_engine(backend), thread_id)
    assert counts["checkpoint_writes"] == 2, "the rolled-back DELETE was autocommitted"


async def test_a_pool_assigned_by_hand_after_the_first_call_is_guarded(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """An application may give an engine another pool after lg_sqla's first call on it
    (``engine.pool = QueuePool(...)``: no ``dispose()``, so none of the old pool's
    listeners come along). lg_sqla's one-statement calls leave their sessions in
    autocommit only on a pool that switches them back at any other checkout: an
    application's transaction on the new pool is still one."""
    engine = make_engine.for_mode(mode, backend, pool_size=1, max_overflow=0)
    saver = saver_on(engine)
    thread_id = new_thread()
    values = {"count": 1}  # (kept in the checkpoint document: a put of one statement)
    versions: ChannelVersions = {"count": "1"}
    stored = await saver.put(config(thread_id), checkpoint(values, versions), {}, versions)
    plain = sync_engine(engine)
    cargs, cparams = plain.dialect.create_connect_args(plain.url)
    # (a QueuePool, or the async engine's AsyncAdaptedQueuePool: the engine's own class)
    pool_class: type[sa.pool.QueuePool] = type(plain.pool)  # type: ignore[assignment]
    plain.pool = pool_class(
        lambda: plain.dialect.connect(*cargs, **cparams),
        pool_size=1,
        max_overflow=0,
        dialect=plain.dialect,
    )
    await saver.put_writes(stored, [("count", 2)], "t1")  # one statement: autocommit
    await _delete_rolled_back(engine, "checkpoint_writes", thread_id, 1)
    counts = table_counts(_plain_engine(backend), thread_id)
    assert counts["checkpoint_writes"] == 1, "the rolled-back DELETE was autocommitted"


async def _delete_rolled_back(
    engine: sa.Engine | AsyncEngine, table: str, thread_id: str, rows: int
) -> None:
    """An application's transaction on the pool: the thread's ``rows`` rows of ``table``
    deleted, then rolled back (the caller checks they are still there)."""
    delete = sa.text(f"DELETE FROM {table} WHERE thread_id = :t")
    if isinstance(engine, AsyncEngine):
        async with engine.connect() as connection:
            assert (await connection.execute(delete, {"t": thread_id})).rowcount == rows
            await connection.rollback()
    else:
        with engine.connect() as sync_connection:
            assert sync_connection.execute(delete, {"t": thread_id}).rowcount == rows
            sync_connection.rollback()


def _plain_engine(backend: Backend) -> sa.Engine:
    return backend.engine(poolclass=sa.pool.NullPool)


class Killer:
    """Wraps the DBAPI connections an engine opens (SQLAlchemy's ``do_connect`` event;
    no ConnectionEvents listener, so the calls keep the direct path) and, once armed,
    ends the session (``KILL CONNECTION`` from another connection) before each
    statement whose SQL holds ``marker`` is sent on it."""

    def __init__(self, engine: sa.Engine, backend: Backend) -> None:
        self.marker: str | None = None
        self.seen: list[str] = []
        self.admin = _plain_engine(backend)

        def connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
            return _KillingConnection(dialect.connect(*cargs, **cparams), self)

        sa.event.listen(engine, "do_connect", connect)

    @contextmanager
    def armed(self, marker: str) -> Iterator[list[str]]:
        self.marker, self.seen = marker, []
        try:
            yield self.seen
        finally:
            self.marker = None

    def before(self, statement: str, driver_connection: Any) -> None:
        if self.marker is None:
            return
        self.seen.append(statement)
        if self.marker in statement:
            with self.admin.connect() as admin:
                admin.exec_driver_sql(f"KILL CONNECTION {int(driver_connection.thread_id())}")


class _KillingConnection(Proxy):
    """The driver's connection (``Proxy``: faults.py's), its cursors killing on cue."""

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        driver = getattr(self._wrapped, "driver_connection", self._wrapped)
        return _KillingCursor(self._wrapped.cursor(*args, **kwargs), (self._faults, driver))


class _KillingCursor(Proxy):
    """A cursor that asks its ``Killer`` (``_faults``: the killer and the driver's
    connection) before each statement."""

    def __iter__(self) -> Any:
        return iter(self._wrapped)

    def execute(self, statement: str, *args: Any, **kwargs: Any) -> Any:
        killer, driver = self._faults
        killer.before(statement, driver)
        return self._wrapped.execute(statement, *args, **kwargs)

    def executemany(self, statement: str, *args: Any, **kwargs: Any) -> Any:
        killer, driver = self._faults
        killer.before(statement, driver)
        return self._wrapped.executemany(statement, *args, **kwargs)


async def test_a_session_killed_between_a_puts_statements_leaves_nothing(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """The blobs were sent and the session ended before the checkpoint's INSERT, on
    each attempt (the first, and its one retry on a new connection): the put fails,
    and nothing of it is stored (its BEGIN held the blobs in the transaction the server
    rolled back), while the one-statement calls before it had their rows committed
    without a COMMIT."""
    engine = make_engine.for_mode(mode, backend)
    killer = Killer(sync_engine(engine), backend)
    saver = saver_on(engine, reconnect_window=0)
    before, thread_id = new_thread(), new_thread()
    stored = await saver.put(config(before), *_new_checkpoint(saver, 1))
    await saver.put_writes(stored, [("a", 1)], "t")  # one statement, in autocommit
    with killer.armed("INSERT INTO checkpoints ") as seen, pytest.raises(sa.exc.OperationalError):
        await saver.put(config(thread_id), *_new_checkpoint(saver, 1))
    # (the new connection's set-up statements aside)
    kinds = [" ".join(s.split()[:3]) for s in seen if s.startswith("INSERT")]
    # (each attempt's transaction: BEGIN on the session the put_writes left in
    # autocommit, counted in test_one_statement_calls_send_no_commit; the retry's new
    # session is not in autocommit, its first statement begins the transaction)
    assert kinds == ["INSERT INTO checkpoint_blobs", "INSERT INTO checkpoints"] * 2, seen
    plain = _plain_engine(backend)
    empty = {"checkpoints": 0, "checkpoint_writes": 0, "checkpoint_blobs": 0}
    assert table_counts(plain, thread_id) == empty
    assert table_counts(plain, before) == {
        "checkpoints": 1,
        "checkpoint_writes": 1,
        "checkpoint_blobs": 1,  # b (a list); a, a small int, is in the document
    }
    # The pool works again, and the put is whole.
    stored = await saver.put(config(thread_id), *_new_checkpoint(saver, 1))
    found = await saver.get_tuple(stored)
    assert found is not None and found.checkpoint["channel_values"] == {"a": 1, "b": [1]}
    killer.admin.dispose()


async def test_an_autocommit_engine_sends_begin_only_for_several_statements(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """On an engine made with ``isolation_level="AUTOCOMMIT"`` a one-statement call is
    still its statement alone, and a call of several statements is one transaction by
    one BEGIN, never by switching autocommit (``SET``), on the direct path (a put with
    blobs) and on Core (``copy_thread``); the session stays in autocommit. (That such a
    call failing midway leaves nothing, on every backend and driver:
    test_autocommit_engines.py.)"""
    engine = make_engine.for_mode(
        mode, backend, isolation_level="AUTOCOMMIT", pool_size=1, max_overflow=0
    )
    saver = saver_on(engine)
    thread_id = new_thread()
    await saver.get_tuple(config(thread_id))  # the schema check (through Core)
    session = await _only_connection(engine, mode)
    one = {"statements": 1, "begin": 0, "commit": 0, "set": 0}
    values = {"count": 1}
    versions: ChannelVersions = {"count": "1"}
    inline = checkpoint(values, versions)
    assert await session.sent_by(lambda: saver.put(config(thread_id), inline, {}, versions)) == one
    put = await session.sent_by(lambda: saver.put(config(thread_id), *_new_checkpoint(saver, 1)))
    assert put == {"statements": 4, "begin": 1, "commit": 1, "set": 0}
    copy = await session.sent_by(lambda: saver.copy_thread(thread_id, new_thread()))
    assert copy["begin"] == 1 and copy["commit"] == 1 and copy["set"] == 0, copy
    assert await session.sent_by(lambda: saver.get_tuple(config(thread_id))) == one
