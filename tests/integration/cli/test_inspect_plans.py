"""A first page of ``threads`` costs the threads it lists, not the table (issue 21).

Unfiltered, ``threads`` newest first walks the ``updated_at`` index and
``order="thread_id"`` the primary key, each stopping after its page. As in
test_query_plans.py, no timing: the database's own count of the work the
statement did (SQLite VM steps, PostgreSQL rows through the plan with sequential
scans off, MySQL/MariaDB handler reads) on a table of FEW threads and of ten
times more.
"""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa
from backends import Backend
from helpers import checkpoint, config
from test_query_plans import _fill, _work_of

from lg_sqla import SQLAlchemySaver
from lg_sqla.inspection import Inspector
from lg_sqla.models import checkpoint_blobs, checkpoints

FEW, MORE = 6, 60
PAGE = 5


@pytest.mark.parametrize("order", ["last_write", "thread_id"])
def test_a_first_page_of_threads_does_not_grow_with_the_table(
    fresh_database: Backend, order: str
) -> None:
    engine = fresh_database.engine()
    try:
        saver = SQLAlchemySaver(engine)
        saver.setup()
        inspector = Inspector(saver)
        # Thread ids of the later batch sort after the first one's: the first page
        # by thread id lists the same threads; newest first, the later ones.
        for n in range(FEW):
            _fill(saver, f"a-{n:04}", 2)

        def first_page() -> object:
            return inspector.threads(order=order, limit=PAGE)

        def work() -> int:
            if fresh_database.name == "postgres":
                with engine.begin() as conn:
                    conn.exec_driver_sql("ANALYZE")
            return _work_of(fresh_database, engine, first_page)

        on_few = work()
        for n in range(MORE - FEW):
            _fill(saver, f"b-{n:04}", 2)
        on_more = work()
        assert len(inspector.threads(order=order, limit=PAGE).threads) == PAGE
        assert on_few > 0
        # Ten times the threads; the same page size: about the same work.
        assert on_more <= 1.5 * on_few + 50, (order, on_few, on_more)
    finally:
        engine.dispose()


BULK_FEW, BULK_MORE = 1_000, 10_000
MATCHES = 3


def _earlier(row: dict[str, object], n: int) -> dict[str, object]:
    return {
        column: row[column] - dt.timedelta(seconds=n + 1)  # type: ignore[operator]
        for column in ("created_at", "updated_at")
        if column in row
    }


def _copy_threads(saver: SQLAlchemySaver, template: str, first: int, last: int) -> None:
    """Threads ``bulk-<first>`` .. ``bulk-<last - 1>``: copies of ``template``'s rows
    (the same checkpoint and values), inserted in bulk: 10k puts would take minutes."""
    engine = saver.engine
    with engine.begin() as conn:
        copies = {}
        for table in (checkpoints, checkpoint_blobs):
            rows = [
                r._asdict()
                for r in conn.execute(sa.select(table).where(table.c.thread_id == template))
            ]
            copies[table] = rows
        for start in range(first, last, 1000):
            for table, rows in copies.items():
                if not rows:
                    continue  # (the template's values may all be in its document)
                batch = [
                    # Older than the template, each thread at its own time (ties
                    # of the updated_at index would be sorted, unlike real writes).
                    {**row, "thread_id": f"bulk-{n:05}", **_earlier(row, n)}
                    for n in range(start, min(start + 1000, last))
                    for row in rows
                ]
                conn.execute(sa.insert(table), batch)


def test_a_page_of_a_value_filter_does_not_grow_with_the_table(fresh_database: Backend) -> None:
    """``values`` filters decode the candidates' latest values a batch at a time: a page
    whose matches are among the newest threads costs the same on 1k and 10k threads."""
    engine = fresh_database.engine()
    try:
        saver = SQLAlchemySaver(engine)
        saver.setup()
        inspector = Inspector(saver)
        versions: dict[str, str | int | float] = {"order_id": 1, "status": 1}
        saver.put(
            config("template"),
            checkpoint({"order_id": 0, "status": "new"}, versions),
            {"step": 0},
            versions,
        )
        _copy_threads(saver, "template", 0, BULK_FEW)
        for n in range(MATCHES):  # the newest threads, with the order sought
            values = {"order_id": 3, "status": "paid"}
            saver.put(config(f"wanted-{n}"), checkpoint(values, versions), {"step": 0}, versions)

        def page() -> object:
            return inspector.threads(values={"order_id": 3}, limit=MATCHES)

        def work() -> int:
            if fresh_database.name == "postgres":
                with engine.begin() as conn:
                    conn.exec_driver_sql("ANALYZE")
            return _work_of(fresh_database, engine, page)

        on_few = work()
        _copy_threads(saver, "template", BULK_FEW, BULK_MORE)
        on_more = work()
        found = inspector.threads(values={"order_id": 3}, limit=MATCHES)
        assert sorted(t.thread_id for t in found.threads) == [f"wanted-{n}" for n in range(3)]
        assert inspector.count_threads(values={"order_id": 3}) == MATCHES
        assert on_few > 0
        assert on_more <= 1.5 * on_few + 50, (on_few, on_more)
    finally:
        engine.dispose()
