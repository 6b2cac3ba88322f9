"""Provision real PostgreSQL and MySQL/MariaDB servers for the test suite.

Each context manager yields an *admin* base URL with no driver and no database,
e.g. ``postgresql://postgres@127.0.0.1:54321`` or ``mysql://root@127.0.0.1:33061``.
Callers pick the driver and the database (see :func:`sqlalchemy_url`).

Resolution order, per dialect (first that applies wins):

1. ``LG_SQLA_TEST_POSTGRES_URL`` / ``LG_SQLA_TEST_MYSQL_URL``: used as-is, nothing started.
2. testcontainers, but only when a Docker engine actually answers
   (set ``LG_SQLA_TEST_DOCKER=0`` to skip this step).
3. A private throwaway server built from the locally installed Debian binaries
   (``postgresql-15``, ``mariadb-server``; ``tests/bootstrap.sh`` installs them):
   temp data dir, free port on 127.0.0.1 only, passwordless auth, durability off.

If none applies, a ``RuntimeError`` says what to install or set. Nothing here
imports pytest, so the module can also be used from a REPL or a script.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypedDict

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import NullPool

POSTGRES_URL_ENV = "LG_SQLA_TEST_POSTGRES_URL"
MYSQL_URL_ENV = "LG_SQLA_TEST_MYSQL_URL"
PGVECTOR_URL_ENV = "LG_SQLA_TEST_PGVECTOR_URL"
TMP_ENV = "LG_SQLA_TEST_TMP"
DOCKER_ENV = "LG_SQLA_TEST_DOCKER"

# Generous: a cold first start on a loaded 2-core CI box must not flake.
READY_TIMEOUT_S = 60.0

# sun_path is 108 bytes on Linux; servers refuse longer socket paths, so we
# check up front and fail with an actionable message instead of a log dump.
_MAX_SOCKET_PATH = 100

_INSTALL_HINT = (
    "Run `bash tests/bootstrap.sh` (installs the Debian packages postgresql-15 and "
    "mariadb-server), or point the tests at running servers with "
    f"{POSTGRES_URL_ENV}=postgresql://USER:PASS@HOST:PORT and "
    f"{MYSQL_URL_ENV}=mysql://root:PASS@HOST:PORT, or start a Docker engine "
    "(testcontainers is used when one answers)."
)


# --------------------------------------------------------------------------- public API


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Yield an admin URL ``postgresql://USER[:PASS]@HOST:PORT`` for a PostgreSQL server."""
    from_env = os.environ.get(POSTGRES_URL_ENV)
    if from_env:
        yield from_env
        return
    if _docker_answers():
        with _postgres_container() as url:
            yield url
        return
    with _local_postgres() as url:
        yield url


@contextlib.contextmanager
def pgvector_server() -> Iterator[str]:
    """Yield an admin URL for a PostgreSQL server that has the pgvector extension.

    ``LG_SQLA_TEST_PGVECTOR_URL`` if set; else a private throwaway server run from the
    binaries of the PyPI package ``pgserver`` (PostgreSQL 16 built with pgvector; in the
    dev dependency group): Debian bookworm has no pgvector package for our PostgreSQL 15.
    Only the vector tests use it; everything else runs on :func:`postgres_server`.
    """
    from_env = os.environ.get(PGVECTOR_URL_ENV)
    if from_env:
        yield from_env
        return
    bindir, user = _pgserver_bindir(), _service_user("postgres")
    try:
        _check_reachable(bindir, user)
    except RuntimeError:
        # As root, the server runs as "postgres", who may not enter the directory of
        # this checkout's virtualenv: a copy of the binaries (~35 MB) where it can.
        # The layout is kept: the binaries find their libraries in ../../../pgserver.libs
        # (the wheel's RPATH).
        copy = _base_dir()
        try:
            package = bindir.parent.parent
            shutil.copytree(package / "pginstall", copy / "pgserver" / "pginstall", symlinks=True)
            libs = package.parent / "pgserver.libs"
            if libs.is_dir():
                shutil.copytree(libs, copy / "pgserver.libs", symlinks=True)
            with _local_postgres(copy / "pgserver" / "pginstall" / "bin", name="pgvector") as url:
                yield url
        finally:
            shutil.rmtree(copy, ignore_errors=True)
        return
    with _local_postgres(bindir, name="pgvector") as url:
        yield url


def _pgserver_bindir() -> Path:
    import importlib.util

    # Found, not imported: only its binaries are used.
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the PyPI package pgserver (PostgreSQL with pgvector) is not installed: run "
            f"`bash tests/bootstrap.sh`, or set {PGVECTOR_URL_ENV} to a server with pgvector"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


@contextlib.contextmanager
def mysql_server() -> Iterator[str]:
    """Yield an admin URL ``mysql://root[:PASS]@HOST:PORT`` for a MySQL/MariaDB server."""
    from_env = os.environ.get(MYSQL_URL_ENV)
    if from_env:
        yield from_env
        return
    if _docker_answers():
        with _mysql_container() as url:
            yield url
        return
    with _local_mariadb() as url:
        yield url


def sqlalchemy_url(admin_url: str, driver: str, database: str | None = None) -> str:
    """Turn an admin base URL into a full SQLAlchemy URL string.

    ``sqlalchemy_url("mysql://root@h:1", "pymysql", "db1")`` -> ``mysql+pymysql://root@h:1/db1``.
    Goes through :class:`URL` so passwords with special characters stay escaped
    (and are not masked: ``str(URL)`` would render them as ``***``).
    """
    url = make_url(admin_url)
    backend = url.get_backend_name()
    url = url.set(drivername=f"{backend}+{driver}", database=database)
    return url.render_as_string(hide_password=False)


def create_database(admin_url: str, name: str, *, mysql_charset: str = "utf8mb4") -> None:
    """Create database ``name``; on MySQL/MariaDB with ``mysql_charset`` (utf8mb4 / utf8mb4_bin).

    The charset is always explicit: our private server runs with utf8mb4 as its
    default, and ``mysql_charset="latin1"`` gives what a plain ``CREATE DATABASE``
    gives on a server left at MariaDB's own default (latin1), which lg_sqla must
    also work in.
    """
    with _admin_connection(admin_url) as conn:
        quoted = conn.dialect.identifier_preparer.quote_identifier(name)
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"CREATE DATABASE {quoted} ENCODING 'UTF8' TEMPLATE template0")
        elif mysql_charset == "utf8mb4":
            conn.exec_driver_sql(
                f"CREATE DATABASE {quoted} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
            )
        else:
            conn.exec_driver_sql(f"CREATE DATABASE {quoted} CHARACTER SET {mysql_charset}")


def drop_database(admin_url: str, name: str) -> None:
    """Drop database ``name`` if it exists."""
    with _admin_connection(admin_url) as conn:
        quoted = conn.dialect.identifier_preparer.quote_identifier(name)
        if conn.dialect.name == "postgresql":
            # FORCE (PG >= 13) disconnects sessions a test may have leaked, e.g. an
            # undisposed pool; otherwise DROP would fail with "being accessed by other users".
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {quoted} WITH (FORCE)")
        else:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {quoted}")


# --------------------------------------------------------------------------- helpers


# Drivers used for admin work and readiness polling; both are in the dev group.
_ADMIN_DRIVERS = {"postgresql": "psycopg", "mysql": "pymysql", "mariadb": "pymysql"}


def _admin_engine(admin_url: str, *, io_timeout: int = 60) -> sa.Engine:
    url = make_url(admin_url)
    backend = url.get_backend_name()
    driver = _ADMIN_DRIVERS.get(backend)
    if driver is None:
        raise ValueError(f"unsupported admin URL backend {backend!r} in {url!r}")
    if backend == "postgresql" and not url.database:
        # A PostgreSQL session always needs a database; "postgres" exists on
        # every initdb-created cluster and in the official image.
        url = url.set(database="postgres")
    url = url.set(drivername=f"{backend}+{driver}")
    connect_args: dict[str, object] = {"connect_timeout": 5}
    if driver == "pymysql":
        # PyMySQL's connect_timeout covers only the TCP connect: without these, a
        # peer that accepts but never answers (e.g. a server dying on startup, or
        # a foreign process on the port) blocks the handshake forever.
        connect_args |= {"read_timeout": io_timeout, "write_timeout": io_timeout}
    # NullPool: admin engines are short-lived; nothing should linger and block DROP.
    return sa.create_engine(url, poolclass=NullPool, connect_args=connect_args)


@contextlib.contextmanager
def _admin_connection(admin_url: str) -> Iterator[sa.Connection]:
    # CREATE/DROP DATABASE cannot run inside a transaction block on PostgreSQL.
    engine = _admin_engine(admin_url).execution_options(isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            yield conn
    finally:
        engine.dispose()


def _wait_until_ready(
    admin_url: str,
    *,
    what: str,
    timeout: float = READY_TIMEOUT_S,
    log_file: Path | None = None,
    is_alive: Callable[[], bool] | None = None,
) -> None:
    """Poll until ``SELECT 1`` succeeds; raise with the server log tail on failure."""
    engine = _admin_engine(admin_url, io_timeout=5)
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    try:
        while time.monotonic() < deadline:
            if is_alive is not None and not is_alive():
                raise RuntimeError(f"{what} exited during startup.\n{_log_tail(log_file)}")
            try:
                with engine.connect() as conn:
                    conn.execute(sa.text("SELECT 1"))
                return
            except sa.exc.DBAPIError as exc:  # refused, reset, auth not ready yet...
                last_error = exc
                time.sleep(0.1)
    finally:
        engine.dispose()
    raise RuntimeError(
        f"{what} did not accept connections within {timeout:.0f}s "
        f"(last error: {last_error}).\n{_log_tail(log_file)}"
    )


def _log_tail(path: Path | None, lines: int = 40) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(no log at {path}: {exc})"
    return f"--- last {lines} lines of {path} ---\n" + "\n".join(text[-lines:])


def _free_port() -> int:
    # The kernel picks an unused port; there is a tiny race until the server
    # binds it, which is acceptable for tests (a clash fails loudly with the log).
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --------------------------------------------------------------------------- Docker


def _docker_answers() -> bool:
    """True only if a Docker engine responds right now (the CLI alone is not enough)."""
    if os.environ.get(DOCKER_ENV, "1") == "0":
        return False
    if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
        # No engine to ask: docker-py's client would open a socket to find out and
        # leave it unclosed when nothing answers (a ResourceWarning in every session).
        return False
    try:
        import docker  # type: ignore[import-untyped]  # dependency of testcontainers
    except ImportError:
        return False
    try:
        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        # Any failure (no socket, daemon down, permission denied) means "no Docker".
        return False


@contextlib.contextmanager
def _postgres_container() -> Iterator[str]:
    try:
        from testcontainers.community.postgres import PostgresContainer
    except ImportError:  # testcontainers < 4.14 keeps the module at the top level
        from testcontainers.postgres import PostgresContainer

    with PostgresContainer("postgres:16", driver=None) as container:
        url = URL.create(
            "postgresql",
            username=container.username,  # the image makes POSTGRES_USER a superuser
            password=container.password,
            host=container.get_container_host_ip(),
            port=int(container.get_exposed_port(5432)),
        ).render_as_string(hide_password=False)
        _wait_until_ready(url, what="PostgreSQL container")
        yield url


@contextlib.contextmanager
def _mysql_container() -> Iterator[str]:
    try:
        from testcontainers.community.mysql import MySqlContainer
    except ImportError:  # testcontainers < 4.14 keeps the module at the top level
        from testcontainers.mysql import MySqlContainer

    with MySqlContainer("mysql:8.4") as container:
        url = URL.create(
            "mysql",
            username="root",  # admin work (CREATE DATABASE) needs root, not MYSQL_USER
            password=container.root_password,
            host=container.get_container_host_ip(),
            port=int(container.get_exposed_port(3306)),
        ).render_as_string(hide_password=False)
        _wait_until_ready(url, what="MySQL container")
        yield url


# --------------------------------------------------------------------------- local servers


def _base_dir() -> Path:
    """A fresh temp dir for one server, under $LG_SQLA_TEST_TMP when set."""
    parent = os.environ.get(TMP_ENV)
    if parent:
        Path(parent).mkdir(parents=True, exist_ok=True)
        base = Path(tempfile.mkdtemp(prefix="lg_sqla_", dir=os.path.abspath(parent)))
    else:
        base = Path(tempfile.mkdtemp(prefix="lg_sqla_"))
    # mkdtemp makes it 0700; as root the server runs as another user who must
    # be able to enter it.
    base.chmod(0o755)
    return base


def _service_user(name: str) -> pwd.struct_passwd | None:
    """The account to run a server as: ``name`` when we are root, else ourselves (None).

    initdb/pg_ctl refuse to run as root and mariadbd wants a non-root user too.
    """
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise RuntimeError(
            f"running as root but the system user {name!r} does not exist. " + _INSTALL_HINT
        ) from None


def _check_reachable(path: Path, user: pwd.struct_passwd | None) -> None:
    """As root, every ancestor of ``path`` must be searchable by the service user."""
    if user is None:
        return
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH and parent.stat().st_uid != user.pw_uid:
            raise RuntimeError(
                f"{parent} is not searchable by user {user.pw_name!r}, so the test server "
                f"cannot use {path}. Set {TMP_ENV} to a world-searchable directory."
            )


def _owned_dir(path: Path, user: pwd.struct_passwd | None) -> Path:
    path.mkdir(mode=0o700)
    if user is not None:
        os.chown(path, user.pw_uid, user.pw_gid)
    return path


def _check_socket_path(sock: Path) -> None:
    if len(os.fsencode(sock)) > _MAX_SOCKET_PATH:
        raise RuntimeError(
            f"unix socket path {sock} is too long (> {_MAX_SOCKET_PATH} bytes); "
            f"set {TMP_ENV} to a shorter directory."
        )


def _run_as(user: pwd.struct_passwd | None, argv: list[str], *, log_file: Path, what: str) -> None:
    """Run a setup command to completion as ``user``; raise with its output on failure."""
    with log_file.open("ab") as log:
        result = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
            **_user_kwargs(user),
        )
    if result.returncode != 0:
        raise RuntimeError(
            f"{what} failed (exit {result.returncode}): {' '.join(argv)}\n{_log_tail(log_file)}"
        )


class _AsUser(TypedDict, total=False):
    """Keyword arguments for subprocess.run/Popen that switch to another account."""

    user: int
    group: int
    extra_groups: list[int]
    env: dict[str, str]


def _user_kwargs(user: pwd.struct_passwd | None) -> _AsUser:
    if user is None:
        return {}
    # Drop root's supplementary groups too, not just uid/gid; HOME matters for
    # tools that look for per-user config files.
    env = {**os.environ, "HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "env": env}


def _spawn(
    user: pwd.struct_passwd | None, argv: list[str], out_file: Path
) -> subprocess.Popen[bytes]:
    """Start a long-running server process as ``user``, output appended to ``out_file``."""
    with out_file.open("ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Own session: a terminal Ctrl-C reaches pytest only, which then stops
            # the server in an orderly way from the fixture teardown.
            start_new_session=True,
            **_user_kwargs(user),
        )


def _postgres_bindir() -> Path:
    """Directory holding initdb/pg_ctl: newest Debian /usr/lib/postgresql/N, else $PATH."""
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda d: int(Path(d).parent.name) if Path(d).parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for directory in candidates:
        if all((Path(directory) / tool).exists() for tool in ("initdb", "pg_ctl", "postgres")):
            return Path(directory)
    raise RuntimeError(
        "no PostgreSQL server binaries (initdb, pg_ctl, postgres) found. " + _INSTALL_HINT
    )


@contextlib.contextmanager
def _local_postgres(
    bindir: Path | None = None, name: str = "pg", extra_conf: str = ""
) -> Iterator[str]:
    bindir = bindir or _postgres_bindir()
    user = _service_user("postgres")
    base = _base_dir()
    try:
        _check_reachable(base, user)
        _check_reachable(bindir, user)
        home = _owned_dir(base / name, user)  # data dir, socket and log all live here
        data, log_file = home / "data", home / "server.log"
        _check_socket_path(home / ".s.PGSQL.65535")
        port = _free_port()

        # trust auth: a private, loopback-only throwaway server needs no passwords.
        _run_as(
            user,
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
            log_file=home / "initdb.log",
            what="initdb",
        )
        # Settings go in the config file rather than `pg_ctl -o`, which is
        # re-parsed by a shell and would break on paths with spaces.
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# lg_sqla test server (tests/servers.py)\n"
                "listen_addresses = '127.0.0.1'\n"
                f"port = {port}\n"
                f"unix_socket_directories = '{_pg_quote(str(home))}'\n"
                # Durability is pointless for a throwaway server and costs seconds.
                "fsync = off\n"
                "synchronous_commit = off\n"
                "full_page_writes = off\n" + extra_conf
            )
        # The postmaster runs as our own child (not daemonized by `pg_ctl start`) so
        # that we notice if it dies during startup and reap it afterwards: in
        # containers PID 1 often does not reap orphans, leaving zombies behind.
        proc = _spawn(user, [str(bindir / "postgres"), "-D", str(data)], log_file)
        try:
            url = f"postgresql://postgres@127.0.0.1:{port}"
            _wait_until_ready(
                url, what="PostgreSQL", log_file=log_file, is_alive=lambda: proc.poll() is None
            )
            yield url
        finally:
            _stop_postgres(user, str(bindir / "pg_ctl"), data, home, proc)
    finally:
        shutil.rmtree(base, ignore_errors=True)


# A primary that a hot standby streams from, and waits for: a commit returns once the
# standby has applied it (remote_apply), so a read there right after sees it.
_PRIMARY_CONF = (
    "wal_level = replica\n"
    "max_wal_senders = 4\n"
    "synchronous_standby_names = '*'\n"
    "synchronous_commit = remote_apply\n"
)


@contextlib.contextmanager
def postgres_with_standby() -> Iterator[tuple[str, str]]:
    """Yield admin URLs ``(primary, standby)``: a PostgreSQL primary and a hot standby
    made from it with ``pg_basebackup -R`` (read-only, streaming, on loopback).

    Always private local servers (a Docker or externally provided server has no
    standby of ours)."""
    bindir = _postgres_bindir()
    user = _service_user("postgres")
    with _local_postgres(bindir, name="pg-primary", extra_conf=_PRIMARY_CONF) as primary:
        primary_port = make_url(primary).port
        base = _base_dir()
        try:
            _check_reachable(base, user)
            home = _owned_dir(base / "pg-standby", user)
            data, log_file = home / "data", home / "server.log"
            port = _free_port()
            _run_as(
                user,
                [
                    str(bindir / "pg_basebackup"),
                    f"--dbname=host=127.0.0.1 port={primary_port} user=postgres",
                    "-D",
                    str(data),
                    "-R",  # standby.signal and primary_conninfo: a streaming standby
                    "-X",
                    "stream",
                    "--no-sync",
                ],
                log_file=home / "basebackup.log",
                what="pg_basebackup",
            )
            with (data / "postgresql.conf").open("a") as conf:
                conf.write(  # later lines win over the primary's copied settings
                    "\n# lg_sqla test standby (tests/servers.py)\n"
                    f"port = {port}\n"
                    f"unix_socket_directories = '{_pg_quote(str(home))}'\n"
                    "hot_standby = on\n"
                )
            proc = _spawn(user, [str(bindir / "postgres"), "-D", str(data)], log_file)
            try:
                standby = f"postgresql://postgres@127.0.0.1:{port}"
                _wait_until_ready(
                    standby,
                    what="PostgreSQL standby",
                    log_file=log_file,
                    is_alive=lambda: proc.poll() is None,
                )
                yield primary, standby
            finally:
                _stop_postgres(user, str(bindir / "pg_ctl"), data, home, proc)
        finally:
            shutil.rmtree(base, ignore_errors=True)


def _pg_quote(value: str) -> str:
    """Escape a value for use inside single quotes in postgresql.conf."""
    return value.replace("\\", "\\\\").replace("'", "''")


def _stop_postgres(
    user: pwd.struct_passwd | None,
    pg_ctl: str,
    data: Path,
    home: Path,
    proc: subprocess.Popen[bytes],
) -> None:
    if proc.poll() is not None:
        return
    try:
        # fast = roll back open transactions and disconnect clients, then stop.
        _run_as(
            user,
            [pg_ctl, "-D", str(data), "-m", "fast", "-w", "-t", "30", "stop"],
            log_file=home / "pg_ctl.log",
            what="pg_ctl stop",
        )
    finally:
        # pg_ctl has no say over our child: reap it, and make sure it is gone
        # even when pg_ctl failed (SIGQUIT = immediate shutdown).
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGQUIT)
            proc.wait()


def _mariadb_binaries() -> tuple[str, str]:
    server = shutil.which("mariadbd") or shutil.which("mariadbd", path="/usr/sbin:/usr/libexec")
    install_db = shutil.which("mariadb-install-db")
    if server and install_db:
        return server, install_db
    raise RuntimeError(
        "no MariaDB server binaries (mariadbd, mariadb-install-db) found. " + _INSTALL_HINT
    )


@contextlib.contextmanager
def _local_mariadb() -> Iterator[str]:
    server, install_db = _mariadb_binaries()
    user = _service_user("mysql")
    base = _base_dir()
    try:
        _check_reachable(base, user)
        home = _owned_dir(base / "mysql", user)  # data dir, socket, pid and log live here
        data, log_file, sock = home / "data", home / "error.log", home / "mysqld.sock"
        # Its own temp dir, not the system /tmp: a /tmp cleaner once removed the
        # server's temp files mid-run and took the server down with them.
        tmp = _owned_dir(home / "tmp", user)
        _check_socket_path(sock)
        port = _free_port()

        # --no-defaults: ignore /etc/mysql/*.cnf so the host's config cannot leak in.
        # normal auth: root@localhost/127.0.0.1 with an empty password (not unix_socket).
        _run_as(
            user,
            [
                install_db,
                "--no-defaults",
                f"--datadir={data}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
            ],
            log_file=home / "install-db.log",
            what="mariadb-install-db",
        )
        argv = [
            server,
            "--no-defaults",
            f"--datadir={data}",
            f"--socket={sock}",
            f"--tmpdir={tmp}",
            f"--pid-file={home / 'mysqld.pid'}",
            f"--log-error={log_file}",
            "--bind-address=127.0.0.1",
            f"--port={port}",
            "--skip-name-resolve",
            # Debian's default is latin1; MySQL 8's is utf8mb4. Match MySQL.
            "--character-set-server=utf8mb4",
            # MySQL 8.4's default; MariaDB 10.11's is 16M. Checkpoint blobs can be large.
            "--max-allowed-packet=64M",
            # Throwaway server: no binlog, no per-commit flushes, no doublewrite.
            "--skip-log-bin",
            "--innodb-flush-log-at-trx-commit=0",
            "--innodb-doublewrite=0",
            # io_uring/libaio are often blocked in sandboxes; plain I/O always works.
            "--innodb-use-native-aio=0",
        ]
        proc = _spawn(user, argv, home / "stdout.log")
        try:
            url = f"mysql://root@127.0.0.1:{port}"
            _wait_until_ready(
                url, what="MariaDB", log_file=log_file, is_alive=lambda: proc.poll() is None
            )
            yield url
        finally:
            _stop_mariadb(proc, log_file)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _stop_mariadb(proc: subprocess.Popen[bytes], log_file: Path) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()  # SIGTERM = mariadbd's normal shutdown
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RuntimeError(
            f"MariaDB did not stop within 60s after SIGTERM; killed.\n{_log_tail(log_file)}"
        ) from None
