"""Recall@10 of the store's approximate indexes (pgvector HNSW / IVFFlat from
``ann_index_config``) against exact search, on random vectors.

    .venv/bin/python -m benchmarks.vector_recall [--items 10000] [--dims 128] [--queries 100]

Runs on the PostgreSQL server with pgvector that the tests use (tests/servers.py:
``pgvector_server``, or ``LG_SQLA_TEST_PGVECTOR_URL``). Puts ``--items`` items, one
random vector each (uniform in [-1, 1], seeded), through an exact store, then for each
index configuration opens a store with that ``ann_index_config`` (its ``setup()``
builds the index over the rows already there) and compares the keys of its first page
of 10 with the exact store's, for ``--queries`` random queries, without and with a
filter (half of the items, then a tenth). Prints a Markdown table (docs/store.md).
Random vectors in many dimensions are a hard case for approximate search: recall on
real embeddings, which cluster, is usually higher.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langgraph.store.base import PutOp

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from servers import create_database, pgvector_server, sqlalchemy_url  # noqa: E402

from lg_sqla.store import SQLAlchemyStore  # noqa: E402

CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("hnsw (m 16, ef_construction 64)", {"kind": "hnsw"}),
    ("hnsw (m 16, ef_construction 64), ef_search 100", {"kind": "hnsw", "ef_search": 100}),
    ("ivfflat (lists 10), probes 1", {"kind": "ivfflat", "lists": 10}),
    ("ivfflat (lists 10), probes 3", {"kind": "ivfflat", "lists": 10, "probes": 3}),
    ("ivfflat (lists 100), probes 10", {"kind": "ivfflat", "lists": 100, "probes": 10}),
]
FILTERS: list[tuple[str, dict[str, Any] | None]] = [
    ("none", None),
    ("1 in 2", {"half": True}),
    ("1 in 10", {"tenth": True}),
]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=128)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--distance", default="cosine", choices=["cosine", "l2", "inner_product"])
    args = parser.parse_args(argv)
    rng = random.Random(20)
    vectors = {f"v{n}": [rng.uniform(-1, 1) for _ in range(args.dims)] for n in range(args.items)}
    vectors.update(
        {f"q{n}": [rng.uniform(-1, 1) for _ in range(args.dims)] for n in range(args.queries)}
    )

    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [vectors[t] for t in texts]

    base: Any = {
        "dims": args.dims,
        "embed": embed,
        "fields": ["text"],
        "distance_type": args.distance,
    }
    with pgvector_server() as admin:
        name = f"lg_sqla_recall_{uuid.uuid4().hex[:8]}"
        create_database(admin, name)
        engine = sa.create_engine(sqlalchemy_url(admin, "psycopg", name))
        exact = SQLAlchemyStore(engine, index=base)
        exact.setup()
        with engine.connect() as conn:
            version = conn.execute(
                sa.text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            ).scalar_one()
        ns = ("recall",)
        ops = [
            PutOp(ns, f"k{n}", {"text": f"v{n}", "half": n % 2 == 0, "tenth": n % 10 == 0})
            for n in range(args.items)
        ]
        for start in range(0, len(ops), 500):
            exact.batch(ops[start : start + 500])
        with engine.begin() as conn:  # statistics, as autovacuum gathers them in time
            conn.execute(sa.text("ANALYZE store_items"))
            conn.execute(sa.text("ANALYZE store_vectors"))
        queries = [f"q{n}" for n in range(args.queries)]

        def pages(
            store: SQLAlchemyStore, wanted: dict[str, Any] | None
        ) -> tuple[list[set[str]], float]:
            found, took = [], []
            for q in queries:
                began = time.perf_counter()
                hits = store.search(ns, query=q, filter=wanted, limit=10)
                took.append(time.perf_counter() - began)
                found.append({h.key for h in hits})
            return found, statistics.median(took) * 1000

        truth = {label: pages(exact, wanted) for label, wanted in FILTERS}
        sent: list[tuple[str, Any]] = []

        def record(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
            sent.append((statement, params))

        print(
            f"pgvector {version}, {args.items} items, {args.dims} dims, {args.distance}, "
            f"{args.queries} queries, first page of 10"
        )
        print()
        print("| index | filter | recall@10 | median search, ms (exact) | index scan | build, s |")
        print("|---|---|---|---|---|---|")
        for label, ann in CONFIGS:
            store = SQLAlchemyStore(engine, index={**base, "ann_index_config": ann})
            began = time.perf_counter()
            store.setup()  # builds the index over the rows already there
            built = time.perf_counter() - began
            for filter_label, wanted in FILTERS:
                sent.clear()
                sa.event.listen(engine, "before_cursor_execute", record)
                found, ms = pages(store, wanted)
                sa.event.remove(engine, "before_cursor_execute", record)
                scan = _index_scan(engine, sent, store._ann.name(args.distance, args.dims))  # type: ignore[union-attr]
                expected, exact_ms = truth[filter_label]
                recall = statistics.mean(
                    len(f & e) / len(e) for f, e in zip(found, expected, strict=True)
                )
                print(
                    f"| {label} | {filter_label} | {recall:.3f} | {ms:.1f} ({exact_ms:.1f}) "
                    f"| {scan} | {built:.1f} |"
                )
            with engine.begin() as conn:  # the next configuration's index alone
                conn.execute(
                    sa.text(
                        f"DROP INDEX {store._ann.name(args.distance, args.dims)}"  # type: ignore[union-attr]
                    )
                )
        engine.dispose()


def _index_scan(engine: sa.Engine, sent: list[tuple[str, Any]], index: str) -> str:
    """Whether the planner uses the index for the last search's statement that may
    (the one ordering by the index's operator), and whether the searches were ranked
    again exactly (the index could not fill their pages): "yes", "no", "yes, then exact"
    for all or some of the searches."""
    ranked = [s for s in sent if "OPERATOR(" in s[0]]
    again = sum(1 for s in sent if "cosine_distance(" in s[0] or "l2_distance(" in s[0])
    again += sum(1 for s in sent if "inner_product(" in s[0])
    statement, params = ranked[-1]
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("EXPLAIN " + statement, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        raw.rollback()
    finally:
        raw.close()
    used = "yes" if index in plan else "no"
    if again:
        used += f", then exact for {again} of {len(ranked)}"
    return used


if __name__ == "__main__":
    main()
