"""The ``scale`` level: how each cross-thread call grows with the tables.

``python -m benchmarks scale [--dialects sqlite,postgres,mysql] [--sizes 1000,10000,100000]``

One database per dialect grows through the sizes (threads): each thread holds
``CHECKPOINTS`` checkpoints, ``WRITES`` pending writes and ``BLOBS`` channel values
per checkpoint (at 100k threads: 1M checkpoints, 2M writes, 3M values). Writing them
through the saver would take hours, so the rows are made in SQL, set-based:

1. the saver writes one *template* thread whose thread id, checkpoint ids and run ids
   carry a placeholder (``TOKEN``) where the thread's number goes; its rows are copied
   into scratch tables and deleted;
2. ``INSERT ... SELECT`` from the scratch tables ``CROSS JOIN`` a table of numbers puts
   the placeholder's place by each number, in every key and in the JSON documents;
3. before that, the saver writes sample threads the ordinary way; their rows are read
   back, deleted, made again by step 2 and compared, column by column (the timestamps
   aside): the built rows are the rows the saver writes.

At each size, every cross-thread call is timed (median wall time of repeats, and the
client's CPU), and the growth factor from the smallest size to each size printed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langgraph.checkpoint.base import empty_checkpoint

from lg_sqla import SQLAlchemySaver
from lg_sqla.inspection import Inspector
from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints

from .databases import LABELS, Database, Servers, servers
from .runner import _commit

CHECKPOINTS = 10  # per thread
WRITES = 2  # per checkpoint
CHANNELS = ("messages", "state", "step")  # each changes at every step: 3 values per checkpoint
RUN_LENGTH = 5  # checkpoints per run: two runs per thread
TOKEN = "@@@@@@@@"  # the thread number's place in the template; never elsewhere in a row
DIGITS = len(TOKEN)
TEMPLATE = "scale_template_"
NUMBERS = "scale_numbers"
# Threads per INSERT ... SELECT (10 checkpoints, 20 writes, 30 values each).
BUILD_CHUNK = 10_000
# A call is repeated until it has REPEATS timings or has run for BUDGET seconds.
REPEATS = 7
BUDGET = 20.0
TABLES = (checkpoints, checkpoint_writes, checkpoint_blobs)
# Columns that hold the thread number (keys as text; documents as JSON).
KEYS = {"thread_id", "checkpoint_id", "parent_checkpoint_id", "run_id"}
DOCUMENTS = {"checkpoint", "metadata"}
TIMESTAMPS = {"created_at", "updated_at"}


def number(n: int) -> str:
    return f"{n:0{DIGITS}d}"


def thread_of(token: str) -> str:
    return f"thread-{token}"


def checkpoint_id(token: str, step: int) -> str:
    # uuid-shaped; threads in number order, steps in order within a thread.
    return f"{token}-{step:04x}-6000-8000-000000000000"


def run_of(token: str, run: int) -> str:
    return f"{token}-{run:04x}-4000-8000-000000000000"


def write_thread(saver: SQLAlchemySaver, token: str) -> None:
    """One thread through the saver: what the built threads are copies of."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread_of(token), "checkpoint_ns": ""}}
    for step in range(CHECKPOINTS):
        document = empty_checkpoint()
        document["id"] = checkpoint_id(token, step)
        document["ts"] = "2026-11-01T00:00:00+00:00"
        versions = {channel: f"{step + 1:032}.0" for channel in CHANNELS}
        document["channel_versions"] = dict(versions)
        document["channel_values"] = {
            "messages": [f"message {i}" for i in range(step + 1)],
            "state": {"step": step, "note": "x" * 40},
            "step": step,
        }
        document["versions_seen"] = {"agent": {"messages": versions["messages"]}}
        metadata: Any = {
            "source": "loop",
            "step": step,
            "run_id": run_of(token, step // RUN_LENGTH),
            "parents": {},
        }
        config = saver.put(config, document, metadata, versions)  # type: ignore[arg-type]
        saver.put_writes(
            config,
            [("messages", f"reply {step}"), ("step", step + 1)][:WRITES],
            task_id=f"task-{step}",
        )


# --- SQL per dialect ---------------------------------------------------------------------


class Builder:
    """Set-based copies of the template thread, in one database."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.name = engine.dialect.name
        self.q = engine.dialect.identifier_preparer.quote

    def _pad(self, column: str) -> str:
        if self.name == "sqlite":
            return f"printf('%0{DIGITS}d', {column})"
        if self.name == "postgresql":
            return f"lpad({column}::text, {DIGITS}, '0')"
        return f"LPAD({column}, {DIGITS}, '0')"

    def _document(self, column: str, pad: str) -> str:
        replaced = f"REPLACE({column}{'::text' if self.name == 'postgresql' else ''}, "
        replaced += f"'{TOKEN}', {pad})"
        if self.name == "postgresql":
            return f"({replaced})::jsonb"
        if self.name == "mysql" and not getattr(self.engine.dialect, "is_mariadb", False):
            return f"CAST({replaced} AS JSON)"
        return replaced

    def _value(self, name: str, pad: str) -> str:
        """Template column ``name`` (of ``t``) for the thread whose number is ``pad``."""
        column = f"t.{self.q(name)}"
        if name in KEYS:
            return f"REPLACE({column}, '{TOKEN}', {pad})"
        if name in DOCUMENTS:
            return self._document(column, pad)
        if name in TIMESTAMPS:
            return self._earlier(column, "s.n")
        return column

    def _earlier(self, column: str, seconds: str) -> str:
        """Timestamp ``column`` moved ``seconds`` back: thread n was written n seconds
        before the template, so threads do not all share one ``updated_at`` (a tie
        that no real table has, and that would make any page ordered by last write
        sort every tied row)."""
        if self.name == "sqlite":  # stored as text 'YYYY-MM-DD HH:MM:SS.ffffff'
            return f"datetime({column}, '-' || {seconds} || ' seconds') || substr({column}, 20)"
        if self.name == "postgresql":
            return f"{column} - {seconds} * interval '1 second'"
        return f"{column} - INTERVAL {seconds} SECOND"

    def _text(self, column: str) -> str:
        """A column as the text it is stored as (JSON documents too)."""
        if column in DOCUMENTS and self.name == "postgresql":
            return f"{column}::text"
        return self.q(column)

    def keep_template(self) -> None:
        """Copy the template thread's rows to scratch tables; delete it from the real ones."""
        scratch = sa.MetaData()
        for table in TABLES:
            copy = sa.Table(
                TEMPLATE + table.name,
                scratch,
                *(sa.Column(c.name, c.type) for c in table.columns),
            )
            copy.drop(self.engine, checkfirst=True)
            copy.create(self.engine)
        numbers = sa.Table(
            NUMBERS, scratch, sa.Column("n", sa.Integer, primary_key=True, autoincrement=False)
        )
        numbers.drop(self.engine, checkfirst=True)
        numbers.create(self.engine)
        with self.engine.begin() as conn:
            for table in TABLES:
                names = ", ".join(self.q(c.name) for c in table.columns)
                conn.exec_driver_sql(
                    f"INSERT INTO {TEMPLATE}{table.name} ({names}) SELECT {names} "
                    f"FROM {table.name} WHERE thread_id = '{thread_of(TOKEN)}'"
                )
                conn.exec_driver_sql(
                    f"DELETE FROM {table.name} WHERE thread_id = '{thread_of(TOKEN)}'"
                )

    def drop_scratch(self) -> None:
        with self.engine.begin() as conn:
            for name in [TEMPLATE + t.name for t in TABLES] + [NUMBERS]:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")

    def build(self, first: int, last: int, log: Callable[[str], None]) -> None:
        """Threads number ``first`` .. ``last - 1``, BUILD_CHUNK threads per statement."""
        for start in range(first, last, BUILD_CHUNK):
            stop = min(last, start + BUILD_CHUNK)
            with self.engine.begin() as conn:
                conn.execute(
                    sa.text(f"INSERT INTO {NUMBERS} (n) VALUES (:n)"),
                    [{"n": n} for n in range(start, stop)],
                )
                pad = self._pad("s.n")
                for table in TABLES:
                    names = [c.name for c in table.columns]
                    values = ", ".join(self._value(name, pad) for name in names)
                    conn.exec_driver_sql(
                        f"INSERT INTO {table.name} ({', '.join(map(self.q, names))}) "
                        f"SELECT {values} "
                        f"FROM {TEMPLATE}{table.name} t CROSS JOIN {NUMBERS} s "
                        f"WHERE s.n >= {start} AND s.n < {stop}"
                    )
            log(f"  built threads {start}..{stop - 1}")

    def rows_of(self, token: str) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of a thread as stored (timestamps aside), in key order."""
        out = {}
        with self.engine.connect() as conn:
            for table in TABLES:
                names = [c.name for c in table.columns if c.name not in TIMESTAMPS]
                keys = ", ".join(c.name for c in table.primary_key.columns)
                selected = ", ".join(self._text(name) for name in names)
                rows = conn.exec_driver_sql(
                    f"SELECT {selected} FROM {table.name} "
                    f"WHERE thread_id = '{thread_of(token)}' ORDER BY {keys}"
                ).all()
                out[table.name] = [tuple(_plain(v) for v in row) for row in rows]
        return out

    def analyze(self) -> None:
        """Fresh statistics, as a production database's background analysis keeps them."""
        with self.engine.connect() as conn:
            if self.name == "postgresql":
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")
            elif self.name == "sqlite":
                conn.exec_driver_sql("ANALYZE")
                conn.commit()
            else:
                for table in TABLES:
                    conn.exec_driver_sql(f"ANALYZE TABLE {table.name}").all()


def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


# --- the calls ---------------------------------------------------------------------------


def _cli(url: str, *argv: str) -> Callable[[], object]:
    from lg_sqla.cli import main

    def call() -> object:
        with contextlib.redirect_stdout(io.StringIO()):
            code = main([*argv, "--url", url, "--json"])
        if code != 0:
            raise RuntimeError(f"lg-sqla {' '.join(argv)} exited with {code}")
        return code

    return call


def calls(saver: SQLAlchemySaver, url: str, threads: int) -> dict[str, Callable[[int], object]]:
    """Each call, given the repeat's number (calls that delete pick a new thread each time)."""
    inspector = Inspector(saver)
    # The newest write's time: built thread n was written n seconds before the
    # template (Builder._earlier), so a ten-minute window holds the 600 newest threads
    # at every size.
    with saver.engine.connect() as conn:
        newest = conn.execute(sa.select(sa.func.max(checkpoint_writes.c.created_at))).scalar_one()
    window = (newest - timedelta(minutes=10)).isoformat()

    def thread(r: int) -> str:
        return number((threads // 2 + 7919 * r) % threads)

    def config(token: str) -> Any:
        return {"configurable": {"thread_id": thread_of(token), "checkpoint_ns": ""}}

    return {
        "list(None, limit=10)": lambda r: list(saver.list(None, limit=10)),
        "list(None, run_id filter)": lambda r: list(
            saver.list(None, filter={"run_id": run_of(thread(r), 1)}, limit=10)
        ),
        "get_tuple (latest)": lambda r: saver.get_tuple(config(thread(r))),
        "get_tuple (by id)": lambda r: saver.get_tuple(
            {
                "configurable": {
                    **config(thread(r))["configurable"],
                    "checkpoint_id": checkpoint_id(thread(r), 3),
                }
            }
        ),
        # Runs of threads no other call reads (the odd numbers from the end).
        "delete_for_runs": lambda r: saver.delete_for_runs(
            [run_of(number(threads - 1 - 2 * r), 0)]
        ),
        "threads (first page)": lambda r: inspector.threads(limit=50),
        "lg-sqla stats": lambda r: _cli(url, "stats")(),
        "lg-sqla stats --since (10 min)": lambda r: _cli(url, "stats", "--since", window)(),
        "lg-sqla sweep --dry-run": lambda r: _cli(
            url, "sweep", "--dry-run", "--older-than-days", "30"
        )(),
    }


def _time(call: Callable[[int], object]) -> dict[str, float]:
    walls, cpus = [], []
    call(-1)  # warm: statement caches, connections
    started = time.perf_counter()
    for r in range(REPEATS):
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        call(r)
        walls.append((time.perf_counter_ns() - wall) / 1e6)
        cpus.append((time.thread_time_ns() - cpu) / 1e6)
        if time.perf_counter() - started > BUDGET:
            break
    return {
        "ms": statistics.median(walls),
        "cpu_ms": statistics.median(cpus),
        "repeats": len(walls),
    }


# --- the level ---------------------------------------------------------------------------


def run_dialect(
    db: Database, sizes: list[int], log: Callable[[str], None]
) -> dict[str, dict[str, dict[str, float]]]:
    """{size: {call: timing}} on one database grown through ``sizes``."""
    engine = sa.create_engine(db.sync_url)
    saver = SQLAlchemySaver(engine)
    saver.setup()
    builder = Builder(engine)
    write_thread(saver, TOKEN)
    builder.keep_template()
    results: dict[str, dict[str, dict[str, float]]] = {}
    built = 0
    try:
        for size in sizes:
            samples = sorted({built, size - 1})
            # Written by the saver first (then deleted), built below, then compared.
            written = {n: _written_by_saver(saver, builder, n) for n in samples}
            started = time.perf_counter()
            builder.build(built, size, log)
            built = size
            builder.analyze()
            log(f"{db.dialect}: {size} threads built in {time.perf_counter() - started:.1f} s")
            for n, rows in written.items():
                made = builder.rows_of(number(n))
                for table, expected in rows.items():
                    if not expected or made[table] != expected:
                        raise AssertionError(f"thread {n}, {table}: built rows differ")
            log(f"{db.dialect}: threads {samples} as the saver writes them")
            results[str(size)] = {}
            for name, call in calls(saver, db.sync_url, size).items():
                timing = _time(call)
                results[str(size)][name] = timing
                log(f"  {size:>7} {name:<28} {timing['ms']:10.2f} ms  cpu {timing['cpu_ms']:.2f}")
    finally:
        builder.drop_scratch()
        engine.dispose()
    return results


def _written_by_saver(
    saver: SQLAlchemySaver, builder: Builder, n: int
) -> dict[str, list[tuple[Any, ...]]]:
    write_thread(saver, number(n))
    rows = builder.rows_of(number(n))
    saver.delete_thread(thread_of(number(n)))
    return rows


def growth(results: dict[str, dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per call: median time at each size over the time at the smallest."""
    sizes = sorted(results, key=int)
    out: dict[str, dict[str, float]] = {}
    for name in results[sizes[0]]:
        first = results[sizes[0]][name]["ms"]
        out[name] = {size: results[size][name]["ms"] / first for size in sizes}
    return out


def table(dialect: str, results: dict[str, dict[str, dict[str, float]]]) -> str:
    sizes = sorted(results, key=int)
    head = f"{LABELS.get(dialect, dialect)}: median ms per call (growth vs {sizes[0]} threads)"
    lines = [head, "call".ljust(28) + "".join(f"{s + ' threads':>22}" for s in sizes)]
    factors = growth(results)
    for name in results[sizes[0]]:
        cells = "".join(
            f"{results[s][name]['ms']:>12.2f} ({factors[name][s]:5.1f}x)" for s in sizes
        )
        lines.append(name.ljust(28) + cells)
    return "\n".join(lines)


# --- what an index costs the writes ----------------------------------------------------

LIST_ORDER_INDEX = "ix_checkpoints_checkpoint_id_thread_id_checkpoint_ns_hash"
COST_ROUNDS = 10  # interleaved rounds, each writing COST_THREADS threads on both databases
COST_THREADS = 20


def index_cost(srv: Servers, dialect: str, threads: int, log: Callable[[str], None]) -> Any:
    """Put cost and storage of the list-order index (revision 0005): two databases of
    ``threads`` built threads, one without the index; rounds of threads written through
    the saver, alternating which database goes first; per put: median wall time, client
    CPU (all of SQLite's work), statements sent; storage per checkpoint."""
    with contextlib.ExitStack() as stack:
        savers: dict[str, SQLAlchemySaver] = {}
        dbs: dict[str, Database] = {}
        for variant in ("with index", "without"):
            db = dbs[variant] = stack.enter_context(srv.fresh(dialect))
            engine = sa.create_engine(db.sync_url)
            stack.callback(engine.dispose)
            saver = savers[variant] = SQLAlchemySaver(engine)
            saver.setup()
            builder = Builder(engine)
            write_thread(saver, TOKEN)
            builder.keep_template()
            builder.build(0, threads, log)
            builder.drop_scratch()
            if variant == "without":
                with engine.begin() as conn:
                    on = "" if dialect == "sqlite" else f" ON {checkpoints.name}"
                    conn.exec_driver_sql(
                        f"DROP INDEX {LIST_ORDER_INDEX}" + ("" if dialect == "postgres" else on)
                    )
            builder.analyze()
        timings: dict[str, list[float]] = {v: [] for v in savers}
        cpus: dict[str, list[float]] = {v: [] for v in savers}
        statements: dict[str, int] = dict.fromkeys(savers, 0)
        next_thread = threads
        for r in range(COST_ROUNDS):
            order = list(savers) if r % 2 == 0 else list(savers)[::-1]
            for variant in order:
                saver = savers[variant]
                sent: list[str] = []

                def count(*args: Any, sent: list[str] = sent) -> None:
                    sent.append("")

                sa.event.listen(saver.engine, "before_cursor_execute", count)
                for n in range(next_thread, next_thread + COST_THREADS):
                    wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
                    write_thread(saver, number(n))
                    timings[variant].append((time.perf_counter_ns() - wall) / 1e6 / CHECKPOINTS)
                    cpus[variant].append((time.thread_time_ns() - cpu) / 1e6 / CHECKPOINTS)
                sa.event.remove(saver.engine, "before_cursor_execute", count)
                statements[variant] += len(sent)
            next_thread += COST_THREADS
        written = COST_ROUNDS * COST_THREADS
        out = {}
        for variant, db in dbs.items():
            rows = (threads + written) * CHECKPOINTS
            out[variant] = {
                # a write_thread is CHECKPOINTS puts and as many put_writes
                "put+put_writes ms": statistics.median(timings[variant]),
                "client cpu ms": statistics.median(cpus[variant]),
                "statements per put+put_writes": statements[variant] / written / CHECKPOINTS,
                "bytes per checkpoint": srv.storage_bytes(db) / rows,
            }
            log(f"{dialect} {variant}: {out[variant]}")
        return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks scale", description=__doc__)
    parser.add_argument("--dialects", default="sqlite,postgres,mysql")
    parser.add_argument("--sizes", default="1000,10000,100000", help="threads, ascending")
    parser.add_argument("--json", type=Path, help="also save the raw results here")
    parser.add_argument(
        "--index-cost",
        type=int,
        metavar="THREADS",
        help="instead: what the list-order index costs puts and storage, on THREADS threads",
    )
    args = parser.parse_args(argv)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s})
    if not sizes or sizes[0] < 1:
        parser.error("--sizes: thread counts >= 1, e.g. 1000,10000")
    dialects = [d for d in args.dialects.split(",") if d]
    if unknown := set(dialects) - {"sqlite", "postgres", "mysql"}:
        parser.error(f"--dialects: unknown {sorted(unknown)}; choose sqlite, postgres, mysql")
    out: dict[str, Any] = {"sizes": sizes, "results": {}}
    if args.index_cost:
        with servers(dialects) as srv:
            out = {d: index_cost(srv, d, args.index_cost, _log) for d in dialects}
        if args.json:
            args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
        return 0
    started = time.time()
    out["load_start"] = os.getloadavg()
    with servers(dialects) as srv:
        for dialect in dialects:
            with srv.fresh(dialect) as db:
                out["results"][dialect] = run_dialect(db, sizes, _log)
            print(table(dialect, out["results"][dialect]), flush=True)
    out.update(
        date=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        commit=_commit(),
        seconds=round(time.time() - started),
        load_end=os.getloadavg(),
    )
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


def _log(line: str) -> None:
    print(line, flush=True)
