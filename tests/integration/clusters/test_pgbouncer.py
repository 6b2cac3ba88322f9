# mypy: disable-error-code="call-overload,arg-type"
# Relaxed for this test module only: LangGraph configs passed as plain dicts.
"""lg_sqla behind PgBouncer (Debian's 1.18, tests/pgbouncer.py), in session and
transaction pool mode, opened the way a user who never read the docs opens it: a
plain ``from_conn_string(url)`` with the pooler's URL.

In transaction mode each transaction may run on another server session, so a
prepared statement of psycopg (which lg_sqla's engines prepare at the first
execution) is missing there, or taken by another client, or, worst, another client's
statement of the same name runs with this client's parameters. lg_sqla tells a
pooler from the server at connect (``dialects.poolers``) and prepares nothing
through one: the conformance suite, graphs and concurrent writers pass, and no
connection of the engine ever prepares a statement. The same in transaction mode on
lg_sqla's other PostgreSQL drivers (psycopg2, asyncpg, pg8000: the last section),
where asyncpg's named statements failed and pg8000's calls hung before.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from graph_helpers import build_approval_graph, build_chat_graph, expected_chat, summarize
from helpers import assert_conformance, checkpoint, config, new_thread
from langchain_core.messages import HumanMessage
from langgraph.types import Command
from pgbouncer import MODES, Bouncers, pgbouncers
from servers import create_database, drop_database, sqlalchemy_url
from sqlalchemy.ext.asyncio import create_async_engine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.dialects import poolers

pytestmark = pytest.mark.postgres

WRITERS = 8
PUTS = 100
DRIVER_PUTS = 30  # (each other driver: 480 calls at once, enough to meet another's session)


@dataclass(frozen=True)
class Pooled:
    """One migrated database, reached through each pooler (plain URLs: no driver)."""

    urls: dict[str, str]  # by pool mode
    server_url: str  # the same database on the server itself (psycopg)


@pytest.fixture(scope="module")
def bouncers(postgres_admin_url: str) -> Iterator[Bouncers]:
    with pgbouncers(postgres_admin_url) as running:
        yield running


@pytest.fixture(scope="module")
def pooled(postgres_admin_url: str, bouncers: Bouncers) -> Iterator[Pooled]:
    name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
    create_database(postgres_admin_url, name)
    try:
        server_url = sqlalchemy_url(postgres_admin_url, "psycopg", name)
        with SQLAlchemySaver.from_conn_string(server_url) as saver:
            saver.setup()
        urls = {mode: f"{url}/{name}" for mode, url in bouncers.urls.items()}
        yield Pooled(urls, server_url)
    finally:
        drop_database(postgres_admin_url, name)


def _prepares_nothing(engine: sa.Engine) -> None:
    """Every connection the engine's pool holds was told to prepare nothing."""
    pool = engine.pool
    assert isinstance(pool, sa.pool.QueuePool)
    held = [engine.raw_connection() for _ in range(pool.checkedin())]
    try:
        assert held, "the writers left no pooled connection to look at"
        for pooled in held:
            assert getattr(pooled.driver_connection, "prepare_threshold", 0) is None
    finally:
        for pooled in held:
            pooled.close()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "connection pooler" in r.getMessage()]


# --------------------------------------------------------------------------- conformance


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_conformance_through_pgbouncer(pooled: Pooled, mode: str, flavour: str) -> None:
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    url = pooled.urls[mode]
    if flavour == "async":

        async def factory() -> Any:
            async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
                yield saver

    else:

        async def factory() -> Any:
            with SQLAlchemySaver.from_conn_string(url) as saver:
                yield saver

    report = await validate(checkpointer_test(name=f"lg_sqla-pgbouncer-{mode}-{flavour}")(factory))
    assert_conformance(report)


# --------------------------------------------------------------------------- graphs


def _graph_users(saver: SQLAlchemySaver) -> None:
    """Chat threads and an interrupted approval, from threads at once."""
    errors: list[BaseException] = []
    chat = build_chat_graph().compile(checkpointer=saver)
    calls: Counter[str] = Counter()
    approval = build_approval_graph(calls).compile(checkpointer=saver)

    def user(n: int) -> None:
        try:
            cfg = {"configurable": {"thread_id": new_thread()}}
            for text in ("hello", "again", "bye"):
                chat.invoke({"messages": [HumanMessage(f"{text} {n}")]}, cfg)
            state = chat.get_state(cfg)
            assert summarize(state.values["messages"]) == expected_chat(
                f"hello {n}", f"again {n}", f"bye {n}"
            )
            assert len(list(chat.get_state_history(cfg))) == 3 * 3  # input, 2 steps
            ask = {"configurable": {"thread_id": new_thread()}}
            approval.invoke({"request": f"r{n}"}, ask)
            assert approval.get_state(ask).next == ("ask_human",)
            done = approval.invoke(Command(resume="yes"), ask)
            assert done["log"][-1] == "finished with yes"
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=user, args=(n,)) for n in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


async def _async_graph_users(saver: AsyncSQLAlchemySaver) -> None:
    """Chat threads from tasks at once."""
    chat = build_chat_graph().compile(checkpointer=saver)

    async def user(n: int) -> None:
        cfg = {"configurable": {"thread_id": new_thread()}}
        for text in ("hello", "bye"):
            await chat.ainvoke({"messages": [HumanMessage(f"{text} {n}")]}, cfg)
        state = await chat.aget_state(cfg)
        assert summarize(state.values["messages"]) == expected_chat(f"hello {n}", f"bye {n}")

    await asyncio.gather(*(user(n) for n in range(5)))


@pytest.mark.parametrize("mode", MODES)
def test_graphs_through_pgbouncer(pooled: Pooled, mode: str) -> None:
    with SQLAlchemySaver.from_conn_string(pooled.urls[mode]) as saver:
        _graph_users(saver)


@pytest.mark.parametrize("mode", MODES)
async def test_an_async_graph_through_pgbouncer(pooled: Pooled, mode: str) -> None:
    async with AsyncSQLAlchemySaver.from_conn_string(pooled.urls[mode]) as saver:
        await _async_graph_users(saver)


# --------------------------------------------------------------------------- writers


def _writers(
    saver: SQLAlchemySaver, puts: int = PUTS
) -> tuple[list[BaseException], list[tuple[Any, str]]]:
    """WRITERS threads, ``puts`` puts and put_writes each on a thread of their own;
    returns the errors and every acknowledged (put config, write task)."""
    errors: list[BaseException] = []
    acknowledged: list[tuple[Any, str]] = []
    start = threading.Barrier(WRITERS)

    def writer(w: int) -> None:
        parent = config(new_thread())
        start.wait()
        for i in range(puts):
            try:
                stored = saver.put(parent, checkpoint({"a": i}, {"a": i + 1}), {"step": i}, {})
                saver.put_writes(stored, [("a", i), ("b", w)], f"task-{i}")
                acknowledged.append((stored, f"task-{i}"))
                parent = stored
            except BaseException as error:
                errors.append(error)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors, acknowledged


def _all_there(server_url: str, acknowledged: list[tuple[Any, str]]) -> None:
    """Read on the server itself: every acknowledged checkpoint, with its writes."""
    with SQLAlchemySaver.from_conn_string(server_url) as saver:
        for stored, task in acknowledged:
            found = saver.get_tuple(stored)
            assert found is not None, stored
            assert [w[0] for w in found.pending_writes or []] == [task, task]


@pytest.mark.parametrize("mode", MODES)
def test_concurrent_writers_through_pgbouncer(
    pooled: Pooled, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="lg_sqla")
    with SQLAlchemySaver.from_conn_string(pooled.urls[mode], pool_size=WRITERS) as saver:
        errors, acknowledged = _writers(saver)
        assert errors == []
        _prepares_nothing(saver.engine)
    assert len(acknowledged) == WRITERS * PUTS
    _all_there(pooled.server_url, acknowledged)
    assert len(_warnings(caplog)) == 1, _warnings(caplog)  # one per engine


def test_the_server_itself_still_prepares(pooled: Pooled) -> None:
    """No pooler in front: the check changes nothing (prepared at the first execution)."""
    with SQLAlchemySaver.from_conn_string(pooled.server_url) as saver:
        errors, _ = _writers(saver)
        assert errors == []
        pooled_connection = saver.engine.raw_connection()
        try:
            assert getattr(pooled_connection.driver_connection, "prepare_threshold", None) == 0
        finally:
            pooled_connection.close()


def test_a_callers_engine_through_transaction_mode(
    pooled: Pooled, caplog: pytest.LogCaptureFixture
) -> None:
    """An engine the caller made, preparing at the first execution: lg_sqla's first
    call finds the pooler, and every checkout prepares nothing from then on."""
    caplog.set_level(logging.WARNING, logger="lg_sqla")
    url = pooled.urls["transaction"].replace("postgresql://", "postgresql+psycopg://")
    engine = sa.create_engine(url, pool_size=WRITERS, connect_args={"prepare_threshold": 0})
    try:
        errors, acknowledged = _writers(SQLAlchemySaver(engine))
        assert errors == []
        _prepares_nothing(engine)
    finally:
        engine.dispose()
    _all_there(pooled.server_url, acknowledged)
    assert len(_warnings(caplog)) == 1


def test_a_pooler_error_switches_the_engine_and_runs_the_call_again(
    pooled: Pooled, caplog: pytest.LogCaptureFixture
) -> None:
    """A pooler the connect-time check cannot see (one that passes the server's backend
    key through): its "prepared statement does not exist" switches the engine to
    unprepared statements, and the call that met it runs again."""
    caplog.set_level(logging.WARNING, logger="lg_sqla")
    url = pooled.urls["transaction"].replace("postgresql://", "postgresql+psycopg://")
    engine = sa.create_engine(url, pool_size=2, connect_args={"prepare_threshold": 0})
    blocker = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        poolers._CHECKED.add(engine.pool)  # (as if the check had found no pooler)
        saver = SQLAlchemySaver(engine)
        thread_id = new_thread()
        stored = saver.put(config(thread_id), checkpoint({"a": 1}), {}, {})
        assert saver.get_tuple(stored) is not None  # get_tuple prepared on server session S
        # Another client holds S in a transaction: the next get_tuple runs on another
        # server session (PgBouncer hands out its most recently used one first), where
        # its prepared statement does not exist.
        with blocker.connect() as other:
            other.execute(sa.text("SELECT 1"))
            found = saver.get_tuple(stored)
            other.rollback()
        assert found is not None and found.config == stored
        assert len(_warnings(caplog)) == 1
        _prepares_nothing(engine)
    finally:
        poolers._CHECKED.discard(engine.pool)
        engine.dispose()
        blocker.dispose()


# --------------------------------------------------------------------------- every driver
# psycopg 3 (sync and async) is lg_sqla's default, tested above in both modes. Here,
# in transaction mode (where prepared statements break), the other PostgreSQL drivers
# lg_sqla runs on (tests/integration/runtime/test_drivers.py): psycopg2 binds on the
# client and sends plain queries; asyncpg prepares named statements and caches them;
# pg8000 runs each statement as an unnamed one, in exchanges of several round trips.


@dataclass(frozen=True)
class PgDriver:
    name: str  # the test id
    scheme: str  # the URL's drivername
    is_async: bool

    def url(self, pooled_url: str) -> str:
        return pooled_url.replace("postgresql://", f"{self.scheme}://", 1)


OTHER_DRIVERS = (
    PgDriver("psycopg2", "postgresql+psycopg2", is_async=False),
    PgDriver("asyncpg", "postgresql+asyncpg", is_async=True),
    PgDriver("pg8000", "postgresql+pg8000", is_async=False),
)
by_driver = pytest.mark.parametrize("driver", OTHER_DRIVERS, ids=lambda d: d.name)


@by_driver
async def test_conformance_on_every_driver_through_transaction_mode(
    pooled: Pooled, driver: PgDriver
) -> None:
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    url = driver.url(pooled.urls["transaction"])
    if driver.is_async:

        async def factory() -> Any:
            async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
                yield saver

    else:

        async def factory() -> Any:
            with SQLAlchemySaver.from_conn_string(url) as saver:
                yield saver

    report = await validate(checkpointer_test(name=f"lg_sqla-pgbouncer-{driver.name}")(factory))
    assert_conformance(report)


@by_driver
async def test_graphs_on_every_driver_through_transaction_mode(
    pooled: Pooled, driver: PgDriver
) -> None:
    url = driver.url(pooled.urls["transaction"])
    if driver.is_async:
        async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
            await _async_graph_users(saver)
    else:
        with SQLAlchemySaver.from_conn_string(url) as saver:
            await asyncio.to_thread(_graph_users, saver)


async def _async_writers(
    saver: AsyncSQLAlchemySaver,
) -> tuple[list[BaseException], list[tuple[Any, str]]]:
    """``_writers`` as WRITERS tasks of the event loop, DRIVER_PUTS each."""
    errors: list[BaseException] = []
    acknowledged: list[tuple[Any, str]] = []
    start = asyncio.Event()  # (set once every writer's task exists)

    async def writer(w: int) -> None:
        parent = config(new_thread())
        await start.wait()
        for i in range(DRIVER_PUTS):
            try:
                stored = await saver.aput(
                    parent, checkpoint({"a": i}, {"a": i + 1}), {"step": i}, {}
                )
                await saver.aput_writes(stored, [("a", i), ("b", w)], f"task-{i}")
                acknowledged.append((stored, f"task-{i}"))
                parent = stored
            except Exception as error:
                errors.append(error)

    tasks = [asyncio.create_task(writer(w)) for w in range(WRITERS)]
    start.set()
    await asyncio.gather(*tasks)
    return errors, acknowledged


def _leaves_nothing(engine: sa.Engine, driver: PgDriver) -> None:
    """What each driver was switched to (``dialects.poolers``), on every connection the
    engine's pool holds: asyncpg names and caches no statement; pg8000 stays in
    transactions when asked for AUTOCOMMIT. (psycopg2 leaves nothing anyway.)"""
    pool = engine.pool
    assert isinstance(pool, sa.pool.QueuePool)
    held = [engine.raw_connection() for _ in range(pool.checkedin())]
    try:
        assert held, "the writers left no pooled connection to look at"
        for pooled in held:
            own: Any = pooled.driver_connection
            if driver.name == "asyncpg":  # (asyncpg's statement_cache_size, turned to 0)
                assert own._stmt_cache_enabled is False
                assert len(own._stmt_cache) == 0
    finally:
        for pooled in held:
            pooled.close()
    if driver.name == "pg8000":
        with engine.connect() as connection:
            connection.execution_options(isolation_level="AUTOCOMMIT")
            own_connection: Any = connection.connection.dbapi_connection
            assert own_connection.autocommit is False


async def _run_writers(saver: SQLAlchemySaver | AsyncSQLAlchemySaver) -> list[tuple[Any, str]]:
    if isinstance(saver, AsyncSQLAlchemySaver):
        errors, acknowledged = await _async_writers(saver)
    else:
        errors, acknowledged = await asyncio.to_thread(_writers, saver, DRIVER_PUTS)
    assert errors == []
    assert len(acknowledged) == WRITERS * DRIVER_PUTS
    return acknowledged


def _switch_warnings(driver: PgDriver) -> int:
    return 0 if driver.name == "psycopg2" else 1  # (one per engine)


@by_driver
async def test_concurrent_writers_on_every_driver_through_transaction_mode(
    pooled: Pooled, driver: PgDriver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="lg_sqla")
    url = driver.url(pooled.urls["transaction"])
    if driver.is_async:
        async with AsyncSQLAlchemySaver.from_conn_string(url, pool_size=WRITERS) as saver:
            acknowledged = await _run_writers(saver)
            await asyncio.to_thread(_leaves_nothing, saver.engine.sync_engine, driver)
    else:
        with SQLAlchemySaver.from_conn_string(url, pool_size=WRITERS) as sync_saver:
            acknowledged = await _run_writers(sync_saver)
            _leaves_nothing(sync_saver.engine, driver)
    await asyncio.to_thread(_all_there, pooled.server_url, acknowledged)
    assert len(_warnings(caplog)) == _switch_warnings(driver), _warnings(caplog)


@by_driver
async def test_a_callers_engine_on_every_driver_through_transaction_mode(
    pooled: Pooled, driver: PgDriver, caplog: pytest.LogCaptureFixture
) -> None:
    """An engine the caller made with the driver's defaults (asyncpg: named, cached
    statements; pg8000: lg_sqla's AUTOCOMMIT for one statement): lg_sqla's first call
    finds the pooler, and every checkout is switched from then on."""
    caplog.set_level(logging.WARNING, logger="lg_sqla")
    url = driver.url(pooled.urls["transaction"])
    if driver.is_async:
        engine = create_async_engine(url, pool_size=WRITERS)
        try:
            acknowledged = await _run_writers(AsyncSQLAlchemySaver(engine))
            await asyncio.to_thread(_leaves_nothing, engine.sync_engine, driver)
        finally:
            await engine.dispose()
    else:
        sync_engine = sa.create_engine(url, pool_size=WRITERS)
        try:
            acknowledged = await _run_writers(SQLAlchemySaver(sync_engine))
            _leaves_nothing(sync_engine, driver)
        finally:
            sync_engine.dispose()
    await asyncio.to_thread(_all_there, pooled.server_url, acknowledged)
    assert len(_warnings(caplog)) == _switch_warnings(driver), _warnings(caplog)


async def test_an_asyncpg_pooler_error_switches_the_engine_and_runs_the_call_again(
    pooled: Pooled, caplog: pytest.LogCaptureFixture
) -> None:
    """asyncpg's "prepared statement "__asyncpg_stmt_N__" does not exist", from a
    pooler the connect-time check cannot see: the engine is switched to unnamed
    statements, and the call that met it runs again."""
    caplog.set_level(logging.WARNING, logger="lg_sqla")
    url = pooled.urls["transaction"].replace("postgresql://", "postgresql+asyncpg://")
    engine = create_async_engine(url, pool_size=2)
    blocker = create_async_engine(url, poolclass=sa.pool.NullPool)
    try:
        poolers._CHECKED.add(engine.sync_engine.pool)  # (as if the check had found no pooler)
        saver = AsyncSQLAlchemySaver(engine)
        stored = await saver.aput(config(new_thread()), checkpoint({"a": 1}), {}, {})
        assert await saver.aget_tuple(stored) is not None  # named on server session S
        # Another client holds S in a transaction: the next aget_tuple runs on another
        # server session, where asyncpg's cached statement does not exist.
        async with blocker.connect() as other:
            await other.execute(sa.text("SELECT 1"))
            found = await saver.aget_tuple(stored)
            await other.rollback()
        assert found is not None and found.config == stored
        assert len(_warnings(caplog)) == 1
        await asyncio.to_thread(_leaves_nothing, engine.sync_engine, OTHER_DRIVERS[1])
    finally:
        poolers._CHECKED.discard(engine.sync_engine.pool)
        await engine.dispose()
        await blocker.dispose()


async def test_an_asyncpg_that_cannot_be_switched_is_refused_behind_a_pooler(
    pooled: Pooled, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An asyncpg whose internals lg_sqla does not find (a release that changed them):
    refused at its first connection through the pooler, with the setting that makes
    it safe, rather than left to hand its named statements to other clients."""
    from lg_sqla import internals
    from lg_sqla.errors import UnsupportedDriverError

    monkeypatch.setattr(internals, "asyncpg_unnamed_statements", lambda _connection: False)
    url = OTHER_DRIVERS[1].url(pooled.urls["transaction"])
    async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
        with pytest.raises(UnsupportedDriverError, match="statement_cache_size': 0"):
            await saver.aget_tuple(config(new_thread()))


async def test_a_callers_async_psycopg_engine_through_transaction_mode(
    pooled: Pooled, caplog: pytest.LogCaptureFixture
) -> None:
    """An async engine the caller made: its writers' first calls start together on one
    event loop, and each checks its connection for the pooler without blocking the
    loop's thread (a thread lock there hung them all)."""
    caplog.set_level(logging.WARNING, logger="lg_sqla")
    url = pooled.urls["transaction"].replace("postgresql://", "postgresql+psycopg://")
    engine = create_async_engine(url, pool_size=WRITERS, connect_args={"prepare_threshold": 0})
    try:
        acknowledged = await _run_writers(AsyncSQLAlchemySaver(engine))
        await asyncio.to_thread(_prepares_nothing, engine.sync_engine)
    finally:
        await engine.dispose()
    await asyncio.to_thread(_all_there, pooled.server_url, acknowledged)
    assert len(_warnings(caplog)) == 1


@pytest.mark.parametrize("driver", OTHER_DRIVERS[1:], ids=lambda d: d.name)
async def test_the_server_itself_keeps_every_drivers_settings(
    pooled: Pooled, driver: PgDriver, caplog: pytest.LogCaptureFixture
) -> None:
    """No pooler in front: the check at connect switches nothing (asyncpg keeps its
    statement cache, pg8000 its AUTOCOMMIT), and warns of nothing."""
    caplog.set_level(logging.WARNING, logger="lg_sqla")
    url = pooled.server_url.replace("postgresql+psycopg://", f"{driver.scheme}://", 1)
    if driver.is_async:
        async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
            assert await saver.aget_tuple(config(new_thread())) is None
            raw = await saver.engine.raw_connection()
            try:
                own: Any = raw.driver_connection
                assert own._stmt_cache_enabled is True
            finally:
                raw.close()
    else:
        with SQLAlchemySaver.from_conn_string(url) as sync_saver:
            assert sync_saver.get_tuple(config(new_thread())) is None
            with sync_saver.engine.connect() as connection:
                connection.execution_options(isolation_level="AUTOCOMMIT")
                own_connection: Any = connection.connection.dbapi_connection
                assert own_connection.autocommit is True
    assert _warnings(caplog) == []
