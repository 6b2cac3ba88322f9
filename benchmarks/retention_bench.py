"""Timings of retention on a database of many threads: the TTL sweep, its dry run, and
``sweep``'s selection (the updated_at index walk) next to the selection it replaced.

    .venv/bin/python benchmarks/retention_bench.py [--threads 10000] [--dialects sqlite,mysql]

Fills a fresh database per dialect with ``--threads`` finished threads of 3
checkpoints, 6 values and 4 writes each (ops_bench.py's bulk fill: thread ``t`` was
last written ``t`` minutes ago), then, with a TTL of 3.5 days (5040 minutes, so the
oldest half of the threads has expired):

* ``select_old`` / ``select_new``: the first batch (100 threads) of ``sweep --strategy
  delete --older-than-days 3.5``: the GROUP BY over the whole primary key that
  ``stale_threads`` ran before, and the updated_at index walk it runs now, both
  through ``saver.run`` (one transaction each). Medians of 5 runs.
  ``--selection-only`` stops there (for 100,000 threads).
* ``sweep_dry_run`` and ``ttl_dry_run``: ``lg-sqla sweep --dry-run`` and ``lg-sqla ttl
  sweep --dry-run`` through ``lg_sqla.cli.main`` in this process (no interpreter start).
* ``ttl_sweep``: ``saver.sweep_ttl()`` deleting the expired half: wall time, this
  thread's CPU time, statements; then ``ttl_noop``: the same sweep again, nothing due
  (what the background sweeper costs at every interval).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from ops_bench import database, fill  # noqa: E402

from lg_sqla import SQLAlchemySaver  # noqa: E402
from lg_sqla.checkpoint import maintenance  # noqa: E402
from lg_sqla.cli import main as cli  # noqa: E402
from lg_sqla.models import checkpoints as C  # noqa: E402
from lg_sqla.plans import Plan, Step  # noqa: E402

TTL_MINUTES = 3.5 * 24 * 60


def median_ms(call: Callable[[], Any], repeats: int = 5) -> float:
    call()  # warm-up
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return 1000 * statistics.median(samples)


def old_selection(cutoff: dt.datetime) -> sa.Select[Any]:
    """The first batch as ``stale_threads`` selected it before (delete strategy)."""
    stale = (
        sa.select(C.c.thread_id)
        .group_by(C.c.thread_id)
        .having(sa.func.max(C.c.updated_at) < cutoff)
    )
    return stale.order_by(C.c.thread_id).limit(100)


def stamp_expiry(engine: sa.Engine) -> None:
    """Every checkpoint as written by a saver with ``default_ttl=TTL_MINUTES`` (revision
    0008: the expiry is stored, the sweep reads it)."""
    ttl = dt.timedelta(minutes=TTL_MINUTES)
    key = (C.c.thread_id, C.c.checkpoint_ns_hash, C.c.checkpoint_id)
    with engine.begin() as conn:
        rows = conn.execute(sa.select(*key, C.c.updated_at)).all()
        conn.execute(
            sa.update(C)
            .where(*(column == sa.bindparam(f"k_{column.name}") for column in key))
            .values(expires_at=sa.bindparam("k_expires_at", type_=C.c.expires_at.type)),
            [
                {
                    "k_thread_id": r.thread_id,
                    "k_checkpoint_ns_hash": r.checkpoint_ns_hash,
                    "k_checkpoint_id": r.checkpoint_id,
                    "k_expires_at": r.updated_at + ttl,
                }
                for r in rows
            ],
        )


def quiet_cli(args: list[str]) -> dict[str, Any]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(args) == 0
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def run(dialect: str, threads: int, tmp: Path, selection_only: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with database(dialect, tmp) as url:
        with SQLAlchemySaver.from_conn_string(url) as saver:
            saver.setup()
            started = time.perf_counter()
            fill(saver.engine, threads)
            stamp_expiry(saver.engine)
            results["fill_s"] = round(time.perf_counter() - started, 1)
            cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=TTL_MINUTES)
            page = old_selection(cutoff)

            def one(statement: Any) -> Plan[Any]:
                return (yield Step(statement, fetch=True)).rows

            # Both selections through saver.run: the same transaction and round trips.
            old_page = [r[0] for r in saver.run(lambda: one(page))]
            results["select_old_ms"] = median_ms(lambda: saver.run(lambda: one(page)))
            new_page, _ = saver.run(
                lambda: maintenance.stale_threads(cutoff, "delete", None, 100, set())
            )
            assert sorted(new_page) == sorted(old_page[: len(new_page)]) or len(new_page) == 100
            results["select_new_ms"] = median_ms(
                lambda: saver.run(
                    lambda: maintenance.stale_threads(cutoff, "delete", None, 100, set())
                )
            )
            if selection_only:
                return results
        days = str(TTL_MINUTES / 1440)
        for name, args in (
            ("sweep_dry_run", ["sweep", "--older-than-days", days, "--dry-run"]),
            ("ttl_dry_run", ["ttl", "sweep", "--dry-run"]),
        ):
            started = time.perf_counter()
            report = quiet_cli(["--url", url, *args, "--json"])
            results[f"{name}_ms"] = 1000 * (time.perf_counter() - started)
            results[f"{name}_threads"] = report["threads"]
        with SQLAlchemySaver.from_conn_string(url, ttl={"default_ttl": TTL_MINUTES}) as saver:
            statements = 0

            def count(*_: Any) -> None:
                nonlocal statements
                statements += 1

            sa.event.listen(saver.engine, "before_cursor_execute", count)
            wall, cpu = time.perf_counter(), time.thread_time()
            swept = saver.sweep_ttl()
            results["ttl_sweep_ms"] = 1000 * (time.perf_counter() - wall)
            results["ttl_sweep_cpu_ms"] = 1000 * (time.thread_time() - cpu)
            results["ttl_sweep_threads"] = swept.removed.threads
            results["ttl_sweep_statements"] = statements
            statements = 0
            wall = time.perf_counter()
            again = saver.sweep_ttl()
            results["ttl_noop_ms"] = 1000 * (time.perf_counter() - wall)
            results["ttl_noop_statements"] = statements
            # (the few threads that came of age while the first sweep ran)
            results["ttl_noop_threads"] = again.removed.threads
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000, help="threads to create")
    parser.add_argument(
        "--dialects", default="sqlite,postgres,mysql", help="comma-separated dialects"
    )
    parser.add_argument("--selection-only", action="store_true", help="time the selections only")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for dialect in args.dialects.split(","):
            results[dialect] = run(dialect, args.threads, Path(tmp), args.selection_only)
            print(dialect, json.dumps({k: round(v, 1) for k, v in results[dialect].items()}))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
