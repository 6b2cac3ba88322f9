"""The command line through its real entry points (`python -m lg_sqla`, `lg-sqla`).

Every test runs on a SQLite file, PostgreSQL and MariaDB, in a subprocess, as
an operator would run it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from backends import Backend
from sqlalchemy.engine import make_url

MODULE = [sys.executable, "-m", "lg_sqla"]
SCRIPT = [str(Path(sys.executable).with_name("lg-sqla"))]


def run_cli(
    args: Sequence[str], url: str | None = None, *, entry: Sequence[str] = MODULE
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LG_SQLA_DEBUG"}
    if url is not None:
        env["LG_SQLA_DATABASE_URL"] = url
    return subprocess.run(
        [*entry, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def assert_one_error_line(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """A failed command: non-zero exit, nothing on stdout, one `error:` line, no traceback."""
    assert done.returncode != 0, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unreachable_url(backend: Backend, tmp_path: Path) -> str:
    if backend.name == "sqlite":
        return f"sqlite:///{tmp_path}"  # a directory: SQLite cannot open it
    url = make_url(backend.sync_url).set(host="127.0.0.1", port=_closed_port())
    return url.render_as_string(hide_password=False)


def wrong_database_url(backend: Backend, tmp_path: Path) -> str:
    if backend.name == "sqlite":
        return f"sqlite:///{tmp_path / 'mistyped.sqlite'}"
    url = make_url(backend.sync_url).set(database="lg_sqla_no_such_database")
    return url.render_as_string(hide_password=False)


READS = (["current"], ["check"], ["sweep", "--older-than-days", "1"], ["prune", "t-1"])


@pytest.mark.parametrize("command", READS, ids=lambda c: c[0])
def test_unreachable_server_is_one_error_line(
    backend: Backend, tmp_path: Path, command: list[str]
) -> None:
    url = unreachable_url(backend, tmp_path)
    line = assert_one_error_line(run_cli(command, url), "cannot use the database")
    fix = "permissions" if backend.name == "sqlite" else "server is running"
    assert fix in line


@pytest.mark.parametrize("command", [["upgrade"], *READS], ids=lambda c: c[0])
def test_wrong_database_is_one_error_line(
    backend: Backend, tmp_path: Path, command: list[str]
) -> None:
    url = wrong_database_url(backend, tmp_path)
    done = run_cli(command, url, entry=SCRIPT)
    if backend.name == "sqlite" and command == ["upgrade"]:
        # Creating a new SQLite file is what `upgrade` is for.
        assert done.returncode == 0, done.stderr
        return
    line = assert_one_error_line(done)
    if backend.name == "sqlite":
        assert "no SQLite database at" in line
        assert not (tmp_path / "mistyped.sqlite").exists()  # no stray empty file
    else:
        assert "lg_sqla_no_such_database" in line and "database name are right" in line


def test_a_file_that_is_not_sqlite_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    assert_one_error_line(run_cli(["check"], f"sqlite:///{path}"), "file is not a database")


@pytest.mark.parametrize(
    "command",
    [
        ["check"],
        ["sweep", "--older-than-days", "1"],
        ["prune", "t-1"],
        ["prune", "t-1", "--strategy", "delete"],
    ],
    ids=lambda c: "-".join(c[:1] + c[3:]),
)
def test_missing_schema_is_one_error_line_naming_the_fix(
    fresh_database: Backend, command: list[str]
) -> None:
    if fresh_database.name == "sqlite":
        Path(make_url(fresh_database.sync_url).database or "").touch()  # an empty SQLite file
    line = assert_one_error_line(run_cli(command, fresh_database.sync_url), "not set up")
    assert "lg_sqla upgrade" in line


def test_bad_urls_and_missing_drivers_are_one_error_line() -> None:
    assert_one_error_line(run_cli(["current"], "not a url"), "invalid database URL")
    assert_one_error_line(run_cli(["current"], "nosuchdb://h/x"), "unknown database dialect")
    # mysqlclient is not installed here (lg_sqla's MySQL extra is PyMySQL).
    line = assert_one_error_line(run_cli(["current"], "mysql+mysqldb://u@127.0.0.1/x"))
    assert "'MySQLdb' is not installed" in line and '"lg_sqla[mysql]"' in line
    done = run_cli(["current"], None)
    assert_one_error_line(done, "no database URL")
    assert done.returncode == 2


def test_async_url_for_maintenance_names_the_sync_driver(backend: Backend) -> None:
    done = run_cli(["sweep", "--older-than-days", "1000"], backend.async_url)
    if backend.name == "postgres":
        # psycopg 3 is one driver for sync and async: the same URL works.
        assert done.returncode == 0, done.stderr
        return
    line = assert_one_error_line(done)
    assert "use a sync driver URL" in line
