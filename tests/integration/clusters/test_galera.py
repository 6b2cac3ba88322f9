# mypy: disable-error-code="call-overload,arg-type"
# Relaxed for this test module only: LangGraph configs passed as plain dicts.
"""lg_sqla on a 3-node MariaDB Galera Cluster (tests/galera.py), every node taking writes.

What a cluster changes, and what each test holds lg_sqla to:

* the official conformance suite passes on a node (a joiner, fed by state transfer);
* writers on two nodes, on the same keys (certification failures at COMMIT, retried)
  and on distinct ones: no error reaches the caller, no write is lost;
* ``setup()`` from three processes, one per node, at once on a fresh database: every
  caller succeeds and the schema is at head once (the lease lock of
  ``dialects.galera.galera_migration_lock``; GET_LOCK holds on one node only);
* a graph whose turns alternate between nodes sees its whole state at every turn, and
  a ``get_tuple`` on node 3 right after a ``put`` on node 1 sees it (lg_sqla's default
  ``wsrep_sync_wait``);
* the store, across nodes;
* a node killed (SIGKILL) under graph writers that reach the cluster through
  Debian's ``haproxy`` (one active node, the others backups): the clients move to
  another node within lg_sqla's reconnect window, no error reaches them, nothing
  acknowledged is lost. It runs last: the cluster has two nodes after it.

Each test prints what it measured (``-s`` shows it; the CI log keeps it on failure).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from galera import GaleraCluster
from helpers import assert_conformance, checkpoint, config
from langchain_core.messages import HumanMessage
from servers import create_database, drop_database, sqlalchemy_url

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.dialects import MIGRATION_LOCK_NAME
from lg_sqla.dialects.galera import (
    MIGRATION_LOCK_TABLE,
    WSREP_SYNC_WAIT_OPTION,
    migration_lock_table,
)
from lg_sqla.engines import configure_engine
from lg_sqla.migrate import VERSION_TABLE, head_revision
from lg_sqla.store import SQLAlchemyStore

pytestmark = pytest.mark.galera

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Node:
    number: int
    sync_url: str
    async_url: str

    def engine(self, **kwargs: Any) -> sa.Engine:
        return configure_engine(sa.create_engine(self.sync_url, **kwargs))


def _nodes(cluster: GaleraCluster, database: str) -> list[Node]:
    return [
        Node(
            n + 1,
            sqlalchemy_url(url, "pymysql", database) + "?charset=utf8mb4",
            sqlalchemy_url(url, "asyncmy", database) + "?charset=utf8mb4",
        )
        for n, url in enumerate(cluster.urls)
    ]


@contextlib.contextmanager
def _database(cluster: GaleraCluster, *, migrated: bool) -> Iterator[list[Node]]:
    """A new database (created on node 1, replicated to all), optionally set up."""
    name = f"lg_sqla_{uuid.uuid4().hex[:12]}"
    create_database(cluster.urls[0], name)
    try:
        nodes = _nodes(cluster, name)
        if migrated:
            engine = nodes[0].engine()
            try:
                SQLAlchemySaver(engine).setup()
            finally:
                engine.dispose()
        yield nodes
    finally:
        _drop_on_a_live_node(cluster, name)


def _drop_on_a_live_node(cluster: GaleraCluster, name: str) -> None:
    """Drop the database through the first node that is up (the last test kills
    node 1: test_a_node_killed_under_load)."""
    for n, url in enumerate(cluster.urls):
        if cluster.procs and cluster.procs[n].poll() is not None:
            continue
        drop_database(url, name)
        return


@pytest.fixture(scope="module")
def nodes(galera: GaleraCluster) -> Iterator[list[Node]]:
    print(f"\nGalera cluster: 3 nodes Synced in {galera.started_in_s:.1f}s")
    with _database(galera, migrated=True) as nodes:
        yield nodes


# --------------------------------------------------------------------------- conformance


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_conformance_on_a_joined_node(nodes: list[Node], mode: str) -> None:
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    node = nodes[1]  # a joiner: its data came by state transfer
    if mode == "async":

        async def factory() -> Any:
            async with AsyncSQLAlchemySaver.from_conn_string(node.async_url) as saver:
                yield saver

    else:

        async def factory() -> Any:
            with SQLAlchemySaver.from_conn_string(node.sync_url) as saver:
                yield saver

    report = await validate(checkpointer_test(name=f"lg_sqla-galera-{mode}")(factory))
    assert_conformance(report)
    print(f"\nconformance on node 2 ({mode}): passed")


# --------------------------------------------------------------------------- writers


WRITER_ROUNDS = 150


def _count(engine: sa.Engine, table: str, thread_ids: list[str]) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.text(f"SELECT COUNT(*) FROM {table} WHERE thread_id IN :ids").bindparams(
                    sa.bindparam("ids", expanding=True)
                ),
                {"ids": thread_ids},
            ).scalar_one()
        )


def _conflicts(nodes: list[Node]) -> int:
    """Transactions the cluster aborted so far on nodes 1 and 2: certification failures
    (refused at COMMIT) and brute-force aborts (a local transaction in the way of a
    replicated one), the 1213 errors lg_sqla's runtime retries."""
    total = 0
    for node in nodes[:2]:
        engine = sa.create_engine(node.sync_url)
        try:
            with engine.connect() as conn:
                rows = conn.exec_driver_sql(
                    "SHOW GLOBAL STATUS WHERE Variable_name IN "
                    "('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')"
                ).all()
            total += sum(int(value) for _, value in rows)
        finally:
            engine.dispose()
    return total


@pytest.mark.parametrize("keys", ["same", "distinct"])
def test_writers_on_two_nodes(nodes: list[Node], keys: str) -> None:
    """Two writers, on nodes 1 and 2. Same keys: both put the same checkpoints (same
    ids, same blobs) and the same pending write (task "shared"), each also its own
    write (its own task), on one thread. Distinct: a thread per writer. Every error
    is counted, then the rows: nothing may be missing."""
    shared_thread = f"t-{uuid.uuid4()}"
    ids = [checkpoint({"x": 0})["id"] for _ in range(WRITER_ROUNDS)]
    errors: list[BaseException] = []
    calls = [0, 0]
    threads_of = [shared_thread] * 2 if keys == "same" else [f"t-{uuid.uuid4()}" for _ in "ab"]
    barrier = threading.Barrier(2)

    def writer(w: int) -> None:
        engine = nodes[w].engine()
        try:
            saver = SQLAlchemySaver(engine)
            thread = threads_of[w]
            barrier.wait()
            for j, checkpoint_id in enumerate(ids):
                cp = checkpoint({"x": j, "y": "v" * 50}, {"x": j + 1, "y": 1})
                cp["id"] = checkpoint_id
                try:
                    stored = saver.put(
                        config(thread), cp, {"source": "loop", "step": j}, {"x": j + 1, "y": 1}
                    )
                    calls[w] += 1
                    saver.put_writes(stored, [("x", j)], "shared")
                    calls[w] += 1
                    saver.put_writes(stored, [("x", j)], f"task-{w}")
                    calls[w] += 1
                except BaseException as error:  # counted, reported below
                    errors.append(error)
        finally:
            engine.dispose()

    conflicts_before = _conflicts(nodes)
    workers = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    started = time.monotonic()
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    elapsed = time.monotonic() - started
    conflicts = _conflicts(nodes) - conflicts_before

    engine = nodes[2].engine()  # counted on the third node
    try:
        thread_ids = sorted(set(threads_of))
        with engine.connect() as conn:
            conn.exec_driver_sql("SET SESSION wsrep_sync_wait = 1")
        checkpoints = _count(engine, "checkpoints", thread_ids)
        writes = _count(engine, "checkpoint_writes", thread_ids)
    finally:
        engine.dispose()
    per_thread = 1 if keys == "same" else 2
    expected_checkpoints = WRITER_ROUNDS * per_thread
    # Same: per checkpoint, the shared task's write and each writer's own (3);
    # distinct: each thread's checkpoints have their writer's shared and own (2 each).
    expected_writes = WRITER_ROUNDS * 3 if keys == "same" else WRITER_ROUNDS * 4
    lost = (expected_checkpoints - checkpoints) + (expected_writes - writes)
    print(
        f"\nwriters on nodes 1+2, {keys} keys: {sum(calls)} calls in {elapsed:.1f}s, "
        f"{conflicts} conflicts retried, {len(errors)} errors, {lost} lost "
        f"(checkpoints {checkpoints}/{expected_checkpoints}, writes {writes}/{expected_writes})"
    )
    assert not errors, errors[:3]
    assert (checkpoints, writes) == (expected_checkpoints, expected_writes)


# --------------------------------------------------------------------------- setup race

_SETUP_SCRIPT = """
import os, sys
from lg_sqla import SQLAlchemySaver
if os.environ.get("LG_SQLA_GALERA_NODE_LOCAL_LOCK"):  # to measure what GET_LOCK gives
    import lg_sqla.dialects.mysql as m
    m.is_galera_node = lambda connection: False
url = sys.argv[1]
if url.startswith("mysql+asyncmy"):
    import asyncio
    from lg_sqla import AsyncSQLAlchemySaver

    async def main():
        async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            await saver.setup()

    asyncio.run(main())
else:
    with SQLAlchemySaver.from_conn_string(url) as saver:
        print("ready", flush=True)
        sys.stdin.readline()  # the start signal: all three begin together
        saver.setup()
print("done", flush=True)
"""

# More with LG_SQLA_GALERA_SETUP_RUNS (to measure); the last run uses schema=.
SETUP_RUNS = int(os.environ.get("LG_SQLA_GALERA_SETUP_RUNS", "3"))


def _setup_race(nodes: list[Node], schema: str | None = None) -> list[str]:
    """``setup()`` from one process per node, released at once (node 3's through the
    async saver, on asyncmy); the failures' output."""
    script = _SETUP_SCRIPT
    if schema is not None:
        script = script.replace(
            "from_conn_string(url)", f"from_conn_string(url, schema={schema!r})"
        )
    urls = [nodes[0].sync_url, nodes[1].sync_url, nodes[2].async_url]
    args = [[sys.executable, "-c", script, url] for url in urls]
    procs = [
        subprocess.Popen(
            a,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=HERE,
        )
        for a in args
    ]
    failures = []
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "ready":
                failures.append(f"did not start: {line} {proc.communicate()[1][-2000:]}")
        for proc in procs:
            assert proc.stdin is not None
            if proc.poll() is None:
                proc.stdin.write("go\n")
                proc.stdin.flush()
        for proc in procs:
            _out, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                failures.append(err[-6000:])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return failures


def _assert_at_head_once(engine: sa.Engine, schema: str | None = None) -> None:
    prefix = f"`{schema}`." if schema else ""
    with engine.connect() as conn:
        conn.exec_driver_sql("SET SESSION wsrep_sync_wait = 1")
        versions = conn.exec_driver_sql(f"SELECT version_num FROM {prefix}{VERSION_TABLE}").all()
        assert versions == [(head_revision(),)]
        # The lease is released.
        rows = conn.exec_driver_sql(f"SELECT * FROM {prefix}{MIGRATION_LOCK_TABLE}").all()
        assert rows == []


def test_setup_from_three_nodes_at_once(galera: GaleraCluster) -> None:
    failed = 0
    outputs: list[str] = []
    started = time.monotonic()
    for run in range(SETUP_RUNS):
        schema = f"lg_sqla_s{uuid.uuid4().hex[:8]}" if run == SETUP_RUNS - 1 else None
        with _database(galera, migrated=False) as nodes:
            failures = _setup_race(nodes, schema)
            failed += len(failures)
            print(f"run {run}: {len(failures)} failed")
            outputs += failures
            if not failures:
                engine = nodes[2].engine()
                try:
                    _assert_at_head_once(engine, schema)
                finally:
                    engine.dispose()
            if schema is not None:
                drop_database(galera.urls[0], schema)
    print(
        f"\nsetup() from 3 nodes at once: {SETUP_RUNS} runs (the last with schema=), "
        f"{failed} of {3 * SETUP_RUNS} callers failed, {time.monotonic() - started:.1f}s"
    )
    assert failed == 0, "\n\n".join(outputs[:2])


def test_an_expired_lease_is_taken_over(galera: GaleraCluster) -> None:
    """A migration that died holding the lock left its row: once expired, the next
    setup() deletes it and migrates; an unexpired one of ours is left alone."""
    with _database(galera, migrated=False) as nodes:
        engine = nodes[1].engine()
        try:
            with engine.begin() as conn:
                conn.execute(sa.schema.CreateTable(migration_lock_table, if_not_exists=True))
                conn.execute(
                    sa.insert(migration_lock_table).values(
                        name=MIGRATION_LOCK_NAME,
                        holder="a process that died",
                        expires_at=sa.func.utc_timestamp(6) - sa.text("INTERVAL 1 SECOND"),
                    )
                )
            started = time.monotonic()
            other = nodes[0].engine()
            try:
                SQLAlchemySaver(other).setup()
            finally:
                other.dispose()
            assert time.monotonic() - started < 30
            _assert_at_head_once(engine)
        finally:
            engine.dispose()


# --------------------------------------------------------------------------- stale reads

STALE_ROUNDS = 150


def _stale_reads(nodes: list[Node], **engine_options: Any) -> int:
    """put on node 1, then at once get_tuple on node 3: how often it misses the put."""
    writer_engine = nodes[0].engine()
    reader_engine = nodes[2].engine()
    if engine_options:
        reader_engine = reader_engine.execution_options(**engine_options)
    try:
        writer, reader = SQLAlchemySaver(writer_engine), SQLAlchemySaver(reader_engine)
        thread = f"t-{uuid.uuid4()}"
        stale = 0
        for j in range(STALE_ROUNDS):
            cp = checkpoint({"x": j, "blob": "b" * 2000})
            writer.put(config(thread), cp, {"step": j}, cp["channel_versions"])
            got = reader.get_tuple(config(thread))
            if got is None or got.checkpoint["id"] != cp["id"]:
                stale += 1
        return stale
    finally:
        writer_engine.dispose()
        reader_engine.dispose()


def test_reads_see_the_last_write_of_another_node(nodes: list[Node]) -> None:
    with_default = _stale_reads(nodes)
    without = _stale_reads(nodes, **{WSREP_SYNC_WAIT_OPTION: 0})
    print(
        f"\nget_tuple on node 3 right after put on node 1: stale {with_default}/{STALE_ROUNDS} "
        f"with lg_sqla's default (wsrep_sync_wait=1), {without}/{STALE_ROUNDS} with "
        f"{WSREP_SYNC_WAIT_OPTION}=0 (the server's default)"
    )
    assert with_default == 0


def test_session_settings_kept_and_overridden(nodes: list[Node]) -> None:
    """The default adds the read bit; a session value the user chose is kept; the
    engine option sets its own value (on both paths: direct and Core)."""

    def session_value(engine: sa.Engine, **saver_options: Any) -> int:
        saver = SQLAlchemySaver(engine, **saver_options)
        saver.get_tuple(config(f"t-{uuid.uuid4()}"))
        with engine.connect() as conn:  # the pool's one connection, used by the call
            return int(conn.exec_driver_sql("SELECT @@session.wsrep_sync_wait").scalar_one())

    def one_connection(**options: Any) -> sa.Engine:
        return nodes[0].engine(pool_size=1, max_overflow=0, **options)

    cases = {
        "default, direct path": (one_connection(), {}, 1),
        "default, Core": (one_connection(), {"direct_path": False}, 1),
        "option 3": (one_connection().execution_options(**{WSREP_SYNC_WAIT_OPTION: 3}), {}, 3),
        "option 0, create_engine's execution_options": (
            one_connection(execution_options={WSREP_SYNC_WAIT_OPTION: 0}),
            {},
            0,
        ),
        "option None": (
            one_connection().execution_options(**{WSREP_SYNC_WAIT_OPTION: None}),
            {},
            0,
        ),
        "user's init_command": (
            one_connection(connect_args={"init_command": "SET SESSION wsrep_sync_wait = 4"}),
            {},
            4,
        ),
    }
    for name, (engine, saver_options, expected) in cases.items():
        try:
            assert session_value(engine, **saver_options) == expected, name
        finally:
            engine.dispose()


async def test_session_settings_async(nodes: list[Node]) -> None:
    """The async saver's calls (asyncmy, in a greenlet) get causal reads too."""
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = configure_engine(create_async_engine(nodes[0].async_url, pool_size=1, max_overflow=0))
    try:
        await AsyncSQLAlchemySaver(engine).aget_tuple(config(f"t-{uuid.uuid4()}"))
        async with engine.connect() as conn:
            value = await conn.exec_driver_sql("SELECT @@session.wsrep_sync_wait")
            assert value.scalar_one() == 1
    finally:
        await engine.dispose()


# --------------------------------------------------------------------------- graph, store


def test_graph_turns_alternate_between_nodes(nodes: list[Node]) -> None:
    from graph_helpers import build_chat_graph, expected_chat, summarize

    engines = [node.engine() for node in nodes]
    try:
        graphs = [build_chat_graph().compile(checkpointer=SQLAlchemySaver(e)) for e in engines]
        thread = {"configurable": {"thread_id": f"t-{uuid.uuid4()}"}}
        turns: list[str] = []
        for turn in range(9):
            graph = graphs[turn % 3]
            turns.append(f"turn {turn}")
            result = graph.invoke({"messages": [HumanMessage(turns[-1])]}, thread)
            assert summarize(result["messages"]) == expected_chat(*turns), turn
            # ... and the next node reads the state just written.
            state = graphs[(turn + 1) % 3].get_state(thread)
            assert summarize(state.values["messages"]) == expected_chat(*turns), turn
    finally:
        for e in engines:
            e.dispose()
    print("\ngraph: 9 turns on nodes 1, 2, 3, 1, ...: state current at every turn")


def test_store_across_nodes(nodes: list[Node]) -> None:
    engines = [node.engine() for node in nodes]
    try:
        stores = [SQLAlchemyStore(e) for e in engines]
        namespace = ("galera", uuid.uuid4().hex[:8])
        for i in range(20):
            writer, reader = stores[i % 3], stores[(i + 1) % 3]
            writer.put(namespace, f"k{i}", {"i": i, "by": i % 3})
            item = reader.get(namespace, f"k{i}")
            assert item is not None and item.value == {"i": i, "by": i % 3}
        found = stores[2].search(namespace, filter={"by": 1}, limit=50)
        assert sorted(item.key for item in found) == sorted(
            f"k{i}" for i in range(20) if i % 3 == 1
        )
        stores[0].delete(namespace, "k5")
        assert stores[1].get(namespace, "k5") is None
        assert len(stores[2].search(namespace, limit=50)) == 19
    finally:
        for e in engines:
            e.dispose()


# --------------------------------------------------------------------------- a node killed
# Last in the module, on purpose: node 1 stays down after it.


def test_a_node_killed_under_load(galera: GaleraCluster, nodes: list[Node]) -> None:
    from graph_writers import Acknowledged, WaitsSeen, Writers, check_everything_is_there
    from haproxy import haproxy_in_front

    database = nodes[0].sync_url.rsplit("/", 1)[1].split("?")[0]
    ports = [int(url.rsplit(":", 1)[1]) for url in galera.urls]
    acknowledged = Acknowledged()
    with haproxy_in_front(ports) as port:
        url = f"mysql://root@127.0.0.1:{port}/{database}?charset=utf8mb4"
        with Writers(url, acknowledged) as writers, WaitsSeen() as waits:
            writers.wait_for_turns(4, "before the kill")
            galera.kill(1)
            writers.wait_for_turns(4, "after node 1 was killed")
        print(
            f"\nGalera node 1 killed under {len(writers.progress)} graph writers through haproxy: "
            f"{len(acknowledged.puts)} puts and {len(acknowledged.writes)} put_writes "
            f"acknowledged; errors reaching the application: {len(acknowledged.errors)}; "
            f"reconnect-window waits: {waits.count}"
        )
        assert acknowledged.errors == []
    check_everything_is_there(nodes[1].sync_url, acknowledged)
    print("acknowledged writes lost: 0")
