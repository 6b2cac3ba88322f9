"""A page of ``list_namespaces`` costs the database the same work under a prefix of many
namespaces as under one of few.

``store_items.prefix_head`` is in the order namespaces are listed in (revision
0007_store_namespace_index), so a page is an index walk that stops after its
namespaces; it read, deduplicated and sorted every namespace under the prefix before
(SQLite, 10,000 namespaces: 8.5 ms a page). Measured, as test_query_plans.py does,
by each database's own account of the work (SQLite VM instructions, PostgreSQL rows
through the plan's nodes, MariaDB Handler_read_* counters), not by time.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import sqlalchemy as sa
from backends import Backend, EngineFactory
from langgraph.store.base import GetOp, Item, PutOp
from store_helpers import fake_index, root
from test_query_plans import _captured, _work_of

from lg_sqla.store import SQLAlchemyStore

FEW, MANY = 30, 600  # namespaces under the prefix
PAGE = 10


def _fill(store: SQLAlchemyStore, root: str, n: int) -> None:
    """n namespaces under (root, "ns"), two items each; labels with "-" and a "."-free
    neighbour that sorts between them by code point ("n1-", Python puts it after "n1")."""
    ops = [
        PutOp((root, "ns", f"n{i}", *(("x",) if i % 2 else ())), key, {"i": i})
        for i in range(n)
        for key in ("a", "b")
    ]
    ops += [PutOp((root, "ns", "n1-"), "a", {}), PutOp((root, "other"), "a", {})]
    store.batch(ops)


def test_a_page_of_namespaces_does_not_grow_with_the_namespaces(
    make_engine: EngineFactory, backend: Backend
) -> None:
    engine = make_engine(backend)
    store = SQLAlchemyStore(engine)
    few, many = f"few-{uuid.uuid4().hex[:8]}", f"many-{uuid.uuid4().hex[:8]}"
    _fill(store, few, FEW)
    _fill(store, many, MANY)
    if backend.name == "postgres":
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")

    def page(root: str, offset: int = 0) -> list[tuple[str, ...]]:
        return store.list_namespaces(prefix=(root, "ns"), limit=PAGE, offset=offset)

    # The pages are Python's order of the tuples (not the joined text's: "n1-" after
    # ("n1", "x"), where "-" sorts before ".").
    everything = store.list_namespaces(prefix=(many, "ns"), limit=MANY + 10)
    assert everything == sorted(everything) and len(everything) == MANY + 1
    assert page(many) == everything[:PAGE]
    assert page(many, offset=PAGE) == everything[PAGE : 2 * PAGE]
    assert ("n1", "x") < ("n1-",) and everything.index((many, "ns", "n1-")) == 2

    on_few = _work_of(backend, engine, lambda: page(few))
    on_many = _work_of(backend, engine, lambda: page(many))
    assert on_few > 0
    # The same page read either way; allow for a deeper index.
    assert on_many <= 1.5 * on_few + 50, (on_few, on_many)


def test_the_work_counter_sees_a_namespace_list_that_grows(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """The measure above would catch the regression: every namespace under the prefix,
    distinct and sorted (the statement before revision 0007), counts as more work."""
    engine = make_engine(backend)
    store = SQLAlchemyStore(engine)
    few, many = f"few-{uuid.uuid4().hex[:8]}", f"many-{uuid.uuid4().hex[:8]}"
    _fill(store, few, FEW)
    _fill(store, many, MANY)
    if backend.name == "postgres":
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
    every_namespace = sa.text(
        "SELECT DISTINCT prefix FROM store_items WHERE prefix_head >= :low AND prefix_head < :high"
    )

    def work(root: str) -> int:
        low = f"{root}\x01ns"

        def run() -> None:
            with engine.connect() as conn:
                conn.execute(every_namespace, {"low": low, "high": low + "\x02"}).all()

        return _work_of(backend, engine, run)

    assert work(many) > 1.5 * work(few) + 50


def _sent_parameters(engine: sa.Engine, call: Callable[[], object]) -> list[int]:
    """How many bound parameters each statement ``call`` sends has."""
    with _captured(engine) as sent:
        call()
    return [len(params) if params else 0 for _, params in sent]


def test_a_semantic_search_sends_the_same_statements_for_few_and_many_candidates(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """Native ranking is one statement; portable ranking (MariaDB, PostgreSQL without
    pgvector, SQLite without sqlite-vec) reads the candidates' vectors by the search's
    own conditions: it sent every candidate's key as two bound parameters, 2,000 a
    search of 1,000 items (most of its client time went to naming them)."""
    engine = make_engine(backend)
    store = SQLAlchemyStore(engine, index=fake_index(["text"]))
    few, many = (root(), "few"), (root(), "many")
    store.batch(
        [PutOp(few, f"k{i}", {"text": f"memory {i}"}) for i in range(5)]
        + [PutOp(many, f"k{i}", {"text": f"memory {i}"}) for i in range(60)]
    )
    store.search(few, query="memory 1", limit=3)  # (PostgreSQL asks for pgvector once)
    on_few = _sent_parameters(engine, lambda: store.search(few, query="memory 1", limit=3))
    on_many = _sent_parameters(engine, lambda: store.search(many, query="memory 1", limit=3))
    assert on_few == on_many and len(on_few) <= 2, (on_few, on_many)
    assert [item.key for item in store.search(many, query="memory 7", limit=1)] == ["k7"]


def test_a_get_of_a_few_keys_does_not_grow_with_the_items(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """A batch's gets of a few keys (``_read.keys_statement``) are primary-key lookups:
    the same work with 20 items in the table as with 1,000 more (a row-value ``IN`` of
    the pairs found no index on SQLite 3.40 and, with the expiry condition, read every
    item of the table)."""
    engine = make_engine(backend)
    store = SQLAlchemyStore(engine)
    space, other = f"space-{uuid.uuid4().hex[:8]}", f"other-{uuid.uuid4().hex[:8]}"
    ops = [GetOp((space, "n1"), "k1"), GetOp((space, "n2"), "k2"), GetOp((space, "n3"), "k9")]

    def fill(root: str, n: int) -> None:
        store.batch([PutOp((root, f"n{i % 5}"), f"k{i}", {"i": i}) for i in range(n)])
        if backend.name == "postgres":
            with engine.begin() as conn:
                conn.exec_driver_sql("ANALYZE")

    fill(space, 20)
    on_few = _work_of(backend, engine, lambda: store.batch(ops))
    fill(other, 1000)
    found = store.batch(ops)
    assert [item.value["i"] if isinstance(item, Item) else item for item in found] == [1, 2, None]
    on_many = _work_of(backend, engine, lambda: store.batch(ops))
    assert on_few > 0
    assert on_many <= 1.5 * on_few + 50, (on_few, on_many)
