"""The command line through its real entry points (`python -m lg_sqla`, `lg-sqla`).

Every test runs on a SQLite file, PostgreSQL and MariaDB, in a subprocess, as
an operator would run it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory, checked_engine, fresh_saver
from graph_helpers import build_fan_graph
from helpers import table_counts
from langgraph.checkpoint.base import CheckpointMetadata, empty_checkpoint
from langgraph.types import Send
from sqlalchemy.engine import make_url

from lg_sqla.models import checkpoint_writes, checkpoints

MODULE = [sys.executable, "-m", "lg_sqla"]
SCRIPT = [str(Path(sys.executable).with_name("lg-sqla"))]


def run_cli(
    args: Sequence[str], url: str | None = None, *, entry: Sequence[str] = MODULE
) -> subprocess.CompletedProcess[str]:
    # stdout is a pipe, as a script's: no $COLUMNS either (pytest-xdist's workers
    # export COLUMNS=80, which makes plain tables fit 80 columns).
    env = {k: v for k, v in os.environ.items() if k not in ("LG_SQLA_DEBUG", "COLUMNS", "LINES")}
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


def _tag() -> str:
    """A run's ``suite`` metadata value: a letter first, as ``--filter suite=VALUE``
    reads VALUE as JSON when it parses (hex digits alone may make a number)."""
    return "t" + uuid.uuid4().hex[:12]


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
    # CyMySQL is in no extra and no dependency group: a driver the user named but lacks.
    line = assert_one_error_line(run_cli(["current"], "mysql+cymysql://u@127.0.0.1/x"))
    assert "'cymysql' is not installed" in line and '"lg_sqla[mysql]"' in line
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


# --- the operators' toolkit: read commands --------------------------------------------


def populate(backend: Backend, tag: str, runs: dict[str, int]) -> dict[str, list[Any]]:
    """Run the fan-out graph (pull tasks, Sends, a 5 KB value) on a few threads;
    return each thread's checkpoint tuples, newest first, read through the saver."""
    out: dict[str, list[Any]] = {}
    with fresh_saver(backend) as saver:
        graph = build_fan_graph().compile(checkpointer=saver)
        for thread_id, n in runs.items():
            for _ in range(n):
                graph.invoke(
                    {"items": [], "note": ""},
                    {"configurable": {"thread_id": thread_id}, "metadata": {"suite": tag}},
                )
            out[thread_id] = list(saver.list({"configurable": {"thread_id": thread_id}}))
    return out


def read_json(args: Sequence[str], url: str) -> Any:
    done = run_cli([*args, "--json"], url)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


def run_cli_reads(
    commands: dict[str, Sequence[str]], url: str
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Read-only commands that do not depend on each other, one process per core at a
    time: each is still its own process through the real entry point (as run_cli),
    the test only waits for them together (CI machines have 2 cores; a CLI process
    is ~1 s of CPU, most of it imports)."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        done = pool.map(lambda args: run_cli(args, url), commands.values())
        return dict(zip(commands, done, strict=True))


def parsed_json(done: subprocess.CompletedProcess[str]) -> Any:
    """read_json's checks on a finished `--json` command."""
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


def test_read_commands_json_and_tables(backend: Backend) -> None:
    tag = _tag()
    a, b = f"cli-{tag}-a", f"cli-{tag}-b"
    tuples = populate(backend, tag, {a: 1, b: 2})
    url = backend.sync_url
    newest, oldest = tuples[b][0], tuples[b][-1]
    old_id, new_id = oldest.checkpoint["id"], newest.checkpoint["id"]
    with_writes = next(t for t in tuples[b] if len(t.pending_writes) > 1)
    mine = ["--filter", f"suite={tag}"]
    # Every command reads the threads populate() wrote and nothing writes in between,
    # so they run together; the checks below are those of one command after another.
    json_reads = {
        "threads": ["threads", *mine, "--order", "thread_id"],
        "page": ["threads", *mine, "--order", "thread_id", "--limit", "1"],
        "recent": ["threads", *mine, "--written-after", "1h"],
        "older": ["threads", *mine, "--written-before", "1h"],
        "history": ["history", b],
        "show": ["show", b],
        "diff": ["diff", b, old_id, new_id],
        "writes": ["writes", b, with_writes.checkpoint["id"], "--values"],
        "stats": ["stats", "--thread", b],
        "latest": ["latest", "items", a, b, "nope"],
        "storage": ["storage", "--thread", a],
    }
    # The same commands as tables for humans (plain text: stdout is not a terminal).
    table_reads = {
        "threads": ["threads", *mine],
        "history-2": ["history", b, "--limit", "2"],
        "history": ["history", b],
        "stats": ["stats", "--thread", b],
        "diff": ["diff", b, old_id, new_id],
        "no-such": ["show", b, "no-such-checkpoint"],
    }
    done_all = run_cli_reads(
        {
            **{f"json {k}": [*args, "--json"] for k, args in json_reads.items()},
            **{f"table {k}": args for k, args in table_reads.items()},
        },
        url,
    )
    out = {k: parsed_json(done_all[f"json {k}"]) for k in json_reads}
    tables = {k: done_all[f"table {k}"] for k in table_reads}

    threads = out["threads"]
    assert [t["thread_id"] for t in threads["threads"]] == [a, b]
    assert [t["checkpoints"] for t in threads["threads"]] == [len(tuples[a]), len(tuples[b])]
    assert all(t["bytes"] == t["value_bytes"] + t["write_bytes"] > 5000 for t in threads["threads"])
    page = out["page"]
    assert [t["thread_id"] for t in page["threads"]] == [a] and page["next_offset"] == 1
    assert len(out["recent"]["threads"]) == 2  # both were written in the last hour
    assert out["older"] == {"threads": [], "next_offset": None, "total": None}

    history = out["history"]["checkpoints"]
    assert [h["checkpoint_id"] for h in history] == [t.checkpoint["id"] for t in tuples[b]]
    assert [h["pending_writes"] for h in history] == [len(t.pending_writes) for t in tuples[b]]
    assert {h["step"] for h in history} == {t.metadata["step"] for t in tuples[b]}

    shown = out["show"]
    assert shown["checkpoint_id"] == newest.checkpoint["id"]
    assert shown["metadata"] == json.loads(json.dumps(newest.metadata))
    assert shown["values"]["note"] == "x" * 5000  # the value itself, not a preview
    assert shown["values"]["items"] == newest.checkpoint["channel_values"]["items"]

    changed = out["diff"]["changes"]
    old_v, new_v = oldest.checkpoint["channel_versions"], newest.checkpoint["channel_versions"]
    assert {c["channel"] for c in changed} == {
        ch for ch in {*old_v, *new_v} if old_v.get(ch) != new_v.get(ch)
    }

    writes = out["writes"]["writes"]
    assert [(w["task_id"], w["channel"], w["value"]) for w in writes] == [
        (t, c, {"node": v.node, "arg": v.arg} if isinstance(v, Send) else v)
        for t, c, v in with_writes.pending_writes
    ]
    assert all(w["bytes"] > 0 for w in writes)

    stats = out["stats"]["groups"]
    assert {"plan", "<send>", "__start__"} <= {s["key"] for s in stats}
    assert sum(s["writes"] for s in stats) == sum(
        h["pending_writes"] for h in history
    )  # every write of the thread belongs to one of its checkpoints

    latest = out["latest"]
    assert set(latest["values"]) == {a, b} and latest["missing"] == ["nope"]
    assert latest["values"][b]["value"] == tuples[b][0].checkpoint["channel_values"]["items"]

    storage = out["storage"]
    assert storage["tables"]["checkpoints"]["rows"] == len(tuples[a])
    assert storage["writes_to_values"] > 0

    done = tables["threads"]
    assert done.returncode == 0 and a in done.stdout and "CHECKPOINTS" in done.stdout
    assert [line.split()[1] for line in done.stdout.splitlines()[2:]] == ["idle", "idle"]
    done = tables["history-2"]
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.splitlines()[2:4]]
    for short, tup in zip(listed, tuples[b][:2], strict=True):  # ids cut to a unique prefix
        assert len(short) < len(tup.checkpoint["id"]) and tup.checkpoint["id"].startswith(short)
    assert f"more: --before {listed[1]}" in done.stdout
    assert "2 send(s)" in tables["history"].stdout  # the Send fan-out step
    done = tables["stats"]
    assert "plan" in done.stdout and "AVG BYTES" in done.stdout
    done = tables["diff"]
    assert done.returncode == 0, done.stderr
    assert f"{len(changed)} channel(s) changed" in done.stdout
    # The list channel: the items the second run appended, one per line.
    lines = done.stdout.splitlines()
    at = next(n for n, line in enumerate(lines) if line.strip().startswith("items ("))
    first_run = len(oldest.checkpoint["channel_values"].get("items", []))
    appended = newest.checkpoint["channel_values"]["items"][first_run:]
    assert lines[at + 1 : at + 1 + len(appended)] == [f"    + {item!r}" for item in appended]
    done = tables["no-such"]
    assert done.returncode == 1
    assert_one_error_line(done, "has no checkpoint 'no-such-checkpoint'")


def test_a_filter_value_read_as_a_number_says_how_to_match_the_text(backend: Backend) -> None:
    # `--filter KEY=VALUE` reads VALUE as JSON when it parses: digits are a number, and
    # text stored under the same characters is no match. The empty listing says so,
    # with the quoted form that matches the text.
    digits = str(uuid.uuid4().int % 10**12 + 10**12)
    thread = f"cli-digits-{digits}"
    with fresh_saver(backend) as saver:
        checkpoint = empty_checkpoint()
        saver.put(
            {"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
            checkpoint,
            cast(CheckpointMetadata, {"source": "input", "step": -1, "suite": digits}),
            {},
        )
    url = backend.sync_url
    as_number = run_cli(["threads", "--filter", f"suite={digits}"], url)
    assert as_number.returncode == 0, as_number.stderr
    assert "0 thread(s)" in as_number.stdout
    assert f"""--filter 'suite="{digits}"'""" in as_number.stderr
    found = read_json(["threads", "--filter", f'suite="{digits}"'], url)
    assert [t["thread_id"] for t in found["threads"]] == [thread]
    matched = run_cli(["threads", "--filter", f'suite="{digits}"'], url)
    assert matched.returncode == 0 and matched.stderr == "", matched.stderr


def test_a_conversation_its_status_and_its_changes(backend: Backend) -> None:
    """An operator finds the thread waiting on a human, reads a chat with its tool
    call and result (whole with --full, cut with --width), and what a turn appended."""
    from graph_helpers import build_tool_chat_graph
    from langchain_core.messages import HumanMessage, messages_from_dict
    from langgraph.types import Command

    tag = _tag()
    waiting, done_id = f"chat-{tag}-waiting", f"chat-{tag}-done"
    question = "Paris, " + "please " * 30  # longer than any --width below
    with fresh_saver(backend) as saver:
        graph = build_tool_chat_graph().compile(checkpointer=saver)
        for thread_id in (waiting, done_id):
            config: Any = {"configurable": {"thread_id": thread_id}, "metadata": {"suite": tag}}
            graph.invoke({"messages": [HumanMessage(question)]}, config)
        graph.invoke(Command(resume=True), {"configurable": {"thread_id": done_id}})
        messages = graph.get_state({"configurable": {"thread_id": done_id}}).values["messages"]
        history = list(saver.list({"configurable": {"thread_id": done_id}}))
    url = backend.sync_url

    newest, oldest = history[0].checkpoint["id"], history[-1].checkpoint["id"]
    # Reads only, of what the graph wrote above: they run together (run_cli_reads).
    interrupted = ["--filter", f"suite={tag}", "--status", "interrupted", "--count"]
    done_all = run_cli_reads(
        {
            "found": ["threads", *interrupted, "--json"],
            "shown": ["show", done_id, newest[:-6], "--json"],
            "chat": ["show", done_id, "--full"],
            "changed": ["diff", done_id, oldest[:-6], newest, "--width", "30"],
            "unknown": ["history", f"chat-{tag}-unknown"],
        },
        url,
    )
    found = parsed_json(done_all["found"])
    assert [(t["thread_id"], t["status"]) for t in found["threads"]] == [(waiting, "interrupted")]
    assert (found["total"], found["next_offset"]) == (1, None)

    # --json: the messages in LangChain's own dict form; the checkpoint by a prefix.
    shown = parsed_json(done_all["shown"])
    assert shown["checkpoint_id"] == newest
    assert messages_from_dict(shown["values"]["messages"]) == messages

    chat = done_all["chat"]
    assert chat.returncode == 0, chat.stderr
    lines = [line.strip() for line in chat.stdout.splitlines()]
    at = lines.index(next(line for line in lines if line.startswith("messages (")))
    assert lines[at + 1 : at + 5] == [
        f"human  {question}".strip(),
        f'ai     -> get_weather({{"city": "{question}"}}) [call_1]',
        "tool   get_weather [call_1]: 18°C and sunny",
        "ai     It is 18°C and sunny in Paris.",
    ]

    changed = done_all["changed"]
    assert changed.returncode == 0, changed.stderr
    lines = [line.strip() for line in changed.stdout.splitlines()]
    at = lines.index("messages (v- -> v5; + 4)")  # the input checkpoint had none
    assert lines[at + 1 : at + 5] == [
        "+ human  Paris, please please please p…",  # 30 characters
        '+ ai     -> get_weather({"city": "Paris, please pleas…) [call_1]',
        "+ tool   get_weather [call_1]: 18°C and sunny",
        "+ ai     It is 18°C and sunny in Paris.",
    ]

    unknown = done_all["unknown"]
    assert unknown.returncode == 1
    assert_one_error_line(unknown, f"chat-{tag}-unknown", "has no checkpoint")


def test_version_and_help_for_every_option() -> None:
    import argparse

    from lg_sqla.cli import _parser

    done = run_cli(["--version"], None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("lg-sqla ") and "schema head" in done.stdout
    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = subparsers.choices
    assert {"threads", "history", "show", "diff", "writes", "stats", "latest", "storage"} <= set(
        commands
    )
    assert {"prune", "sweep", "delete-thread", "downgrade", "stamp", "revisions", "vacuum"} <= set(
        commands
    )
    for name, command in commands.items():
        assert command.description, name
        for action in command._actions:
            if action.option_strings:  # every option says what it does
                assert action.help, (name, action.option_strings)
        options = {o for a in command._actions for o in a.option_strings}
        if name in ("threads", "history", "show", "diff", "writes", "stats", "latest", "storage"):
            assert "--json" in options, name
        if name in ("prune", "sweep", "delete-thread", "downgrade"):
            assert {"--dry-run", "--yes"} <= options, name
    shown = run_cli(["threads", "--help"], None)
    assert shown.returncode == 0 and "--written-after WHEN" in shown.stdout


# --- destructive commands --------------------------------------------------------------


def _rows(backend: Backend, thread_ids: Sequence[str]) -> dict[str, int]:
    with checked_engine(backend) as engine:
        totals = {"checkpoints": 0, "checkpoint_writes": 0, "checkpoint_blobs": 0}
        for thread_id in thread_ids:
            for table, n in table_counts(engine, thread_id).items():
                totals[table] += n
        return totals


@pytest.mark.parametrize("command", ["prune", "delete-thread"])
def test_dry_run_reports_exactly_what_the_real_run_removes(backend: Backend, command: str) -> None:
    tag = _tag()
    threads = [f"dry-{tag}-{n}" for n in range(2)]
    populate(backend, tag, {t: 2 for t in threads})
    url = backend.sync_url
    args = [command, *threads, "no-such-thread"]
    if command == "prune":
        args += ["--keep-last", "2"]
    before = _rows(backend, threads)
    dry = read_json([*args, "--dry-run"], url)
    assert _rows(backend, threads) == before  # nothing removed by a dry run
    assert dry["dry_run"] is True and dry["threads"] == 2  # the unknown thread is not counted
    assert dry["bytes"] > 0
    real = read_json([*args, "--yes"], url)
    after = _rows(backend, threads)
    removed = {
        "checkpoints": before["checkpoints"] - after["checkpoints"],
        "writes": before["checkpoint_writes"] - after["checkpoint_writes"],
        "values": before["checkpoint_blobs"] - after["checkpoint_blobs"],
    }
    for key, n in removed.items():
        assert dry[key] == real[key] == n > 0, key
    assert real["threads"] == 2
    if command == "delete-thread":
        assert after == {"checkpoints": 0, "checkpoint_writes": 0, "checkpoint_blobs": 0}
    else:
        assert after["checkpoints"] == 4  # two per thread kept


def test_prune_of_unknown_threads_removes_nothing_and_says_so(backend: Backend) -> None:
    done = run_cli(["prune", "no-such-thread", "--strategy", "delete"], backend.sync_url)
    assert done.returncode == 0, done.stderr
    assert (
        "done: deleted 0 thread(s); removed 0 checkpoint(s), 0 write(s), 0 value(s)" in done.stdout
    )


def test_sweep_reports_pruned_not_removed_threads(
    make_engine: EngineFactory, backend: Backend
) -> None:
    tag = _tag()
    threads = [f"sweep-{tag}-{n}" for n in range(2)]
    populate(backend, tag, {t: 1 for t in threads})
    engine = make_engine(backend)
    with engine.begin() as conn:  # make them 40 days old
        old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=40)
        conn.execute(
            sa.update(checkpoints)
            .where(checkpoints.c.thread_id.in_(threads))
            .values(updated_at=old, created_at=old)
        )
        conn.execute(
            sa.update(checkpoint_writes)
            .where(checkpoint_writes.c.thread_id.in_(threads))
            .values(created_at=old)
        )
    url = backend.sync_url
    sweep = ["sweep", "--older-than-days", "30", "--strategy", "keep_latest", "--keep-last", "1"]
    dry = read_json([*sweep, "--dry-run"], url)
    done = run_cli(sweep, url)
    assert done.returncode == 0, done.stderr
    # Plain progress lines (not a terminal), then the report.
    assert re.search(r"^sweep: \d+/\d+, ", done.stdout, flags=re.M), done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert "none deleted" in last and "removed 0 thread" not in last
    assert f"removed {dry['checkpoints']} checkpoint(s)" in last
    assert _rows(backend, threads)["checkpoints"] == 2  # each thread kept its newest
    again = read_json(["sweep", "--older-than-days", "30", "--dry-run"], url)
    assert again["threads"] >= 2  # the delete strategy would now remove them...
    assert _rows(backend, threads)["checkpoints"] == 2  # ...but a dry run did not
    # Leave no stale threads behind for other tests' sweeps of the shared database.
    done = run_cli(["delete-thread", *threads], url)
    assert done.returncode == 0 and "deleted 2 thread(s)" in done.stdout, done.stderr


def test_downgrade_dry_run_and_confirmation_on_a_terminal(fresh_database: Backend) -> None:
    url = fresh_database.sync_url
    assert run_cli(["upgrade"], url).returncode == 0
    populate(fresh_database, "x", {"only-thread": 1})
    dry = run_cli(["downgrade", "base", "--dry-run"], url)
    assert dry.returncode == 0, dry.stderr
    assert (
        "would undo 10 migration(s) (0010_partial_indexes, 0009_state_revision, "
        "0008_checkpoint_expiry, "
        "0007_store_namespace_index, "
        "0006_checkpoint_retention, "
        "0005_scale_indexes, "
        "0004_store_prefix_head, 0003_vectors_real_array, 0002_store_cache, 0001_initial) "
        "and DROP 7 table(s): "
        "checkpoints (4 rows)" in dry.stdout
    )
    assert run_cli(["check"], url).returncode == 0  # still there

    # On a terminal the command asks; "n" leaves everything in place, "y" goes ahead.
    assert "cancelled" in on_terminal(["downgrade", "base"], url, answer="n")
    assert run_cli(["check"], url).returncode == 0
    assert "downgraded to base" in on_terminal(["downgrade", "base"], url, answer="y")
    assert "not set up" in run_cli(["check"], url).stderr


def on_terminal(args: Sequence[str], url: str, *, answer: str) -> str:
    """Run the CLI on a pseudo-terminal (as a person would), answering its question."""
    import pty

    env = {**os.environ, "LG_SQLA_DATABASE_URL": url, "COLUMNS": "200"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI, attached to the terminal
        os.execve(MODULE[0], [*MODULE, *args], env)
    output = b""
    answered = False
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
        if not answered and b"[y/N]" in output:
            os.write(fd, answer.encode() + b"\n")
            answered = True
    os.waitpid(pid, 0)
    os.close(fd)
    return output.decode(errors="replace")


def test_tables_and_progress_bar_on_a_terminal(backend: Backend) -> None:
    tag = _tag()
    thread_id = f"tty-{tag}"
    populate(backend, tag, {thread_id: 2})
    screen = on_terminal(["threads", "--filter", f"suite={tag}"], backend.sync_url, answer="n")
    assert thread_id in screen and "┃" in screen  # a rich table, with box drawing
    screen = on_terminal(["prune", thread_id], backend.sync_url, answer="y")
    assert (
        "Prune 1 thread(s)" in screen and "1/1" in screen and "done: pruned 1 thread(s)" in screen
    )


def test_upgrade_sql_stamp_revisions_and_vacuum(fresh_database: Backend) -> None:
    url = fresh_database.sync_url
    sql = run_cli(["upgrade", "--sql"], url)
    assert sql.returncode == 0, sql.stderr
    assert "CREATE TABLE checkpoints" in sql.stdout and "lg_sqla_alembic_version" in sql.stdout
    if fresh_database.name == "sqlite":
        Path(make_url(url).database or "").touch()
    assert "not set up" in run_cli(["check"], url).stderr  # --sql ran nothing
    stamped = run_cli(["stamp", "head"], url)
    assert stamped.returncode == 0, stamped.stderr
    assert read_json(["current"], url)["current"] == read_json(["revisions"], url)[0]["revision"]
    assert read_json(["revisions"], url)[0]["current"] is True
    assert read_json(["history"], url) == read_json(["revisions"], url)  # the DBA's `history`
    assert run_cli(["stamp", "base"], url).returncode == 0
    assert run_cli(["upgrade"], url).returncode == 0
    vacuum = run_cli(["vacuum"], url)
    if fresh_database.name == "sqlite":
        assert vacuum.returncode == 0 and "vacuumed" in vacuum.stdout
    else:
        assert_one_error_line(vacuum, "vacuum is for SQLite")
