"""Store level: lg_sqla's ``SQLAlchemyStore`` / ``AsyncSQLAlchemyStore`` against the store
each user would otherwise pick, on the same database in the same run.

Official stores: ``SqliteStore`` / ``AsyncSqliteStore`` (langgraph-checkpoint-sqlite),
``PostgresStore`` / ``AsyncPostgresStore`` (langgraph-checkpoint-postgres), and on
MariaDB the community ``PyMySQLStore`` / ``AIOMySQLStore`` (langgraph-checkpoint-mysql).
Each is opened with its own ``from_conn_string`` and ``setup()``; lg_sqla's with
``from_conn_string`` and the README's URLs, as the savers (benchmarks/contenders.py).

One measurement, on a fresh database: ``shape.store_calls`` calls of each kind, one at
a time, each timed (rate = calls / time spent in them), after a warm-up on a
namespace of its own:

1. put of a new item, spread over ``USERS`` namespaces ``(root, "users", "u<n>")``;
2. get of each stored item;
3. search of one user's namespace with an equality filter, ``limit=10``;
4. a batch of mixed ops (``BATCH_OPS``: a put, two gets, a filtered search, a
   list_namespaces), as a graph node reading and writing memory would send it.

No semantic search (no model; and vector search is measured nowhere here).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, Op, PutOp, SearchOp

from .contenders import Contender, _sqlite_normal, patch_aiomysql_bytes
from .databases import Database, base
from .workload import Shape

METRICS = {
    "put_per_s": ("put (new item)", "calls/s", True),
    "get_per_s": ("get", "calls/s", True),
    "search_per_s": ("search (filter, limit 10)", "calls/s", True),
    "batch_per_s": ("batch of 5 mixed ops", "batches/s", True),
}
OFFICIAL = {
    ("sqlite", False): "SqliteStore",
    ("sqlite", True): "AsyncSqliteStore",
    ("postgres", False): "PostgresStore",
    ("postgres", True): "AsyncPostgresStore",
    ("mysql", False): "PyMySQLStore",
    ("mysql", True): "AIOMySQLStore",
}
OURS = {False: "SQLAlchemyStore", True: "AsyncSQLAlchemyStore"}
ROOT = "bench"
USERS = 4
BATCH_OPS = 5
WARM_UP = 20


def _value(i: int) -> dict[str, Any]:
    return {"text": f"memory {i}: the user prefers short answers", "tag": i % 5, "n": i}


def _namespace(i: int) -> tuple[str, ...]:
    return (ROOT, "users", f"u{i % USERS}")


def _batch(i: int) -> list[Op]:
    """BATCH_OPS ops: write one memory, read two, search one user's, list users."""
    return [
        PutOp(_namespace(i), f"b{i}", _value(i)),
        GetOp(_namespace(i), f"k{i}"),
        GetOp(_namespace(i + 1), f"k{i + 1}"),
        SearchOp(_namespace(i), filter={"tag": i % 5}, limit=10),
        ListNamespacesOp(
            match_conditions=(MatchCondition("prefix", (ROOT,)),), max_depth=3, limit=10
        ),
    ]


def _check(results: list[Any], n: int) -> None:
    """The stores did the work asked (not a figure of a store that silently failed)."""
    assert all(item is not None and item.value["n"] == i for i, item in enumerate(results)), n


# --- sync ----------------------------------------------------------------------------


def run_sync(store: Any, shape: Shape) -> dict[str, float]:
    n = shape.store_calls
    warm = (ROOT, "warm-up")
    for i in range(WARM_UP):  # connections, prepared statements, schema check
        store.put(warm, f"w{i}", _value(i))
        store.get(warm, f"w{i}")
        store.search(warm, filter={"tag": i % 5}, limit=10)
    store.batch(_batch(0)[1:])

    def timed(call: Callable[[int], Any]) -> tuple[float, list[Any]]:
        spent, out = 0.0, []
        for i in range(n):
            start = time.perf_counter()
            result = call(i)
            spent += time.perf_counter() - start
            out.append(result)
        return spent, out

    put, _ = timed(lambda i: store.put(_namespace(i), f"k{i}", _value(i)))
    get, items = timed(lambda i: store.get(_namespace(i), f"k{i}"))
    _check(items, n)
    search, found = timed(lambda i: store.search(_namespace(i), filter={"tag": i % 5}, limit=10))
    assert all(found), "every search finds items"
    batch, _ = timed(lambda i: store.batch(_batch(i)))
    return _rates(n, put, get, search, batch)


def _rates(n: int, put: float, get: float, search: float, batch: float) -> dict[str, float]:
    return {
        "put_per_s": n / put,
        "get_per_s": n / get,
        "search_per_s": n / search,
        "batch_per_s": n / batch,
    }


# --- async ---------------------------------------------------------------------------


async def run_async(store: Any, shape: Shape) -> dict[str, float]:
    n = shape.store_calls
    warm = (ROOT, "warm-up")
    for i in range(WARM_UP):
        await store.aput(warm, f"w{i}", _value(i))
        await store.aget(warm, f"w{i}")
        await store.asearch(warm, filter={"tag": i % 5}, limit=10)
    await store.abatch(_batch(0)[1:])

    async def timed(call: Callable[[int], Any]) -> tuple[float, list[Any]]:
        spent, out = 0.0, []
        for i in range(n):
            start = time.perf_counter()
            result = await call(i)
            spent += time.perf_counter() - start
            out.append(result)
        return spent, out

    put, _ = await timed(lambda i: store.aput(_namespace(i), f"k{i}", _value(i)))
    get, items = await timed(lambda i: store.aget(_namespace(i), f"k{i}"))
    _check(items, n)
    search, found = await timed(
        lambda i: store.asearch(_namespace(i), filter={"tag": i % 5}, limit=10)
    )
    assert all(found), "every search finds items"
    batch, _ = await timed(lambda i: store.abatch(_batch(i)))
    return _rates(n, put, get, search, batch)


# --- the contenders ------------------------------------------------------------------


@contextlib.contextmanager
def _lg_sqla_sync(db: Database, sqlite_normal: bool = False) -> Iterator[Any]:
    from lg_sqla.store import SQLAlchemyStore

    with SQLAlchemyStore.from_conn_string(db.sync_url) as store:
        if sqlite_normal:
            _sqlite_normal(store.engine)
        store.setup()
        yield store


@contextlib.contextmanager
def _official_sync(db: Database, sqlite_normal: bool = False) -> Iterator[Any]:
    store_cls: Any
    if db.dialect == "sqlite":
        from langgraph.store.sqlite import SqliteStore as store_cls
    elif db.dialect == "postgres":
        from langgraph.store.postgres import PostgresStore as store_cls
    else:
        from langgraph.store.mysql.pymysql import PyMySQLStore as store_cls
    with store_cls.from_conn_string(db.native) as store:
        store.setup()
        if sqlite_normal:
            store.conn.execute("PRAGMA synchronous=NORMAL")
        yield store


@contextlib.asynccontextmanager
async def _lg_sqla_async(db: Database, sqlite_normal: bool = False) -> AsyncIterator[Any]:
    from lg_sqla.store import AsyncSQLAlchemyStore

    async with AsyncSQLAlchemyStore.from_conn_string(db.async_url) as store:
        if sqlite_normal:
            _sqlite_normal(store.engine.sync_engine)
            threaded = getattr(store, "_threaded", None)
            if threaded is not None:  # whole batches run on this pysqlite engine
                _sqlite_normal(threaded)
        await store.setup()
        yield store


@contextlib.asynccontextmanager
async def _official_async(db: Database, sqlite_normal: bool = False) -> AsyncIterator[Any]:
    store_cls: Any
    if db.dialect == "sqlite":
        from langgraph.store.sqlite.aio import AsyncSqliteStore as store_cls
    elif db.dialect == "postgres":
        from langgraph.store.postgres.aio import AsyncPostgresStore as store_cls
    else:
        from langgraph.store.mysql.aio import AIOMySQLStore as store_cls

        patch_aiomysql_bytes()
    async with store_cls.from_conn_string(db.native) as store:
        await store.setup()
        if sqlite_normal:
            await store.conn.execute("PRAGMA synchronous=NORMAL")
        yield store


def contenders(setup: str, is_async: bool) -> tuple[Contender, Contender]:
    """(lg_sqla's store, the official store) for one setup (databases.SETUPS) and mode."""
    normal = setup == "sqlite-normal"
    ours = Contender(
        OURS[is_async],
        True,
        is_async,
        functools.partial(_lg_sqla_async if is_async else _lg_sqla_sync, sqlite_normal=normal),
    )
    official = Contender(
        OFFICIAL[(base(setup), is_async)],
        False,
        is_async,
        functools.partial(_official_async if is_async else _official_sync, sqlite_normal=normal),
    )
    return ours, official
