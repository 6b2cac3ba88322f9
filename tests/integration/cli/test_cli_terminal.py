"""The command line at an operator's terminal, on SQLite, PostgreSQL and MariaDB.

- Every table fits 80 columns without an id, status or time folded inside its cell:
  rich's tables on a pseudo-terminal, and the plain ones (``COLUMNS=80``, a pipe).
- ``show`` cuts values at the terminal's width, not at a fixed 120.
- Exit codes as docs/operations.md says: 0 with an answer, 1 for a thread, checkpoint
  or item that does not exist, 2 for a usage error, 130 when interrupted.
- ``upgrade --dry-run`` and ``upgrade --sql`` start from the database's revision.
- ``storage`` reports bytes on disk, ``vacuum`` the file before and after.
- ``copy-thread``, whole or forked at a checkpoint.
- Ctrl-C in ``sweep`` says what was removed and that a rerun resumes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import re
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, fresh_saver
from graph_helpers import build_fan_graph, build_tool_chat_graph
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import make_url
from test_cli import MODULE, run_cli

from lg_sqla import cli
from lg_sqla.models import checkpoints
from lg_sqla.store import SQLAlchemyStore

LONG = "weather in Paris? " * 12  # a 216-character message


@pytest.fixture(scope="module")
def threads(backend: Backend) -> dict[str, str]:
    """Threads in every status, with uuid ids (36 characters), tagged ``suite`` (the
    session's database holds other tests' threads too), and a store item."""
    # (a letter first: `--filter suite=VALUE` reads VALUE as JSON when it parses, and
    # eight hex digits may be all digits, or digits around an "e": a number)
    tag = "t" + uuid.uuid4().hex[:8]
    ids = {status: str(uuid.uuid4()) for status in ("interrupted", "error", "idle")}
    with fresh_saver(backend) as saver:
        chat = build_tool_chat_graph().compile(checkpointer=saver)
        chat.invoke({"messages": [HumanMessage(LONG)]}, _config(ids["interrupted"], tag))
        with contextlib.suppress(RuntimeError):  # the model raises: status "error"
            chat.invoke({"messages": [HumanMessage("fail now")]}, _config(ids["error"], tag))
        fan = build_fan_graph().compile(checkpointer=saver)
        fan.invoke({"items": [], "note": ""}, _config(ids["idle"], tag))
        SQLAlchemyStore(saver.engine).put(("terminal", tag), "item-1", {"text": LONG})
        # A deleted thread leaves free pages in a SQLite file, so `storage` prints its
        # widest line (sizes, free pages and the vacuum hint) whatever ran before.
        gone = str(uuid.uuid4())
        chat.invoke({"messages": [HumanMessage(LONG * 50)]}, _config(gone, "gone"))
        saver.delete_thread(gone)
    return {**ids, "tag": tag}


def _config(thread_id: str, tag: str = "") -> Any:
    return {"configurable": {"thread_id": thread_id}, "metadata": {"suite": tag}}


def in_terminal(args: Sequence[str], url: str, columns: int = 80) -> tuple[str, int]:
    """The CLI on a pseudo-terminal of ``columns`` (rich's tables), its screen as text."""
    primary, secondary = os.openpty()
    env = {**os.environ, "LG_SQLA_DATABASE_URL": url, "COLUMNS": str(columns), "TERM": "xterm"}
    env.pop("LG_SQLA_DEBUG", None)
    process = subprocess.Popen(
        [*MODULE, *args], stdout=secondary, stderr=secondary, stdin=subprocess.DEVNULL, env=env
    )
    os.close(secondary)
    output = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # (EIO: the child closed the terminal)
            break
        if not chunk:
            break
        output += chunk
    code = process.wait(timeout=120)
    os.close(primary)
    return _text(output.decode()), code


def _text(screen: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen).replace("\r", "")


class _Screen(io.StringIO):
    """Stdout as a terminal (rich draws its tables) or a pipe (plain text)."""

    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@contextlib.contextmanager
def _output(stdout: io.StringIO) -> Iterator[io.StringIO]:
    stderr = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        yield stderr


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.code == 0, self.stderr
        return json.loads(self.stdout)


Lg = Callable[..., Ran]


@pytest.fixture
def lg(monkeypatch: pytest.MonkeyPatch) -> Lg:
    """``lg(args, url, columns=80, terminal=False)``: the CLI's ``main`` run in this
    process (a process per command costs seconds on a loaded CI machine; the
    entry points themselves are test_cli.py's), its output and exit code."""
    monkeypatch.delenv("LG_SQLA_DEBUG", raising=False)
    monkeypatch.delenv("LG_SQLA_DATABASE_URL", raising=False)

    def run(
        args: Sequence[str], url: str | None, *, columns: int = 80, terminal: bool = False
    ) -> Ran:
        monkeypatch.setenv("COLUMNS", str(columns))
        monkeypatch.setenv("TERM", "xterm")
        screen = _Screen(terminal)
        with _output(screen) as stderr:
            code = cli.main([*(["--url", url] if url else []), *args])
        return Ran(code, _text(screen.getvalue()), stderr.getvalue())

    return run


def one_error_line(done: Ran, code: int, *fragments: str) -> None:
    assert done.code == code, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert all(fragment in lines[0] for fragment in fragments), lines[0]


def _tables(threads: dict[str, str], checkpoint: str) -> list[list[str]]:
    suite = f"suite={threads['tag']}"
    thread = threads["error"]
    return [
        ["threads", "--filter", suite],
        ["threads", "--filter", suite, "--status", "interrupted"],
        ["threads", "--filter", suite, "--extract", "last=values.messages[-1].content"],
        ["history", thread],
        ["writes", thread, checkpoint],
        ["stats", "--thread", thread],
        ["stats", "--by", "channel", "--thread", thread],
        ["storage"],
        ["revisions"],
        ["store", "search", f"terminal.{threads['tag']}"],
        ["store", "stats"],
    ]


def _fits(text: str, listed: list[dict[str, Any]], args: Sequence[str]) -> None:
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert not wide, (args, wide)
    if args[0] == "threads" and len(args) == 3:
        # Each thread whole on one line: its id, its status, its last write.
        lines = text.splitlines()
        for found in listed:
            line = next(line for line in lines if found["thread_id"] in line)
            assert found["status"] in line.split(), line
            assert found["last_write"][:16].replace("T", " ") in line, line


def test_every_table_fits_80_columns(backend: Backend, threads: dict[str, str], lg: Lg) -> None:
    url = backend.sync_url
    suite = ["--filter", f"suite={threads['tag']}"]
    listed = lg(["threads", *suite, "--json"], url).json()["threads"]
    assert sorted(t["status"] for t in listed) == ["error", "idle", "interrupted"]
    history = lg(["history", threads["error"], "--json"], url).json()
    checkpoint = history["checkpoints"][0]["checkpoint_id"]
    for args in _tables(threads, checkpoint):
        for terminal in (True, False):  # rich's tables, the plain ones
            done = lg(args, url, terminal=terminal)
            assert done.code == 0 and done.stdout.strip(), (args, done.stderr)
            _fits(done.stdout, listed, args)
            if args == ["storage"] and backend.name == "sqlite":
                assert "free pages" in done.stdout and "vacuum" in done.stdout, done.stdout
    # And once as an operator runs it: the command on a real pseudo-terminal.
    screen, code = in_terminal(["threads", *suite], url)
    assert code == 0 and "┃" in screen, screen  # a rich table, with its borders
    _fits(screen, listed, ["threads", *suite])


def test_show_cuts_values_at_the_terminal_width(
    backend: Backend, threads: dict[str, str], lg: Lg
) -> None:
    url = backend.sync_url
    narrow = lg(["show", threads["interrupted"]], url, columns=60)
    wide = lg(["show", threads["interrupted"]], url, columns=300)
    assert narrow.code == wide.code == 0, (narrow.stderr, wide.stderr)
    assert LONG.strip() in wide.stdout  # whole at 300 columns
    human = next(line for line in narrow.stdout.splitlines() if "human" in line)
    shown = human.split("human", 1)[1].strip()
    assert shown.endswith("…") and len(shown) == 60  # cut at the terminal's 60


def test_exit_codes_are_the_documented_ones(
    backend: Backend, threads: dict[str, str], lg: Lg
) -> None:
    url = backend.sync_url
    nobody = f"nobody-{uuid.uuid4()}"
    for args in (["ttl", "show", nobody], ["show", nobody], ["history", nobody]):
        one_error_line(lg(args, url), 1, nobody)
    one_error_line(lg(["store", "get", f"terminal.{threads['tag']}", "no-such-key"], url), 1)
    done = lg(["ttl", "show", threads["idle"]], url)
    assert done.code == 0 and threads["idle"] in done.stdout, done.stderr
    empty = lg(["threads", "--filter", f"tag={uuid.uuid4()}"], url)
    assert empty.code == 0, empty.stderr  # an empty answer is an answer
    with pytest.raises(SystemExit) as usage:  # argparse's usage error
        lg(["threads", "--limit", "0"], url)
    assert usage.value.code == 2
    one_error_line(lg(["threads"], None), 2, "no database URL")


def test_upgrade_dry_run_and_sql_start_from_the_current_revision(
    fresh_database: Backend, lg: Lg
) -> None:
    url = fresh_database.sync_url
    report = lg(["upgrade", "--dry-run", "--json"], url).json()
    assert report["current"] is None and report["apply"][0] == "0001_initial"
    assert "checkpoints" in report["creates"]
    if fresh_database.name == "sqlite":
        database = make_url(url).database
        assert database is not None and not Path(database).exists()  # not even the file
    else:
        assert lg(["current"], url).stdout.startswith("none")  # nothing was written

    assert lg(["upgrade", "0005_scale_indexes"], url).code == 0
    report = lg(["upgrade", "--dry-run", "--json"], url).json()
    assert report["current"] == "0005_scale_indexes"
    assert report["apply"] == [
        "0006_checkpoint_retention",
        "0007_store_namespace_index",
        "0008_checkpoint_expiry",
        "0009_state_revision",
        "0010_partial_indexes",
    ]
    assert report["creates"] == ["checkpoint_retention"]
    # (Alembic prints the offline SQL through its own stdout handle: a process of its own)
    sql = run_cli(["upgrade", "--sql"], url)
    assert sql.returncode == 0, sql.stderr
    assert "Running upgrade 0005_scale_indexes -> 0006_checkpoint_retention" in sql.stdout
    assert "0004_store_prefix_head" not in sql.stdout  # nothing before the current one
    assert lg(["current"], url).stdout.strip() == "0005_scale_indexes"

    assert lg(["upgrade"], url).code == 0
    at_head = lg(["upgrade", "--sql"], url)
    assert at_head.code == 0 and at_head.stdout == "" and "already" in at_head.stderr


def test_upgrade_sql_without_the_database_starts_from_base(backend: Backend) -> None:
    if backend.name == "sqlite":
        url = "sqlite:////nonexistent-dir/lg_sqla.sqlite"
    else:
        url = make_url(backend.sync_url).set(host="127.0.0.1", port=9).render_as_string(False)
    done = run_cli(["upgrade", "--sql"], url)
    assert done.returncode == 0, done.stderr
    assert "Running upgrade  -> 0001_initial" in done.stdout
    assert "starts from an empty database" in done.stderr


def test_storage_reports_bytes_on_disk(backend: Backend, threads: dict[str, str], lg: Lg) -> None:
    url = backend.sync_url
    report = lg(["storage", "--json"], url).json()
    on_disk = report["on_disk"]
    assert on_disk is not None and set(on_disk) == set(report["tables"])
    for name, usage in report["tables"].items():
        assert on_disk[name] > 0, name  # every table and its indexes take pages
        if name == "checkpoint_blobs":
            assert on_disk[name] >= usage["bytes"]  # (pages hold the payload and more)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            if backend.name == "sqlite":
                database = make_url(url).database
                assert database is not None
                assert report["file"]["bytes"] == Path(database).stat().st_size
            elif backend.name == "postgres":
                size = connection.scalar(sa.text("SELECT pg_total_relation_size('checkpoints')"))
                assert on_disk["checkpoints"] == size
            else:
                assert report["file"] is None
    finally:
        engine.dispose()
    done = lg(["storage"], url)
    assert "ON DISK" in done.stdout and "PAYLOAD" in done.stdout


def test_vacuum_reports_the_file_before_and_after(tmp_path: Path, lg: Lg) -> None:
    path = tmp_path / "vacuum.sqlite"
    url = f"sqlite:///{path}"
    assert lg(["upgrade"], url).code == 0
    engine = sa.create_engine(url)
    try:
        store = SQLAlchemyStore(engine)
        store.put(("big",), "blob", {"text": "x" * 2_000_000})
        store.delete(("big",), "blob")
    finally:
        engine.dispose()
    before = path.stat().st_size
    done = lg(["vacuum"], url)
    assert done.code == 0, done.stderr
    assert path.stat().st_size < before
    sizes = re.findall(r"(\d+(?:\.\d+)?) (B|KB|MB)", done.stdout)
    assert len(sizes) == 3 and sizes[0][1] == "MB", done.stdout  # before -> after (given back)


def _checkpoint_ids(lg: Lg, url: str, thread_id: str) -> list[str]:
    return [
        c["checkpoint_id"] for c in lg(["history", thread_id, "--json"], url).json()["checkpoints"]
    ]


def test_copy_thread_whole_and_forked(backend: Backend, threads: dict[str, str], lg: Lg) -> None:
    url, source = backend.sync_url, threads["interrupted"]
    history = _checkpoint_ids(lg, url, source)
    copy, fork = f"copy-{uuid.uuid4()}", f"fork-{uuid.uuid4()}"
    assert lg(["copy-thread", source, copy, "--json"], url).json()["checkpoints"] == len(history)
    assert _checkpoint_ids(lg, url, copy) == history
    one_error_line(lg(["copy-thread", source, copy], url), 1, "already has")

    middle = history[1]
    done = lg(["copy-thread", source, fork, "--checkpoint", middle[:13]], url)
    assert done.code == 0, done.stderr
    assert _checkpoint_ids(lg, url, fork) == history[1:]  # the checkpoint and its ancestors
    shown = lg(["show", fork, "--json"], url).json()
    original = lg(["show", source, middle, "--json"], url).json()
    assert shown["values"] == original["values"]
    assert shown["pending_writes"] == original["pending_writes"]
    again = lg(["copy-thread", source, fork, "--checkpoint", middle], url)
    assert again.code == 0, again.stderr  # a rerun (a resume) copies nothing new
    assert _checkpoint_ids(lg, url, fork) == history[1:]
    missing = lg(["copy-thread", source, f"x-{uuid.uuid4()}", "--checkpoint", "zzz"], url)
    one_error_line(missing, 1, "no checkpoint 'zzz'")


class _InterruptAtFirstBatch(io.StringIO):
    """Stdout that sends this process SIGINT (Ctrl-C) when the first batch is reported
    (a progress line starting with ``label``): a real signal, arriving while the command
    still has batches to go."""

    def __init__(self, label: str) -> None:
        super().__init__()
        self.label, self.sent = label, False

    def write(self, text: str) -> int:
        written = super().write(text)
        if text.startswith(self.label) and not self.sent:
            self.sent = True
            signal.raise_signal(signal.SIGINT)
        return written


def _interrupted(args: Sequence[str], label: str) -> tuple[int, str]:
    """``lg-sqla args``, Ctrl-C at its first progress line: its exit code and stderr.
    Under Python's own SIGINT handler, as in a terminal: a process started in the
    background by a shell without job control (``cmd &`` in a script, as CI runners
    may start the suite) inherits SIGINT ignored, and Python then leaves it ignored."""
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with _output(_InterruptAtFirstBatch(label)) as stderr:
            code = cli.main(list(args))
    except KeyboardInterrupt:  # pragma: no cover (the CLI let Ctrl-C through: a failure)
        pytest.fail(f"{args} let KeyboardInterrupt through")
    finally:
        signal.signal(signal.SIGINT, handler)
    return code, stderr.getvalue()


def test_ctrl_c_in_delete_thread_reports_what_was_deleted(
    backend: Backend, threads: dict[str, str], lg: Lg
) -> None:
    doomed = [f"doomed-{uuid.uuid4()}" for _ in range(3)]
    with fresh_saver(backend) as saver:
        fan = build_fan_graph().compile(checkpointer=saver)
        for thread_id in doomed:
            fan.invoke({"items": [], "note": ""}, _config(thread_id))
    args = ["--url", backend.sync_url, "delete-thread", *doomed, "--yes"]
    code, message = _interrupted(args, "deleted: ")
    assert code == 130
    assert message.startswith(
        "error: interrupted: delete-thread stopped; done so far: deleted 1 thread(s)"
    )
    assert "run the same command again to resume" in message
    left = [t for t in doomed if lg(["history", t], backend.sync_url).code == 0]
    assert left == doomed[1:]  # the first thread's transaction is committed, no other
    assert lg(args[2:], backend.sync_url).code == 0  # the same command again
    assert not [t for t in doomed if lg(["history", t], backend.sync_url).code == 0]


def test_ctrl_c_in_sweep_reports_and_a_rerun_resumes(fresh_database: Backend, lg: Lg) -> None:
    url = fresh_database.sync_url
    assert lg(["upgrade"], url).code == 0
    stale = [f"stale-{n}" for n in range(5)]
    with fresh_saver(fresh_database) as saver:
        fan = build_fan_graph().compile(checkpointer=saver)
        for thread_id in stale:
            fan.invoke({"items": [], "note": ""}, _config(thread_id))
        now = dt.datetime.now(dt.timezone.utc)
        with saver.engine.begin() as connection:  # 40 days old and more, each its own age
            for n, thread_id in enumerate(stale):
                old = now - dt.timedelta(days=40 + n)
                connection.execute(
                    sa.update(checkpoints)
                    .where(checkpoints.c.thread_id == thread_id)
                    .values(updated_at=old, created_at=old)
                )
    args = ["--url", url, "sweep", "--older-than-days", "30", "--batch-size", "2", "--yes"]
    code, message = _interrupted(args, "sweep: ")
    assert code == 130
    assert message.startswith("error: interrupted: sweep stopped; done so far: visited 2 thread(s)")
    assert "removed 2 thread(s)" in message and "run the same command again" in message
    listed = lg(["threads", "--json", "--limit", "100"], url).json()["threads"]
    assert len(listed) == 3  # the first batch is committed; nothing of the second
    assert lg(args[2:], url).code == 0  # the same command again
    assert lg(["threads", "--json"], url).json()["threads"] == []
