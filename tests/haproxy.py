"""Debian's ``haproxy`` as a TCP proxy in front of database nodes, for the cluster
tests: one active node, the others backups, health-checked every 200 ms, so a killed
node's clients reconnect to the next one through the same address.

Nothing here skips: a missing binary is a ``RuntimeError`` naming the package.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence

from servers import _INSTALL_HINT, _base_dir, _free_port, _log_tail

READY_S = 30.0


@contextlib.contextmanager
def haproxy_in_front(ports: Sequence[int]) -> Iterator[int]:
    """Yield the port of a proxy to ``ports`` (the first active, the rest backups)."""
    binary = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin")
    if binary is None:
        raise RuntimeError("no haproxy binary (Debian package haproxy). " + _INSTALL_HINT)
    base = _base_dir()
    port = _free_port()
    servers = "\n".join(
        f"    server node{n + 1} 127.0.0.1:{p} check inter 200ms fall 1 rise 2"
        + (" backup" if n else "")
        for n, p in enumerate(ports)
    )
    config = base / "haproxy.cfg"
    config.write_text(
        "global\n    maxconn 512\n"
        "defaults\n    mode tcp\n    timeout connect 2s\n"
        "    timeout client 10m\n    timeout server 10m\n"
        f"listen nodes\n    bind 127.0.0.1:{port}\n"
        # A backup takes over only while the active node is down; when it is back the
        # proxy does not return to it for clients already moved (they stay).
        "    option allbackups\n"
        f"{servers}\n"
    )
    log = base / "haproxy.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [binary, "-f", str(config), "-db"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + READY_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"haproxy exited at start.\n{_log_tail(log)}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"haproxy did not listen within {READY_S}s.\n{_log_tail(log)}")
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(base, ignore_errors=True)
