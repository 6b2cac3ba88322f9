"""The indexes of mostly-NULL columns are partial on SQLite and PostgreSQL (revision
0010_partial_indexes), and every query that read them still does.

``checkpoints.run_id``, ``checkpoints.expires_at``, ``store_items.expires_at`` and
``cache_entries.expires_at`` are indexed ``WHERE <column> IS NOT NULL`` there: a write
that leaves the column NULL touches one b-tree less. A planner uses a partial index
only when it can prove the query's WHERE implies the index's; here the statements the
real calls send are captured and each one that compares an indexed column is asked
for its plan (SQLite ``EXPLAIN QUERY PLAN``; PostgreSQL ``EXPLAIN`` with sequential
scans off, as on a table too big to scan, and with a generic plan, as drivers prepare
a statement they run often). MySQL/MariaDB have no partial indexes: theirs stay whole.

Alembic's model comparison (test_migrations.py) ignores index predicates: the
reflected definitions are compared with the models' here.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

import psycopg.sql
import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from langgraph.checkpoint.base import CheckpointMetadata
from langgraph.store.base import PutOp
from store_helpers import fake_index
from test_query_plans import _captured

from lg_sqla import SQLAlchemySaver, migrate
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.cli import store as store_cli
from lg_sqla.models import metadata
from lg_sqla.store import SQLAlchemyStore

# (table, column) of each index made partial by revision 0010.
MOSTLY_NULL = (
    ("checkpoints", "run_id"),
    ("checkpoints", "expires_at"),
    ("store_items", "expires_at"),
    ("cache_entries", "expires_at"),
)
BEFORE_0010 = "0009_state_revision"
PARTIAL_DIALECTS = ("sqlite", "postgres")


def _definitions(conn: sa.Connection) -> dict[str, str]:
    """Each index of lg_sqla's tables by name: its DDL as the database keeps it."""
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        )
    elif conn.dialect.name == "postgresql":
        rows = conn.exec_driver_sql(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        )
    else:  # MySQL/MariaDB: the columns (no predicate can be declared)
        rows = conn.exec_driver_sql(
            "SELECT index_name, group_concat(column_name ORDER BY seq_in_index) "
            "FROM information_schema.statistics "
            "WHERE table_schema = database() AND index_name <> 'PRIMARY' "
            "GROUP BY index_name"
        )
    return {str(name): " ".join(str(ddl).split()) for name, ddl in rows}


def _predicate(ddl: str) -> str | None:
    """The WHERE of an index's DDL, without parentheses and case (None: a whole index)."""
    found = re.search(r"\bWHERE\b(.*)$", ddl, flags=re.IGNORECASE)
    return None if found is None else re.sub(r"[()]", "", found.group(1)).strip().upper()


def _partial_indexes(conn: sa.Connection) -> dict[str, str | None]:
    return {f"ix_{t}_{c}": _predicate(_definitions(conn)[f"ix_{t}_{c}"]) for t, c in MOSTLY_NULL}


def _partial() -> dict[str, str | None]:
    return {f"ix_{t}_{c}": f"{c.upper()} IS NOT NULL" for t, c in MOSTLY_NULL}


def _whole() -> dict[str, str | None]:
    return {f"ix_{t}_{c}": None for t, c in MOSTLY_NULL}


def test_the_migrated_indexes_are_the_models(make_engine: EngineFactory, backend: Backend) -> None:
    """Every index's predicate is the models' on this dialect: partial where the
    database has partial indexes, whole on MySQL/MariaDB."""
    engine = make_engine(backend)
    with engine.connect() as conn:
        stored = _definitions(conn)
        for table in metadata.sorted_tables:
            for index in table.indexes:
                ddl = str(sa.schema.CreateIndex(index).compile(dialect=conn.dialect))
                assert index.name in stored, index.name
                if conn.dialect.name in ("sqlite", "postgresql"):
                    assert _predicate(stored[str(index.name)]) == _predicate(ddl), index.name
        if backend.name in PARTIAL_DIALECTS:
            assert _partial_indexes(conn) == _partial()
        else:  # whole, on the one column
            assert all(stored[name] in ("run_id", "expires_at") for name in _whole())


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "mysql"], indirect=True)
def test_revision_0010_keeps_rows_and_goes_back(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """Up: the indexes become partial and the rows stay findable through them (a run's
    checkpoints deleted by run id); down: whole again; up again."""
    engine = make_engine(fresh_database)
    migrate.upgrade(engine, BEFORE_0010)
    with engine.connect() as conn:
        before = _definitions(conn)
    saver = SQLAlchemySaver(engine, check_schema=False)
    kept, doomed = new_thread(), new_thread()
    saver.put(config(kept), checkpoint({"a": 1}), {"step": 1}, {"a": 1})
    saver.put(config(doomed), checkpoint({"a": 2}), {"step": 1, "run_id": "run-1"}, {"a": 2})
    migrate.upgrade(engine)
    partial = fresh_database.name in PARTIAL_DIALECTS
    with engine.connect() as conn:
        assert _partial_indexes(conn) == (_partial() if partial else _whole())
    saver = SQLAlchemySaver(engine)
    saver.delete_for_runs(["run-1"])
    assert saver.get_tuple(config(doomed)) is None
    assert saver.get_tuple(config(kept)) is not None
    with engine.connect() as conn:
        migrate.downgrade_connection(conn, BEFORE_0010)
        assert _definitions(conn) == before
        assert _partial_indexes(conn) == _whole()
    migrate.upgrade(engine)
    with engine.connect() as conn:
        assert _partial_indexes(conn) == (_partial() if partial else _whole())


# --- plans ---------------------------------------------------------------------------


def _compared(statement: str) -> set[str]:
    """The partial indexes whose column this statement's WHERE compares (=, <, <=, IN)."""
    where = re.split(r"\bWHERE\b", statement, maxsplit=1, flags=re.IGNORECASE)[1:]
    return {
        f"ix_{table}_{column}"
        for table, column in MOSTLY_NULL
        if where and re.search(rf"\b{table}\.{column}\s*(=|<|<=|IN)\s", where[0], re.IGNORECASE)
    }


def _sqlite_plan(conn: sa.Connection, statement: str, parameters: Any) -> str:
    rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
    return "\n".join(str(row[-1]) for row in rows)


def _postgres_plan(conn: sa.Connection, statement: str, parameters: Any) -> str:
    with conn.begin():
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        rows = conn.exec_driver_sql("EXPLAIN " + statement, parameters).all()
    return "\n".join(str(row[0]) for row in rows)


def _postgres_generic_plan(conn: sa.Connection, statement: str, parameters: Any) -> str:
    """The plan PostgreSQL settles on for a prepared statement (no parameter values:
    the predicate must follow from the operator alone)."""
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        names.append(match.group(1))
        return f"${len(names)}"

    prepared = re.sub(r"%\((\w+)\)s", placeholder, statement)
    # EXECUTE's arguments as literals (a utility statement binds no parameters), each
    # quoted and typed by psycopg as it would send it: the prepared statement's types.
    driver = conn.connection.driver_connection
    literals = [psycopg.sql.Literal(parameters[name]).as_string(driver) for name in names]
    with conn.begin():
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.exec_driver_sql(f"PREPARE lg_sqla_partial AS {prepared}")
        try:
            arguments = f"({', '.join(literals)})".replace("%", "%%") if names else ""
            rows = conn.exec_driver_sql(f"EXPLAIN EXECUTE lg_sqla_partial{arguments}").all()
        finally:
            conn.exec_driver_sql("DEALLOCATE lg_sqla_partial")
    return "\n".join(str(row[0]) for row in rows)


@pytest.fixture
def plans_database(
    make_engine: EngineFactory, fresh_database: Backend
) -> Iterator[tuple[Backend, sa.Engine]]:
    """A database of the test's own (a TTL sweep reaches every thread of its database),
    with rows of each kind: most with the column NULL, some set."""
    engine = make_engine(fresh_database)
    migrate.upgrade(engine)
    plain = SQLAlchemySaver(engine)
    stamped = SQLAlchemySaver(engine, ttl={"default_ttl": 60})
    for n in range(40):
        metadata_: CheckpointMetadata = {"step": n}
        if n % 10 == 0:
            metadata_["run_id"] = f"run-{n}"
        saver = stamped if n % 4 == 0 else plain
        saver.put(config(new_thread()), checkpoint({"a": n}), metadata_, {"a": n})
    # Items with vectors: the store's sweep deletes the expired items' vectors first.
    store = SQLAlchemyStore(engine, index=fake_index(["text"]))
    store.batch(
        [
            PutOp(("plans",), f"k{n}", {"text": f"item {n}"}, ttl=60 if n % 4 == 0 else None)
            for n in range(40)
        ]
    )
    cache: SQLAlchemyCache[Any] = SQLAlchemyCache(engine)
    cache.set({(("plans",), f"k{n}"): (n, 60 if n % 4 == 0 else None) for n in range(40)})
    if fresh_database.name == "postgres":
        with engine.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
    yield fresh_database, engine


@pytest.mark.parametrize("backend", list(PARTIAL_DIALECTS), indirect=True)
def test_every_query_of_a_partial_index_still_reads_it(
    plans_database: tuple[Backend, sa.Engine],
) -> None:
    backend, engine = plans_database
    saver = SQLAlchemySaver(engine)
    store = SQLAlchemyStore(engine)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    with _captured(engine) as sent:
        list(saver.list(None, filter={"run_id": "run-30"}, limit=5))  # run_id = ...
        saver.delete_for_runs(["run-0", "run-10"])  # run_id IN (...)
        saver.delete_for_runs(["run-20"])
        # A page of 2: the walk's next page (expires_at > after) and the rest of an
        # instant cut in two (expires_at = last) are sent too.
        saver.sweep_ttl(batch_size=2, dry_run=True, now=later)
        store.sweep_ttl()
        with engine.connect() as conn:
            store_cli._stats(conn)
            store_cli._expired(conn)
    reading = [(s, p, _compared(s)) for s, p in sent if _compared(s)]
    assert {name for *_, names in reading for name in names} == {
        f"ix_{t}_{c}" for t, c in MOSTLY_NULL
    }
    planners = (
        [_sqlite_plan] if backend.name == "sqlite" else [_postgres_plan, _postgres_generic_plan]
    )
    with engine.connect() as conn:
        for statement, parameters, names in reading:
            for planner in planners:
                plan = planner(conn, statement, parameters)
                for name in names:
                    assert name in plan, (planner.__name__, statement, plan)
        # The check tells: a query that does not imply IS NOT NULL cannot read them.
        unproven = "SELECT count(*) FROM store_items WHERE expires_at IS NULL OR expires_at < %s"
        for planner in planners:
            plan = planner(conn, unproven.replace("%s", _marker(backend)), _one(backend, later))
            assert "ix_store_items_expires_at" not in plan, plan


def _marker(backend: Backend) -> str:
    return "?" if backend.name == "sqlite" else "%(later)s"


def _one(backend: Backend, value: dt.datetime) -> Any:
    return (value.isoformat(),) if backend.name == "sqlite" else {"later": value}
