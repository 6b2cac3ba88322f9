"""Forked workers (gunicorn ``--preload``, Celery prefork, multiprocessing's ``fork``).

A parent opens a saver or store, calls it (so it keeps a connection between calls on
SQLite, PostgreSQL and MySQL/MariaDB: ``runtime.kept``), then forks. What users rely on:

* the parent's sessions survive: no child closes, rolls back or uses a connection of
  the parent, whether the child follows SQLAlchemy's recipe
  (``engine.dispose(close=False)``) or does nothing (on an engine lg_sqla made, it
  needs none), and even when the child then closes its saver's engine for good;
  the parent goes on with the same kept connection;
* each child's calls succeed on connections of its own and read the right rows;
* a fork while a thread of the parent is inside a SQLite write (holding the
  in-process writer lock) leaves no child waiting on that lock forever;
* the async saver and store on a SQLite file, whose calls run in lg_sqla's worker
  threads, work in a child, which has none of the parent's threads.

Children run through multiprocessing with the ``fork`` start method. Every wait on a
child has a deadline that fails the test loudly: a guard against a hang, not a timing
assertion.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from helpers import checkpoint, config, new_thread

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.runtime import locks
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

# Deadlock guard: a child, or a thread waiting on an event, that takes longer is hung.
DEADLINE = 60.0
CHILDREN = 3


def run_in_children(count: int, work: Callable[[int], Any]) -> list[Any]:
    """``work(i)`` in ``count`` forked children at once; their results, by ``i``. A
    child that raised fails the test with its traceback; one that does not finish
    within ``DEADLINE`` is killed and fails the test as hung."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()

    def child(i: int) -> None:
        try:
            results.put((i, True, work(i)))
        except BaseException:
            results.put((i, False, traceback.format_exc()))

    children = [context.Process(target=child, args=(i,), daemon=True) for i in range(count)]
    for process in children:
        process.start()
    try:
        got = {}
        for _ in children:
            try:
                i, ok, value = results.get(timeout=DEADLINE)
            except Exception:  # queue.Empty
                pytest.fail(f"a forked child gave no answer within {DEADLINE}s: hung")
            assert ok, f"child {i} failed:\n{value}"
            got[i] = value
        for process in children:
            process.join(DEADLINE)
            assert not process.is_alive(), f"child {process.pid} did not exit: hung"
            assert process.exitcode == 0
        return [got[i] for i in range(count)]
    finally:
        for process in children:
            if process.is_alive():
                process.kill()
                process.join()


# --- what a connection is, as the server sees it ------------------------------------

_SESSION_QUERIES = {"postgres": "SELECT pg_backend_pid()", "mysql": "SELECT CONNECTION_ID()"}


def _session_of_dbapi(backend: Backend, dbapi_connection: Any) -> int | None:
    """The server's id of a DBAPI connection's session (SQLite has none)."""
    query = _SESSION_QUERIES.get(backend.name)
    if query is None:
        return None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(query)
        (session,) = cursor.fetchone()
    finally:
        cursor.close()
    dbapi_connection.commit()  # (ends the read's transaction, as a call would)
    return int(session)


def _pooled_session(backend: Backend, engine: sa.Engine) -> int | None:
    """The session of the connection the engine's pool hands out next."""
    with engine.connect() as connection:
        return _session_of_dbapi(backend, connection.connection.dbapi_connection)


def _kept_dbapi(owner: SQLAlchemySaver | SQLAlchemyStore) -> Any | None:
    """The DBAPI connection the owner keeps between calls (None: it keeps none)."""
    for kept in owner._runtime._kept.values():
        if kept._pooled is not None:
            return kept._pooled.dbapi_connection
    return None


def _live_sessions(backend: Backend) -> set[int]:
    query = {
        "postgres": "SELECT pid FROM pg_stat_activity",
        "mysql": "SELECT ID FROM information_schema.PROCESSLIST",
    }[backend.name]
    admin = backend.engine(poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as connection:
            return {int(row[0]) for row in connection.execute(sa.text(query))}
    finally:
        admin.dispose()


# --- the owners ---------------------------------------------------------------------


@dataclass
class Owner:
    """A saver or store as a test calls it: write a value, read one back."""

    engine: sa.Engine
    handle: SQLAlchemySaver | SQLAlchemyStore
    write: Callable[[str, int], None]
    read: Callable[[str], int | None]


def _saver_owner(saver: SQLAlchemySaver) -> Owner:
    def write(thread_id: str, value: int) -> None:
        # (a new version per value: a channel's value at a version is written once)
        saver.put(config(thread_id), checkpoint({"v": value}, {"v": value}), {}, {"v": value})

    def read(thread_id: str) -> int | None:
        found = saver.get_tuple(config(thread_id))
        return None if found is None else int(found.checkpoint["channel_values"]["v"])

    return Owner(saver.engine, saver, write, read)


def _store_owner(store: SQLAlchemyStore) -> Owner:
    def write(key: str, value: int) -> None:
        store.put(("fork",), key, {"v": value})

    def read(key: str) -> int | None:
        item = store.get(("fork",), key)
        return None if item is None else int(item.value["v"])

    return Owner(store.engine, store, write, read)


@contextmanager
def opened(backend: Backend, kind: str) -> Iterator[Owner]:
    with ExitStack() as stack:
        if kind == "saver":
            yield _saver_owner(
                stack.enter_context(SQLAlchemySaver.from_conn_string(backend.sync_url))
            )
        elif kind == "store":
            store = stack.enter_context(SQLAlchemyStore.from_conn_string(backend.sync_url))
            store.setup()
            yield _store_owner(store)
        else:  # the user's own engine, given to the saver
            engine = backend.engine()
            stack.callback(engine.dispose)
            yield _saver_owner(SQLAlchemySaver(engine))


@dataclass
class ChildReport:
    own: int | None  # the value the child wrote, read back
    parents: int | None  # the parent's value, read by the child
    sessions: set[int | None]  # the server sessions the child's calls ran on
    kept_is_parents: bool  # the child's kept connection was the parent's
    pool_is_parents: bool  # the child's engine hands out the parent's pool's connections


@pytest.mark.parametrize(
    ("kind", "recipe"),
    [
        ("saver", False),
        ("saver", True),
        ("store", False),
        ("store", True),
        # An engine the user made: SQLAlchemy's recipe is the user's to follow.
        ("user_engine", True),
    ],
    ids=["saver", "saver-recipe", "store", "store-recipe", "user_engine-recipe"],
)
def test_forked_children_never_touch_the_parents_connections(
    backend: Backend, kind: str, recipe: bool
) -> None:
    with opened(backend, kind) as owner:
        parent_key = new_thread()
        owner.write(parent_key, 1)
        assert owner.read(parent_key) == 1
        parent_kept = _kept_dbapi(owner.handle)
        parent_sessions = {_pooled_session(backend, owner.engine)}
        if parent_kept is not None:
            parent_sessions.add(_session_of_dbapi(backend, parent_kept))
        if kind != "user_engine":
            assert parent_kept is not None  # what this test is about
        parent_pool = owner.engine.pool

        def child(i: int) -> ChildReport:
            if recipe:
                owner.engine.dispose(close=False)
            own_key = f"{parent_key}-child-{i}"
            owner.write(own_key, 100 + i)
            kept = _kept_dbapi(owner.handle)
            sessions = {_pooled_session(backend, owner.engine)}
            if kept is not None:
                sessions.add(_session_of_dbapi(backend, kept))
            report = ChildReport(
                own=owner.read(own_key),
                parents=owner.read(parent_key),
                sessions=sessions,
                kept_is_parents=kept is not None and kept is parent_kept,
                pool_is_parents=owner.engine.pool is parent_pool,
            )
            # As a child leaving its own ``with from_conn_string(...)`` block would:
            # everything it closes must be its own.
            owner.handle._runtime.release_connections()
            owner.engine.dispose()
            return report

        reports = run_in_children(CHILDREN, child)

        for i, report in enumerate(reports):
            assert report.own == 100 + i
            assert report.parents == 1
            assert not report.kept_is_parents
            assert not report.pool_is_parents
            assert not report.sessions & parent_sessions - {None}
        # The parent goes on, on the same kept connection, its sessions alive.
        assert owner.read(parent_key) == 1
        owner.write(parent_key, 2)
        assert owner.read(parent_key) == 2
        assert _kept_dbapi(owner.handle) is parent_kept
        if backend.name != "sqlite":
            assert parent_sessions <= _live_sessions(backend)
        for i in range(CHILDREN):
            assert owner.read(f"{parent_key}-child-{i}") == 100 + i


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
@pytest.mark.parametrize("kind", ["saver", "store"])
def test_a_fork_during_a_parents_sqlite_write_leaves_no_child_waiting(
    backend: Backend, kind: str
) -> None:
    """A thread of the parent is stopped inside a write (its first INSERT, before it
    runs: SQLite's own lock is not taken yet, lg_sqla's writer lock and the kept
    connection are), and the process forks. Every child must write and read, and
    close its saver; the parent's write then completes."""
    inside = threading.Event()
    resume = threading.Event()
    writer: list[int] = []  # the ident of the thread to stop

    def stop_the_writer(statement: str) -> None:
        if writer and threading.get_ident() == writer[0] and statement.startswith("INSERT"):
            inside.set()
            assert resume.wait(DEADLINE), "the test never let the parent's writer go on"

    with opened(backend, kind) as owner:
        # On every connection of the parent's engine (a connect listener leaves the
        # kept connection in place, runtime.kept): children connect anew, where no
        # thread of theirs is the writer.
        sa.event.listen(
            owner.engine,
            "connect",
            lambda dbapi_connection, _: dbapi_connection.set_trace_callback(stop_the_writer),
        )
        owner.engine.dispose()  # (connections made before the listener: gone)
        parent_key = new_thread()
        owner.write(parent_key, 1)  # a kept connection, traced
        assert _kept_dbapi(owner.handle) is not None
        lock = locks.writer_lock(owner.handle.dialect_ops, owner.engine)
        assert lock is not None

        failures: list[BaseException] = []

        def write_in_parent() -> None:
            writer.append(threading.get_ident())
            try:
                owner.write(parent_key, 2)
            except BaseException as error:
                failures.append(error)
                inside.set()

        thread = threading.Thread(target=write_in_parent)
        thread.start()
        try:
            assert inside.wait(DEADLINE), "the parent's writer never reached its INSERT"
            assert not failures, failures
            assert lock.locked()  # the fork below copies it held

            def child(i: int) -> tuple[int | None, int | None]:
                key = f"{parent_key}-child-{i}"
                owner.write(key, 100 + i)
                read = owner.read(key), owner.read(parent_key)
                owner.handle._runtime.release_connections()  # (waits on nothing held)
                owner.engine.dispose()
                return read

            reports = run_in_children(CHILDREN, child)
        finally:
            resume.set()
            thread.join(DEADLINE)
        assert not thread.is_alive(), "the parent's writer did not finish: hung"
        assert not failures, failures
        # Each child saw the parent's committed value (1: the write in flight had not
        # run its first statement).
        assert reports == [(100 + i, 1) for i in range(CHILDREN)]
        assert owner.read(parent_key) == 2
        for i in range(CHILDREN):
            assert owner.read(f"{parent_key}-child-{i}") == 100 + i


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_forked_children_run_async_calls_in_worker_threads_of_their_own(
    backend: Backend,
) -> None:
    """The async saver and store opened on a SQLite file by from_conn_string run each
    call whole in a worker thread of lg_sqla's (``runtime.workers``). A child forked
    after the parent's calls started some has none of those threads: its calls must
    run on threads of its own, not wait in a queue for the parent's, and the parent
    goes on with its own."""
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()
    try:
        saver = loop.run_until_complete(
            stack.enter_async_context(AsyncSQLAlchemySaver.from_conn_string(backend.async_url))
        )
        store = loop.run_until_complete(
            stack.enter_async_context(AsyncSQLAlchemyStore.from_conn_string(backend.async_url))
        )
        loop.run_until_complete(saver.setup())
        loop.run_until_complete(store.setup())

        async def write(key: str, value: int) -> None:
            versions: dict[str, str | int | float] = {"v": value}
            await saver.aput(config(key), checkpoint(versions, versions), {}, versions)
            await store.aput(("fork",), key, {"v": value})

        async def read(key: str) -> tuple[int | None, int | None]:
            found = await saver.aget_tuple(config(key))
            item = await store.aget(("fork",), key)
            return (
                None if found is None else int(found.checkpoint["channel_values"]["v"]),
                None if item is None else int(item.value["v"]),
            )

        parent_key = new_thread()
        loop.run_until_complete(write(parent_key, 1))  # (worker threads started)

        def child(i: int) -> tuple[tuple[int | None, int | None], ...]:
            async def calls() -> tuple[tuple[int | None, int | None], ...]:
                own_key = f"{parent_key}-child-{i}"
                await write(own_key, 100 + i)
                return await read(own_key), await read(parent_key)

            return asyncio.run(calls())

        reports = run_in_children(CHILDREN, child)
        assert reports == [((100 + i, 100 + i), (1, 1)) for i in range(CHILDREN)]
        loop.run_until_complete(write(parent_key, 2))
        assert loop.run_until_complete(read(parent_key)) == (2, 2)
        for i in range(CHILDREN):
            assert loop.run_until_complete(read(f"{parent_key}-child-{i}")) == (100 + i,) * 2
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()
