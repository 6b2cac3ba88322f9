# mypy: disable-error-code="index,typeddict-item"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""lg_sqla on every DBAPI driver a SQLAlchemy user of its databases plausibly has.

"Bring your SQLAlchemy engine": each test builds the engine exactly as a user
would (``sa.create_engine(url)`` / ``create_async_engine(url)``, nothing of
lg_sqla's ``configure_engine``) on one driver, migrates a database of its own
through that driver (``setup()``), then runs the official conformance suite, the
essential LangGraph scenarios of test_graphs.py, names and values beyond ASCII,
the store and the node cache on it. Sync drivers run the sync classes, async
drivers the async ones.

The rest of the suite runs on lg_sqla's default drivers (psycopg 3, PyMySQL,
asyncmy, pysqlite, aiosqlite); this module is where psycopg2, asyncpg, pg8000,
mysqlclient and MariaDB Connector/Python are proven (dependency group ``drivers``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import operator
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
import sqlalchemy as sa
import test_graphs as graphs
from backends import MYSQL_DEFAULT_CHARSET, Backend, assert_no_leaked_connections, new_database
from graph_runner import Runner
from helpers import assert_conformance, checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import START, StateGraph
from sqlalchemy.ext.asyncio import create_async_engine
from store_helpers import age_rows_in, fake_index
from typing_extensions import TypedDict

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.models import store_items
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore


@dataclass(frozen=True)
class Driver:
    name: str  # the test id
    dialect: str  # sqlite, postgres or mysql: new_database's backend and the marker
    scheme: str  # the URL's drivername
    is_async: bool
    query: str = ""  # the URL's query string, as the README shows it

    def url(self, backend: Backend) -> str:
        base = sa.make_url(backend.sync_url).set(drivername=self.scheme, query={})
        return base.render_as_string(hide_password=False) + self.query


DRIVERS = (
    Driver("pysqlite", "sqlite", "sqlite+pysqlite", is_async=False),
    Driver("aiosqlite", "sqlite", "sqlite+aiosqlite", is_async=True),
    Driver("psycopg", "postgres", "postgresql+psycopg", is_async=False),
    # The same URL: create_async_engine picks psycopg's async dialect.
    Driver("psycopg-async", "postgres", "postgresql+psycopg", is_async=True),
    Driver("psycopg2", "postgres", "postgresql+psycopg2", is_async=False),
    Driver("asyncpg", "postgres", "postgresql+asyncpg", is_async=True),
    Driver("pg8000", "postgres", "postgresql+pg8000", is_async=False),
    Driver("pymysql", "mysql", "mysql+pymysql", is_async=False, query="?charset=utf8mb4"),
    Driver("mysqlclient", "mysql", "mysql+mysqldb", is_async=False, query="?charset=utf8mb4"),
    Driver("asyncmy", "mysql", "mysql+asyncmy", is_async=True, query="?charset=utf8mb4"),
    # MariaDB Connector/Python: always utf8mb4 (SQLAlchemy's dialect sets it).
    Driver("mariadbconnector", "mysql", "mariadb+mariadbconnector", is_async=False),
)


def _user_engine(url: str, is_async: bool) -> Any:
    """The engine as a user builds it: no lg_sqla settings, no event listeners."""
    return create_async_engine(url) if is_async else sa.create_engine(url)


@dataclass(frozen=True)
class Target:
    """A migrated database of its own, reached through one driver."""

    driver: Driver
    url: str

    @property
    def is_async(self) -> bool:
        return self.driver.is_async

    @asynccontextmanager
    async def engine(self) -> AsyncIterator[Any]:
        """A new engine on the driver, built as a user builds it; checked for leaks."""
        engine = _user_engine(self.url, self.is_async)
        try:
            yield engine
            assert_no_leaked_connections(engine.sync_engine if self.is_async else engine)
        finally:
            if self.is_async:
                await engine.dispose()
            else:
                engine.dispose()

    @asynccontextmanager
    async def saver(self) -> AsyncIterator[SQLAlchemySaver | AsyncSQLAlchemySaver]:
        async with self.engine() as engine:
            yield AsyncSQLAlchemySaver(engine) if self.is_async else SQLAlchemySaver(engine)


async def _migrate_async(url: str) -> None:
    engine = _user_engine(url, is_async=True)
    try:
        await AsyncSQLAlchemySaver(engine).setup()
    finally:
        await engine.dispose()


def _migrate(url: str) -> None:
    engine = _user_engine(url, is_async=False)
    try:
        SQLAlchemySaver(engine).setup()
    finally:
        engine.dispose()


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(driver, id=driver.name, marks=getattr(pytest.mark, driver.dialect))
        for driver in DRIVERS
    ],
)
def target(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Target]:
    """A database of its own per driver, its schema created through that driver."""
    driver: Driver = request.param
    for backend in new_database(request, driver.dialect, tmp_path_factory.mktemp("drivers")):
        url = driver.url(backend)
        if driver.is_async:
            asyncio.run(_migrate_async(url))
        else:
            _migrate(url)
        yield Target(driver, url)


# --- the official conformance suite ------------------------------------------------


async def test_conformance(target: Target) -> None:
    async def factory() -> AsyncIterator[SQLAlchemySaver | AsyncSQLAlchemySaver]:
        async with target.saver() as saver:
            yield saver

    registered = checkpointer_test(name=f"lg_sqla-{target.driver.name}")(factory)
    assert_conformance(await validate(registered))


# --- LangGraph graphs (the scenarios of test_graphs.py) -----------------------------


@dataclass(frozen=True)
class DriverRunner(Runner):
    """test_graphs.py's runner, whose other savers open engines on the same driver."""

    target: Target | None = None

    @asynccontextmanager
    async def other(self) -> AsyncIterator[Runner]:
        assert self.target is not None
        async with self.target.saver() as saver:
            yield DriverRunner(self.mode, self.backend, saver, self.target)


SCENARIOS: dict[str, Callable[[Runner], Awaitable[None]]] = {
    "chat-memory": graphs.test_chat_memory_across_two_saver_instances,
    "interrupt-resume": graphs.test_interrupt_then_resume,
    "time-travel-fork": graphs.test_update_state_forks_from_an_old_checkpoint,
    "subgraph": graphs.test_subgraph_state_and_interrupt_resume,
    "fan-out-send": graphs.test_parallel_fan_out_and_send,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
async def test_graph(target: Target, scenario: str) -> None:
    backend = Backend(target.driver.dialect, target.url, target.url)
    async with target.saver() as saver:
        mode = "async" if target.is_async else "sync"
        await SCENARIOS[scenario](DriverRunner(mode, backend, saver, target))


# --- names and values beyond ASCII ----------------------------------------------------


class NotesState(TypedDict):
    ñandú: Annotated[list[str], operator.add]
    频道: str


def build_notes_graph() -> StateGraph[Any]:
    """START -> paso-ü -> END over channels whose names are not ASCII."""

    def step(state: Any) -> dict[str, Any]:
        return {"ñandú": [f"vi {len(state['ñandú'])} 🐦"], "频道": "第" + str(len(state["ñandú"]))}

    builder = StateGraph(NotesState)
    builder.add_node("paso-ü", step)
    builder.add_edge(START, "paso-ü")
    return builder


async def test_non_ascii_threads_channels_and_metadata(target: Target) -> None:
    # "%" too: drivers with the format/pyformat paramstyle must not read it.
    thread = f"hilo-ñandú-中文-🎉-100%-%s-{uuid.uuid4().hex[:8]}"
    config: Any = {"configurable": {"thread_id": thread}}
    runner_mode = "async" if target.is_async else "sync"
    backend = Backend(target.driver.dialect, target.url, target.url)
    async with target.saver() as saver:
        runner = DriverRunner(runner_mode, backend, saver, target)
        graph = runner.compile(build_notes_graph())
        await runner.invoke(graph, {"ñandú": ["¡hola!"], "频道": "零"}, config)
        second = await runner.invoke(graph, {"ñandú": ["añadido"]}, config)
        assert second == {"ñandú": ["¡hola!", "vi 1 🐦", "añadido", "vi 3 🐦"], "频道": "第3"}
        history = await runner.history(graph, config)
        assert [s.metadata["step"] for s in history] == [4, 3, 2, 1, 0, -1]
        head = await runner.get_tuple(config)
        assert head is not None
        assert {"ñandú", "频道"} <= set(head.checkpoint["channel_versions"])

        # The saver's own API: a namespace, channel names, a task path and metadata
        # beyond ASCII, and a metadata filter on them. More channels and writes than
        # one VALUES list takes (dialects.VALUES_ROWS_MAX): on PostgreSQL they go as
        # arrays (bytea[] among them) expanded by unnest.
        ns_config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": "子图:ñ%"}}
        values: dict[str, Any] = {f"canal-ç-{n}": f"välue-{n}-%s" for n in range(40)}
        values["键"] = b"\x00\xff bytes %(x)s"
        cp = checkpoint(values)
        metadata: Any = {"quién": "Zoë 🎉 %", "step": 7}
        versions = cp["channel_versions"]
        writes = [(f"canal-ç-{n}", f"escrito-{n}") for n in range(40)] + [("键", "写入")]
        if isinstance(saver, AsyncSQLAlchemySaver):
            stored = await saver.aput(ns_config, cp, metadata, versions)
            await saver.aput_writes(stored, writes, "tarea-ü", "路径")
            got = await saver.aget_tuple(stored)
            found = [t async for t in saver.alist(None, filter={"quién": "Zoë 🎉 %"})]
            await saver.adelete_thread(thread)
            gone = await saver.aget_tuple(config)
        else:
            stored = saver.put(ns_config, cp, metadata, versions)
            saver.put_writes(stored, writes, "tarea-ü", "路径")
            got = saver.get_tuple(stored)
            found = list(saver.list(None, filter={"quién": "Zoë 🎉 %"}))
            saver.delete_thread(thread)
            gone = saver.get_tuple(config)
    assert got is not None
    assert got.checkpoint["channel_values"] == values
    assert got.metadata["quién"] == "Zoë 🎉 %"
    assert got.config["configurable"]["checkpoint_ns"] == "子图:ñ%"
    assert [(w[1], w[2]) for w in got.pending_writes or []] == writes
    assert [t.config["configurable"]["thread_id"] for t in found] == [thread]
    assert gone is None


# --- the store and the node cache ----------------------------------------------------


async def test_store_round_trip(target: Target) -> None:
    namespace = ("usuarios", f"josé-中文-{uuid.uuid4().hex[:8]}")
    value = {"nombre": "Zoë 🎉", "n": 3, "etiquetas": ["ñ", "ü"]}
    async with target.engine() as engine:
        # With an index: embeddings are stored and read back through the driver
        # (float32 bytes, real[] on PostgreSQL), ranked in Python here.
        index = fake_index(["nombre"])
        if target.is_async:
            store: Any = AsyncSQLAlchemyStore(engine, index=index)

            async def call(name: str, *args: Any, **kwargs: Any) -> Any:
                return await getattr(store, "a" + name)(*args, **kwargs)

        else:
            store = SQLAlchemyStore(engine, index=index)

            async def call(name: str, *args: Any, **kwargs: Any) -> Any:
                return getattr(store, name)(*args, **kwargs)

        await call("put", namespace, "clé-🔑", value)
        await call("put", namespace, "otra", {"nombre": "Ana", "n": 4})
        item = await call("get", namespace, "clé-🔑")
        assert item is not None and item.value == value and item.namespace == namespace
        hits = await call("search", namespace, filter={"nombre": "Zoë 🎉"})
        assert [h.key for h in hits] == ["clé-🔑"]
        hits = await call("search", namespace[:1], filter={"n": {"$gt": 3}})
        assert [h.key for h in hits if h.namespace == namespace] == ["otra"]
        assert namespace in await call("list_namespaces", prefix=namespace[:1])
        ranked = await call("search", namespace, query="Ana")
        assert [h.key for h in ranked] == ["otra", "clé-🔑"]
        assert ranked[0].score == pytest.approx(1.0) and ranked[1].score < 0.99
        await call("put", namespace, "clé-🔑", {"nombre": "cambiado"})
        item = await call("get", namespace, "clé-🔑")
        assert item is not None and item.value == {"nombre": "cambiado"}
        await call("delete", namespace, "clé-🔑")
        assert await call("get", namespace, "clé-🔑") is None
        assert [h.key for h in await call("search", namespace)] == ["otra"]
        # Expiry: timestamps with their time zone through the driver, and the sweep's
        # count (the driver's rowcount). This database has no other store items.
        await call("put", namespace, "fugaz", {"v": 1}, ttl=0.2)
        assert (await call("get", namespace, "fugaz", refresh_ttl=False)) is not None
        # Aged past its TTL (12 s) through this driver, not slept past it.
        aged = store_items.c.prefix.startswith(namespace[0])
        by = dt.timedelta(seconds=30)
        if target.is_async:
            async with engine.begin() as conn:
                await conn.run_sync(age_rows_in, store_items, aged, by)
        else:
            with engine.begin() as conn:
                age_rows_in(conn, store_items, aged, by)
        assert (await call("get", namespace, "fugaz", refresh_ttl=False)) is None
        swept = await store.sweep_ttl() if target.is_async else store.sweep_ttl()
        assert swept == 1
        assert [h.key for h in await call("search", namespace)] == ["otra"]


async def test_node_cache_round_trip(target: Target) -> None:
    namespace = ("nodo-ñ", f"图-{uuid.uuid4().hex[:8]}")
    pairs: Any = {
        (namespace, "clave-中"): ({"v": "ü 🎉", "b": b"\x00\xff"}, None),
        (namespace, "expira"): (42, 60),
    }
    async with target.engine() as engine:
        cache: SQLAlchemyCache[Any] = SQLAlchemyCache(engine)
        if target.is_async:
            await cache.aset(pairs)
            got = await cache.aget(list(pairs))
            await cache.aclear([namespace])
            after = await cache.aget(list(pairs))
        else:
            cache.set(pairs)
            got = cache.get(list(pairs))
            cache.clear([namespace])
            after = cache.get(list(pairs))
    assert got == {key: value for key, (value, _) in pairs.items()}
    assert after == {}


# --- retention: what a sweep reports is what the driver counted -----------------------


@pytest.mark.mysql
@pytest.mark.parametrize(
    "driver", [d for d in DRIVERS if d.dialect == "mysql"], ids=lambda d: d.name
)
def test_mysql_tables_are_utf8mb4_bin(
    driver: Driver, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Tables created through any MySQL-family driver's URL, in a database whose
    default charset is latin1 (MariaDB's own default), have the utf8mb4_bin table
    collation: mariadb+... URLs included (SQLAlchemy reads table options by the
    dialect's name, so with mysql_ options alone they got the database's default)."""
    query = (
        "SELECT table_name, table_collation FROM information_schema.tables "
        "WHERE table_schema = DATABASE() AND table_name <> 'lg_sqla_alembic_version'"
    )
    for backend in new_database(request, MYSQL_DEFAULT_CHARSET, tmp_path):
        url = driver.url(backend)
        if driver.is_async:
            asyncio.run(_migrate_async(url))
        else:
            _migrate(url)
        engine = sa.create_engine(backend.sync_url)
        try:
            with engine.connect() as conn:
                rows = conn.exec_driver_sql(query).all()
        finally:
            engine.dispose()
        collations = {str(name): str(collation) for name, collation in rows}
        assert {"checkpoints", "store_items", "cache_entries"} <= collations.keys()
        assert set(collations.values()) == {"utf8mb4_bin"}, collations


async def test_sweep_reports_the_rows_it_removed(target: Target) -> None:
    """Last in this module: it removes every thread of the driver's database."""
    async with target.saver() as saver:
        for n in range(2):
            config: Any = {"configurable": {"thread_id": f"barrido-ñ-{n}-{uuid.uuid4().hex[:6]}"}}
            # (lists: blob rows of its own; small ints and strs are kept in the document)
            cp = checkpoint({"ç": [n], "键": ["v"]})
            if isinstance(saver, AsyncSQLAlchemySaver):
                stored = await saver.aput(config, cp, {}, cp["channel_versions"])
                await saver.aput_writes(stored, [("ç", 1)], "t", "")
            else:
                stored = saver.put(config, cp, {}, cp["channel_versions"])
                saver.put_writes(stored, [("ç", 1)], "t", "")
        counts = "SELECT (SELECT count(DISTINCT thread_id) FROM checkpoints), " + ", ".join(
            f"(SELECT count(*) FROM {table})"
            for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
        )
        older_than = dt.timedelta(0)
        if isinstance(saver, AsyncSQLAlchemySaver):
            async with saver.engine.connect() as connection:
                before = tuple((await connection.exec_driver_sql(counts)).one())
            report = await saver.asweep(older_than)
            async with saver.engine.connect() as connection:
                after = tuple((await connection.exec_driver_sql(counts)).one())
        else:
            with saver.engine.connect() as sync_connection:
                before = tuple(sync_connection.exec_driver_sql(counts).one())
            report = saver.sweep(older_than)
            with saver.engine.connect() as sync_connection:
                after = tuple(sync_connection.exec_driver_sql(counts).one())
    removed = report.removed
    assert before[0] >= 2 and before[3] >= 4
    assert (removed.threads, removed.checkpoints, removed.writes, removed.blobs) == before
    assert after == (0, 0, 0, 0)
