# mypy: disable-error-code="arg-type,return-value"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""A read costs the database the same work on a long thread as on a short one, and a
call across threads the same work on a big table as on a small one.

A checkpoint's blobs are found through its ``channel_versions``, its writes by
its key. A planner that joins the other way round reads every blob (or write) of
the thread for each checkpoint: PostgreSQL did, until ``PostgresOps.keyed_lookup``
(``get_tuple`` took 0.40 ms at 50 checkpoints, 4.6 ms at 2,000; SQLite and MariaDB
keep their order through ``ordered_join``). A DeltaChannel history walks the parent
chain only as far as the channels' nearest stored values (it walked to the root).
No timing here: each database's own account of the work a statement did is
compared between a thread of SHORT and a thread of LONG checkpoints:

* SQLite: virtual machine instructions executed (a progress handler);
* PostgreSQL: rows through the plan's nodes (``EXPLAIN ANALYZE``, after ``ANALYZE``:
  with the statistics that misled it);
* MySQL/MariaDB: rows read by the storage engine (the ``Handler_read_*`` counters).

Across threads, the same database is measured at SMALL_TABLE and at BIG_TABLE threads
(10 checkpoints, 20 writes, 30 values each), made in SQL by the scale benchmark's
builder (benchmarks/scale_level.py: the rows the saver writes, copied set-based).
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread

from lg_sqla import SQLAlchemySaver
from lg_sqla.checkpoint import codec

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks import scale_level as scale

# Also on a MariaDB database at the server's default charset (conftest.py).
pytestmark = pytest.mark.any_charset

SHORT, LONG = 10, 150
SMALL_TABLE, BIG_TABLE = 50, 500  # threads
CHANNELS = 4
PAGE = 10


def _fill(saver: SQLAlchemySaver, thread_id: str, n: int) -> list[dict[str, Any]]:
    """n checkpoints whose CHANNELS channels all change every step, 2 writes each."""
    stored, parent = [], config(thread_id)
    for i in range(n):
        versions = {f"ch{c}": f"{i + 1:032}.0" for c in range(CHANNELS)}
        values = {channel: {"step": i, "channel": channel} for channel in versions}
        parent = saver.put(parent, checkpoint(values, versions), {"step": i}, versions)
        saver.put_writes(parent, [("a", i), ("b", -i)], task_id=f"task-{i}")
        stored.append(parent)
    return stored


@contextmanager
def _captured(engine: sa.Engine) -> Iterator[list[tuple[str, Any]]]:
    """The statements a call sends (a listener also keeps the saver on Core: same SQL)."""
    sent: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        sent.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", capture)
    try:
        yield sent
    finally:
        sa.event.remove(engine, "before_cursor_execute", capture)


def _sqlite_work(conn: sa.Connection, statement: str, parameters: Any) -> int:
    raw = conn.connection.dbapi_connection
    assert raw is not None
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0  # (non-zero would interrupt the statement)

    raw.set_progress_handler(count, 1)
    try:
        result = conn.exec_driver_sql(statement, parameters)
        if result.returns_rows:  # (not a DELETE)
            result.fetchall()
    finally:
        raw.set_progress_handler(None, 1)
    return steps


def _postgres_work(conn: sa.Connection, statement: str, parameters: Any) -> int:
    # Rows through every node of the plan, and rows its filters dropped. With
    # sequential scans off, as on a table too large to scan, so the count follows
    # the join order, not the planner's choice to scan a test's small table.
    with conn.begin():
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        plan = conn.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters)
        document = plan.scalar_one()
    nodes = [(json.loads(document) if isinstance(document, str) else document)[0]["Plan"]]
    rows = 0
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", ()))
        per_loop = (
            node.get("Actual Rows", 0)
            + node.get("Rows Removed by Filter", 0)
            + node.get("Rows Removed by Join Filter", 0)
        )
        rows += per_loop * node.get("Actual Loops", 0)
    return rows


def _mysql_reads(conn: sa.Connection) -> int:
    status = conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Handler_read%%'").all()
    return sum(int(value) for _, value in status)


def _mysql_work(conn: sa.Connection, statement: str, parameters: Any) -> int:
    before = _mysql_reads(conn)
    result = conn.exec_driver_sql(statement, parameters)
    if result.returns_rows:  # (not the SET that lifts the recursion limit)
        result.fetchall()
    return _mysql_reads(conn) - before


WORK: dict[str, Callable[[sa.Connection, str, Any], int]] = {
    "sqlite": _sqlite_work,
    "postgres": _postgres_work,
    "mysql": _mysql_work,
}


def _work_of(backend: Backend, engine: sa.Engine, call: Callable[[], object]) -> int:
    """The database's work for the statements ``call`` sends, each run again on its own
    (how many there are is test_statement_counts.py's business)."""
    with _captured(engine) as sent:
        call()
    assert sent
    with engine.connect() as conn:
        return sum(WORK[backend.name](conn, statement, params) for statement, params in sent)


def test_reads_do_not_grow_with_the_thread(make_engine: EngineFactory, backend: Backend) -> None:
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine, list_page_size=PAGE)
    short, long = new_thread(), new_thread()
    short_ids = _fill(saver, short, SHORT)
    long_ids = _fill(saver, long, LONG)
    if backend.name == "postgres":
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")

    reads: dict[str, Callable[[str, list[dict[str, Any]]], Callable[[], object]]] = {
        "get_tuple (latest)": lambda thread, ids: lambda: saver.get_tuple(config(thread)),
        "get_tuple (by id)": lambda thread, ids: lambda: saver.get_tuple(ids[SHORT // 2]),
        "list (one page)": lambda thread, ids: lambda: list(saver.list(config(thread), limit=PAGE)),
        # Every checkpoint stores every channel: the seeds are one step back, and
        # the walk up the parent chain stops there (history.seed_walk_cte).
        "get_delta_channel_history": lambda thread, ids: (
            lambda: saver.get_delta_channel_history(config=config(thread), channels=["ch0", "ch1"])
        ),
    }
    for name, read in reads.items():
        on_short = _work_of(backend, engine, read(short, short_ids))
        on_long = _work_of(backend, engine, read(long, long_ids))
        assert on_short > 0, name  # (the counter sees the statement's work)
        # The same rows are found either way; allow for deeper indexes.
        assert on_long <= 1.5 * on_short + 50, (name, on_short, on_long)


def test_the_work_counter_sees_a_read_that_grows(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """The measure above would catch the regression: a lookup of every blob of the
    thread (what the mis-ordered join did) counts as more work on the long thread."""
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine)
    short, long = new_thread(), new_thread()
    _fill(saver, short, SHORT)
    _fill(saver, long, LONG)
    if backend.name == "postgres":
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
    every_blob = sa.text(
        "SELECT b.channel, b.blob FROM checkpoint_blobs b "
        "WHERE b.thread_id = :t AND b.type <> 'never'"
    )

    def work(thread: str) -> int:
        with engine.connect() as conn:
            compiled = every_blob.bindparams(t=thread).compile(
                dialect=engine.dialect, compile_kwargs={"render_postcompile": True}
            )
            positional = compiled.positiontup or []
            parameters: Any = (
                tuple(compiled.params[name] for name in positional)
                if compiled.positional
                else compiled.params
            )
            return WORK[backend.name](conn, compiled.string, parameters)

    assert work(long) > 1.5 * work(short) + 50


def test_calls_across_threads_do_not_grow_with_the_tables(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """``list`` without a thread pages through the list-order index (revision 0005),
    a ``run_id`` filter reads the run's checkpoints through the ``run_id`` column, and
    ``delete_for_runs`` deletes the run's writes by key: none reads the whole table
    (SQLite's ``(a, b, c) IN (VALUES ...)`` did, for the writes)."""
    backend = fresh_database  # (its own: list(None) would see other tests' threads)
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine, list_page_size=PAGE)
    saver.setup()
    builder = scale.Builder(engine)
    scale.write_thread(saver, scale.TOKEN)
    builder.keep_template()

    def thread(n: int) -> str:
        return scale.number(n)

    # Each takes the number of a thread of the small table (that a call deletes is its own).
    calls: dict[str, Callable[[int], Callable[[], object]]] = {
        "list(None), first page": lambda n: lambda: list(saver.list(None, limit=PAGE)),
        "list(None), two pages": lambda n: lambda: list(saver.list(None, limit=2 * PAGE)),
        "list(None, before=)": lambda n: (
            lambda: list(
                saver.list(
                    None,
                    before={"configurable": {"checkpoint_id": scale.checkpoint_id(thread(n), 5)}},
                    limit=PAGE,
                )
            )
        ),
        "list(run_id filter)": lambda n: (
            lambda: list(
                saver.list(None, filter={"run_id": scale.run_of(thread(n), 1)}, limit=PAGE)
            )
        ),
        "delete_for_runs": lambda n: (
            lambda: saver.delete_for_runs([scale.run_of(thread(n + 1), 0)])
        ),
    }
    # A statement no index serves (the order of a column without one): a scan, whose
    # work must grow with the table for this comparison to mean anything.
    scan = sa.text("SELECT checkpoint_id FROM checkpoints ORDER BY created_at, metadata LIMIT 1")

    def scan_work() -> int:
        with engine.connect() as conn:
            return WORK[backend.name](conn, str(scan.compile(dialect=engine.dialect)), {})

    work: dict[int, dict[str, int]] = {}
    for size, thread_number in ((SMALL_TABLE, 10), (BIG_TABLE, 30)):
        builder.build(SMALL_TABLE if size == BIG_TABLE else 0, size, lambda line: None)
        builder.analyze()
        work[size] = {
            name: _work_of(backend, engine, call(thread_number)) for name, call in calls.items()
        }
        work[size]["a scan"] = scan_work()
    builder.drop_scratch()
    small, big = work[SMALL_TABLE], work[BIG_TABLE]
    assert big["a scan"] > 5 * small["a scan"], (small, big)
    for name in calls:
        assert small[name] > 0, name
        assert big[name] <= 1.5 * small[name] + 50, (name, small[name], big[name])


def test_get_tuple_limits_its_page_with_a_constant(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """``LIMIT 1`` in the SQL text, not a bound value: PostgreSQL's generic plan of a
    prepared statement (psycopg prepares from the fifth run) then counts on one row."""
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine)
    thread = new_thread()
    _fill(saver, thread, 2)
    with _captured(engine) as sent:
        assert saver.get_tuple(config(thread)) is not None
    statements = [statement for statement, _ in sent if "checkpoints" in statement]
    assert statements
    assert all("LIMIT 1" in " ".join(statement.split()) for statement in statements)


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)  # (reads_all_inline: SQLite's)
def test_get_tuple_skips_the_blobs_of_a_checkpoint_naming_none(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """SQLite: a checkpoint whose values are all inline records it (codec.ALL_INLINE_KEY)
    and get_tuple runs no blob lookup for it: its work does not grow with its channels,
    where the same document without the record (written before) looks each one up."""
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine)
    work, stored, values = {}, {}, {}
    for n in (2, 40):
        values[n] = {f"ch{c}": c for c in range(n)}
        cp = checkpoint(values[n])
        stored[n] = saver.put(config(new_thread()), cp, {}, dict.fromkeys(values[n], 1))
        work[n] = _work_of(backend, engine, functools.partial(saver.get_tuple, stored[n]))
    assert work[40] == work[2]
    record = f'{{"{codec.ALL_INLINE_KEY}":true,'
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE checkpoints SET checkpoint = '{' || substr(checkpoint, :rest)"
                " WHERE thread_id = :thread AND substr(checkpoint, 1, :n) = :record"
            ),
            {
                "rest": len(record) + 1,
                "thread": stored[40]["configurable"]["thread_id"],
                "n": len(record),
                "record": record,
            },
        )
    without = _work_of(backend, engine, lambda: saver.get_tuple(stored[40]))
    assert without > work[40] + 40  # (a json_each row and a blob probe per channel)
    for n in (2, 40):
        found = saver.get_tuple(stored[n])
        assert found is not None and found.checkpoint["channel_values"] == values[n]
