"""CPU, not wall clock, on one long thread: what the saver's calls cost per turn.

``python -m benchmarks.saver_cpu DIALECT LEVEL LENGTHS`` runs the long levels' thread
(``long``: the chat graph, ``long-delta``: ``messages`` on a DeltaChannel) with
lg_sqla's sync saver and then the official one, each on a fresh database, and prints,
for the 5 turns ending at each length: the thread CPU time spent inside each saver
method (``get_tuple``, ``put``, ``put_writes``, ``get_delta_channel_history``;
whichever thread LangGraph runs them on), the database server's CPU time (PostgreSQL:
the postmaster and its backends; MariaDB: mysqld; read from ``/proc/<pid>/task/*/
schedstat``, so Linux only), and lg_sqla / official of their sum.

``--calls N`` then also times N calls of ``get_tuple`` and of
``get_delta_channel_history`` (the ``messages`` channel) on the finished thread.

On a shared machine, wall-clock ratios are noise; CPU time per call much less so.
The servers are the benchmark's own (``databases.servers``): nothing else runs on them.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from .contenders import contenders
from .databases import servers
from .workload import WORKLOADS, config, user_turn

METHODS = ("get_tuple", "put", "put_writes", "get_delta_channel_history")
LEVELS = {"long": "graph", "long-delta": "delta"}
WINDOW = 5


def _tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and its direct children, every thread (nanosecond counters)."""
    pids = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                pids.append(int(entry.name))
    total = 0
    for one in pids:
        try:
            for task in Path(f"/proc/{one}/task").iterdir():
                with contextlib.suppress(OSError):  # (a thread that ended meanwhile)
                    total += int((task / "schedstat").read_text().split()[0])
        except OSError:
            pass
    return total / 1e9


class ServerCPU:
    """The server's CPU time so far (0 for SQLite, which runs in the client)."""

    def __init__(self, dialect: str, url: str) -> None:
        self.pid: int | None = None
        if dialect == "sqlite":
            return
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                if dialect == "postgres":
                    backend = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
                    stat = Path(f"/proc/{backend}/stat").read_text()
                    self.pid = int(stat.rsplit(")", 1)[1].split()[1])  # the postmaster
                else:
                    pid_file = conn.exec_driver_sql("SELECT @@pid_file").scalar_one()
                    self.pid = int(Path(pid_file).read_text().strip())
        finally:
            engine.dispose()

    def seconds(self) -> float:
        return 0.0 if self.pid is None else _tree_cpu_seconds(self.pid)


def _count_cpu(saver: Any, spent: collections.Counter[str]) -> None:
    """Wrap the saver's methods (on the instance) to add their thread CPU to ``spent``."""
    lock = threading.Lock()
    for name in METHODS:
        original = getattr(saver, name)

        def counted(*args: Any, _original: Any = original, _name: str = name, **kw: Any) -> Any:
            start = time.thread_time_ns()
            try:
                return _original(*args, **kw)
            finally:
                used = time.thread_time_ns() - start
                with lock:
                    spent[_name] += used

        setattr(saver, name, counted)


def _per_call(fn: Callable[[], Any], server: ServerCPU, calls: int) -> tuple[float, float]:
    fn()
    client, on_server = [], []
    for _ in range(calls):
        before_server, before = server.seconds(), time.thread_time()
        fn()
        client.append(time.thread_time() - before)
        on_server.append(server.seconds() - before_server)
    return statistics.median(client) * 1e3, statistics.median(on_server) * 1e3


def _time_reads(
    saver: Any,
    server: ServerCPU,
    calls: int,
    level: str,
    ours: bool,
    per_call: dict[tuple[bool, str], tuple[float, float]],
) -> None:
    head = saver.get_tuple(config("long")).config
    per_call[(ours, "get_tuple")] = _per_call(
        lambda: saver.get_tuple(config("long")), server, calls
    )
    if level == "long-delta":
        per_call[(ours, "get_delta_channel_history")] = _per_call(
            lambda: saver.get_delta_channel_history(config=head, channels=["messages"]),
            server,
            calls,
        )


def run(dialect: str, level: str, lengths: list[int], calls: int) -> None:
    workload = WORKLOADS[LEVELS[level]]
    found: dict[tuple[bool, int], tuple[dict[str, float], float]] = {}
    per_call: dict[tuple[bool, str], tuple[float, float]] = {}
    with servers([dialect]) as srv:
        for contender in contenders(dialect, False):
            with srv.fresh(dialect) as db, contender.open(db) as saver:
                server = ServerCPU(dialect, db.sync_url)
                spent: collections.Counter[str] = collections.Counter()
                _count_cpu(saver, spent)
                graph = workload.compile(saver)
                # The window of each length (lengths closer than WINDOW share turns).
                starts = {max(1, length - WINDOW + 1): length for length in lengths}
                server_start, first = 0.0, 1
                for turn in range(1, max(lengths) + 1):
                    if turn in starts:
                        spent.clear()
                        server_start, first = server.seconds(), turn
                    graph.invoke(user_turn("long", turn), config("long"))
                    if turn in lengths:
                        turns = turn - first + 1
                        on_server = (server.seconds() - server_start) * 1e3 / turns
                        ms = {m: spent[m] / 1e6 / turns for m in METHODS}
                        found[(contender.ours, turn)] = (ms, on_server)
                if calls:
                    _time_reads(saver, server, calls, level, contender.ours, per_call)
    for length in lengths:
        (ours, ours_server), (official, official_server) = (
            found[(True, length)],
            found[(False, length)],
        )
        total_ours = sum(ours.values()) + ours_server
        total_official = sum(official.values()) + official_server
        methods = " ".join(
            f"{m}={ours[m]:.2f}/{official[m]:.2f}" for m in METHODS if ours[m] or official[m]
        )
        print(
            f"{dialect} {level} turn {length}: saver+server CPU ms/turn "
            f"{total_ours:.2f}/{total_official:.2f} = {total_ours / total_official:.2f}x "
            f"(server {ours_server:.2f}/{official_server:.2f}; {methods})"
        )
    for (ours_flag, name), (client, on_server) in sorted(per_call.items()):
        if ours_flag:
            other_client, other_server = per_call[(False, name)]
            print(
                f"{dialect} {level} per call {name}: client+server ms "
                f"{client + on_server:.2f}/{other_client + other_server:.2f} = "
                f"{(client + on_server) / (other_client + other_server):.2f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("dialect", choices=["sqlite", "postgres", "mysql"])
    parser.add_argument("level", choices=sorted(LEVELS))
    parser.add_argument("lengths", help="comma-separated thread lengths, e.g. 10,100")
    parser.add_argument("--calls", type=int, default=0)
    args = parser.parse_args()
    run(args.dialect, args.level, [int(x) for x in args.lengths.split(",")], args.calls)


if __name__ == "__main__":
    main()
