"""The long-term memory in the operator tools, through the CLI's entry point: the
``store`` commands, the store and cache tables in ``storage`` and in every downgrade's
dry run and question, ``downgrade`` off a terminal, and the URLs the savers take.

Each test runs on a SQLite file, PostgreSQL and MariaDB (a fresh database, so every
count is exact). Commands run through ``lg_sqla.cli.main``, the function the
``lg-sqla`` script calls, in this process (a subprocess pays ~1.5 s of imports per
command); a few run as the installed script and on a pseudo-terminal, as an
operator runs them. Every ``--json`` answer is parsed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import subprocess
from collections.abc import Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from sqlalchemy.engine import make_url
from store_helpers import age_rows_in, fake_index
from test_cli import SCRIPT, assert_one_error_line, on_terminal, run_cli

from lg_sqla import cli
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.models import store_items
from lg_sqla.store import SQLAlchemyStore

NOTES = 25  # the figure: a downgrade's dry run must count them


def lg_sqla(args: Sequence[str], url: str) -> subprocess.CompletedProcess[str]:
    """``lg-sqla --url URL ARGS`` in this process: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(["--url", url, *args])
        except SystemExit as stop:  # argparse refusing an argument
            code = int(stop.code or 0)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def read_json(args: Sequence[str], url: str) -> Any:
    done = lg_sqla([*args, "--json"], url)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return json.loads(done.stdout)


_TWO_MINUTES = dt.timedelta(minutes=2)


def _fill(url: str) -> None:
    """25 notes of ada (each with a vector), bob's preferences, 3 items that expire
    at once, 2 node-cache entries."""
    with SQLAlchemyStore.from_conn_string(url, index=fake_index(["text"])) as store:
        for n in range(NOTES):
            store.put(("users", "ada"), f"note-{n:02}", {"text": f"note {n}", "kind": "note"})
        store.put(("users", "bob", "prefs"), "theme", {"dark": True}, index=False)
        for n in range(3):
            store.put(("scratch",), f"tmp-{n}", {"n": n}, index=False, ttl=1)
    engine = sa.create_engine(url)
    try:
        cache: SQLAlchemyCache[Any] = SQLAlchemyCache(engine)
        cache.set({(("node",), "a"): ({"v": 1}, None), (("node",), "b"): ({"v": 2}, 3600)})
        with engine.begin() as conn:  # the scratch items expire: aged, not slept past
            aged = age_rows_in(conn, store_items, store_items.c.prefix == "scratch", _TWO_MINUTES)
            assert aged == 3
    finally:
        engine.dispose()


def test_store_commands(fresh_database: Backend) -> None:
    url = fresh_database.sync_url
    assert lg_sqla(["upgrade"], url).returncode == 0
    _fill(url)

    listed = read_json(["store", "namespaces"], url)
    # Expired items are gone for readers: "scratch" is not listed.
    assert listed == {
        "namespaces": [["users", "ada"], ["users", "bob", "prefs"]],
        "next_offset": None,
    }
    assert read_json(["store", "namespaces", "--max-depth", "1"], url)["namespaces"] == [["users"]]
    page = read_json(["store", "namespaces", "--prefix", "users", "--limit", "1"], url)
    assert page == {"namespaces": [["users", "ada"]], "next_offset": 1}
    assert read_json(["store", "namespaces", "--suffix", "prefs"], url)["namespaces"] == [
        ["users", "bob", "prefs"]
    ]

    found = read_json(["store", "search", "users", "--filter", "kind=note", "--limit", "10"], url)
    assert len(found["items"]) == 10 and found["next_offset"] == 10
    assert {i["namespace"] == ["users", "ada"] for i in found["items"]} == {True}
    assert all(i["value"]["kind"] == "note" for i in found["items"])
    rest = read_json(["store", "search", "users.ada", "--offset", "20", "--limit", "10"], url)
    assert len(rest["items"]) == NOTES - 20 and rest["next_offset"] is None
    # A VALUE of digits is a JSON number: an empty listing says how to match text.
    as_number = lg_sqla(["store", "search", "users", "--filter", "kind=7"], url)
    assert as_number.returncode == 0, as_number.stderr
    assert """--filter 'kind="7"'""" in as_number.stderr
    shown = lg_sqla(["store", "search", "users.bob"], url)
    assert shown.returncode == 0 and "theme" in shown.stdout and "users.bob.prefs" in shown.stdout

    item = read_json(["store", "get", "users.ada", "note-07"], url)
    assert item["value"] == {"text": "note 7", "kind": "note"}
    assert item["namespace"] == ["users", "ada"] and item["key"] == "note-07"
    assert item["created_at"] and item["updated_at"]
    missing = lg_sqla(["store", "get", "users.ada", "nope"], url)
    assert_one_error_line(missing, "no item 'nope' in namespace 'users.ada'")
    assert missing.returncode == 1

    stats = read_json(["store", "stats"], url)
    assert {k: v for k, v in stats.items() if k != "bytes"} == {
        "items": NOTES + 1 + 3,
        "namespaces": 3,
        "items_with_ttl": 3,
        "items_expired": 3,
        "vectors": NOTES,
        "cache_entries": 2,
        "cache_entries_expired": 0,
    }
    assert stats["bytes"]["store_items"] > 0
    assert stats["bytes"]["store_vectors"] == NOTES * 4 * fake_index()["dims"]  # float32
    assert stats["bytes"]["cache_entries"] > 0

    storage = read_json(["storage"], url)["tables"]
    assert storage["store_items"]["rows"] == NOTES + 4
    assert storage["store_vectors"] == {"rows": NOTES, "bytes": stats["bytes"]["store_vectors"]}
    assert storage["cache_entries"]["rows"] == 2
    assert storage["checkpoints"]["rows"] == 0

    assert read_json(["store", "sweep-ttl", "--dry-run"], url) == {
        "dry_run": True,
        "expired_items": 3,
    }
    assert read_json(["store", "stats"], url)["items"] == NOTES + 4  # a dry run deletes nothing
    assert read_json(["store", "sweep-ttl"], url) == {"dry_run": False, "removed_items": 3}
    after = read_json(["store", "stats"], url)
    assert (after["items"], after["items_expired"], after["vectors"]) == (NOTES + 1, 0, NOTES)


def test_downgrade_counts_the_store_and_asks_for_yes_off_a_terminal(
    fresh_database: Backend,
) -> None:
    url = fresh_database.sync_url
    assert lg_sqla(["upgrade"], url).returncode == 0
    _fill(url)
    head = read_json(["current"], url)["current"]

    dry = read_json(["downgrade", "0001_initial", "--dry-run"], url)
    assert dry["dry_run"] is True and dry["current"] == head
    assert dry["undo"][-1] == "0002_store_cache" and "0001_initial" not in dry["undo"]
    # What revisions 0002 and 0006 created, counted: the store's items and vectors, the
    # cache, the checkpointer's retention settings.
    assert {name: t["rows"] for name, t in dry["drops"].items()} == {
        "checkpoint_retention": 0,
        "store_items": NOTES + 4,
        "store_vectors": NOTES,
        "cache_entries": 2,
    }
    assert dry["drops_bytes"] == sum(t["bytes"] for t in dry["drops"].values()) > 0
    text = lg_sqla(["downgrade", "0001_initial", "--dry-run"], url).stdout
    assert f"store_items ({NOTES + 4} rows), store_vectors ({NOTES} rows)" in text
    assert "cache_entries (2 rows)" in text and "DROP 4 table(s)" in text

    base = read_json(["downgrade", "base", "--dry-run"], url)
    assert set(base["drops"]) == {
        "checkpoints",
        "checkpoint_writes",
        "checkpoint_blobs",
        "checkpoint_retention",
        "store_items",
        "store_vectors",
        "cache_entries",
    }

    # No terminal, no --yes: refused, nothing changed.
    refused = run_cli(["downgrade", "0001_initial"], url, entry=SCRIPT)  # stdin: /dev/null
    assert_one_error_line(refused, "pass --yes")
    assert refused.returncode == 2
    assert read_json(["current"], url)["current"] == head
    # On a terminal the question says what goes; "n" keeps it.
    screen = on_terminal(["downgrade", "0001_initial"], url, answer="n")
    assert f"store_items ({NOTES + 4} rows)" in screen and "cancelled" in screen
    assert read_json(["current"], url)["current"] == head

    done = read_json(["downgrade", "0001_initial", "--yes"], url)
    assert done["dry_run"] is False and done["drops"]["store_items"]["rows"] == NOTES + 4
    assert read_json(["current"], url)["current"] == "0001_initial"
    # The store commands need the tables back: one error line naming the fix.
    assert_one_error_line(lg_sqla(["store", "stats"], url), "lg_sqla upgrade")
    assert lg_sqla(["downgrade", "base", "--yes"], url).returncode == 0


def test_store_urls_and_bad_input(backend: Backend) -> None:
    url = backend.sync_url
    if backend.name != "postgres":  # (psycopg 3 is one driver for sync and async)
        done = lg_sqla(["store", "get", "a", "b"], backend.async_url)
        assert_one_error_line(done, "use a sync driver")
    bad = lg_sqla(["store", "get", "users..ada", "k"], url)
    assert bad.returncode == 2 and "empty label" in bad.stderr
    negative = lg_sqla(["store", "search", "--offset", "-1"], url)
    assert_one_error_line(negative, "--offset must be >= 0")
    if backend.name == "postgres":
        # postgres:// (Heroku, LangGraph's PostgresSaver) opens as the savers open it.
        heroku = "postgres://" + url.split("://", 1)[1]
        assert read_json(["current"], heroku)["current"] == read_json(["current"], url)["current"]
        assert "namespaces" in read_json(["store", "namespaces"], heroku)
    if backend.name == "mysql":
        # aiomysql cannot send bytes with PyMySQL >= 1.2.3: one line naming asyncmy.
        aiomysql = make_url(url).set(drivername="mysql+aiomysql")
        for command in (["current"], ["threads"], ["storage"], ["upgrade"], ["store", "stats"]):
            done = lg_sqla(command, aiomysql.render_as_string(hide_password=False))
            assert_one_error_line(done, "asyncmy")


@pytest.mark.parametrize("days", ["0", "-1", "nan", "inf", "x"])
def test_sweep_older_than_days_is_validated(days: str) -> None:
    done = lg_sqla(["sweep", "--older-than-days", days], "sqlite:///nowhere.sqlite")
    assert done.returncode == 2 and "--older-than-days" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
