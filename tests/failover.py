"""A PostgreSQL primary and synchronous standby on loopback that can fail over again
and again, for the ``failover`` tests (tests/integration/clusters/test_failover.py).

Two nodes, each with its own data dir and a fixed port for its whole life, so one
libpq multi-host URL (``?host=127.0.0.1:A&host=127.0.0.1:B&target_session_attrs=
read-write``) names the writable one whichever it is. :meth:`Pair.fail_over` crashes
the primary (``pg_ctl stop -m immediate``: no shutdown checkpoint, clients cut) and
promotes the standby; :meth:`Pair.rebuild_standby` makes the crashed node a standby
of the new primary again (``pg_basebackup -R`` into a fresh data dir) and turns
synchronous replication back on once it streams (``sync_state = 'sync'``).

Replication settings, as a production pair would have them: the primary waits for
the standby's flush at every commit (``synchronous_commit = on``,
``synchronous_standby_names = '*'``), so an acknowledged commit is on both nodes; a
standby comes with ``synchronous_standby_names = ''``, so once promoted, alone, it
commits without waiting for a standby it does not have (a promoted standby that
still names one waits for ever: what ``call_timeout`` is for). Everything through
``postgresql.conf`` lines (later ones win), none through ``ALTER SYSTEM``, whose
``postgresql.auto.conf`` a base backup would copy to the next standby.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from servers import (
    _admin_engine,
    _base_dir,
    _check_reachable,
    _free_port,
    _log_tail,
    _owned_dir,
    _pg_quote,
    _postgres_bindir,
    _run_as,
    _service_user,
    _spawn,
    _stop_postgres,
    _wait_until_ready,
)

READY_S = 60.0

_NODE_CONF = (
    "listen_addresses = '127.0.0.1'\n"
    "wal_level = replica\n"
    "max_wal_senders = 4\n"
    "hot_standby = on\n"
    "fsync = off\n"  # (a throwaway server; replication, not the disk, is under test)
    "full_page_writes = off\n"
    "synchronous_commit = on\n"
    "wal_sender_timeout = 5s\n"
    "wal_receiver_status_interval = 1s\n"
)


@dataclass
class _Node:
    name: str
    port: int
    home: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}"


@dataclass
class Pair:
    """Two nodes; ``primary`` is the index of the writable one."""

    nodes: list[_Node]
    bindir: Path
    user: object
    primary: int = 0
    failovers: list[float] = field(default_factory=list)  # seconds crash -> promoted

    @property
    def standby(self) -> int:
        return 1 - self.primary

    def admin_url(self, node: int) -> str:
        return self.nodes[node].admin_url

    def url(self, database: str, driver: str = "psycopg") -> str:
        """The multi-host URL of ``database``: libpq tries both, keeps the writable one."""
        hosts = "&".join(f"host=127.0.0.1:{node.port}" for node in self.nodes)
        return (
            f"postgresql+{driver}://postgres@/{database}?{hosts}"
            "&target_session_attrs=read-write&connect_timeout=5"
        )

    # --- node processes ---------------------------------------------------------

    def _append_conf(self, node: _Node, lines: str) -> None:
        with (node.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# tests/failover.py\n" + lines)

    def _start(self, node: _Node) -> None:
        node.proc = _spawn(
            self.user,  # type: ignore[arg-type]
            [str(self.bindir / "postgres"), "-D", str(node.data)],
            node.home / "server.log",
        )
        proc = node.proc
        _wait_until_ready(
            node.admin_url,
            what=f"PostgreSQL {node.name}",
            timeout=READY_S,
            log_file=node.home / "server.log",
            is_alive=lambda: proc.poll() is None,
        )

    def _pg_ctl(self, node: _Node, *args: str) -> None:
        _run_as(
            self.user,  # type: ignore[arg-type]
            [str(self.bindir / "pg_ctl"), "-D", str(node.data), *args],
            log_file=node.home / "pg_ctl.log",
            what=f"pg_ctl {' '.join(args)} on {node.name}",
        )

    def crash(self, node_index: int) -> None:
        """``pg_ctl stop -m immediate``: no checkpoint, every client cut at once."""
        node = self.nodes[node_index]
        self._pg_ctl(node, "stop", "-m", "immediate", "-w", "-t", "30")
        assert node.proc is not None
        node.proc.wait(timeout=30)
        node.proc = None

    def restart(self, node_index: int) -> None:
        self._start(self.nodes[node_index])

    def fail_over(self, before_promotion: Callable[[], None] = lambda: None) -> None:
        """Crash the primary, then (once ``before_promotion`` returns: a condition the
        test waits for during the outage) promote the standby (``pg_ctl promote -w``)."""
        crashed = time.monotonic()
        self.crash(self.primary)
        before_promotion()
        self._pg_ctl(self.nodes[self.standby], "promote", "-w", "-t", "60")
        self.primary = self.standby
        self.failovers.append(time.monotonic() - crashed)

    def rebuild_standby(self) -> None:
        """The node that is not the primary, stopped, made anew from a base backup of
        the primary; then synchronous replication on again."""
        node, primary = self.nodes[self.standby], self.nodes[self.primary]
        if node.proc is not None:
            self.crash(self.standby)
        if node.data.exists():
            shutil.rmtree(node.data)
        _run_as(
            self.user,  # type: ignore[arg-type]
            [
                str(self.bindir / "pg_basebackup"),
                f"--dbname=host=127.0.0.1 port={primary.port} user=postgres",
                "-D",
                str(node.data),
                "-R",
                "-X",
                "stream",
                "--no-sync",
                # An immediate checkpoint, not a spread one: after a promotion the
                # primary's own checkpoint is spread over minutes, and a base backup
                # waits for it unless it asks for speed.
                "--checkpoint=fast",
                f"--label=standby-{len(self.failovers)}",
            ],
            log_file=node.home / "basebackup.log",
            what="pg_basebackup",
        )
        self._append_conf(
            node,
            f"port = {node.port}\n"
            f"unix_socket_directories = '{_pg_quote(str(node.home))}'\n"
            "synchronous_standby_names = ''\n",
        )
        self._start(node)
        self._append_conf(primary, "synchronous_standby_names = '*'\n")
        self._sql(self.primary, "SELECT pg_reload_conf()")
        self._wait_synchronous()

    def _sql(self, node_index: int, statement: str) -> list[tuple[object, ...]]:
        engine = _admin_engine(self.admin_url(node_index), io_timeout=10)
        try:
            with engine.connect() as conn:
                rows = [tuple(row) for row in conn.execute(sa.text(statement)).all()]
                conn.commit()
                return rows
        finally:
            engine.dispose()

    def _wait_synchronous(self) -> None:
        """Until the primary has a standby in ``sync`` state and a synchronous setting."""
        deadline = time.monotonic() + READY_S
        while True:
            states = self._sql(
                self.primary, "SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'"
            )
            names = self._sql(self.primary, "SHOW synchronous_standby_names")
            if ("sync",) in states and names == [("*",)]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"no synchronous standby within {READY_S:.0f}s: {states} {names}\n"
                    + _log_tail(self.nodes[self.standby].home / "server.log")
                )
            time.sleep(0.1)


@contextlib.contextmanager
def failover_pair() -> Iterator[Pair]:
    """A primary (node a) and its synchronous standby (node b), on loopback."""
    bindir = _postgres_bindir()
    user = _service_user("postgres")
    base = _base_dir()
    pair: Pair | None = None
    try:
        _check_reachable(base, user)
        nodes = [_Node(name, _free_port(), _owned_dir(base / name, user)) for name in "ab"]
        for node in nodes:
            _check_reachable(node.home, user)
        pair = Pair(nodes, bindir, user)
        first = nodes[0]
        _run_as(
            user,
            [
                str(bindir / "initdb"),
                "-D",
                str(first.data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
            log_file=first.home / "initdb.log",
            what="initdb",
        )
        pair._append_conf(
            first,
            _NODE_CONF
            + f"port = {first.port}\n"
            + f"unix_socket_directories = '{_pg_quote(str(first.home))}'\n",
        )
        pair._start(first)
        pair.rebuild_standby()  # (node b: a standby of a, and a synchronous one)
        yield pair
    finally:
        if pair is not None:
            for node in pair.nodes:
                if node.proc is not None and node.proc.poll() is None:
                    try:
                        _stop_postgres(
                            user,
                            str(bindir / "pg_ctl"),
                            node.data,
                            node.home,
                            node.proc,
                        )
                    except Exception:
                        node.proc.send_signal(signal.SIGQUIT)
                        node.proc.wait()
        shutil.rmtree(base, ignore_errors=True)
