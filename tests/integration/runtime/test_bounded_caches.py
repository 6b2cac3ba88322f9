"""What the direct path remembers stays bounded, and belongs to its statement.

A long-running server calls ``list`` with a filter, ``delete_thread``, the store's
searches and namespace lists thousands of times a minute, each with a statement
built per call or per shape. What users rely on: memory stays flat (before, every
such call left its statement in the path decisions: ~76 KB per ``list`` with a
filter), and no call ever reads with another statement's column names (before, a
statement's column names were kept under the ``id()`` of its driver form, and a new
statement at a freed address got the old one's: ``ValueError`` from ``zip``, or
silently wrong names). ``benchmarks/cache_memory.py`` runs the same kinds of calls
100,000 times each (tracemalloc; docs/configuration.md has its figures); here
fewer, so that the test stays short.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from backends import Backend
from sqlalchemy.sql import Executable

from benchmarks.cache_memory import Owners, cache_sizes, call_of, owners
from lg_sqla.runtime.direct import STATEMENTS_MAX, DirectCompiler
from lg_sqla.runtime.drivers import direct_driver

# The store's LRU of statements by shape (store._common.Statements).
STORE_SHAPES = 512
# Far under what these calls used to leave behind: 300 calls of list with a filter
# ~23 MB (~76 KB each), 1,000 of delete_thread ~3 MB. Measured now: under 40 KB.
GROWTH_LIMIT = 512 * 1024


@pytest.fixture
def found(backend: Backend) -> Iterator[Owners]:
    with owners(backend.sync_url) as made:
        yield made


@pytest.mark.parametrize(
    ("kind", "calls"),
    # (list with a filter compiles its statement at every call: slow under tracemalloc)
    [("list_filter", 300), ("delete_thread", 1_000)],
)
def test_calls_with_per_call_statements_keep_memory_flat(
    found: Owners, kind: str, calls: int
) -> None:
    call = call_of(kind, found)
    tracemalloc.start()  # from the first call: what a cache frees later was traced
    try:
        for i in range(calls):
            call(i)
        sizes = cache_sizes(found)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(calls, 2 * calls):
            call(i)
        gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert cache_sizes(found) == sizes
    assert growth < GROWTH_LIMIT, f"{growth} bytes more after {calls} calls of {kind}"


@pytest.mark.parametrize("kind", ["search_filter", "list_namespaces"])
def test_statements_by_shape_stay_within_the_stores_bound(found: Owners, kind: str) -> None:
    """Past the store's LRU of shapes, what it drops is dropped everywhere (the calls
    check their own results: nothing found for a new member or prefix)."""
    call = call_of(kind, found)
    for i in range(STORE_SHAPES + 300):
        call(i)
    sizes = cache_sizes(found)
    for name in ("store_compiled", "store_paths", "store_cached_statements"):
        # (+ the store's statements built once: the lone get, the put)
        assert STORE_SHAPES <= sizes[name] <= STORE_SHAPES + 8, sizes
    assert sizes["store_compiled"] <= STATEMENTS_MAX


def _select_of(names: list[str]) -> Executable:
    return sa.select(*(sa.literal(n).label(name) for n, name in enumerate(names)))


def test_a_reused_id_never_gets_another_statements_column_names(backend: Backend) -> None:
    """Statements built, run and dropped one after the other, as the store's LRU drops
    shapes: CPython hands a freed address to the next object of the same size, so
    compiled forms come back at the ids of dropped ones. Each must read its own
    column names (PostgreSQL's psycopg form was the one left behind)."""
    engine = backend.engine()
    driver = direct_driver(engine.dialect)
    assert driver is not None
    compiler = DirectCompiler()
    pooled = engine.raw_connection()
    try:
        cursor, native = driver.open_cursor(pooled.dbapi_connection)
        seen: set[int] = set()
        reused = 0
        for i in range(300):
            names = [f"c{i}_{n}" for n in range(1 + i % 3)]
            statement = _select_of(names)
            compiled = compiler.get(statement, engine.dialect)
            assert compiled is not None
            form = compiled.native if native and compiled.native is not None else compiled
            cursor.execute(form.sql, form.parameters({}))
            assert list(cursor.fetchall()[0]) == list(range(len(names)))
            assert compiler.column_names(form, cursor) == names
            reused += id(form) in seen
            seen.add(id(form))
            compiler.forget(statement)  # as the store does when its LRU drops a shape
            del statement, compiled, form
        assert reused, "no id was reused: the case this test is about never happened"
        cursor.close()
    finally:
        pooled.close()
        engine.dispose()
