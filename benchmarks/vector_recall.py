"""Recall@10 of the store's approximate indexes (pgvector HNSW / IVFFlat from
``ann_index_config``) against exact search, on random vectors.

    .venv/bin/python -m benchmarks.vector_recall [--items 10000] [--dims 128] [--queries 100]
        [--distance cosine] [--clusters 0]

Runs on the PostgreSQL server with pgvector that the tests use (tests/servers.py:
``pgvector_server``, or ``LG_SQLA_TEST_PGVECTOR_URL``). Puts ``--items`` items, one
random vector each (uniform in [-1, 1], seeded), through an exact store, then for each
index configuration opens a store with that ``ann_index_config`` (its ``setup()``
builds the index over the rows already there) and compares the keys of its first page
of 10 with the exact store's, for ``--queries`` random queries, without and with a
filter (half of the items, then a tenth). Prints a Markdown table (docs/store.md).
Uniform random vectors in many dimensions are the hard case for approximate search
(no structure for the index to use); ``--clusters N`` draws them around N centres,
closer to embeddings of real texts.
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
    ("ivfflat (lists 100), probes 1", {"kind": "ivfflat", "lists": 100}),
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
    parser.add_argument(
        "--clusters",
        type=int,
        default=0,
        help="0: uniform random vectors; N: around N random centres (spread 0.3), as "
        "embeddings of related texts cluster",
    )
    args = parser.parse_args(argv)
    rng = random.Random(20)
    centres = [[rng.uniform(-1, 1) for _ in range(args.dims)] for _ in range(args.clusters)]

    def draw() -> list[float]:
        if not centres:
            return [rng.uniform(-1, 1) for _ in range(args.dims)]
        centre = rng.choice(centres)
        return [x + rng.gauss(0, 0.3) for x in centre]

    vectors = {f"v{n}": draw() for n in range(args.items)}
    vectors.update({f"q{n}": draw() for n in range(args.queries)})

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

        data = f"around {args.clusters} centres" if centres else "uniform"
        print(
            f"pgvector {version}, {args.items} items ({data}), {args.dims} dims, "
            f"{args.distance}, {args.queries} queries, first page of 10"
        )
        print()
        print("| index | filter | recall@10 | median search, ms (exact) | index used | build, s |")
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
    """In how many searches the planner uses the index (EXPLAIN of each statement
    ordering by the index's operator), and how many were ranked again exactly (the
    index could not fill their pages)."""
    ranked = [s for s in sent if "OPERATOR(" in s[0]]
    again = sum(
        1
        for s in sent
        if any(f in s[0] for f in ("cosine_distance(", "l2_distance(", "inner_product("))
    )
    used = 0
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        for statement, params in ranked:
            cursor.execute("EXPLAIN " + statement, params)
            used += any(index in row[0] for row in cursor.fetchall())
        raw.rollback()
    finally:
        raw.close()
    text = f"{used} of {len(ranked)}"
    if again:
        text += f", {again} ranked again exactly"
    return text


if __name__ == "__main__":
    main()
