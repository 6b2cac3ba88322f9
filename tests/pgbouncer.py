"""PgBouncer (Debian's ``pgbouncer``) in front of a test PostgreSQL server, for the
``pgbouncer`` tests.

One PgBouncer process per pool mode (``session``, ``transaction``), each on a free
port of 127.0.0.1, forwarding every database name to the server (``* = host=...``),
with trust auth (the server trusts loopback too). Run as the ``postgres`` user when
we are root (PgBouncer refuses root). Nothing here skips: a missing binary is a
``RuntimeError`` naming the package.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass

from servers import (
    _INSTALL_HINT,
    _base_dir,
    _check_reachable,
    _free_port,
    _owned_dir,
    _service_user,
    _spawn,
    _wait_until_ready,
)
from sqlalchemy.engine import make_url

MODES = ("session", "transaction")


@dataclass(frozen=True)
class Bouncers:
    """Admin-style URLs (``postgresql://postgres@127.0.0.1:PORT``) by pool mode."""

    urls: dict[str, str]


def _binary() -> str:
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin")
    if found is None:
        raise RuntimeError("no pgbouncer binary (Debian package pgbouncer). " + _INSTALL_HINT)
    return found


@contextlib.contextmanager
def pgbouncers(server_admin_url: str) -> Iterator[Bouncers]:
    """A PgBouncer per pool mode in front of ``server_admin_url``'s server."""
    binary = _binary()
    server = make_url(server_admin_url)
    user = _service_user("postgres")
    base = _base_dir()
    procs = []
    try:
        _check_reachable(base, user)
        urls = {}
        for mode in MODES:
            home = _owned_dir(base / mode, user)
            port = _free_port()
            (home / "userlist.txt").write_text('"postgres" ""\n')
            (home / "pgbouncer.ini").write_text(
                "[databases]\n"
                f"* = host={server.host} port={server.port}\n"
                "[pgbouncer]\n"
                "listen_addr = 127.0.0.1\n"
                f"listen_port = {port}\n"
                "unix_socket_dir =\n"
                "auth_type = trust\n"
                f"auth_file = {home / 'userlist.txt'}\n"
                f"pool_mode = {mode}\n"
                "max_client_conn = 500\n"
                # Transaction mode: fewer server connections than the tests' clients,
                # so one server session really serves many clients in turn. Session
                # mode pins one per client connection: as many as a test's pools hold.
                f"default_pool_size = {4 if mode == 'transaction' else 30}\n"
                "admin_users = postgres\n"
                # psycopg and asyncpg send these at connect; PgBouncer refuses unknown ones.
                "ignore_startup_parameters = extra_float_digits,options\n"
            )
            proc = _spawn(user, [binary, str(home / "pgbouncer.ini")], home / "pgbouncer.log")
            procs.append(proc)
            url = f"postgresql://postgres@127.0.0.1:{port}"
            _wait_until_ready(
                url,
                what=f"PgBouncer ({mode} mode)",
                log_file=home / "pgbouncer.log",
                is_alive=lambda proc=proc: proc.poll() is None,  # type: ignore[misc]
            )
            urls[mode] = url
        yield Bouncers(urls)
    finally:
        for proc in procs:
            proc.terminate()  # SIGTERM: PgBouncer shuts down at once
            try:
                proc.wait(timeout=30)
            except Exception:
                proc.kill()
                proc.wait()
        shutil.rmtree(base, ignore_errors=True)
