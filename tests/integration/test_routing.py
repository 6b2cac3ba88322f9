"""When a plan takes the direct path, and that nothing a user can see changes when it does.

``lg_sqla.runtime.routing.choose_path`` is the one decision; these tests hold each of
its reasons to what users rely on: a driver the direct path was not built for works
(through Core), the switch turns it off, ``echo=True`` and INFO logging see every
statement of every call, and a SQLAlchemy without the internals it reads still works.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, new_database
from helpers import checkpoint, config, new_thread
from sqlalchemy.ext.asyncio import create_async_engine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.runtime import DIRECT_PATH_OPTION, direct
from lg_sqla.runtime.drivers import DIRECT_DRIVERS
from lg_sqla.store import SQLAlchemyStore

# Also on a MariaDB database at the server's default charset (non-ASCII names).
pytestmark = pytest.mark.any_charset


class DirectRuns:
    """Counts the plans the real ``direct.run`` executes (a spy: it still runs them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real: Callable[..., Any] = direct.run

        def spy(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(direct, "run", spy)


def _round_trip(saver: SQLAlchemySaver) -> None:
    """put, put_writes, get_tuple and list, with non-ASCII names, results checked."""
    thread_id = new_thread() + "-ñandú"
    stored = saver.put(config(thread_id), checkpoint({"ñandú": "😀"}), {"step": 1}, {"ñandú": 1})
    saver.put_writes(stored, [("ñandú", "x"), ("__interrupt__", "y")], "task-1")
    found = saver.get_tuple(config(thread_id))
    assert found is not None
    assert found.checkpoint["channel_values"] == {"ñandú": "😀"}
    assert sorted(w[1] for w in found.pending_writes or []) == ["__interrupt__", "ñandú"]
    assert [t.metadata["step"] for t in saver.list(config(thread_id))] == [1]


async def _around_trip(saver: AsyncSQLAlchemySaver) -> None:
    thread_id = new_thread() + "-ñandú"
    stored = await saver.aput(config(thread_id), checkpoint({"k": [1]}), {"step": 1}, {"k": 1})
    await saver.aput_writes(stored, [("k", 2)], "task-1")
    found = await saver.aget_tuple(config(thread_id))
    assert found is not None and found.checkpoint["channel_values"] == {"k": [1]}
    assert found.pending_writes == [("task-1", "k", 2)]
    assert [t.metadata["step"] async for t in saver.alist(config(thread_id))] == [1]


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


@pytest.mark.postgres
def test_a_driver_off_the_allowlist_runs_on_core(
    postgres_database: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """psycopg2: the engine a user already has works, every call through Core (the
    direct path once set psycopg 3's binary format on its cursor and failed)."""
    runs = DirectRuns(monkeypatch)
    url = postgres_database.sync_url.replace("postgresql+psycopg://", "postgresql+psycopg2://")
    engine = sa.create_engine(url)
    try:
        _round_trip(SQLAlchemySaver(engine))
    finally:
        engine.dispose()
    assert runs.count == 0


@pytest.mark.postgres
async def test_an_async_driver_off_the_allowlist_runs_on_core(
    postgres_database: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """asyncpg, as a user's app creates it."""
    runs = DirectRuns(monkeypatch)
    url = postgres_database.async_url.replace("postgresql+psycopg://", "postgresql+asyncpg://")
    engine = create_async_engine(url)
    try:
        await _around_trip(AsyncSQLAlchemySaver(engine))
    finally:
        await engine.dispose()
    assert runs.count == 0


def test_hot_calls_run_directly_by_default(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline the next tests turn off: an allowlisted driver, nothing listening."""
    runs = DirectRuns(monkeypatch)
    with SQLAlchemySaver.from_conn_string(backend.sync_url) as saver:
        saver.setup()
        _round_trip(saver)
    assert runs.count == 4  # put, put_writes, get_tuple, one list page


@pytest.mark.parametrize("switch", ["saver", "engine"])
def test_the_switch_keeps_every_call_on_core(
    backend: Backend, switch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = DirectRuns(monkeypatch)
    engine = backend.engine()
    try:
        if switch == "saver":
            saver = SQLAlchemySaver(engine, direct_path=False)
            store = SQLAlchemyStore(engine, direct_path=False)
        else:
            off = engine.execution_options(**{DIRECT_PATH_OPTION: False})
            saver, store = SQLAlchemySaver(off), SQLAlchemyStore(off)
        _round_trip(saver)
        store.put(("ñ",), "k", {"v": "😀"})
        item = store.get(("ñ",), "k")
        assert item is not None and item.value == {"v": "😀"}
    finally:
        engine.dispose()
    assert runs.count == 0


async def test_the_switch_keeps_every_async_call_on_core(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = DirectRuns(monkeypatch)
    async with AsyncSQLAlchemySaver.from_conn_string(backend.async_url, direct_path=False) as saver:
        await _around_trip(saver)
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
    backend: Backend, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``create_engine(url, echo=True)``: each get_tuple is logged, the tenth as the first
    (the direct path once went silent after the first call)."""
    runs = DirectRuns(monkeypatch)
    engine = backend.engine(echo=True)
    try:
        saver = SQLAlchemySaver(engine)
        thread_id = new_thread()
        saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="sqlalchemy.engine"):
            for _ in range(10):
                assert saver.get_tuple(config(thread_id)) is not None
        assert len(_logged_statements(caplog.records)) == 10
    finally:
        engine.dispose()
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


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        (sa.engine.Connection, "_handle_dbapi_exception"),
        (sa.engine.Connection, "_handle_dbapi_exception_noconnection"),
    ],
)
def test_a_sqlalchemy_without_an_internal_falls_back_to_core(
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
    direct.missing_internals.cache_clear()
    try:
        with (
            caplog.at_level(logging.WARNING, logger="lg_sqla"),
            SQLAlchemySaver.from_conn_string(backend.sync_url) as saver,
        ):
            _round_trip(saver)
            _round_trip(saver)
        assert runs.count == 0
        warnings = [r.getMessage() for r in caplog.records if r.name.startswith("lg_sqla")]
        assert len(warnings) == 1 and name in warnings[0], warnings
    finally:
        monkeypatch.undo()
        direct.missing_internals.cache_clear()
    assert direct.missing_internals() is None


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
    problem = direct._probe_internals()
    monkeypatch.undo()
    assert problem is not None and name in problem
    assert direct._probe_internals() is None


@pytest.fixture(scope="module")
def postgres_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    """A migrated PostgreSQL database for the drivers lg_sqla does not default to."""
    for db in new_database(request, "postgres", tmp_path_factory.mktemp("pg")):
        with SQLAlchemySaver.from_conn_string(db.sync_url) as saver:
            saver.setup()
        yield db
