"""The direct path (lg_sqla.runtime.direct): hot calls skip SQLAlchemy Core's execution
layer where nobody could tell, and behave exactly the same.

The conformance suite and the graph tests run on it (their engines are built as
users build them). These tests pin down when it is taken, each reason
``runtime.routing.choose_path`` has for Core held to what users rely on (a driver it
was not built for works, the switch turns it off, ``echo=True`` and INFO logging see
every statement of every call, a SQLAlchemy without an internal it reads still
works), that the SQL reaching the database is the same one statement per read, and
that its errors are SQLAlchemy's.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory, new_database
from helpers import DirectRuns, checkpoint, config, count_statements, new_thread
from modes import Either, either, saver_from_url, saver_on, store_on
from sqlalchemy.ext.asyncio import create_async_engine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver, internals
from lg_sqla.runtime import DIRECT_PATH_OPTION
from lg_sqla.runtime.drivers import DIRECT_DRIVERS
from lg_sqla.store import SQLAlchemyStore

# Also on a MariaDB database at the server's default charset (non-ASCII channel names).
pytestmark = pytest.mark.any_charset


async def _calls(saver: Either[SQLAlchemySaver | AsyncSQLAlchemySaver], thread_id: str) -> None:
    """The four hot calls, in the saver's mode: put, put_writes, get_tuple, a list page."""
    stored = await saver.put(
        config(thread_id), checkpoint({"ñandú": "😀"}), {"step": 1}, {"ñandú": 1}
    )
    await saver.put_writes(stored, [("ñandú", "x"), ("__interrupt__", "y")], "task-1")
    found = await saver.get_tuple(config(thread_id))
    assert found is not None
    assert found.checkpoint["channel_values"] == {"ñandú": "😀"}
    assert sorted(found.pending_writes or []) == [
        ("task-1", "__interrupt__", "y"),
        ("task-1", "ñandú", "x"),
    ]
    assert [t.metadata["step"] for t in await saver.list(config(thread_id))] == [1]


def _url(backend: Backend, mode: str) -> str:
    return backend.async_url if mode == "async" else backend.sync_url


async def test_hot_calls_run_directly_without_listeners(
    backend: Backend, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = DirectRuns(monkeypatch)
    async with saver_from_url(mode, _url(backend, mode)) as saver:
        await saver.setup()
        await _calls(saver, new_thread())
    assert runs.count == 4  # put, put_writes, get_tuple, one list page


def test_a_cursor_listener_keeps_the_core_path(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instrumentation (statement counters, tracing) sees every statement, as before."""
    runs = DirectRuns(monkeypatch)
    with SQLAlchemySaver.from_conn_string(backend.sync_url) as saver:
        saver.setup()
        thread_id = new_thread()
        with count_statements(saver.engine) as counter:
            saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
            written = counter.count
            assert saver.get_tuple(config(thread_id)) is not None
        assert written in (1, 2) and counter.count == written + 1
    assert runs.count == 0


def test_errors_on_the_direct_path_are_sqlalchemys(backend: Backend) -> None:
    """A failing statement raises SQLAlchemy's exception class, with the driver's error
    as ``orig``, and leaves the pooled connection usable."""
    with SQLAlchemySaver.from_conn_string(backend.sync_url, pool_size=1) as saver:
        saver.setup()
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        with saver.engine.begin() as connection:
            connection.execute(sa.text("ALTER TABLE checkpoint_writes RENAME TO writes_away"))
        try:
            with pytest.raises(sa.exc.DBAPIError) as raised:
                saver.put_writes(stored, [("a", 2)], "task-1")
            assert raised.value.orig is not None
            assert not isinstance(raised.value.orig, sa.exc.SQLAlchemyError)
        finally:
            with saver.engine.begin() as connection:
                connection.execute(sa.text("ALTER TABLE writes_away RENAME TO checkpoint_writes"))
        saver.put_writes(stored, [("a", 2)], "task-1")  # same single pooled connection
        found = saver.get_tuple(config(thread_id))
        assert found is not None and found.pending_writes == [("task-1", "a", 2)]


@pytest.mark.sqlite
def test_sqlite_sees_one_statement_per_read(tmp_path: Any) -> None:
    """What SQLite itself executes on the direct path: one statement for a get_tuple
    or a list page (no BEGIN/COMMIT around a read), one per write step; a write of
    one statement without BEGIN/COMMIT (atomic by itself), of two in a transaction."""
    url = f"sqlite:///{tmp_path / 'direct.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url, pool_size=1) as saver:
        saver.setup()
        thread_id = new_thread()
        saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        executed: list[str] = []
        with saver.engine.connect() as connection:
            raw = connection.connection.dbapi_connection
            assert isinstance(raw, sqlite3.Connection)
            raw.set_trace_callback(executed.append)
        try:
            assert saver.get_tuple(config(thread_id)) is not None
            assert len(list(saver.list(config(thread_id)))) == 1
            reads = list(executed)
            executed.clear()
            saver.put(config(thread_id), checkpoint({"a": [2]}, {"a": 2}), {}, {"a": 2})
            with_blob = list(executed)
            executed.clear()
            # (a small int is kept in the checkpoint document: no blob step)
            saver.put(config(thread_id), checkpoint({"a": 3}, {"a": 3}), {}, {"a": 3})
        finally:
            raw.set_trace_callback(None)
    assert len(reads) == 2 and all(s.lstrip().startswith("WITH page") for s in reads), reads
    kinds = [s.split()[0].upper() for s in with_blob]
    assert kinds == ["BEGIN", "INSERT", "INSERT", "COMMIT"], with_blob
    kinds = [s.split()[0].upper() for s in executed]
    assert kinds == ["INSERT"], executed


@pytest.mark.sqlite
def test_sqlite_autocommits_only_a_write_of_one_statement(tmp_path: Any) -> None:
    """On SQLite a ``put_writes`` of one write is its INSERT alone (autocommit); of
    several, one transaction: sqlite3's executemany runs the INSERT per row, which
    autocommit would commit one by one."""
    url = f"sqlite:///{tmp_path / 'writes.sqlite'}"
    with SQLAlchemySaver.from_conn_string(url, pool_size=1) as saver:
        saver.setup()
        stored = saver.put(config(new_thread()), checkpoint({"a": 1}), {}, {"a": 1})
        saver.put_writes(stored, [("a", 1)], "warm")
        executed: list[str] = []
        with saver.engine.connect() as connection:
            raw = connection.connection.dbapi_connection
            assert isinstance(raw, sqlite3.Connection)
            raw.set_trace_callback(executed.append)
        try:
            saver.put_writes(stored, [("a", 2), ("b", 3)], "task-2")
            several = [s.split()[0].upper() for s in executed]
            executed.clear()
            saver.put_writes(stored, [("a", 4)], "task-4")
            one = [s.split()[0].upper() for s in executed]
        finally:
            raw.set_trace_callback(None)
    assert several == ["BEGIN", "INSERT", "INSERT", "COMMIT"], several
    assert one == ["INSERT"], one


async def test_connections_go_back_to_the_pool_transactional(backend: Backend, mode: str) -> None:
    """Single-statement calls run in autocommit where the dialect gains from it; the
    pooled connection is handed back as it was, so its next user's transaction can
    still be rolled back."""
    async with saver_from_url(mode, _url(backend, mode), pool_size=1, max_overflow=0) as saver:
        await saver.setup()
        thread_id = new_thread()
        stored = await saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        await saver.put_writes(stored, [("a", 2)], "task-1")
        assert await saver.get_tuple(config(thread_id)) is not None
        # the pool's only connection
        connection = either(await either(saver.target.engine, mode).connect(), mode)
        try:
            delete = sa.text("DELETE FROM checkpoints WHERE thread_id = :t")
            assert (await connection.execute(delete, {"t": thread_id})).rowcount == 1
            await connection.rollback()
        finally:
            await connection.close()
        assert await saver.get_tuple(config(thread_id)) is not None, "the DELETE was autocommitted"


async def test_a_committed_call_hands_its_connection_back_without_a_rollback(
    backend: Backend, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool rolls back each connection handed back with its transaction open; the
    direct path's committed calls say theirs is over, as Core's Connection does (on
    PyMySQL the ROLLBACK was one more round trip per call)."""
    runs = DirectRuns(monkeypatch)
    async with saver_from_url(mode, _url(backend, mode)) as saver:
        await saver.setup()
        resets: list[bool] = []
        # (on a SQLite file, async calls run on the saver's pysqlite engine)
        engine = getattr(saver.target, "_threaded", None) or saver.target.engine
        pool = getattr(engine, "sync_engine", engine).pool
        sa.event.listen(
            pool, "reset", lambda _dbapi, _record, state: resets.append(state.transaction_was_reset)
        )
        await _calls(saver, new_thread())
        assert runs.count == 4
        assert resets == [True] * 4


def test_a_failed_call_has_its_connection_rolled_back_by_the_pool(backend: Backend) -> None:
    with SQLAlchemySaver.from_conn_string(backend.sync_url, pool_size=1) as saver:
        saver.setup()
        stored = saver.put(config(new_thread()), checkpoint({"a": 1}), {}, {"a": 1})
        with saver.engine.begin() as connection:
            connection.execute(sa.text("ALTER TABLE checkpoint_writes RENAME TO writes_away"))
        resets: list[bool] = []
        sa.event.listen(
            saver.engine.pool,
            "reset",
            lambda _dbapi, _record, state: resets.append(state.transaction_was_reset),
        )
        try:
            with pytest.raises(sa.exc.DBAPIError):
                saver.put_writes(stored, [("a", 2)], "task-1")
            assert resets == [False]
        finally:
            with saver.engine.begin() as connection:
                connection.execute(sa.text("ALTER TABLE writes_away RENAME TO checkpoint_writes"))


def test_the_allowlisted_drivers_are_the_ones_the_suite_runs() -> None:
    assert set(DIRECT_DRIVERS) == {
        ("sqlite", "pysqlite"),
        ("sqlite", "aiosqlite"),
        ("postgresql", "psycopg"),
        ("postgresql", "psycopg_async"),
        ("mysql", "pymysql"),
        ("mysql", "asyncmy"),
        ("mariadb", "pymysql"),
        ("mariadb", "asyncmy"),
    }


# A driver of each mode that lg_sqla does not default to, as a user's app creates it.
OFF_THE_ALLOWLIST = {"sync": "postgresql+psycopg2://", "async": "postgresql+asyncpg://"}


@pytest.mark.postgres
async def test_a_driver_off_the_allowlist_runs_on_core(
    make_engine: EngineFactory,
    postgres_database: Backend,
    mode: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """psycopg2 and asyncpg: the engine a user already has works, every call through
    Core (the direct path once set psycopg 3's binary format on its cursor and failed)."""
    runs = DirectRuns(monkeypatch)
    url = _url(postgres_database, mode).replace("postgresql+psycopg://", OFF_THE_ALLOWLIST[mode])
    engine = make_engine.track(
        create_async_engine(url) if mode == "async" else sa.create_engine(url)
    )
    await _calls(saver_on(engine), new_thread() + "-ñandú")
    assert runs.count == 0


class RawExecutes:
    """Counts the statements psycopg's raw cursors (``$1`` placeholders) execute."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
        import psycopg

        self.count = 0
        cursor_class: Any = psycopg.AsyncRawCursor if mode == "async" else psycopg.RawCursor
        real: Callable[..., Any] = cursor_class.execute

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(cursor_class, "execute", spy)


@pytest.mark.postgres
@pytest.mark.parametrize("client_side", [False, True], ids=["default", "ClientCursor"])
async def test_psycopg_runs_numbered_placeholders_unless_the_user_chose_a_cursor(
    postgres_database: Backend, mode: str, client_side: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg parses pyformat placeholders at every execute, caching only short
    statements: the direct path sends ``$1`` SQL, converted once, on raw cursors. A
    connection made with a cursor_factory of the user's (ClientCursor binds on the
    client, for PgBouncer) keeps it, with the pyformat SQL, and works the same."""
    import psycopg

    runs = DirectRuns(monkeypatch)
    raw = RawExecutes(monkeypatch, mode)
    connect_args = {}
    if client_side:
        factory = psycopg.AsyncClientCursor if mode == "async" else psycopg.ClientCursor
        connect_args = {"cursor_factory": factory}
    async with saver_from_url(
        mode, _url(postgres_database, mode), connect_args=connect_args
    ) as saver:
        await saver.setup()
        await _calls(saver, new_thread() + "-ñandú")
    assert runs.count == 4
    assert raw.count == (0 if client_side else 4)


class RawCursors:
    """The raw cursors psycopg makes (a spy on their constructor: still made)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
        import psycopg

        self.made: list[Any] = []
        cursor_class: Any = psycopg.AsyncRawCursor if mode == "async" else psycopg.RawCursor
        real: Callable[..., Any] = cursor_class.__init__

        def spy(cursor: Any, *args: Any, **kwargs: Any) -> None:
            self.made.append(cursor)
            real(cursor, *args, **kwargs)

        monkeypatch.setattr(cursor_class, "__init__", spy)


@pytest.mark.postgres
async def test_a_cursor_serves_the_next_call_holding_no_rows(
    postgres_database: Backend, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg builds a cursor's adapters and dumpers anew, so the cursor of a call
    waits with its connection for the next call: a write's, and on the sync driver a
    read's with its rows dropped (kept, they would hold blobs and all as long as the
    connection lives). On the async driver (SQLAlchemy's adapter) a read's is closed."""
    cursors = RawCursors(monkeypatch, mode)
    async with saver_from_url(
        mode, _url(postgres_database, mode), pool_size=1, max_overflow=0
    ) as saver:
        await saver.setup()
        thread_id = new_thread()
        made_before = len(cursors.made)
        stored = await saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        await saver.put_writes(stored, [("a", 2)], "task-1")
        await saver.put_writes(stored, [("b", 3)], "task-2")
        assert len(cursors.made) == made_before + 1, "the writes shared one cursor"
        first = await saver.get_tuple(config(thread_id))  # the kept cursor
        second = await saver.get_tuple(config(thread_id))
        assert first is not None and second is not None
        written = [("task-1", "a", 2), ("task-2", "b", 3)]
        assert first.pending_writes == second.pending_writes == written
        made = cursors.made[made_before:]
        if mode == "async":
            assert len(made) == 2  # the read's closed, a new one for the second read
            assert all(cursor.closed for cursor in made)
        else:
            assert len(made) == 1  # the reads ran on the kept cursor too
            assert not made[0].closed and made[0].pgresult is None  # no rows held
        await saver.put(stored, checkpoint({"a": 4}), {}, {"a": 2})
        assert len(cursors.made) == made_before + len(made) + (1 if mode == "async" else 0)


@pytest.mark.parametrize("switch", ["saver", "engine", "from_conn_string"])
async def test_the_switch_keeps_every_call_on_core(
    make_engine: EngineFactory,
    backend: Backend,
    mode: str,
    switch: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = DirectRuns(monkeypatch)
    if switch == "from_conn_string":
        async with saver_from_url(mode, _url(backend, mode), direct_path=False) as saver:
            await _calls(saver, new_thread() + "-ñandú")
        assert runs.count == 0
        return
    engine = make_engine.for_mode(mode, backend)
    if switch == "saver":
        saver, store = saver_on(engine, direct_path=False), store_on(engine, direct_path=False)
    else:
        off = engine.execution_options(**{DIRECT_PATH_OPTION: False})
        saver, store = saver_on(off), store_on(off)
    await _calls(saver, new_thread() + "-ñandú")
    await store.put(("ñ",), "k", {"v": "😀"})
    item = await store.get(("ñ",), "k")
    assert item is not None and item.value == {"v": "😀"}
    assert runs.count == 0


def _logged_statements(records: list[logging.LogRecord]) -> list[str]:
    """The SQL statements SQLAlchemy's engine logger wrote (not its parameter lines,
    nor BEGIN/COMMIT)."""
    return [
        r.getMessage().split()[0].upper()
        for r in records
        if r.name.startswith("sqlalchemy.engine")
        and r.levelno == logging.INFO
        and r.getMessage().split()
        and r.getMessage().split()[0].upper() in ("SELECT", "WITH", "INSERT", "DELETE", "UPDATE")
    ]


def test_echo_logs_every_statement_of_every_call(
    make_engine: EngineFactory,
    backend: Backend,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``create_engine(url, echo=True)``: each get_tuple is logged, the tenth as the first
    (the direct path once went silent after the first call)."""
    runs = DirectRuns(monkeypatch)
    engine = make_engine(backend, echo=True)
    saver = SQLAlchemySaver(engine)
    thread_id = new_thread()
    saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
        for _ in range(10):
            assert saver.get_tuple(config(thread_id)) is not None
    assert len(_logged_statements(caplog.records)) == 10
    assert runs.count == 0


def test_info_logging_switched_on_later_sees_the_next_calls(
    backend: Backend, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An app that turns ``sqlalchemy.engine`` logging to INFO while running (to debug
    a live problem) sees lg_sqla's statements from then on; turned off, the direct
    path comes back."""
    runs = DirectRuns(monkeypatch)
    with SQLAlchemySaver.from_conn_string(backend.sync_url) as saver:
        thread_id = new_thread()
        saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        assert saver.get_tuple(config(thread_id)) is not None
        direct_before = runs.count
        assert direct_before >= 2
        with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
            saver.put(config(thread_id), checkpoint({"a": 2}), {}, {"a": 2})
            assert saver.get_tuple(config(thread_id)) is not None
            logged = _logged_statements(caplog.records)
        assert runs.count == direct_before
        assert "INSERT" in logged or "WITH" in logged, logged
        assert logged[-1] in ("WITH", "SELECT"), logged
        assert saver.get_tuple(config(thread_id)) is not None
        assert runs.count == direct_before + 1


def test_a_listener_added_later_sees_the_next_one_statement_calls(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-statement calls (``put_writes``, the store's lone put and get), run
    directly a few times (on SQLite the runtime then remembers their path, one lookup
    per call), are seen by a statement listener added afterwards: one statement each,
    none run directly."""
    url = f"sqlite:///{tmp_path / 'lean.sqlite'}"
    runs = DirectRuns(monkeypatch)
    with (
        SQLAlchemySaver.from_conn_string(url) as saver,
        SQLAlchemyStore.from_conn_string(url) as store,
    ):
        saver.setup()
        store.setup()
        stored = saver.put(config(new_thread()), checkpoint({"a": 1}), {}, {"a": 1})
        for task in range(3):
            saver.put_writes(stored, [("a", task)], f"task-{task}")
            store.put(("docs",), f"key-{task}", {"n": task})
            assert store.get(("docs",), f"key-{task}") is not None
        direct_before = runs.count
        assert direct_before >= 10
        with (
            count_statements(saver.engine) as writes_seen,
            count_statements(store.engine) as store_seen,
        ):
            saver.put_writes(stored, [("a", 9)], "task-9")
            assert writes_seen.count == 1
            store.put(("docs",), "key-9", {"n": 9})
            item = store.get(("docs",), "key-9")
            assert store_seen.count == 2
        assert item is not None and item.value == {"n": 9}
        assert runs.count == direct_before


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        (sa.engine.Connection, "_handle_dbapi_exception"),
        (sa.engine.Connection, "_handle_dbapi_exception_noconnection"),
    ],
)
async def test_a_sqlalchemy_without_an_internal_falls_back_to_core(
    backend: Backend,
    owner: type,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A SQLAlchemy release that renamed one of the internals the direct path reads:
    detected once, a warning names it, and every call works through Core."""
    runs = DirectRuns(monkeypatch)
    monkeypatch.setattr(owner, name, None)  # as if renamed: no longer callable
    _forget_probe()
    try:
        with (
            caplog.at_level(logging.WARNING, logger="lg_sqla"),
            SQLAlchemySaver.from_conn_string(backend.sync_url) as saver,
        ):
            await _calls(either(saver, "sync"), new_thread() + "-ñandú")
            await _calls(either(saver, "sync"), new_thread() + "-ñandú")
        assert runs.count == 0
        warnings = [r.getMessage() for r in caplog.records if r.name.startswith("lg_sqla")]
        assert len(warnings) == 1 and name in warnings[0], warnings
    finally:
        monkeypatch.undo()
        _forget_probe()
    assert internals.direct_path_blocked() is None


@pytest.mark.parametrize(
    ("target", "name"),
    [
        (sa.engine.Connection, "_has_events"),
        (sa.engine.Engine, "_has_events"),
        (sa.sql.compiler.SQLCompiler, "_bind_processors"),
    ],
)
def test_each_internal_is_probed(target: type, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe names each internal it reads when it is missing or changed (probed
    without running anything: these would break Core itself)."""
    monkeypatch.setattr(target, name, None)
    _forget_probe()
    try:
        problem = internals.direct_path_blocked()
    finally:
        monkeypatch.undo()
        _forget_probe()
    assert problem is not None and name in problem
    assert internals.direct_path_blocked() is None


def _forget_probe() -> None:
    internals.missing_internals.cache_clear()
    internals.direct_path_blocked.cache_clear()


@pytest.fixture(scope="module")
def postgres_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    """A migrated PostgreSQL database for the drivers lg_sqla does not default to."""
    for db in new_database(request, "postgres", tmp_path_factory.mktemp("pg")):
        with SQLAlchemySaver.from_conn_string(db.sync_url) as saver:
            saver.setup()
        yield db
