"""A first page of ``threads`` costs the threads it lists, not the table (issue 21).

Unfiltered, ``threads`` newest first walks the ``updated_at`` index and
``order="thread_id"`` the primary key, each stopping after its page. As in
test_query_plans.py, no timing: the database's own count of the work the
statement did (SQLite VM steps, PostgreSQL rows through the plan with sequential
scans off, MySQL/MariaDB handler reads) on a table of FEW threads and of ten
times more.
"""

from __future__ import annotations

import pytest
from backends import Backend
from test_query_plans import _fill, _work_of

from lg_sqla import SQLAlchemySaver
from lg_sqla.inspection import Inspector

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
