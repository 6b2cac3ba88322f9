"""Store operations per second: lg_sqla's SQLAlchemyStore against LangGraph's
PostgresStore and SqliteStore on the same database (and lg_sqla alone on MariaDB).

    .venv/bin/python benchmarks/store_bench.py [--n 300] [--dialects sqlite,postgres,mysql]

Each store gets its own namespace root in one database; per operation kind
(put of a new item, get of an existing one, search of a 3-label prefix with an
equality filter, limit 10, over ``n`` items) it runs ``n`` calls, one at a
time, after a warm-up, and reports calls per second (median of 3 rounds).
Sync stores; semantic search is not timed (no model).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ops_bench import database  # noqa: E402

from lg_sqla.store import SQLAlchemyStore  # noqa: E402


@contextmanager
def official(dialect: str, url: str) -> Iterator[Any]:
    if dialect == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        with SqliteStore.from_conn_string(url.removeprefix("sqlite:///")) as store:
            store.setup()
            yield store
    elif dialect == "postgres":
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(url.replace("+psycopg", "")) as store:
            store.setup()
            yield store
    else:
        yield None


def rate(calls: Callable[[int], None], n: int) -> float:
    rounds = []
    for _ in range(3):
        start = time.perf_counter()
        for i in range(n):
            calls(i)
        rounds.append(n / (time.perf_counter() - start))
    return statistics.median(rounds)


def measure(store: Any, root: str, n: int) -> dict[str, float]:
    ns = (root, "users", "u1")
    counter = iter(range(10**9))

    def put(i: int) -> None:
        store.put(ns, f"k{next(counter)}", {"text": f"memory {i}", "tag": i % 5})

    def get(i: int) -> None:
        store.get(ns, f"k{i % n}")

    def search(i: int) -> None:
        store.search(ns, filter={"tag": i % 5}, limit=10)

    for i in range(20):  # warm-up: connections, prepared statements, schema check
        put(i)
        get(i)
        search(i)
    return {"put": rate(put, n), "get": rate(get, n), "search": rate(search, n)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--dialects", default="sqlite,postgres,mysql")
    args = parser.parse_args()
    print(f"{'dialect':9} {'op':7} {'lg_sqla/s':>10} {'official/s':>11} {'ratio':>6}")
    for dialect in args.dialects.split(","):
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            url = stack.enter_context(database(dialect, Path(tmp)))
            ours = stack.enter_context(SQLAlchemyStore.from_conn_string(url))
            ours.setup()
            mine = measure(ours, "lg", args.n)
            theirs_store = stack.enter_context(official(dialect, url))
            theirs = measure(theirs_store, "off", args.n) if theirs_store is not None else {}
            for op, value in mine.items():
                other = theirs.get(op)
                ratio = f"{value / other:5.2f}x" if other else "–"
                shown = f"{other:11.0f}" if other else f"{'–':>11}"
                print(f"{dialect:9} {op:7} {value:10.0f} {shown} {ratio:>6}")


if __name__ == "__main__":
    main()
