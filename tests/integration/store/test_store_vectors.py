# mypy: disable-error-code="arg-type"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Semantic search ranked in the database where it can (sqlite-vec on SQLite, pgvector on
PostgreSQL) and in Python elsewhere: both give the same pages as each other and as
LangGraph's InMemoryStore, on every dialect, sync and async store.

Databases: the session's SQLite file (read natively through pysqlite3, which can load
sqlite-vec, and portably through Python's sqlite3, which cannot), the session's
PostgreSQL 15 (no pgvector: portable) and a second PostgreSQL server with pgvector
(tests/servers.py: pgvector_server), and MariaDB (portable: no vector functions before
11.7). The embedding is a deterministic fake (store_helpers.fake_embed), never a model.
"""

from __future__ import annotations

import math
import sqlite3
import struct
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite
import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory, checked_engine
from langgraph.store.base import IndexConfig, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore
from modes import store_from_url
from servers import create_database, sqlalchemy_url
from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_dbapi
from store_helpers import DIMS, Stores, fake_embed, open_store, root

from lg_sqla import ExactSearchWarning, InvalidInputError, SQLAlchemySaver, migrate
from lg_sqla.dialects import sqlite_vec_engine_options
from lg_sqla.models import store_vectors
from lg_sqla.store import SQLAlchemyStore

# The SQL function each native path ranks with: seeing it in the statements sent
# proves the ranking happened in the database.
NATIVE_FUNCTION = {"sqlite": "vec_distance_cosine", "postgres": "cosine_distance"}


def embed(texts: Sequence[str]) -> list[list[float]]:
    """fake_embed, and an all-zero vector for "zero" (cosine undefined: scored 0)."""
    return [[0.0] * DIMS if t == "zero" else fake_embed([t])[0] for t in texts]


def index(dims: int = DIMS, fields: list[str] | None = None) -> IndexConfig:
    return {"dims": dims, "embed": embed, "fields": fields or ["text", "extra"]}


@pytest.fixture(scope="module")
def pgvector_database(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """A migrated database on the PostgreSQL server that has pgvector."""
    admin = request.getfixturevalue("pgvector_admin_url")
    name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
    create_database(admin, name)
    url = sqlalchemy_url(admin, "psycopg", name)
    database = Backend("postgres", url, url)
    with checked_engine(database) as engine:
        SQLAlchemySaver(engine).setup()
    yield database


class _SQLiteWithoutExtensions:
    """Python's sqlite3 as a driver whose connections cannot load extensions, as this
    project's Python is built (CPython's may or may not be): the portable SQLite engine
    on any Python."""

    class Connection:  # what the store looks at: no enable_load_extension
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(sqlite3, name)


class Engines:
    """The engines of one dialect: ``native`` ranks in SQL where the dialect can,
    ``portable`` cannot (sqlite3 without extensions; a PostgreSQL without pgvector)."""

    def __init__(self, backend: Backend, request: pytest.FixtureRequest) -> None:
        self.name = backend.name
        self.portable = backend
        self.native = backend
        if backend.name == "postgres":
            self.native = request.getfixturevalue("pgvector_database")
        self.expect_native = backend.name in NATIVE_FUNCTION

    def shared(self) -> bool:
        """Whether both read the same database (else the corpus is put into each)."""
        return self.native is self.portable

    def native_kwargs(self, is_async: bool) -> dict[str, Any]:
        if self.name != "sqlite":
            return {}
        url = self.native.async_url if is_async else self.native.sync_url
        return sqlite_vec_engine_options(url, {})

    def portable_kwargs(self, is_async: bool) -> dict[str, Any]:
        if self.name != "sqlite":
            return {}
        if is_async:
            return {"module": AsyncAdapt_aiosqlite_dbapi(aiosqlite, _SQLiteWithoutExtensions())}
        return {"module": _SQLiteWithoutExtensions()}


@asynccontextmanager
async def both(
    backend: Backend, request: pytest.FixtureRequest, mode: str, config: IndexConfig
) -> AsyncIterator[tuple[Engines, Stores, Stores]]:
    engines = Engines(backend, request)
    async with (
        open_store(
            engines.native, mode, index=config, setup=True, **engines.native_kwargs(mode == "async")
        ) as n,
        open_store(
            engines.portable,
            mode,
            index=config,
            setup=True,
            **engines.portable_kwargs(mode == "async"),
        ) as p,
    ):
        yield engines, n, p


def record_statements(engine: sa.Engine) -> list[str]:
    sent: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    return sent


def corpus(r: str) -> list[PutOp]:
    """Items under three namespaces: one vector, two (best one counts), none (index=False,
    or no indexed field), an all-zero one; distinct texts, so no two scores tie."""
    ops = []
    for n in range(24):
        namespace = (r, "a") if n % 3 else (r, "b", "deep")
        value: dict[str, Any] = {"text": f"memory {n}", "n": n, "even": n % 2 == 0}
        if n % 5 == 0:
            value["extra"] = f"extra note {n}"
        index: Any = None if n % 7 else False  # n = 0, 7, 14, 21: no vectors
        ops.append(PutOp(namespace, f"k{n}", value, index=index))
    ops.append(PutOp((r, "a"), "untitled", {"body": "no indexed field", "n": 99}))
    ops.append(PutOp((r, "b"), "zero", {"text": "zero", "n": 50}))
    return ops


def mutations(r: str) -> list[PutOp]:
    """Updates that must move the vectors with the items."""
    return [
        PutOp((r, "a"), "k1", {"text": "memory 3 again", "n": 1}),  # re-embedded
        PutOp((r, "a"), "k2", {"text": "memory 2", "n": 2}, index=False),  # vectors go
        PutOp((r, "a"), "k4", None),  # deleted with its vectors
        PutOp((r, "a"), "k7", {"text": "memory 7", "n": 7}),  # now indexed
        PutOp((r, "b", "deep"), "k6", {"text": "memory 6", "n": 6}, index=["text"]),  # 1 field
    ]


def searches(r: str) -> list[SearchOp]:
    found = []
    filters: list[dict[str, Any] | None] = [None, {"even": True}, {"n": {"$gte": 10}}]
    for query in ("memory 3", "extra note 5", "memory 17"):
        for prefix in ((r,), (r, "a"), (r, "b")):
            for wanted in filters:
                for limit, offset in ((4, 0), (3, 2), (100, 0), (5, 17), (10, 200)):
                    found.append(SearchOp(prefix, wanted, limit, offset, query))
    return found


def in_memory(r: str, ops: list[PutOp]) -> InMemoryStore:
    reference = InMemoryStore(index=index())
    for op in ops:
        if op.index is False:
            # Ours (and PostgresStore) drop an item's vectors when it is re-put with
            # index=False; InMemoryStore keeps the old ones: start it from scratch.
            reference.delete(op.namespace, op.key)
        reference.put(op.namespace, op.key, op.value, index=op.index)
    return reference


def same_page(ours: list[Any], theirs: list[Any], what: str) -> None:
    assert [(h.namespace, h.key) for h in ours] == [(h.namespace, h.key) for h in theirs], what
    for a, b in zip(ours, theirs, strict=True):
        if a.score is None or b.score is None:
            assert a.score is b.score is None, what
        else:
            assert a.score == pytest.approx(b.score, abs=1e-5), what


def same_as_in_memory(ours: list[Any], theirs: list[Any], op: SearchOp) -> None:
    """Scored items: same order and scores. Items without vectors fill a short page on
    both, but InMemoryStore lists them in insertion order and ignores the offset among
    them, where ours order them as a search without query and page them: compared as
    sets on first pages."""
    what = repr(op)
    ours_scored = [h for h in ours if h.score is not None]
    theirs_scored = [h for h in theirs if h.score is not None]
    same_page(ours_scored, theirs_scored, what)
    if op.offset == 0:
        assert {h.key for h in ours} == {h.key for h in theirs}, what


async def put_corpus(stores: Sequence[Stores], ops: list[PutOp]) -> None:
    for s in stores:
        for op in ops:  # one at a time: distinct updated_at, as InMemoryStore's order
            await s.batch([op])


async def test_native_and_portable_rankings_match_in_memory_store(
    backend: Backend, request: pytest.FixtureRequest, mode: str
) -> None:
    async with both(backend, request, mode, index()) as (engines, native, portable):
        r = root()
        writers = [native] if engines.shared() else [native, portable]
        await put_corpus(writers, corpus(r))
        sent_native = record_statements(native.engine)
        sent_portable = record_statements(portable.engine)

        async def compare(ops: list[PutOp]) -> None:
            reference = in_memory(r, ops)
            for op in searches(r):
                sent_native.clear()
                got = await native.search(
                    op.namespace_prefix,
                    query=op.query,
                    filter=op.filter,
                    limit=op.limit,
                    offset=op.offset,
                )
                ranked_in_sql = [s for s in sent_native if "cosine" in s]
                if engines.expect_native:
                    # One statement, ranked and paged in SQL; no vectors read back.
                    assert len(ranked_in_sql) == 1, sent_native
                    assert NATIVE_FUNCTION[engines.name] in ranked_in_sql[0]
                    assert not any("store_vectors.embedding \nFROM" in s for s in sent_native)
                else:
                    assert ranked_in_sql == []
                sent_portable.clear()
                expected = await portable.search(
                    op.namespace_prefix,
                    query=op.query,
                    filter=op.filter,
                    limit=op.limit,
                    offset=op.offset,
                )
                assert not any("cosine" in s for s in sent_portable)
                same_page(got, expected, repr(op))
                theirs = reference.search(
                    op.namespace_prefix,
                    query=op.query,
                    filter=op.filter,
                    limit=op.limit,
                    offset=op.offset,
                )
                same_as_in_memory(got, theirs, op)

        await compare(corpus(r))
        await put_corpus(writers, mutations(r))
        await compare(corpus(r) + mutations(r))
        assert native.store.native_vectors is engines.expect_native
        assert portable.store.native_vectors is False

        # Several searches in one batch: one ranking statement, the same pages.
        ops = searches(r)[::9]
        sent_native.clear()
        batched = await native.batch(ops)
        if engines.expect_native:
            assert len([s for s in sent_native if "cosine" in s]) == 1
        for op, page in zip(ops, batched, strict=True):
            alone = await native.search(
                op.namespace_prefix,
                query=op.query,
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
            )
            same_page(page, alone, repr(op))


async def test_zero_vectors_score_zero_on_both_paths(
    backend: Backend, request: pytest.FixtureRequest, mode: str
) -> None:
    async with both(backend, request, mode, index()) as (engines, native, portable):
        r = root()
        writers = [native] if engines.shared() else [native, portable]
        await put_corpus(writers, corpus(r))
        for query in ("zero", "memory 5"):
            got = await native.search((r,), query=query, limit=40)
            expected = await portable.search((r,), query=query, limit=40)
            same_page(got, expected, query)
            scores = {h.key: h.score for h in got}
            assert scores["zero"] == 0.0
            if query == "zero":  # every scored item ties at 0: updated_at order
                assert {s for s in scores.values() if s is not None} == {0.0}


async def test_stored_vectors_of_other_dims_are_refused(
    backend: Backend, request: pytest.FixtureRequest, mode: str
) -> None:
    engines = Engines(backend, request)
    r = root()
    for database, kwargs in (
        (engines.native, engines.native_kwargs(mode == "async")),
        (engines.portable, engines.portable_kwargs(mode == "async")),
    ):
        async with open_store(database, mode, index=index(), setup=True, **kwargs) as s:
            await s.put((r, "x"), "k", {"text": "eight dims"})
            await s.put((r, "x"), "plain", {"text": "no vector"}, index=False)

        def short(texts: Sequence[str]) -> list[list[float]]:
            return [v[:4] for v in embed(texts)]

        fewer: IndexConfig = {"dims": 4, "embed": short, "fields": ["text"]}
        async with open_store(database, mode, index=fewer, setup=True, **kwargs) as s:
            with pytest.raises(InvalidInputError, match="index dims is 4"):
                await s.search((r, "x"), query="eight dims")
            # Without a query nothing is ranked: no vector is read, nothing refused.
            assert len(await s.search((r, "x"))) == 2
            # A put re-embeds the item: consistent again.
            await s.put((r, "x"), "k", {"text": "eight dims"})
            hits = await s.search((r, "x"), query="eight dims")
            assert hits[0].key == "k" and hits[0].score == pytest.approx(1.0, abs=1e-5)

        # An embedding function that does not return index dims: refused, nothing written.
        wrong: IndexConfig = {"dims": 4, "embed": embed, "fields": ["text"]}
        async with open_store(database, mode, index=wrong, setup=True, **kwargs) as s:
            with pytest.raises(InvalidInputError, match="returned 8 dimensions; index dims is 4"):
                await s.search((r, "x"), query="eight dims")
            with pytest.raises(InvalidInputError, match="returned 8 dimensions; index dims is 4"):
                await s.put((r, "x"), "k2", {"text": "x"})
            assert await s.get((r, "x"), "k2") is None


async def test_from_conn_string_ranks_natively_where_it_can(
    backend: Backend, request: pytest.FixtureRequest, mode: str
) -> None:
    engines = Engines(backend, request)
    url = engines.native.async_url if mode == "async" else engines.native.sync_url
    r = root()
    async with store_from_url(mode, url, index=index()) as store:
        await store.setup()
        await store.put((r,), "k", {"text": "memory 1"})
        hits = await store.search((r,), query="memory 1")
        native = store.target.native_vectors
    assert native is engines.expect_native
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)


def test_revision_0003_keeps_vectors_exactly(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """Upgrading to 0003 (PostgreSQL: bytes -> real[]) and back keeps every float32."""
    values = [1.0, -0.0, 0.1, -2.5e-3, 1e-45, -1.17549435e-38, 3.4028234e38, math.inf, -math.inf]
    packed = struct.pack(f"<{len(values)}f", *values)
    engine = make_engine(fresh_database)
    migrate.upgrade(engine, "0002_store_cache")
    row = {
        "prefix_hash": "p" * 32,
        "key_hash": "k" * 32,
        "field": "text",
        "embedding": packed,
        "created_at": sa.func.current_timestamp(),
    }
    legacy = sa.table(
        "store_vectors",
        *(sa.column(name) for name in ("prefix_hash", "key_hash", "field", "created_at")),
        sa.column("embedding", sa.LargeBinary),
    )
    with engine.begin() as conn:
        conn.execute(sa.insert(legacy).values(row))
    migrate.upgrade(engine)
    with engine.connect() as conn:
        stored = conn.execute(sa.select(store_vectors.c.embedding)).scalar_one()
    as_floats = list(stored) if isinstance(stored, list) else None
    if fresh_database.name == "postgres":
        assert as_floats is not None
        assert struct.pack(f"<{len(values)}f", *as_floats) == packed
    else:
        assert bytes(stored) == packed
    with engine.connect() as conn:
        migrate.downgrade_connection(conn, "0002_store_cache")
    with engine.connect() as conn:
        back = conn.execute(sa.select(legacy.c.embedding)).scalar_one()
    assert bytes(back) == packed


# distance_type: the score of each path, PostgresStore's for l2 and inner_product
# (InMemoryStore knows only cosine, tested above), computed here from the vectors.
def _negative_l2(a: Sequence[float], b: Sequence[float]) -> float:
    return -math.dist(a, b)


def _inner_product(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


SCORE = {"l2": _negative_l2, "inner_product": _inner_product}
# The SQL function each native path ranks a distance type with; None: ranked in Python.
DISTANCE_FUNCTION = {
    ("sqlite", "l2"): "vec_distance_l2",
    ("sqlite", "inner_product"): None,
    ("postgres", "l2"): "l2_distance",
    ("postgres", "inner_product"): "inner_product",
}


def expected_ranking(ops: list[PutOp], query: str, distance: str) -> list[tuple[str, float]]:
    """(key, score) of every indexed item of ``ops``, best first: the best score over the
    item's embedded fields (text, extra), as every path must rank them."""
    wanted = embed([query])[0]
    ranking = []
    for op in ops:
        assert op.value is not None
        fields = ["text", "extra"] if op.index is None else list(op.index or [])
        texts = [op.value[f] for f in fields if f in op.value]
        if texts:
            ranking.append((op.key, max(SCORE[distance](wanted, v) for v in embed(texts))))
    return sorted(ranking, key=lambda pair: -pair[1])


@pytest.mark.parametrize("distance", ["l2", "inner_product"])
async def test_distance_types_rank_alike_on_every_path(
    backend: Backend, request: pytest.FixtureRequest, mode: str, distance: str
) -> None:
    config = {**index(), "distance_type": distance}
    async with both(backend, request, mode, config) as (engines, native, portable):
        r = root()
        writers = [native] if engines.shared() else [native, portable]
        ops = corpus(r)
        await put_corpus(writers, ops)
        function = DISTANCE_FUNCTION.get((engines.name, distance))
        sent_native = record_statements(native.engine)
        for query in ("memory 3", "extra note 5"):
            sent_native.clear()
            got = await native.search((r,), query=query, limit=100)
            expected = await portable.search((r,), query=query, limit=100)
            # Every indexed item, in the order and with the scores computed here.
            ranking = expected_ranking(ops, query, distance)
            for page in (got, expected):
                scored = [(h.key, h.score) for h in page if h.score is not None]
                assert [k for k, _ in scored] == [k for k, _ in ranking], (query, page)
                assert [s for _, s in scored] == pytest.approx(
                    [s for _, s in ranking], rel=1e-5, abs=1e-5
                )
            if function is not None:
                assert any(function in s for s in sent_native), sent_native
            else:  # ranked in Python: no distance function in SQL
                assert not any("vec_distance" in s for s in sent_native), sent_native
        # native_vectors says which path ranks: the portable one for inner_product on
        # SQLite, though sqlite-vec is there.
        assert native.store.native_vectors is (function is not None)
        # Filters, prefixes and pages: the native page is the portable one.
        for op in searches(r)[::11]:
            got = await native.search(
                op.namespace_prefix,
                query=op.query,
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
            )
            expected = await portable.search(
                op.namespace_prefix,
                query=op.query,
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
            )
            same_page(got, expected, repr(op))


async def test_bad_vector_options_are_refused(
    backend: Backend, request: pytest.FixtureRequest, mode: str
) -> None:
    engines = Engines(backend, request)
    bad: list[tuple[dict[str, Any], str]] = [
        ({"distance_type": "hamming"}, "distance_type must be one of 'cosine', 'l2'"),
        ({"ann_index_config": {"kind": "annoy"}}, "kind must be 'hnsw', 'ivfflat' or 'flat'"),
        ({"ann_index_config": {"vector_type": "bit"}}, "vector_type must be 'vector' or"),
        ({"ann_index_config": {"kind": "hnsw", "lists": 4}}, "for hnsw takes m, ef_construction"),
        ({"ann_index_config": {"kind": "ivfflat", "lists": 0}}, "lists must be an int >= 1"),
    ]
    for options, message in bad:
        with pytest.raises(InvalidInputError, match=message):
            async with open_store(engines.portable, mode, index={**index(), **options}):
                pass
    # kind "flat" is exact search: accepted everywhere, without a word.
    flat: Any = {**index(), "ann_index_config": {"kind": "flat"}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        async with open_store(engines.portable, mode, index=flat, setup=True) as s:
            await s.put((root(),), "k", {"text": "memory 1"})


# The index options LangGraph's PostgresStore accepts (and LangGraph's own store test
# suites pass to every store): a speed hint that every database must take.
PORTABLE_ANN_OPTIONS: list[dict[str, Any]] = [
    {"kind": "hnsw"},
    {"kind": "hnsw", "m": 8, "ef_construction": 32, "ef_search": 20},
    {"kind": "ivfflat", "lists": 2, "probes": 2},
    {"kind": "ivfflat", "nlist": 2},
    {"kind": "hnsw", "vector_type": "halfvec"},
    {"kind": "ivfflat", "vector_type": "halfvec", "lists": 1},
]


@pytest.mark.parametrize(
    "options", PORTABLE_ANN_OPTIONS, ids=lambda o: "-".join(map(str, o.values()))
)
async def test_index_options_a_database_cannot_honour_search_exactly(
    backend: Backend, request: pytest.FixtureRequest, mode: str, options: dict[str, Any]
) -> None:
    """SQLite, MariaDB and a PostgreSQL without pgvector have no approximate index:
    the store opens, says so once (ExactSearchWarning, naming the option and what it
    does instead) and returns exactly the pages of a store configured without it."""
    engines = Engines(backend, request)
    config: Any = {**index(), "ann_index_config": options}
    r = root()
    texts = [f"memory {n}" for n in range(12)]
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        async with (
            open_store(engines.portable, mode, index=config, setup=True) as hinted,
            open_store(engines.portable, mode, index=index()) as exact,
        ):
            for n, text in enumerate(texts):
                await hinted.put((r, "notes"), f"k{n}", {"text": text, "n": n % 3})
            for query, where in [("memory 3", None), ("memory 7", {"n": 1})]:
                got = await hinted.search((r,), query=query, filter=where, limit=5)
                expected = await exact.search((r,), query=query, filter=where, limit=5)
                assert [(i.key, i.score) for i in got] == [(i.key, i.score) for i in expected]
                assert got[0].key == f"k{query.split()[1]}"  # its own text ranks first
    ours = [w for w in said if issubclass(w.category, ExactSearchWarning)]
    assert len(ours) == 1, [str(w.message) for w in said]
    message = str(ours[0].message)
    assert f"ann_index_config {options['kind']!r}" in message
    assert "exactly" in message
    assert options.get("vector_type", "vector") in message


def planned_indexes(engine: sa.Engine, statement: str, params: Any) -> str:
    """The plan PostgreSQL makes for a statement the store sent, sequential scans and
    sorts off: the corpus is small, the planner would rather read it all and sort, but
    the index must be able to serve the statement as sent."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_sort = off")
        cursor.execute("EXPLAIN " + statement, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.close()
        raw.rollback()
        return plan
    finally:
        raw.close()


@pytest.mark.parametrize(
    ("distance", "options", "setting"),
    [
        ("cosine", {"kind": "hnsw", "m": 8}, None),
        ("l2", {"kind": "hnsw", "m": 8, "ef_search": 60}, ("hnsw.ef_search", "60")),
        ("inner_product", {"kind": "ivfflat", "lists": 1, "probes": 2}, ("ivfflat.probes", "2")),
    ],
)
async def test_approximate_index_is_built_and_serves_filtered_searches(
    request: pytest.FixtureRequest,
    mode: str,
    distance: str,
    options: dict[str, Any],
    setting: tuple[str, str] | None,
) -> None:
    database: Backend = request.getfixturevalue("pgvector_database")
    kind = options["kind"]
    config: Any = {**index(), "distance_type": distance, "ann_index_config": options}
    name = f"store_vectors_{kind}_vector_{distance}_{DIMS}"
    r = root()
    # Items with vectors of other dims must not break the partial index: built over rows
    # already there (setup() on an existing table), and inserted after.
    short: IndexConfig = {"dims": 4, "embed": lambda texts: [v[:4] for v in embed(texts)]}
    async with open_store(database, mode, index=short, setup=True) as other:
        await other.put((root(), "other"), "short", {"text": "four dims"})
    async with (
        open_store(database, mode, index=config, setup=True) as approximate,
        open_store(database, mode, index=config, setup=True) as again,  # idempotent
        open_store(database, mode, index={**index(), "distance_type": distance}) as exact,
    ):
        del again
        looker = database.engine()  # sync, for the catalog and EXPLAIN in either mode
        with looker.connect() as conn:
            found = (
                conn.execute(
                    sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = :name"),
                    {"name": name},
                )
                .scalars()
                .all()
            )
        assert len(found) == 1
        assert f"USING {kind}" in found[0] and f"vector_{_OPS[distance]}" in found[0]
        await put_corpus([approximate], [op for op in corpus(r) if op.key != "zero"])
        sent: list[tuple[str, Any]] = []

        def record(conn: Any, cursor: Any, statement: str, params: Any, *args: Any) -> None:
            sent.append((statement, params))

        sa.event.listen(approximate.engine, "before_cursor_execute", record)
        served, exactly = 0, 0
        for op in searches(r)[::13]:
            sent.clear()
            got = await approximate.search(
                op.namespace_prefix,
                query=op.query,
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
            )
            expected = await exact.search(
                op.namespace_prefix,
                query=op.query,
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
            )
            # A corpus this small is within the index's reach: the exact pages.
            same_page(got, expected, repr(op))
            statement, params = next(s for s in sent if _OPERATOR[distance] in s[0])
            # The search options, for the search's transaction (set_config(..., true)).
            # Custom plans always (a prepared statement's generic plan sorts instead of
            # scanning the index). An HNSW scan returns at most ef_search rows: raised to
            # the rows fetched ((offset + limit) x 2 fields x 2 + 1), from pgvector's 40
            # or the option's.
            configured = [
                {p[f"name{n}"]: p[f"value{n}"] for n in range(len(p) // 2)}
                for s, p in sent
                if "set_config" in s
            ]
            fetched = (op.offset + op.limit) * 2 * 2 + 1
            wanted = {"plan_cache_mode": "force_custom_plan"}
            if kind == "hnsw" and fetched > int(setting[1] if setting else 40):
                wanted["hnsw.ef_search"] = str(fetched)
            elif setting:
                wanted[setting[0]] = setting[1]
            assert configured == [wanted]
            # Pages the index cannot fill (fewer filtered items with vectors than
            # offset + limit) are ranked again exactly.
            if any(_EXACT_FUNCTION[distance] in s for s, _ in sent):
                exactly += 1
            else:
                served += 1
            plan = planned_indexes(looker, statement, params)
            assert f"Index Scan using {name}" in plan, plan
            if op.filter:
                assert "Filter" in plan or "Join Filter" in plan or "Cond" in plan, plan
        looker.dispose()
        assert served and exactly, (served, exactly)
        # Several searches in one batch: one statement for all, the same pages.
        ops = searches(r)[::29]
        sent.clear()
        batched = await approximate.batch(ops)
        assert len([s for s, _ in sent if _OPERATOR[distance] in s]) == 1
        for op, page in zip(ops, batched, strict=True):
            alone = await exact.search(
                op.namespace_prefix,
                query=op.query,
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
            )
            same_page(page, alone, repr(op))
        if mode == "sync":  # the pooled connection is as it was
            with approximate.engine.connect() as conn:
                assert conn.execute(sa.text("SHOW plan_cache_mode")).scalar() == "auto"
                if setting is not None:
                    assert conn.execute(sa.text(f"SHOW {setting[0]}")).scalar() != setting[1]


_OPS = {"cosine": "cosine_ops", "l2": "l2_ops", "inner_product": "ip_ops"}
_OPERATOR = {"cosine": "<=>", "l2": "<->", "inner_product": "<#>"}
_EXACT_FUNCTION = {
    "cosine": "cosine_distance(",
    "l2": "l2_distance(",
    "inner_product": "inner_product(",
}


async def test_halfvec_index_where_pgvector_has_it(
    request: pytest.FixtureRequest, mode: str
) -> None:
    """halfvec came with pgvector 0.7: built there; before (the test server's pgserver
    build has 0.6.2) the index is built over full-precision vectors, with one warning
    naming the version the database has."""
    database: Backend = request.getfixturevalue("pgvector_database")
    config: Any = {**index(), "ann_index_config": {"kind": "hnsw", "vector_type": "halfvec"}}
    looker = database.engine()
    try:
        with looker.connect() as conn:
            version = conn.execute(
                sa.text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
            ).scalar_one()
        if tuple(int(p) for p in version.split(".")[:2]) >= (0, 7):
            async with open_store(database, mode, index=config, setup=True) as s:
                r = root()
                await s.put((r,), "k", {"text": "memory 1"})
                hits = await s.search((r,), query="memory 1", limit=1)
                assert hits[0].score == pytest.approx(1.0, abs=1e-3)  # half precision
            with looker.connect() as conn:
                names = conn.execute(sa.text("SELECT indexname FROM pg_indexes")).scalars().all()
            assert f"store_vectors_hnsw_halfvec_cosine_{DIMS}" in names
        else:
            with pytest.warns(ExactSearchWarning, match=f"needs pgvector >= 0.7, .* {version}"):
                async with open_store(database, mode, index=config, setup=True) as s:
                    r = root()
                    await s.put((r,), "k", {"text": "memory 1"})
                    hits = await s.search((r,), query="memory 1", limit=1)
                    assert hits[0].score == pytest.approx(1.0, abs=1e-6)  # full precision
            with looker.connect() as conn:
                names = conn.execute(sa.text("SELECT indexname FROM pg_indexes")).scalars().all()
            assert f"store_vectors_hnsw_vector_cosine_{DIMS}" in names
            assert f"store_vectors_hnsw_halfvec_cosine_{DIMS}" not in names
    finally:
        looker.dispose()


@pytest.mark.parametrize("schema", [None, "vector's schema"])
def test_approximate_index_in_a_schema_and_through_downgrade(
    request: pytest.FixtureRequest, schema: str | None
) -> None:
    """The index goes where the store's tables are (schema=), and downgrading below
    revision 0003 (real[] back to bytes, which the index's cast cannot take) drops it;
    setup() after the upgrade builds it again."""
    admin = request.getfixturevalue("pgvector_admin_url")
    name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
    create_database(admin, name)
    engine = sa.create_engine(sqlalchemy_url(admin, "psycopg", name))
    index_name = f"store_vectors_hnsw_vector_cosine_{DIMS}"
    config: Any = {**index(), "ann_index_config": {"kind": "hnsw"}}
    try:
        if schema is not None:
            with engine.begin() as conn:
                conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        store = SQLAlchemyStore(engine, index=config, schema=schema)
        store.setup()
        store.put(("r",), "k", {"text": "memory 1"})

        def indexes() -> list[tuple[str, str]]:
            with engine.connect() as conn:
                rows = conn.execute(
                    sa.text(
                        "SELECT schemaname, indexname FROM pg_indexes"
                        " WHERE indexname LIKE 'store_vectors_hnsw%'"
                    )
                )
                return [tuple(row) for row in rows]

        assert indexes() == [(schema or "public", index_name)]
        with store.engine.connect() as conn:
            migrate.downgrade_connection(conn, "0002_store_cache")
        assert indexes() == []
        store.setup()  # upgrades, and builds the index again
        assert indexes() == [(schema or "public", index_name)]
        hits = store.search(("r",), query="memory 1")
        assert [h.key for h in hits] == ["k"] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    finally:
        engine.dispose()


# LangGraph's own store test suites (langgraph-checkpoint-postgres) run their vector
# tests over a grid of index options: each approximate index kind, full or half
# precision vectors, each distance type. Each option set of that grid, with the kinds
# and vector types spread over the three distances.
LANGGRAPH_GRID: list[tuple[str, str, str]] = [
    ("hnsw", "vector", "cosine"),
    ("hnsw", "halfvec", "l2"),
    ("hnsw", "halfvec", "inner_product"),
    ("ivfflat", "vector", "l2"),
    ("ivfflat", "vector", "inner_product"),
    ("ivfflat", "halfvec", "cosine"),
]


async def _vector_scenario(hinted: Stores, exact: Stores, r: str) -> None:
    """What LangGraph's vector store tests do with a store (insert with embedding, update
    re-embeds, filtered search, pagination, unindexed puts, deletes), each search
    answered exactly as by a store configured without the index options."""

    async def same(namespace: tuple[str, ...], **search: Any) -> list[Any]:
        got: list[Any] = await hinted.search(namespace, **search)
        expected = await exact.search(namespace, **search)
        assert [(i.key, i.score) for i in got] == [(i.key, i.score) for i in expected], search
        return got

    ns = (r, "docs")
    for n in range(10):
        await hinted.put(ns, f"k{n}", {"text": f"memory {n}", "n": n % 3})
    assert (await same((r,), query="memory 4", limit=4))[0].key == "k4"
    await hinted.put(ns, "k2", {"text": "memory 8", "n": 2})  # re-embedded: as k8
    assert {i.key for i in (await same(ns, query="memory 8", limit=2))} == {"k8", "k2"}
    filtered = await same(ns, query="memory 5", filter={"n": 1}, limit=10)
    assert filtered and all(i.value["n"] == 1 for i in filtered)
    whole = await same(ns, query="memory 6", limit=6)
    pages = [await same(ns, query="memory 6", limit=3, offset=o) for o in (0, 3)]
    assert [i.key for i in pages[0] + pages[1]] == [i.key for i in whole]
    await hinted.put(ns, "plain", {"text": "memory 6"}, index=False)  # no vector
    await same(ns, query="memory 6", limit=20)
    await hinted.delete(ns, "k6")
    assert "k6" not in {i.key for i in await same(ns, query="memory 6", limit=20)}


async def test_langgraph_grid_of_index_options_searches_exactly(
    backend: Backend, mode: str
) -> None:
    """Every option set of LangGraph's grid (``LANGGRAPH_GRID``) opens a store on every
    database; where no approximate index can be built (SQLite, MariaDB, PostgreSQL
    without pgvector), each store says so once and answers LangGraph's vector scenario
    exactly as a store without the options."""
    for kind, vector_type, distance in LANGGRAPH_GRID:
        options = {"kind": kind, "vector_type": vector_type}
        hinted_config: Any = {**index(), "distance_type": distance, "ann_index_config": options}
        exact_config: Any = {**index(), "distance_type": distance}
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            async with (
                open_store(backend, mode, index=hinted_config, setup=True) as hinted,
                open_store(backend, mode, index=exact_config) as exact,
            ):
                await _vector_scenario(hinted, exact, root())
        ours = [str(w.message) for w in said if issubclass(w.category, ExactSearchWarning)]
        assert len(ours) == 1, (kind, vector_type, distance, ours)
        assert f"ann_index_config {kind!r}" in ours[0] and vector_type in ours[0]
