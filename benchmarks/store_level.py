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

Then, on stores opened with an index (``INDEX``: a deterministic fake embedding of
``DIMS`` dimensions, no model, so both stores embed at the same cost):

5. semantic search (``query=``, ``limit=10``) over a namespace of 1,000 and of
   10,000 items, each ranked natively where the store can (sqlite-vec on SQLite for
   both stores; lg_sqla also pgvector, where the server has it); a store that has
   no semantic search on a database (the official MariaDB store; the official
   PostgreSQL store without pgvector) gets no figure;
6. ``list_namespaces`` under a prefix holding 10,000 namespaces (``limit=100``).

The items of 5. and 6. are put before the clock starts, in batches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
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
    "semantic_1k_per_s": ("semantic search (1k items)", "calls/s", True),
    "semantic_10k_per_s": ("semantic search (10k items)", "calls/s", True),
    "list_namespaces_10k_per_s": ("list_namespaces (10k namespaces)", "calls/s", True),
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
DIMS = 64
FILL_BATCH = 500  # items put per batch before the clock starts


def _embed(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic stand-in for an embedding model: DIMS floats from a hash."""
    vectors = []
    for text in texts:
        digest = hashlib.blake2b(text.encode(), digest_size=DIMS).digest()
        vectors.append([(b - 127.5) / 127.5 for b in digest])
    return vectors


INDEX: dict[str, Any] = {"dims": DIMS, "embed": _embed, "fields": ["text"]}


@dataclasses.dataclass
class Opened:
    """What a contender opens on one fresh database: its store without an index, and
    one with ``INDEX`` (None where it has no semantic search on that database)."""

    plain: Any
    indexed: Any | None


def _semantic_sizes(shape: Shape) -> dict[int, str]:
    """Items searched -> metric: 1k and 10k (``shape.store_items``; --quick: fewer)."""
    return {shape.store_items // 10: "semantic_1k_per_s", shape.store_items: "semantic_10k_per_s"}


def _fill_ops(shape: Shape) -> Iterator[tuple[bool, list[Op]]]:
    """The items of the semantic and list_namespaces measurements, in batches, each
    with whether it goes to the indexed store."""
    namespaces = [
        PutOp((ROOT, "ns", f"n{i}", "x"), "k", {"n": i}) for i in range(shape.store_items)
    ]
    for start in range(0, len(namespaces), FILL_BATCH):
        yield False, list(namespaces[start : start + FILL_BATCH])
    for size in _semantic_sizes(shape):
        ns = (ROOT, "mem", str(size))
        items = [PutOp(ns, f"m{i}", {"text": f"memory {i} of {size}"}) for i in range(size)]
        for start in range(0, size, FILL_BATCH):
            yield True, list(items[start : start + FILL_BATCH])


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


def run_sync(opened: Opened, shape: Shape) -> dict[str, float]:
    store = opened.plain
    n = shape.store_calls
    warm = (ROOT, "warm-up")
    for i in range(WARM_UP):  # connections, prepared statements, schema check
        store.put(warm, f"w{i}", _value(i))
        store.get(warm, f"w{i}")
        store.search(warm, filter={"tag": i % 5}, limit=10)
    store.batch(_batch(0)[1:])

    def timed(call: Callable[[int], Any], calls: int = n) -> tuple[float, list[Any]]:
        spent, out = 0.0, []
        for i in range(calls):
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
    rates = _rates(n, put, get, search, batch)
    few = max(3, n // 10)
    for indexed, ops in _fill_ops(shape):
        if indexed and opened.indexed is not None:
            opened.indexed.batch(ops)
        elif not indexed:
            store.batch(ops)
    listed, pages = timed(lambda i: store.list_namespaces(prefix=(ROOT, "ns"), limit=100), few)
    assert all(len(page) == 100 for page in pages)
    rates["list_namespaces_10k_per_s"] = few / listed
    if opened.indexed is not None:
        for size, metric in _semantic_sizes(shape).items():
            ns = (ROOT, "mem", str(size))
            spent, hits = timed(
                lambda i, ns=ns: opened.indexed.search(ns, query=f"memory {i}", limit=10), few
            )
            assert all(len(h) == 10 for h in hits)
            rates[metric] = few / spent
    return rates


def _rates(n: int, put: float, get: float, search: float, batch: float) -> dict[str, float]:
    return {
        "put_per_s": n / put,
        "get_per_s": n / get,
        "search_per_s": n / search,
        "batch_per_s": n / batch,
    }


# --- async ---------------------------------------------------------------------------


async def run_async(opened: Opened, shape: Shape) -> dict[str, float]:
    store = opened.plain
    n = shape.store_calls
    warm = (ROOT, "warm-up")
    for i in range(WARM_UP):
        await store.aput(warm, f"w{i}", _value(i))
        await store.aget(warm, f"w{i}")
        await store.asearch(warm, filter={"tag": i % 5}, limit=10)
    await store.abatch(_batch(0)[1:])

    async def timed(call: Callable[[int], Any], calls: int = n) -> tuple[float, list[Any]]:
        spent, out = 0.0, []
        for i in range(calls):
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
    rates = _rates(n, put, get, search, batch)
    few = max(3, n // 10)
    for indexed, ops in _fill_ops(shape):
        if indexed and opened.indexed is not None:
            await opened.indexed.abatch(ops)
        elif not indexed:
            await store.abatch(ops)
    listed, pages = await timed(
        lambda i: store.alist_namespaces(prefix=(ROOT, "ns"), limit=100), few
    )
    assert all(len(page) == 100 for page in pages)
    rates["list_namespaces_10k_per_s"] = few / listed
    if opened.indexed is not None:
        for size, metric in _semantic_sizes(shape).items():
            ns = (ROOT, "mem", str(size))
            spent, hits = await timed(
                lambda i, ns=ns: opened.indexed.asearch(ns, query=f"memory {i}", limit=10), few
            )
            assert all(len(h) == 10 for h in hits)
            rates[metric] = few / spent
    return rates


# --- the contenders ------------------------------------------------------------------


@contextlib.contextmanager
def _lg_sqla_sync(
    db: Database, sqlite_normal: bool = False, with_index: bool = True
) -> Iterator[Opened]:
    from lg_sqla.store import SQLAlchemyStore

    if not with_index:
        with SQLAlchemyStore.from_conn_string(db.sync_url) as plain:
            if sqlite_normal:
                _sqlite_normal(plain.engine)
            plain.setup()
            yield Opened(plain, None)
        return
    with (
        SQLAlchemyStore.from_conn_string(db.sync_url) as store,
        SQLAlchemyStore.from_conn_string(db.sync_url, index=INDEX) as indexed,  # type: ignore[arg-type]
    ):
        if sqlite_normal:
            _sqlite_normal(store.engine)
            _sqlite_normal(indexed.engine)
        store.setup()
        indexed.setup()
        yield Opened(store, indexed)


def _official_sqlite_vec_connection(path: str) -> Any:
    """A sqlite3-compatible connection that can load sqlite-vec (pysqlite3; Python's
    sqlite3 here cannot), opened as SqliteStore.from_conn_string opens its own."""
    from pysqlite3 import dbapi2  # type: ignore[import-not-found,import-untyped,unused-ignore]

    return dbapi2.connect(path, check_same_thread=False, isolation_level=None)


@contextlib.contextmanager
def _official_sync(
    db: Database, sqlite_normal: bool = False, with_index: bool = True
) -> Iterator[Opened]:
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
        # No pgvector on the benchmark's server; MariaDB: none.
        if db.dialect != "sqlite" or not with_index:
            yield Opened(store, None)
            return
        conn = _official_sqlite_vec_connection(db.native)
        try:
            indexed = store_cls(conn, index=INDEX)
            indexed.setup()
            if sqlite_normal:
                conn.execute("PRAGMA synchronous=NORMAL")
            yield Opened(store, indexed)
        finally:
            conn.close()


@contextlib.asynccontextmanager
async def _lg_sqla_async(
    db: Database, sqlite_normal: bool = False, with_index: bool = True
) -> AsyncIterator[Opened]:
    from lg_sqla.store import AsyncSQLAlchemyStore

    if not with_index:
        async with AsyncSQLAlchemyStore.from_conn_string(db.async_url) as plain:
            if sqlite_normal:
                _sqlite_normal(plain.engine.sync_engine)
                threaded = getattr(plain, "_threaded", None)
                if threaded is not None:  # whole batches run on this pysqlite engine
                    _sqlite_normal(threaded)
            await plain.setup()
            yield Opened(plain, None)
        return
    async with (
        AsyncSQLAlchemyStore.from_conn_string(db.async_url) as store,
        AsyncSQLAlchemyStore.from_conn_string(db.async_url, index=INDEX) as indexed,  # type: ignore[arg-type]
    ):
        for each in (store, indexed):
            if sqlite_normal:
                _sqlite_normal(each.engine.sync_engine)
                threaded = getattr(each, "_threaded", None)
                if threaded is not None:  # whole batches run on this pysqlite engine
                    _sqlite_normal(threaded)
            await each.setup()
        yield Opened(store, indexed)


@contextlib.asynccontextmanager
async def _official_async(
    db: Database, sqlite_normal: bool = False, with_index: bool = True
) -> AsyncIterator[Opened]:
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
        if db.dialect != "sqlite" or not with_index:
            yield Opened(store, None)
            return
        import aiosqlite

        conn = aiosqlite.Connection(
            functools.partial(_official_sqlite_vec_connection, db.native), iter_chunk_size=64
        )
        async with conn:
            indexed = store_cls(conn, index=INDEX)
            await indexed.setup()
            if sqlite_normal:
                await conn.execute("PRAGMA synchronous=NORMAL")
            yield Opened(store, indexed)


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
