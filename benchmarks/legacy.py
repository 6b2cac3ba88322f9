"""The older single-purpose benchmarks (before ``python -m benchmarks report``).

    .venv/bin/python -m benchmarks ops         # latency per call vs the official savers
    .venv/bin/python -m benchmarks concurrent  # threads sharing one saver
    .venv/bin/python -m benchmarks async       # asyncio tasks sharing one async saver
    .venv/bin/python -m benchmarks prune       # prune a 10k-checkpoint thread per dialect
    .venv/bin/python -m benchmarks storage     # bytes per checkpoint, compression off / on

The side-by-side rows need the official savers: `.venv/bin/pip install -e . --group bench`.
Figures are wall-clock on whatever machine runs them; they go to docs/benchmarks.md
by hand, with the machine described. Nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.base.id import uuid6  # noqa: E402
from servers import (  # noqa: E402
    create_database,
    mysql_server,
    postgres_server,
    sqlalchemy_url,
)

from lg_sqla import SQLAlchemySaver  # noqa: E402
from lg_sqla.engines import configure_engine  # noqa: E402
from lg_sqla.serde import CompressedSerializer  # noqa: E402


@contextlib.contextmanager
def databases(which: list[str], suffix: str = "") -> Iterator[dict[str, str]]:
    """Sync URLs of fresh databases: sqlite (file), postgres, mysql (MariaDB here).

    With ``suffix``, each server also gets a second database (its URL under
    ``"<dialect><suffix>"``), for a peer saver whose table names clash with ours.
    """
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}
        tmp = Path(tempfile.mkdtemp(prefix="lg_sqla_bench_"))
        name = f"bench_{uuid.uuid4().hex[:8]}"
        if "sqlite" in which:
            urls["sqlite"] = f"sqlite:///{tmp / 'bench.sqlite'}"
        if "postgres" in which:
            admin = stack.enter_context(postgres_server())
            create_database(admin, name)
            urls["postgres"] = sqlalchemy_url(admin, "psycopg", name)
            if suffix:
                create_database(admin, name + suffix)
                urls["postgres" + suffix] = sqlalchemy_url(admin, "psycopg", name + suffix)
        if "mysql" in which:
            admin = stack.enter_context(mysql_server())
            create_database(admin, name)
            urls["mysql"] = sqlalchemy_url(admin, "pymysql", name) + "?charset=utf8mb4"
        yield urls


def saver_for(url: str, pool_size: int = 5, **kwargs: Any) -> tuple[sa.Engine, SQLAlchemySaver]:
    options: dict[str, Any] = {} if url.startswith("sqlite") else {"pool_size": pool_size}
    engine = configure_engine(sa.create_engine(url, **options))
    saver = SQLAlchemySaver(engine, **kwargs)
    saver.setup()
    return engine, saver


def config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        c["checkpoint_id"] = checkpoint_id
    return {"configurable": c}


def conversation_step(i: int, messages: list[Any]) -> list[Any]:
    text = f"turn {i}: " + ("the quick brown fox jumps over the lazy dog " * 12)
    return [*messages, HumanMessage(content=text, id=f"h{i}"), AIMessage(content=text, id=f"a{i}")]


def write_chain(saver: Any, thread_id: str, steps: int, channels: int = 6) -> list[dict[str, Any]]:
    """A chat-like chain: a growing messages channel, small counters, writes per step."""
    configs = []
    parent = config(thread_id)
    messages: list[Any] = []
    for i in range(steps):
        messages = conversation_step(i, messages)
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=i))
        values: dict[str, Any] = {"messages": messages, "step": i}
        values.update({f"aux{c}": {"n": i, "c": c} for c in range(channels - 2)})
        version = saver.get_next_version(None if i == 0 else f"{i:032}.0", None)
        cp["channel_values"] = values
        cp["channel_versions"] = {k: version for k in values}
        new_versions = {"messages": version, "step": version}
        if i == 0:
            new_versions = dict(cp["channel_versions"])
        else:
            cp["channel_versions"].update(
                {k: configs[0]["versions"][k] for k in values if k.startswith("aux")}
            )
        stored = saver.put(parent, cp, {"source": "loop", "step": i}, new_versions)
        saver.put_writes(stored, [("messages", messages[-2:])], task_id=f"task-{i}")
        stored = {**stored, "versions": cp["channel_versions"]}
        configs.append(stored)
        parent = {"configurable": stored["configurable"]}
    return configs


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


# --- ops ----------------------------------------------------------------------------


def bench_ops(which: list[str], steps: int, repeat: int) -> None:
    print(f"# per-call latency, median / p95 ms, {steps}-step chat thread, {repeat} samples")
    print("| saver | dialect | put | get_tuple (latest) | get_tuple (by id) | list (20) |")
    print("|---|---|---|---|---|---|")
    with databases(which, suffix="_peer") as urls:
        for dialect in which:
            engine, saver = saver_for(urls[dialect])
            _report_ops("lg_sqla", dialect, saver, steps, repeat)
            engine.dispose()
            official = _official_saver(dialect, urls.get(dialect + "_peer", urls[dialect]))
            if official is not None:
                with official as other:
                    _report_ops(type(other).__name__, dialect, other, steps, repeat)


def _official_saver(dialect: str, url: str) -> Any:
    try:
        if dialect == "postgres":
            from langgraph.checkpoint.postgres import PostgresSaver

            conninfo = sa.make_url(url).set(drivername="postgresql").render_as_string(False)

            @contextlib.contextmanager
            def pg() -> Iterator[Any]:
                with PostgresSaver.from_conn_string(conninfo) as saver:
                    saver.setup()
                    yield saver

            return pg()
        if dialect == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            path = sa.make_url(url).database
            assert path is not None

            @contextlib.contextmanager
            def lite() -> Iterator[Any]:
                with SqliteSaver.from_conn_string(path + ".official") as saver:
                    yield saver

            return lite()
    except ImportError:
        print(f"(official {dialect} saver not installed: pip install -e . --group bench)")
    return None


def _report_ops(name: str, dialect: str, saver: Any, steps: int, repeat: int) -> None:
    thread_id = f"bench-{uuid.uuid4()}"
    configs = write_chain(saver, thread_id, steps)
    middle = {"configurable": configs[steps // 2]["configurable"]}
    extra = f"bench-put-{uuid.uuid4()}"
    counter = iter(range(10**9))

    def put() -> None:
        i = next(counter)
        cp = empty_checkpoint()
        cp["id"] = str(uuid6(clock_seq=i))
        cp["channel_values"] = {"messages": [HumanMessage(content="hi", id="x")], "n": i}
        cp["channel_versions"] = {"messages": f"{i + 1:032}.0", "n": f"{i + 1:032}.0"}
        saver.put(config(extra), cp, {"step": i}, cp["channel_versions"])

    put_ms = timed(put, repeat)
    latest_ms = timed(lambda: saver.get_tuple(config(thread_id)), repeat)
    by_id_ms = timed(lambda: saver.get_tuple(middle), repeat)
    list_ms = timed(lambda: list(saver.list(config(thread_id), limit=20)), max(5, repeat // 5))
    cells = [f"{m:.2f} / {p:.2f}" for m, p in (put_ms, latest_ms, by_id_ms, list_ms)]
    print(f"| {name} | {dialect} | " + " | ".join(cells) + " |", flush=True)


# --- concurrency --------------------------------------------------------------------


def bench_concurrent(which: list[str], threads: int, calls: int) -> None:
    """Several threads sharing ONE saver instance, as a web server's workers do."""
    import threading

    print(f"# {threads} threads sharing one saver, {calls} x (put + get_tuple) each: calls/s")
    print("| saver | dialect | calls/s (1 thread) | calls/s (" + str(threads) + " threads) |")
    print("|---|---|---|---|")
    with databases(which, suffix="_peer") as urls:
        for dialect in which:
            engine, saver = saver_for(urls[dialect], pool_size=threads)
            rows = [("lg_sqla", saver)]
            official = _official_saver(dialect, urls.get(dialect + "_peer", urls[dialect]))
            with official if official is not None else contextlib.nullcontext() as other:
                if other is not None:
                    rows.append((type(other).__name__, other))
                for name, s in rows:
                    rates = [_throughput(s, n, calls, threading) for n in (1, threads)]
                    print(f"| {name} | {dialect} | {rates[0]:,.0f} | {rates[1]:,.0f} |", flush=True)
            engine.dispose()


def _throughput(saver: Any, n_threads: int, calls: int, threading: Any) -> float:
    def work(worker: int) -> None:
        thread_id = f"conc-{uuid.uuid4()}"
        parent = config(thread_id)
        for i in range(calls):
            cp = empty_checkpoint()
            cp["id"] = str(uuid6(clock_seq=i))
            cp["channel_values"] = {"messages": [HumanMessage(content=f"m{i}", id=str(i))]}
            cp["channel_versions"] = {"messages": f"{i + 1:032}.0"}
            parent = saver.put(parent, cp, {"step": i}, cp["channel_versions"])
            saver.get_tuple(config(thread_id))

    workers = [threading.Thread(target=work, args=(w,)) for w in range(n_threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return n_threads * calls * 2 / (time.perf_counter() - start)


# --- async concurrency --------------------------------------------------------------


def bench_async_concurrent(which: list[str], tasks: int, calls: int) -> None:
    """Many asyncio tasks sharing ONE async saver, as an async web server's requests do."""
    print(f"# {tasks} asyncio tasks sharing one async saver, {calls} x (aput + aget_tuple) each")
    print("| saver | dialect | calls/s (1 task) | calls/s (" + str(tasks) + " tasks) |")
    print("|---|---|---|---|")
    with databases(which, suffix="_peer") as urls:
        for dialect in which:
            asyncio.run(_async_rows(dialect, urls, tasks, calls))


async def _async_rows(dialect: str, urls: dict[str, str], tasks: int, calls: int) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    from lg_sqla import AsyncSQLAlchemySaver

    async_url = {
        "sqlite": urls["sqlite"].replace("sqlite://", "sqlite+aiosqlite://", 1)
        if "sqlite" in urls
        else "",
        "postgres": urls.get("postgres", ""),
        "mysql": urls.get("mysql", "").replace("+pymysql", "+asyncmy"),
    }[dialect]
    options: dict[str, Any] = {} if dialect == "sqlite" else {"pool_size": tasks}
    engine = configure_engine(create_async_engine(async_url, **options))
    ours = AsyncSQLAlchemySaver(engine)
    await ours.setup()
    rows: list[tuple[str, Any]] = [("lg_sqla", ours)]
    peer: Any = None
    if dialect == "postgres":
        try:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

            conninfo = (
                sa.make_url(urls["postgres_peer"])
                .set(drivername="postgresql")
                .render_as_string(False)
            )
            peer = AsyncPostgresSaver.from_conn_string(conninfo)
            other = await peer.__aenter__()
            await other.setup()
            rows.append((type(other).__name__, other))
        except ImportError:
            peer = None
    for name, saver in rows:
        rates = [await _async_throughput(saver, n, calls) for n in (1, tasks)]
        print(f"| {name} | {dialect} | {rates[0]:,.0f} | {rates[1]:,.0f} |", flush=True)
    if peer is not None:
        await peer.__aexit__(None, None, None)
    await engine.dispose()


async def _async_throughput(saver: Any, n_tasks: int, calls: int) -> float:
    async def work() -> None:
        thread_id = f"aconc-{uuid.uuid4()}"
        parent = config(thread_id)
        for i in range(calls):
            cp = empty_checkpoint()
            cp["id"] = str(uuid6(clock_seq=i))
            cp["channel_values"] = {"messages": [HumanMessage(content=f"m{i}", id=str(i))]}
            cp["channel_versions"] = {"messages": f"{i + 1:032}.0"}
            parent = await saver.aput(parent, cp, {"step": i}, cp["channel_versions"])
            await saver.aget_tuple(config(thread_id))

    start = time.perf_counter()
    await asyncio.gather(*(work() for _ in range(n_tasks)))
    return n_tasks * calls * 2 / (time.perf_counter() - start)


# --- prune --------------------------------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, *args: Any) -> None:
        self.n += 1


def bench_prune(which: list[str], checkpoints: int) -> None:
    print(f"# prune(keep_latest) of one {checkpoints}-checkpoint thread")
    print("| dialect | fill (s) | prune (s) | statements | checkpoints / writes / blobs removed |")
    print("|---|---|---|---|---|")
    with databases(which) as urls:
        for dialect, url in urls.items():
            engine, saver = saver_for(url)
            thread_id = f"prune-{uuid.uuid4()}"
            start = time.perf_counter()
            parent = config(thread_id)
            for i in range(checkpoints):
                cp = empty_checkpoint()
                cp["id"] = str(uuid6(clock_seq=i))
                version = f"{i + 1:032}.0"
                cp["channel_values"] = {"messages": [f"m{i}"], "step": i}
                cp["channel_versions"] = {"messages": version, "step": version}
                parent = saver.put(parent, cp, {"step": i}, cp["channel_versions"])
                saver.put_writes(parent, [("messages", [f"w{i}"])], task_id="t")
            fill = time.perf_counter() - start
            counts_before = _counts(engine, thread_id)
            counter = Counter()
            sa.event.listen(engine, "before_cursor_execute", counter)
            start = time.perf_counter()
            saver.prune([thread_id], strategy="keep_latest")
            pruned = time.perf_counter() - start
            sa.event.remove(engine, "before_cursor_execute", counter)
            after = _counts(engine, thread_id)
            removed = " / ".join(str(counts_before[k] - after[k]) for k in counts_before)
            print(
                f"| {dialect} | {fill:.1f} | {pruned:.3f} | {counter.n} | {removed} |", flush=True
            )
            engine.dispose()


def _counts(engine: sa.Engine, thread_id: str) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            t: conn.execute(
                sa.text(f"SELECT COUNT(*) FROM {t} WHERE thread_id = :t"), {"t": thread_id}
            ).scalar_one()
            for t in ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
        }


# --- storage ------------------------------------------------------------------------


def bench_storage(which: list[str], steps: int) -> None:
    print(f"# storage of a {steps}-turn chat thread (growing messages list), bytes per checkpoint")
    print("| dialect | serializer | payload bytes / checkpoint | table bytes / checkpoint |")
    print("|---|---|---|---|")
    with databases(which) as urls:
        for dialect, url in urls.items():
            for label, serde in (
                ("JsonPlus (default)", None),
                ("CompressedSerializer (zstd, >1 KiB)", CompressedSerializer()),
            ):
                db_url = url
                if dialect == "sqlite":
                    db_url = url.replace(".sqlite", f"-{'z' if serde else 'p'}.sqlite")
                engine, saver = saver_for(db_url, serde=serde)
                thread_id = f"store-{uuid.uuid4()}"
                write_chain(saver, thread_id, steps)
                payload = _payload_bytes(engine, thread_id)
                table = _table_bytes(engine, dialect, db_url)
                print(
                    f"| {dialect} | {label} | {payload / steps:,.0f} | {(table / steps):,.0f} |",
                    flush=True,
                )
                _empty_tables(engine, dialect)
                engine.dispose()


def _empty_tables(engine: sa.Engine, dialect: str) -> None:
    """Delete everything and give the space back, so the next run is measured alone."""
    tables = ("checkpoints", "checkpoint_writes", "checkpoint_blobs")
    with engine.begin() as conn:
        for t in tables:
            conn.execute(sa.text(f"DELETE FROM {t}"))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for t in tables:
            if dialect == "postgres":
                conn.exec_driver_sql(f"VACUUM FULL {t}")
            elif dialect == "mysql":
                conn.exec_driver_sql(f"OPTIMIZE TABLE {t}")


def _payload_bytes(engine: sa.Engine, thread_id: str) -> int:
    from lg_sqla.models import checkpoint_blobs, checkpoint_writes

    with engine.connect() as conn:
        total = 0
        for table in (checkpoint_blobs, checkpoint_writes):
            # `blob` is a reserved word on MySQL: let SQLAlchemy quote it.
            total += conn.execute(
                sa.select(sa.func.coalesce(sa.func.sum(sa.func.length(table.c.blob)), 0)).where(
                    table.c.thread_id == thread_id
                )
            ).scalar_one()
        return int(total)


def _table_bytes(engine: sa.Engine, dialect: str, url: str) -> int:
    """Bytes the database spends on the three tables (data + indexes)."""
    with engine.connect() as conn:
        if dialect == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.commit()
            path = sa.make_url(url).database
            assert path is not None
            return os.path.getsize(path)
        if dialect == "postgres":
            return int(
                conn.execute(
                    sa.text(
                        "SELECT SUM(pg_total_relation_size(c)) FROM unnest(ARRAY["
                        "'checkpoints','checkpoint_writes','checkpoint_blobs']::regclass[]) c"
                    )
                ).scalar_one()
            )
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            conn.exec_driver_sql(f"ANALYZE TABLE {table}")
        return int(
            conn.execute(
                sa.text(
                    "SELECT SUM(data_length + index_length) FROM information_schema.tables "
                    "WHERE table_schema = DATABASE() AND table_name IN "
                    "('checkpoints','checkpoint_writes','checkpoint_blobs')"
                )
            ).scalar_one()
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("what", choices=["ops", "concurrent", "async", "prune", "storage"])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--dialects", default="sqlite,postgres,mysql")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--checkpoints", type=int, default=10_000)
    args = parser.parse_args(argv)
    which = args.dialects.split(",")
    if args.what == "ops":
        bench_ops(which, args.steps, args.repeat)
    elif args.what == "concurrent":
        bench_concurrent(which, args.threads, args.repeat)
    elif args.what == "async":
        bench_async_concurrent(which, args.threads, args.repeat)
    elif args.what == "prune":
        bench_prune(which, args.checkpoints)
    else:
        bench_storage(which, args.steps)
