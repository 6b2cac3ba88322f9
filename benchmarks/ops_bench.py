"""Timings of the operators' inspection queries on a database of many threads.

    .venv/bin/python benchmarks/ops_bench.py [--threads 10000] [--dialects sqlite,postgres,mysql]

Fills a fresh database per dialect with ``--threads`` threads (3 checkpoints,
6 values and 4 pending writes each: the shape of a short agent run, written
as rows in bulk so the set-up is quick), then times ``lg-sqla threads`` (one
page of 50, newest write first), ``threads --filter`` (metadata) and
``lg-sqla stats`` (writes per node over every thread, and over the last day)
through ``lg_sqla.inspection``: the median of 5 runs after one warm-up, each one
statement. The same queries run from the command line add the interpreter's
start-up (about 0.8 s here).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from servers import (  # noqa: E402
    create_database,
    drop_database,
    mysql_server,
    postgres_server,
    sqlalchemy_url,
)

from lg_sqla import SQLAlchemySaver  # noqa: E402
from lg_sqla.inspection import Inspector  # noqa: E402
from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints  # noqa: E402
from lg_sqla.shared import key_hash  # noqa: E402

NODES = ("agent", "tools", "agent")


@contextmanager
def database(dialect: str, tmp: Path) -> Iterator[str]:
    if dialect == "sqlite":
        yield f"sqlite:///{tmp / 'ops_bench.sqlite'}"
        return
    server = postgres_server() if dialect == "postgres" else mysql_server()
    with server as admin:
        name = f"ops_bench_{int(time.time())}"
        create_database(admin, name)
        try:
            if dialect == "postgres":
                yield sqlalchemy_url(admin, "psycopg", name)
            else:
                yield sqlalchemy_url(admin, "pymysql", name) + "?charset=utf8mb4"
        finally:
            drop_database(admin, name)


INTERRUPTED_EVERY = 25  # 4% of the threads wait at an interrupt (80 of 2,000 in issue 19)


def fill(engine: sa.Engine, threads: int) -> None:
    """``threads`` threads of 3 checkpoints each, with values and writes, in bulk."""
    now = dt.datetime.now(dt.timezone.utc)
    root = key_hash("")
    batch = 500
    for start in range(0, threads, batch):
        cps: list[dict[str, Any]] = []
        blobs: list[dict[str, Any]] = []
        writes: list[dict[str, Any]] = []
        for t in range(start, min(start + batch, threads)):
            thread_id = f"thread-{t:06d}"
            when = now - dt.timedelta(minutes=t)
            parent = None
            for step in range(3):
                checkpoint_id = f"1f0{t:06d}-{step:04d}"
                version = f"{step + 1:032}.0"
                doc = {
                    "v": 4,
                    "id": checkpoint_id,
                    "ts": when.isoformat(),
                    "channel_versions": {"messages": version, "branch:to:agent": version},
                    "versions_seen": {},
                    "updated_channels": ["messages"],
                }
                cps.append(
                    {
                        "thread_id": thread_id,
                        "checkpoint_ns_hash": root,
                        "checkpoint_id": checkpoint_id,
                        "checkpoint_ns": "",
                        "parent_checkpoint_id": parent,
                        "run_id": f"run-{t}",
                        "checkpoint": doc,
                        "metadata": {"source": "loop", "step": step, "user": f"u{t % 100}"},
                        "created_at": when,
                        "updated_at": when,
                    }
                )
                for channel in ("messages", "branch:to:agent"):
                    blobs.append(
                        {
                            "thread_id": thread_id,
                            "checkpoint_ns_hash": root,
                            "channel": channel,
                            "version": version,
                            "type": "msgpack",
                            "blob": b"x" * (400 if channel == "messages" else 1),
                            "created_at": when,
                        }
                    )
                if step < 2:
                    for idx in range(2):
                        writes.append(
                            {
                                "thread_id": thread_id,
                                "checkpoint_ns_hash": root,
                                "checkpoint_id": checkpoint_id,
                                "task_id": f"task-{t}-{step}",
                                "idx": idx,
                                "task_path": f"~__pregel_pull, {NODES[step]}",
                                "channel": "messages",
                                "type": "msgpack",
                                "blob": b"y" * 150,
                                "created_at": when,
                            }
                        )
                parent = checkpoint_id
            if t % INTERRUPTED_EVERY == 0:  # waits on a human: interrupt() on its latest
                writes.append(
                    {
                        "thread_id": thread_id,
                        "checkpoint_ns_hash": root,
                        "checkpoint_id": parent,
                        "task_id": f"task-{t}-2",
                        "idx": -3,
                        "task_path": f"~__pregel_pull, {NODES[1]}",
                        "channel": "__interrupt__",
                        "type": "msgpack",
                        "blob": b"z" * 80,
                        "created_at": when,
                    }
                )
        with engine.begin() as conn:
            conn.execute(sa.insert(checkpoints), cps)
            conn.execute(sa.insert(checkpoint_blobs), blobs)
            conn.execute(sa.insert(checkpoint_writes), writes)


def timed(call: Callable[[], Any], repeats: int = 5) -> float:
    call()  # warm-up: connection, statement cache, server caches
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def run(dialect: str, threads: int, tmp: Path) -> dict[str, float]:
    with database(dialect, tmp) as url, SQLAlchemySaver.from_conn_string(url) as saver:
        saver.setup()
        started = time.perf_counter()
        fill(saver.engine, threads)
        filled = time.perf_counter() - started
        inspector = Inspector(saver)
        assert len(inspector.threads(limit=50).threads) == 50
        waiting = inspector.threads(status="interrupted", limit=50, count=True)
        assert waiting.total == len(range(0, threads, INTERRUPTED_EVERY))
        day = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
        return {
            "fill_s": filled,
            "threads_page_ms": 1000 * timed(lambda: inspector.threads(limit=50)),
            "threads_by_id_ms": 1000
            * timed(lambda: inspector.threads(limit=50, order="thread_id")),
            "threads_filter_ms": 1000
            * timed(lambda: inspector.threads(filter={"user": "u7"}, limit=50)),
            "threads_interrupted_ms": 1000
            * timed(lambda: inspector.threads(status="interrupted", limit=50)),
            "threads_count_ms": 1000 * timed(lambda: inspector.threads(limit=50, count=True)),
            "threads_interrupted_count_ms": 1000
            * timed(lambda: inspector.threads(status="interrupted", limit=50, count=True)),
            "stats_all_ms": 1000 * timed(lambda: inspector.write_stats()),
            "stats_last_day_ms": 1000 * timed(lambda: inspector.write_stats(since=day)),
            "storage_ms": 1000 * timed(lambda: inspector.storage()),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000, help="threads to create")
    parser.add_argument(
        "--dialects", default="sqlite,postgres,mysql", help="comma-separated dialects"
    )
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dialect in args.dialects.split(","):
            results[dialect] = run(dialect, args.threads, Path(tmp))
            print(dialect, json.dumps({k: round(v, 1) for k, v in results[dialect].items()}))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
