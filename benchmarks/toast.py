"""TOAST compression of lg_sqla's value columns on PostgreSQL: pglz against lz4 (an option).

``python -m benchmarks.toast [--repeats N] [--url postgresql://user@host/db]``

1. Value by value: values serialized as the saver does (LangGraph's JsonPlusSerializer)
   are inserted into a ``bytea`` (or ``jsonb``) column of each compression, one INSERT
   per row, then read back one SELECT per row: the stored size
   (``pg_column_size``) and the server CPU per value (the backend's
   ``/proc/<pid>/schedstat``, so only on a server on this machine; elsewhere the wall
   time per value is printed instead). The benchmark's synthetic text (a 22-word
   vocabulary), English prose (license and documentation files found on this machine),
   JSON-like rows, and a value already compressed by ``CompressedSerializer`` (zstd).
2. The graph workload (benchmarks/workload.py, sync and async): the same run with the
   value columns set to pglz and to lz4, interleaved, each on a fresh database:
   turns/s, turn latency p50, ``get_state``, full history, the server's CPU time for
   the whole run, and the bytes of the database's tables.

Without ``--url``, a private PostgreSQL server is started (tests/servers.py); with it,
databases named ``bench_toast_*`` are created on that server and dropped after.
Medians of the interleaved repeats, with each repeat's lz4 / pglz ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import random
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from . import graph_level
from .contenders import contenders
from .databases import Database, Servers, servers
from .workload import Shape, notes, record

# The value columns (docs/configuration.md, "Large values": switching them to lz4).
VALUE_COLUMNS = (
    ("checkpoint_blobs", "blob"),
    ("checkpoint_writes", "blob"),
    ("checkpoints", "checkpoint"),
    ("checkpoints", "metadata"),
    ("store_items", "value"),
    ("cache_entries", "value"),
)
METHODS = ("pglz", "lz4")
PROSE_FILES = (
    "/usr/share/common-licenses/GPL-3",
    "/usr/share/common-licenses/Apache-2.0",
    "/usr/share/common-licenses/GPL-2",
    "/usr/share/common-licenses/LGPL-3",
)


# --- server CPU ----------------------------------------------------------------------


def _cpu_ns(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _server_cpu_ns(postmaster: int) -> int | None:
    """CPU time of the whole server: its live processes, plus what the postmaster's
    ended children used (cutime + cstime, in clock ticks)."""
    stat = Path(f"/proc/{postmaster}/stat")
    if not stat.exists():
        return None
    fields = stat.read_text().rsplit(")", 1)[1].split()
    total = (int(fields[13]) + int(fields[14])) * 10_000_000  # 100 ticks/s
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == postmaster or int(proc.name) == postmaster:
                total += _cpu_ns(int(proc.name)) or 0
    return total


def _postmaster(conn: Any) -> int:
    backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    try:
        return int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1  # not on this machine


# --- 1. value by value ---------------------------------------------------------------


def _prose(rng: random.Random, words: list[str], n_chars: int) -> str:
    """A contiguous passage (real sentences, not a bag of words)."""
    i = rng.randrange(len(words))
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < n_chars:
        out.append(words[i % len(words)])
        i += 1
    return " ".join(out)


def payloads() -> dict[str, tuple[str, bytes]]:
    """name -> (column type, value)."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from lg_sqla.serde import CompressedSerializer

    serde = JsonPlusSerializer()
    out: dict[str, tuple[str, bytes]] = {}
    out["benchmark notes dict (synthetic)"] = ("bytea", serde.dumps_typed(notes(0))[1])
    longest = b""
    for kind, args in record(Shape(threads=1, turns=8)).threads["thread-0"]:
        messages = args[1]["channel_values"].get("messages") if kind == "put" else None
        if messages is not None:
            longest = max(longest, serde.dumps_typed(messages)[1], key=len)
    out["benchmark messages, 8 turns (synthetic)"] = ("bytea", longest)
    words = [w for f in PROSE_FILES if Path(f).exists() for w in Path(f).read_text().split()]
    rng = random.Random(20261123)
    if words:
        messages = [
            (HumanMessage if i % 2 == 0 else AIMessage)(content=_prose(rng, words, 600), id=f"{i}")
            for i in range(32)
        ]
        out["32 messages of English prose"] = ("bytea", serde.dumps_typed(messages)[1])
        docs = {
            f"doc-{i}": {"title": _prose(rng, words, 30), "body": _prose(rng, words, 400)}
            for i in range(110)
        }
        out["50 kB dict of English prose"] = ("bytea", serde.dumps_typed(docs)[1])
        out["the same dict as a store value"] = ("jsonb", json.dumps(docs).encode())
        zstd = CompressedSerializer().dumps_typed(messages)[1]
        out["32 messages, CompressedSerializer (zstd)"] = ("bytea", zstd)
    rows = [
        {
            "id": str(uuid.UUID(int=rng.getrandbits(128))),
            "price": round(rng.uniform(1, 1000), 2),
            "qty": rng.randrange(100),
            "status": rng.choice(["new", "paid", "shipped", "returned"]),
        }
        for _ in range(400)
    ]
    out["tool result: 400 JSON-like rows"] = ("bytea", serde.dumps_typed(rows)[1])
    return out


def _one(conn: Any, table: str, kind: str, value: bytes, n: int) -> dict[str, float]:
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    param: Any = value.decode() if kind == "jsonb" else value
    cast = "::text::jsonb" if kind == "jsonb" else ""
    conn.execute(f"TRUNCATE {table}")
    cpu0, start = _cpu_ns(pid), time.perf_counter()
    for i in range(n):
        conn.execute(f"INSERT INTO {table} VALUES (%s, %s{cast})", (i, param), prepare=True)
    cpu1, middle = _cpu_ns(pid), time.perf_counter()
    for i in range(n):
        conn.execute(f"SELECT b FROM {table} WHERE id = %s", (i,), prepare=True).fetchone()
    cpu2, end = _cpu_ns(pid), time.perf_counter()
    size = conn.execute(f"SELECT pg_column_size(b) FROM {table} LIMIT 1").fetchone()[0]
    if cpu0 is None or cpu1 is None or cpu2 is None:  # a remote server: wall time
        write, read = (middle - start) * 1e6, (end - middle) * 1e6
    else:
        write, read = (cpu1 - cpu0) / 1000, (cpu2 - cpu1) / 1000
    return {"bytes": size, "write_us": write / n, "read_us": read / n}


def by_value(admin_url: str, repeats: int, n: int = 200) -> list[dict[str, Any]]:
    import psycopg

    results = []
    with _database(admin_url) as url, psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = on")  # as a real server commits
        for kind in ("bytea", "jsonb"):
            for method in METHODS:
                column = f"b {kind} COMPRESSION {method}"
                conn.execute(f"CREATE TABLE {kind}_{method} (id int PRIMARY KEY, {column})")
        local = _cpu_ns(conn.execute("SELECT pg_backend_pid()").fetchone()[0]) is not None
        for name, (kind, value) in payloads().items():
            runs: dict[str, list[dict[str, float]]] = {m: [] for m in METHODS}
            for r in range(repeats):
                for method in METHODS if r % 2 == 0 else METHODS[::-1]:
                    runs[method].append(_one(conn, f"{kind}_{method}", kind, value, n))
            row: dict[str, Any] = {"payload": name, "raw_bytes": len(value), "server_cpu": local}
            for method, samples in runs.items():
                for key in ("bytes", "write_us", "read_us"):
                    row[f"{method}_{key}"] = statistics.median(s[key] for s in samples)
                row[f"{method}_write_us_range"] = (
                    min(s["write_us"] for s in samples),
                    max(s["write_us"] for s in samples),
                )
            results.append(row)
    return results


# --- 2. the graph workload -----------------------------------------------------------


def _set_compression(db: Database, method: str) -> None:
    engine = sa.create_engine(db.sync_url)
    try:
        with engine.begin() as conn:
            for table, column in VALUE_COLUMNS:
                conn.exec_driver_sql(
                    f'ALTER TABLE {table} ALTER COLUMN "{column}" SET COMPRESSION {method}'
                )
    finally:
        engine.dispose()


def _graph_once(srv: Servers, method: str, is_async: bool, shape: Shape) -> dict[str, float]:
    import psycopg

    from lg_sqla import migrate

    ours, _ = contenders("postgres", is_async)
    with srv.fresh("postgres") as db:
        engine = sa.create_engine(db.sync_url)
        try:
            migrate.upgrade(engine)
        finally:
            engine.dispose()
        _set_compression(db, method)
        native = sa.make_url(db.sync_url).set(drivername="postgresql")
        with psycopg.connect(native.render_as_string(False)) as monitor:
            postmaster = _postmaster(monitor)

            def cpu() -> int | None:
                return _server_cpu_ns(postmaster)

            gc.collect()
            if is_async:

                async def go() -> tuple[dict[str, float], int | None, int | None]:
                    async with ours.open(db) as saver:
                        before = cpu()
                        result = await graph_level.run_async(saver, shape)
                        return result, before, cpu()

                result, before, after = asyncio.run(go())
            else:
                with ours.open(db) as saver:
                    before = cpu()
                    result = graph_level.run_sync(saver, shape)
                    after = cpu()
        if before is not None and after is not None:
            result["server_cpu_ms"] = (after - before) / 1e6
        result["table_bytes"] = float(srv.storage_bytes(db))
    return result


def graph(srv: Servers, repeats: int, modes: list[str], shape: Shape) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in modes:
        runs: dict[str, list[dict[str, float]]] = {m: [] for m in METHODS}
        for r in range(repeats):
            for method in METHODS if r % 2 == 0 else METHODS[::-1]:
                runs[method].append(_graph_once(srv, method, mode == "async", shape))
        out[mode] = runs
    return out


# --- output --------------------------------------------------------------------------


def _value_table(rows: list[dict[str, Any]]) -> str:
    cpu = "server CPU" if rows and rows[0]["server_cpu"] else "wall time"
    lines = [
        f"| value | raw bytes | stored pglz | stored lz4 | write, {cpu} µs: pglz | lz4 "
        f"| read, {cpu} µs: pglz | lz4 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['payload']} | {r['raw_bytes']:,} | {r['pglz_bytes']:,.0f} | "
            f"{r['lz4_bytes']:,.0f} | {r['pglz_write_us']:,.0f} | {r['lz4_write_us']:,.0f} | "
            f"{r['pglz_read_us']:,.0f} | {r['lz4_read_us']:,.0f} |"
        )
    return "\n".join(lines)


def _graph_table(results: dict[str, Any]) -> str:
    lines = [
        "| mode | metric | pglz | lz4 | lz4 / pglz (each repeat) |",
        "|---|---|---|---|---|",
    ]
    for mode, runs in results.items():
        for key in runs["pglz"][0]:
            a = [run[key] for run in runs["pglz"]]
            b = [run[key] for run in runs["lz4"]]
            ratios = sorted(y / x for x, y in zip(a, b, strict=True))
            lines.append(
                f"| {mode} | {key} | {statistics.median(a):,.1f} | {statistics.median(b):,.1f} "
                f"| **{statistics.median(ratios):.2f}×** "
                f"({', '.join(f'{x:.2f}' for x in ratios)}) |"
            )
    return "\n".join(lines)


@contextlib.contextmanager
def _database(admin_url: str) -> Iterator[str]:
    """A fresh database on the server of ``admin_url``, as a libpq URL."""
    from servers import create_database, drop_database

    name = f"bench_toast_{uuid.uuid4().hex[:8]}"
    create_database(admin_url, name)
    try:
        yield sa.make_url(admin_url).set(database=name).render_as_string(False)
    finally:
        drop_database(admin_url, name)


@contextlib.contextmanager
def _servers(url: str | None) -> Iterator[Servers]:
    if url is None:
        with servers(["postgres"]) as srv:
            yield srv
        return
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="lg_sqla_bench_"))
    try:
        yield Servers({"postgres": url}, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None, log: Callable[[str], None] = print) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.toast", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5, help="interleaved repeats (default 5)")
    parser.add_argument("--modes", default="sync,async", help="graph level: sync, async or both")
    parser.add_argument("--url", help="a PostgreSQL server's admin URL (default: start one)")
    parser.add_argument("--json", type=Path, help="also save the raw results here")
    args = parser.parse_args(argv)
    with _servers(args.url) as srv:
        admin = srv.admin["postgres"]
        version = srv.server_version("postgres")
        log(version)
        values = by_value(admin, args.repeats)
        log("\nValue by value (medians; one INSERT, then one SELECT, per value):\n")
        log(_value_table(values))
        modes = [m for m in args.modes.split(",") if m]
        graphs = graph(srv, args.repeats, modes, Shape())
        log("\nThe graph workload (benchmarks/workload.py), value columns pglz vs lz4:\n")
        log(_graph_table(graphs))
    if args.json:
        raw = {"server": version, "values": values, "graph": graphs}
        args.json.write_text(json.dumps(raw, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
