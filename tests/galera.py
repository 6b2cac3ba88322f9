"""A throwaway 3-node MariaDB Galera Cluster on loopback, for the ``galera`` tests.

Built from Debian's binaries (``mariadb-server`` with ``galera-4``, ``rsync`` for
state transfers), like the single servers of ``tests/servers.py``: each node has its
own temp data dir and four free ports on 127.0.0.1 (clients, group communication
``gmcast.listen_addr``, incremental state transfer, rsync state transfer), runs as
the unprivileged ``mysql`` user when we are root (rsync SST refuses root), and is
stopped and deleted afterwards. Node 1 starts a new cluster (``--wsrep-new-cluster``),
nodes 2 and 3 join it (a full state transfer by rsync from a donor); the cluster is
ready when every node reports ``wsrep_cluster_size = 3`` and ``Synced``.

``LG_SQLA_TEST_GALERA_URLS`` (three comma-separated admin URLs, one per node) uses a
running cluster instead. Nothing here skips: a missing binary is a ``RuntimeError``,
so CI fails loudly rather than passing without the cluster.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from servers import (
    _INSTALL_HINT,
    _admin_engine,
    _base_dir,
    _check_reachable,
    _check_socket_path,
    _log_tail,
    _mariadb_binaries,
    _owned_dir,
    _run_as,
    _service_user,
    _spawn,
    _stop_mariadb,
    _wait_until_ready,
)

GALERA_URLS_ENV = "LG_SQLA_TEST_GALERA_URLS"
GALERA_PROVIDER = "/usr/lib/galera/libgalera_smm.so"
NODES = 3
# A cold start of three nodes (two rsync state transfers) on a loaded 2-core box.
CLUSTER_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class GaleraCluster:
    """Admin URLs (``mysql://root@127.0.0.1:PORT``), one per node, node 1 first."""

    urls: tuple[str, ...]
    started_in_s: float = 0.0
    # The node servers' processes, node 1 first (empty for a cluster from the env).
    procs: tuple[subprocess.Popen[bytes], ...] = ()

    def kill(self, node: int) -> None:
        """SIGKILL node ``node`` (1-based): no shutdown, its clients cut."""
        if not self.procs:
            raise RuntimeError(f"{GALERA_URLS_ENV}: a cluster not started here cannot be killed")
        proc = self.procs[node - 1]
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def galera_cluster() -> Iterator[GaleraCluster]:
    from_env = os.environ.get(GALERA_URLS_ENV)
    if from_env:
        urls = tuple(u.strip() for u in from_env.split(",") if u.strip())
        if len(urls) != NODES:
            raise RuntimeError(f"{GALERA_URLS_ENV} must list {NODES} admin URLs, got {urls}")
        wait_until_synced(urls, timeout=10)
        yield GaleraCluster(urls)
        return
    with _local_galera() as cluster:
        yield cluster


def _galera_binaries() -> tuple[str, str]:
    server, install_db = _mariadb_binaries()
    missing = [
        what
        for what, ok in (
            (GALERA_PROVIDER, Path(GALERA_PROVIDER).is_file()),
            ("rsync", shutil.which("rsync") is not None),
            ("wsrep_sst_rsync", shutil.which("wsrep_sst_rsync") is not None),
        )
        if not ok
    ]
    if missing:
        raise RuntimeError(
            f"cannot start a Galera cluster: missing {', '.join(missing)} "
            "(Debian packages galera-4, rsync, mariadb-server). " + _INSTALL_HINT
        )
    return server, install_db


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports on 127.0.0.1 (all bound at once, then released)."""
    import socket

    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


@contextlib.contextmanager
def _local_galera() -> Iterator[GaleraCluster]:
    started = time.monotonic()
    server, install_db = _galera_binaries()
    user = _service_user("mysql")
    base = _base_dir()
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    try:
        _check_reachable(base, user)
        ports = _free_ports(4 * NODES)
        client = ports[0:NODES]
        gmcast = ports[NODES : 2 * NODES]
        ist = ports[2 * NODES : 3 * NODES]
        sst = ports[3 * NODES : 4 * NODES]
        cluster_address = "gcomm://" + ",".join(f"127.0.0.1:{p}" for p in gmcast)

        homes = [_owned_dir(base / f"node{n + 1}", user) for n in range(NODES)]
        # One system-table install, copied: the joiners' data is replaced by their
        # state transfer anyway, but the server wants a data dir to start in.
        _run_as(
            user,
            [
                install_db,
                "--no-defaults",
                f"--datadir={homes[0] / 'data'}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            log_file=homes[0] / "install-db.log",
            what="mariadb-install-db",
        )
        for home in homes[1:]:
            _run_as(
                user,
                ["cp", "-a", str(homes[0] / "data"), str(home / "data")],
                log_file=home / "copy.log",
                what="copy of the data dir",
            )

        def argv(n: int) -> list[str]:
            home = homes[n]
            sock = home / "mysqld.sock"
            _check_socket_path(sock)
            tmp = home / "tmp"
            if not tmp.exists():
                _owned_dir(tmp, user)
            provider_options = ";".join(
                (
                    f"gmcast.listen_addr=tcp://127.0.0.1:{gmcast[n]}",
                    f"ist.recv_addr=127.0.0.1:{ist[n]}",
                    "gcache.size=64M",
                    # Loopback and a loaded box: a node that misses a few heartbeats
                    # while the CPU is busy must not be evicted.
                    "evs.suspect_timeout=PT30S",
                    "evs.inactive_timeout=PT60S",
                    "evs.install_timeout=PT60S",
                    "pc.wait_prim_timeout=PT60S",
                )
            )
            args = [
                server,
                "--no-defaults",
                f"--datadir={home / 'data'}",
                f"--socket={sock}",
                f"--tmpdir={tmp}",
                f"--pid-file={home / 'mysqld.pid'}",
                f"--log-error={home / 'error.log'}",
                "--bind-address=127.0.0.1",
                f"--port={client[n]}",
                "--skip-name-resolve",
                "--character-set-server=utf8mb4",
                "--max-allowed-packet=64M",
                "--skip-log-bin",
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-doublewrite=0",
                "--innodb-use-native-aio=0",
                "--innodb-buffer-pool-size=64M",
                "--innodb-log-file-size=16M",
                # Galera's requirements.
                "--binlog-format=ROW",
                "--default-storage-engine=InnoDB",
                "--innodb-autoinc-lock-mode=2",
                "--wsrep-on=ON",
                f"--wsrep-provider={GALERA_PROVIDER}",
                f"--wsrep-cluster-address={cluster_address}",
                "--wsrep-cluster-name=lg_sqla_test",
                f"--wsrep-node-name=node{n + 1}",
                "--wsrep-node-address=127.0.0.1",
                f"--wsrep-node-incoming-address=127.0.0.1:{client[n]}",
                f"--wsrep-provider-options={provider_options}",
                "--wsrep-sst-method=rsync",
                f"--wsrep-sst-receive-address=127.0.0.1:{sst[n]}",
                "--wsrep-slave-threads=2",
            ]
            if n == 0:
                args.append("--wsrep-new-cluster")
            return args

        urls = tuple(f"mysql://root@127.0.0.1:{port}" for port in client)
        deadline = started + CLUSTER_TIMEOUT_S

        def start(n: int) -> None:
            proc = _spawn(user, argv(n), homes[n] / "stdout.log")
            procs.append((proc, homes[n] / "error.log"))
            _wait_until_ready(
                urls[n],
                what=f"Galera node {n + 1}",
                timeout=max(deadline - time.monotonic(), 1),
                log_file=homes[n] / "error.log",
                is_alive=lambda: proc.poll() is None,
            )

        start(0)
        # The joiners start together; the cluster serializes their state transfers.
        with concurrent.futures.ThreadPoolExecutor(NODES - 1) as pool:
            for future in [pool.submit(start, n) for n in range(1, NODES)]:
                future.result()
        wait_until_synced(
            urls,
            timeout=max(deadline - time.monotonic(), 1),
            logs=[home / "error.log" for home in homes],
        )
        by_node = {str(home): proc for proc, log in procs for home in [log.parent]}
        yield GaleraCluster(
            urls,
            started_in_s=time.monotonic() - started,
            procs=tuple(by_node[str(home)] for home in homes),
        )
    finally:
        try:
            _stop_nodes(procs)
        finally:
            shutil.rmtree(base, ignore_errors=True)


def _stop_nodes(procs: list[tuple[subprocess.Popen[bytes], Path]]) -> None:
    """Joiners first, the first node last, one at a time (each SIGTERM: a clean
    shutdown). Stopped together, two nodes each waited ~20 s for the other to leave;
    one at a time each leaves in ~0.1 s."""
    errors: list[BaseException] = []
    for proc, log in reversed(procs):
        try:
            _stop_mariadb(proc, log)
        except BaseException as error:
            errors.append(error)
    if errors:
        raise errors[0]


def node_status(url: str) -> dict[str, str]:
    engine = _admin_engine(url, io_timeout=10)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SHOW GLOBAL STATUS LIKE 'wsrep%'")).all()
        return {str(name): str(value) for name, value in rows}
    finally:
        engine.dispose()


def wait_until_synced(
    urls: tuple[str, ...], *, timeout: float, logs: list[Path] | None = None
) -> None:
    """Until every node is in a primary component of ``len(urls)`` nodes and Synced."""
    deadline = time.monotonic() + timeout
    last: list[str] = []
    while True:
        last = []
        for url in urls:
            try:
                status = node_status(url)
            except sa.exc.DBAPIError as error:
                last.append(f"{url}: {error}")
                continue
            size = status.get("wsrep_cluster_size")
            state = status.get("wsrep_local_state_comment")
            primary = status.get("wsrep_cluster_status")
            if size != str(len(urls)) or state != "Synced" or primary != "Primary":
                last.append(f"{url}: size={size} state={state} status={primary}")
        if not last:
            return
        if time.monotonic() > deadline:
            tails = "\n".join(_log_tail(log, 25) for log in logs or [])
            raise RuntimeError(
                f"the Galera cluster did not reach {len(urls)} Synced nodes within "
                f"{timeout:.0f}s: {'; '.join(last)}\n{tails}"
            )
        time.sleep(0.2)
