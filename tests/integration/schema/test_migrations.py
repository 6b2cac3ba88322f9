# mypy: disable-error-code="index,no-any-return"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Migrations on every dialect: round trips, one head, models == migrations,
concurrent setup, and the error a saver gives on a schema that is behind."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from backends import Backend, EngineFactory, assert_no_leaked_connections, checked_engine
from helpers import checkpoint, config, new_thread
from langgraph.checkpoint.base import CheckpointMetadata

from lg_sqla import AsyncSQLAlchemySaver, SchemaError, SQLAlchemySaver, migrate
from lg_sqla.checkpoint.json_values import json_object
from lg_sqla.dialects import MIGRATION_LOCK_NAME
from lg_sqla.models import checkpoint_blobs, checkpoint_retention, checkpoints, metadata
from lg_sqla.store import SQLAlchemyStore

REPO = Path(__file__).resolve().parents[3]
TABLES = {
    "checkpoints",
    "checkpoint_writes",
    "checkpoint_blobs",
    "store_items",
    "store_vectors",
    "cache_entries",
    "checkpoint_retention",
    migrate.VERSION_TABLE,
}
STORE_TABLES = {"store_items", "store_vectors", "cache_entries"}


def _tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def test_single_head_and_readable_revisions() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert script.get_heads() == [migrate.head_revision()]
    for revision in script.walk_revisions():
        assert revision.revision[:4].isdigit(), revision.revision
        source = Path(revision.path).read_text()
        assert "import lg_sqla" not in source and "from lg_sqla" not in source


def test_upgrade_downgrade_upgrade(make_engine: EngineFactory, fresh_database: Backend) -> None:
    engine = make_engine(fresh_database)
    migrate.upgrade(engine)
    assert _tables(engine) >= TABLES
    with engine.connect() as conn:
        migrate.downgrade_connection(conn, "base")
    assert _tables(engine) & {"checkpoints", "checkpoint_writes", "checkpoint_blobs"} == set()
    migrate.upgrade(engine)
    saver = SQLAlchemySaver(engine)
    stored = saver.put(config(new_thread()), checkpoint({"a": 1}), {}, {"a": 1})
    assert saver.get_tuple(stored) is not None


def test_database_at_0001_upgrades_in_place_and_keeps_checkpoints(
    make_engine: EngineFactory,
    fresh_database: Backend,
) -> None:
    """A database made by lg_sqla before the store existed gains the store and cache
    tables on upgrade; its checkpoints stay readable. Downgrading to 0001 drops only
    the new tables."""
    engine = make_engine(fresh_database)
    migrate.upgrade(engine, "0001_initial")
    assert _tables(engine) & STORE_TABLES == set()
    stored = put_as_before_0008(engine, new_thread(), {"step": 1})
    with pytest.raises(SchemaError, match="behind"):
        SQLAlchemySaver(engine).get_tuple(stored)
    migrate.upgrade(engine)
    assert _tables(engine) >= TABLES
    kept = SQLAlchemySaver(engine).get_tuple(stored)
    assert kept is not None and kept.metadata["step"] == 1
    with engine.connect() as conn:
        migrate.downgrade_connection(conn, "0001_initial")
    assert _tables(engine) & STORE_TABLES == set()
    assert _stored_steps(engine, stored["configurable"]["thread_id"]) == [1]


def _stored_steps(engine: sa.Engine, thread_id: str) -> list[int]:
    """The metadata steps of a thread's checkpoints, newest first, read with SQL: a schema
    downgraded below revision 0009 lacks the ``state_revision`` today's saver reads."""
    query = (
        sa.select(checkpoints.c.metadata)
        .where(checkpoints.c.thread_id == thread_id)
        .order_by(checkpoints.c.checkpoint_id.desc())
    )
    with engine.connect() as conn:
        return [json_object(m)["step"] for m in conn.execute(query).scalars()]


def put_as_before_0008(
    engine: sa.Engine,
    thread_id: str,
    metadata: CheckpointMetadata,
    absent: frozenset[str] = frozenset({"expires_at", "state_revision"}),
) -> Any:
    """A checkpoint as lg_sqla wrote it before revision 0008 (no ``expires_at``, no
    ``state_revision``; ``absent``: the columns left out): put by today's saver on a
    scratch SQLite database, its rows copied without them."""
    scratch = sa.create_engine("sqlite://")
    migrate.upgrade(scratch)
    # (a list: a blob row, as every value was then; a small int is kept inline now)
    stored = SQLAlchemySaver(scratch).put(
        config(thread_id), checkpoint({"a": [1]}), metadata, {"a": 1}
    )

    def older(table: sa.Table) -> sa.Table:
        columns = (c._copy() for c in table.columns if c.name not in absent)
        return sa.Table(table.name, sa.MetaData(), *columns)

    with scratch.connect() as source, engine.begin() as target:
        for table in (checkpoints, checkpoint_blobs):
            into = older(table)
            rows = [dict(r._mapping) for r in source.execute(sa.select(table))]
            names = [c.name for c in into.columns]
            target.execute(sa.insert(into), [{name: r[name] for name in names} for r in rows])
    scratch.dispose()
    return stored


def test_revision_0008_keeps_rows_and_settings_and_back(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """Revision 0008 adds the stored expiry to existing checkpoints as NULL: a thread
    written before it never expires unless given a TTL, and a TTL of its own set
    before (a retention row) keeps its meaning; the downgrade keeps every row."""
    engine = make_engine(fresh_database)
    migrate.upgrade(engine, "0007_store_namespace_index")
    plain, own = new_thread(), new_thread()
    stored = {t: put_as_before_0008(engine, t, {"step": 1}) for t in (plain, own)}
    an_hour_ago = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
    with engine.begin() as conn:
        conn.execute(sa.update(checkpoints).values(updated_at=an_hour_ago))
        conn.execute(
            sa.insert(checkpoint_retention),
            {"thread_id": own, "ttl_minutes": 5.0, "pinned": False, "updated_at": an_hour_ago},
        )
    migrate.upgrade(engine)
    columns = {c["name"] for c in sa.inspect(engine).get_columns("checkpoints")}
    assert "expires_at" in columns
    saver = SQLAlchemySaver(engine, ttl={"default_ttl": 1})
    never = saver.thread_ttl(plain)
    assert never.effective_ttl_minutes is None and not never.expired
    assert saver.get_tuple(stored[plain]) is not None
    mine = saver.thread_ttl(own)
    assert mine.ttl_minutes == 5 and mine.expired
    assert saver.sweep_ttl().removed.threads == 1
    assert saver.get_tuple(stored[plain]) is not None
    saver.put(stored[plain], checkpoint({"a": 2}), {"step": 2}, {"a": 2})
    with engine.connect() as conn:
        migrate.downgrade_connection(conn, "0007_store_namespace_index")
    columns = {c["name"] for c in sa.inspect(engine).get_columns("checkpoints")}
    assert "expires_at" not in columns
    assert _stored_steps(engine, plain) == [2, 1]
    migrate.upgrade(engine)
    assert SQLAlchemySaver(engine).thread_ttl(plain).effective_ttl_minutes is None


def test_revision_0009_reads_existing_rows_as_state_revision_zero_and_back(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """Revision 0009 adds ``state_revision`` to checkpoints, blobs and writes as NULL
    (revision zero): a saver given state migrations reads an existing checkpoint in the
    newest shape and stamps what it writes; the downgrade keeps every row."""
    from lg_sqla.checkpoint.state_migrations import (
        RenameChannel,
        StateMigrations,
        StateRevision,
    )

    engine = make_engine(fresh_database)
    migrate.upgrade(engine, "0008_checkpoint_expiry")
    thread = new_thread()
    stored = put_as_before_0008(engine, thread, {"step": 1}, frozenset({"state_revision"}))
    migrate.upgrade(engine)
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        assert "state_revision" in {c["name"] for c in sa.inspect(engine).get_columns(table)}
    with engine.connect() as conn:
        assert conn.execute(sa.select(checkpoints.c.state_revision)).scalars().all() == [None]
    renamed = StateMigrations([StateRevision("r1", None, [RenameChannel("a", "b")])])
    saver = SQLAlchemySaver(engine, state_migrations=renamed)
    got = saver.get_tuple(stored)
    assert got is not None and got.checkpoint["channel_values"] == {"b": [1]}
    saver.put(stored, checkpoint({"b": 2}, {"b": 2}), {"step": 2}, {"b": 2})
    with engine.connect() as conn:
        revisions = conn.execute(sa.select(checkpoints.c.state_revision)).scalars().all()
    assert sorted(revisions, key=str) == [None, "r1"]
    with engine.connect() as conn:
        migrate.downgrade_connection(conn, "0008_checkpoint_expiry")
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        assert "state_revision" not in {c["name"] for c in sa.inspect(engine).get_columns(table)}
    assert _stored_steps(engine, thread) == [2, 1]
    migrate.upgrade(engine)  # and up again: today's saver reads both as before
    old = SQLAlchemySaver(engine).list(config(thread))
    assert [t.metadata["step"] for t in old] == [2, 1]


def test_store_items_keep_across_revision_0004_and_search_by_their_head(
    make_engine: EngineFactory,
    fresh_database: Backend,
) -> None:
    """Revision 0004 gives existing store items their indexed namespace head in place
    (long namespaces included) and its downgrade keeps every item."""
    engine = make_engine(fresh_database)
    migrate.upgrade(engine)
    long = ("n", "x" * 150, "y" * 150)  # joined: 303 characters, beyond the head
    namespaces = [("a",), ("a", "b"), ("a-",), ("ab",), long, (*long, "z")]
    namespaces.append(("n", "x" * 150, "y" * 149 + "z"))  # the same head as `long`
    store = SQLAlchemyStore(engine)
    for n, namespace in enumerate(namespaces):
        store.put(namespace, f"k{n}", {"n": n})
    with engine.connect() as conn:
        migrate.downgrade_connection(conn, "0003_vectors_real_array")
    columns = {c["name"] for c in sa.inspect(engine).get_columns("store_items")}
    assert "prefix_head" not in columns
    with engine.connect() as conn:
        count = sa.text("SELECT count(*) FROM store_items")
        assert conn.execute(count).scalar_one() == len(namespaces)
    migrate.upgrade(engine)
    store = SQLAlchemyStore(engine)

    def keys(prefix: tuple[str, ...]) -> list[str]:
        return sorted(item.key for item in store.search(prefix, limit=100))

    assert keys(("a",)) == ["k0", "k1"]
    assert keys(("a-",)) == ["k2"]
    assert keys(long) == ["k4", "k5"]
    assert keys(("n",)) == ["k4", "k5", "k6"]
    assert keys(namespaces[-1]) == ["k6"]


def test_revision_0007_puts_namespace_heads_in_sort_order_and_back(
    make_engine: EngineFactory,
    fresh_database: Backend,
) -> None:
    """Revision 0007 rewrites existing heads in place (dots as U+0001, the long one cut
    at 200 characters first) and its downgrade writes them back from the prefix; the
    store lists and searches the upgraded items."""
    engine = make_engine(fresh_database)
    migrate.upgrade(engine)
    namespaces = [("a", "b"), ("a-",), ("a",), ("n", "x" * 150, "y" * 150)]
    store = SQLAlchemyStore(engine)
    for n, namespace in enumerate(namespaces):
        store.put(namespace, f"k{n}", {"n": n})
    heads = sa.text("SELECT prefix, prefix_head FROM store_items")

    def stored_heads() -> dict[str, str]:
        with engine.connect() as conn:
            return {row.prefix: row.prefix_head for row in conn.execute(heads)}

    in_sort_order = {".".join(ns): ".".join(ns)[:200].replace(".", "\x01") for ns in namespaces}
    assert stored_heads() == in_sort_order
    with engine.connect() as conn:
        migrate.downgrade_connection(conn, "0006_checkpoint_retention")
    assert stored_heads() == {".".join(ns): ".".join(ns)[:200] for ns in namespaces}
    migrate.upgrade(engine)
    assert stored_heads() == in_sort_order
    store = SQLAlchemyStore(engine)
    assert store.list_namespaces(prefix=("a",)) == [("a",), ("a", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b"), ("a-",)]
    assert [item.key for item in store.search(("n", "x" * 150))] == ["k3"]


def test_models_match_migrations(make_engine: EngineFactory, backend: Backend) -> None:
    """`alembic check` would find nothing: the ORM models are the migrated schema."""
    engine = make_engine(backend)
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "version_table": migrate.VERSION_TABLE,
                "include_name": lambda name, type_, parent: type_ != "table" or name in TABLES,
            },
        )
        diff = compare_metadata(context, metadata)
    assert diff == []


def test_host_alembic_version_untouched(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    engine = make_engine(fresh_database)
    migrate.upgrade(engine)
    assert "alembic_version" not in _tables(engine)
    assert migrate.VERSION_TABLE in _tables(engine)


def test_saver_on_missing_or_old_schema_names_the_fix(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    engine = make_engine(fresh_database)
    with pytest.raises(SchemaError, match=r"python -m lg_sqla upgrade --url"):
        SQLAlchemySaver(engine).get_tuple(config(new_thread()))
    migrate.upgrade(engine)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999_future'"))
    with pytest.raises(SchemaError, match="newer than this lg_sqla"):
        SQLAlchemySaver(engine).get_tuple(config(new_thread()))


async def test_async_setup_and_schema_check(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    engine = make_engine.aio(fresh_database)
    with pytest.raises(SchemaError, match="not set up"):
        await AsyncSQLAlchemySaver(engine).aget_tuple(config(new_thread()))
    saver = AsyncSQLAlchemySaver(engine)
    await saver.setup()
    await saver.setup()  # idempotent
    stored = await saver.aput(config(new_thread()), checkpoint({"a": [1]}), {}, {"a": 1})
    got = await saver.aget_tuple(stored)
    assert got is not None and got.checkpoint["channel_values"] == {"a": [1]}


def _count_table_creations(engine: sa.Engine, seen: list[str]) -> None:
    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.lstrip().upper().startswith("CREATE TABLE"):
            seen.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)


def _assert_migrated_once(backend: Backend, created: list[str]) -> None:
    # Each table is created exactly once: a second concurrent migration would
    # either fail or create them again.
    names = [s.split("(")[0].split()[-1].strip('`"') for s in created]
    assert sorted(names) == sorted({*metadata.tables, migrate.VERSION_TABLE}), created
    with checked_engine(backend) as engine:
        assert _tables(engine) >= TABLES
        with engine.connect() as conn:
            versions = (
                conn.execute(sa.text(f"SELECT version_num FROM {migrate.VERSION_TABLE}"))
                .scalars()
                .all()
            )
        assert versions == [migrate.head_revision()]


@pytest.mark.any_dialect
def test_concurrent_setup_from_several_threads(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """Four threads of one process call setup() at once (one engine each, and one
    shared): all succeed, the tables are created once, and the savers work."""
    engines = [make_engine(fresh_database) for _ in range(2)]
    created: list[str] = []
    for engine in engines:
        _count_table_creations(engine, created)
    savers = [SQLAlchemySaver(engines[0]), SQLAlchemySaver(engines[0])]
    savers += [SQLAlchemySaver(engines[1]), SQLAlchemySaver(engines[1])]
    start = threading.Barrier(len(savers))
    errors: list[BaseException] = []

    def run(saver: SQLAlchemySaver) -> None:
        try:
            start.wait()
            saver.setup()
            thread_id = new_thread()
            saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
            assert saver.get_tuple(config(thread_id)) is not None
        except BaseException as error:  # reported below, with the thread's traceback
            errors.append(error)

    threads = [threading.Thread(target=run, args=(saver,)) for saver in savers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "setup() hung"
    assert errors == []
    _assert_migrated_once(fresh_database, created)


def test_concurrent_setup_from_several_tasks(fresh_database: Backend) -> None:
    """Four asyncio tasks on one loop call setup() at once: all succeed, one migration,
    and the loop keeps serving other tasks while the migration runs.

    The tasks run on a loop of their own in a watched thread: a setup() that blocks
    its loop (e.g. a task waiting on the process lock with a blocking call) would
    otherwise hang the whole test session instead of failing this test."""
    created: list[str] = []
    # Heartbeat count seen at each CREATE TABLE (the listener runs in the migrating
    # task): it must grow during the migration, proving other tasks ran meanwhile.
    ticks_at_create: list[int] = []
    ticks = 0
    errors: list[BaseException] = []

    async def body() -> None:
        nonlocal ticks
        engine = fresh_database.async_engine()
        _count_table_creations(engine.sync_engine, created)

        def record_ticks(*args: object) -> None:
            if str(args[2]).lstrip().upper().startswith("CREATE TABLE"):
                ticks_at_create.append(ticks)

        sa.event.listen(engine.sync_engine, "before_cursor_execute", record_ticks)
        done = asyncio.Event()

        async def heartbeat() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)  # ready again at every turn of the loop

        async def run(saver: AsyncSQLAlchemySaver) -> None:
            await saver.setup()
            thread_id = new_thread()
            await saver.aput(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
            assert await saver.aget_tuple(config(thread_id)) is not None

        try:
            beat = asyncio.create_task(heartbeat())
            await asyncio.gather(*(run(AsyncSQLAlchemySaver(engine)) for _ in range(4)))
            done.set()
            await beat
            # The engine lives on this thread's loop: checked here, not by make_engine.
            assert_no_leaked_connections(engine)
        finally:
            await engine.dispose()

    def in_thread() -> None:
        try:
            asyncio.run(body())
        except BaseException as error:  # reported below, with the task's traceback
            errors.append(error)

    thread = threading.Thread(target=in_thread, daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive(), "setup() from several tasks hung (event loop blocked?)"
    assert errors == []
    assert len(ticks_at_create) > 1 and ticks_at_create[-1] > ticks_at_create[0], ticks_at_create
    _assert_migrated_once(fresh_database, created)


def test_concurrent_setup_from_several_processes(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """Four processes call setup() at once on an empty database: all succeed, one migration."""
    script = textwrap.dedent(
        """
        import sys, sqlalchemy as sa
        from lg_sqla import SQLAlchemySaver
        from lg_sqla.engines import configure_engine
        engine = configure_engine(sa.create_engine(sys.argv[1]))
        SQLAlchemySaver(engine).setup()
        engine.dispose()
        print("ok")
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, fresh_database.sync_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outputs]
    engine = make_engine(fresh_database)
    with engine.connect() as conn:
        versions = (
            conn.execute(sa.text(f"SELECT version_num FROM {migrate.VERSION_TABLE}"))
            .scalars()
            .all()
        )
    assert versions == [migrate.head_revision()]


def _migration_lock_is_free(backend: Backend, probe: sa.Engine) -> bool:
    """Whether another process could take lg_sqla's migration lock right now."""
    if backend.name == "sqlite":
        database = sa.engine.make_url(backend.sync_url).database
        assert database is not None
        raw = sqlite3.connect(database, timeout=0, isolation_level=None)
        try:
            raw.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            assert "locked" in str(error), error
            return False
        finally:
            raw.close()
        return True
    with probe.connect() as conn:
        if backend.name == "postgres":
            key = zlib.crc32(MIGRATION_LOCK_NAME.encode())
            got = conn.execute(sa.select(sa.func.pg_try_advisory_lock(key))).scalar()
            if got:
                conn.execute(sa.select(sa.func.pg_advisory_unlock(key)))
            return bool(got)
        free = conn.execute(sa.select(sa.func.is_free_lock(MIGRATION_LOCK_NAME))).scalar()
        return bool(free)


def test_every_revision_runs_under_the_migration_lock(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """An upgrade across several revisions holds the cross-process lock until the
    last one is applied. (On SQLite it once was released after the first revision,
    so a second process's setup() applied the next one too and failed with
    "table store_items already exists".)"""
    engine = make_engine(fresh_database)
    probe = make_engine(fresh_database, poolclass=sa.pool.NullPool)
    lock_free_at_create: dict[str, bool] = {}

    @sa.event.listens_for(engine, "before_cursor_execute")
    def before(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        created = re.match(r"\s*CREATE TABLE (?:IF NOT EXISTS )?[\"`]?(\w+)", statement, re.I)
        if created:
            lock_free_at_create[created[1]] = _migration_lock_is_free(fresh_database, probe)

    SQLAlchemySaver(engine).setup()
    assert set(lock_free_at_create) >= TABLES - {migrate.VERSION_TABLE}, lock_free_at_create
    assert not any(lock_free_at_create.values()), lock_free_at_create
    assert _migration_lock_is_free(fresh_database, probe)  # and released afterwards


def test_the_lock_is_released_only_once_the_schema_is_committed(
    fresh_database: Backend,
) -> None:
    """Whenever the migration lock is free again, another session sees the schema at
    head. (On MySQL/MariaDB `RELEASE_LOCK` once ran before the last revision's version
    row was committed: the next process to take the lock read the previous revision,
    applied the last one again and failed with "Duplicate column name".)"""
    engine = fresh_database.engine()
    probe = fresh_database.engine(poolclass=sa.pool.NullPool)
    held = False
    seen_once_free: list[str | None] = []

    @sa.event.listens_for(engine, "after_cursor_execute")
    def after(*_args: object) -> None:
        nonlocal held
        if not _migration_lock_is_free(fresh_database, probe):
            held = True
        elif held and not seen_once_free:
            with probe.connect() as conn:
                seen_once_free.append(migrate.current_revision(conn))

    try:
        SQLAlchemySaver(engine).setup()
        assert held
        if fresh_database.name == "mysql":  # released by a statement: always observed
            assert seen_once_free, "the lock's release was not observed"
        assert seen_once_free in ([], [migrate.head_revision()]), seen_once_free
    finally:
        engine.dispose()
        probe.dispose()


def test_alembic_cli_and_module_cli(fresh_database: Backend) -> None:
    """`alembic upgrade head` with LG_SQLA_DATABASE_URL, and `python -m lg_sqla`."""
    env = {**os.environ, "LG_SQLA_DATABASE_URL": fresh_database.sync_url}
    alembic = [sys.executable, "-m", "alembic", "-c", str(REPO / "alembic.ini")]
    subprocess.run([*alembic, "upgrade", "head"], env=env, cwd=REPO, check=True)
    lg_sqla = [sys.executable, "-m", "lg_sqla"]
    check = subprocess.run([*lg_sqla, "check"], env=env, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    subprocess.run(
        [*lg_sqla, "downgrade", "base", "--yes"], env=env, check=True, capture_output=True
    )
    check = subprocess.run([*lg_sqla, "check"], env=env, capture_output=True, text=True)
    assert check.returncode == 1 and "not set up" in check.stderr
    async_url = {**env, "LG_SQLA_DATABASE_URL": fresh_database.async_url}
    subprocess.run([*lg_sqla, "upgrade"], env=async_url, check=True, capture_output=True)
    current = subprocess.run(
        [*lg_sqla, "current"], env=env, check=True, capture_output=True, text=True
    )
    assert current.stdout.strip() == migrate.head_revision()


def test_host_application_autogenerate_ignores_lg_sqla_tables(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """A host app's own Alembic env, with our include_name hook, sees only its tables."""
    from lg_sqla.models import exclude_lg_sqla_tables

    host = sa.MetaData()
    sa.Table("app_users", host, sa.Column("id", sa.Integer, primary_key=True))
    engine = make_engine(backend)
    try:
        host.create_all(engine)

        def diff(include_name: object) -> list[object]:
            with engine.connect() as conn:
                opts: dict[str, object] = {"compare_type": True}
                if include_name is not None:
                    opts["include_name"] = include_name
                return compare_metadata(MigrationContext.configure(conn, opts=opts), host)

        # Without the hook the host's autogenerate would drop our tables...
        removed = {d[1].name for d in diff(None) if d[0] == "remove_table"}
        assert removed >= TABLES
        # ...with it, nothing but the host's own schema is compared.
        assert diff(exclude_lg_sqla_tables) == []
    finally:
        host.drop_all(engine)
