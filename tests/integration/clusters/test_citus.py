"""lg_sqla on Citus (tests/citus.py: a coordinator and two workers on loopback, 8 shards
per table), every table distributed by ``lg_sqla.distributing.distribute_on_citus``.

One module, so the one cluster serves every citus test (pytest-xdist sends a whole file
to one worker). It runs, on the distributed tables of one database:

* the suites of other modules, imported below (the ``backend`` fixture is overridden
  here): the official conformance suite, the graph tests, the store suite, the
  inspection tests and thread search;
* cross-thread calls (``list(None)``, threads, status, count, latest, history, stats,
  sweeps) against the same data on plain PostgreSQL: the same answers;
* Citus's own plans (``EXPLAIN``): every per-thread call and store key operation
  touches one shard;
* migrations on distributed tables, both directions; a table a revision creates is
  distributed by the upgrade; a worker refuses migrations naming the coordinator.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import CITUS, Backend, new_database
from citus import SHARD_COUNT, CitusCluster
from helpers import checkpoint, config, new_thread
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT
from langgraph.store.base import PutOp
from servers import sqlalchemy_url

# The suites that run here too, on the distributed tables (see `backend` below): pytest
# collects these imported test functions (and the fixture `runner`) as this module's own.
from test_conformance import test_conformance  # noqa: F401
from test_graphs import (  # noqa: F401
    runner,
    test_a_failed_send_worker_is_retried_alone,
    test_chat_memory_across_a_process_boundary,
    test_chat_memory_across_two_saver_instances,
    test_chat_on_a_saver_from_conn_string_async,
    test_durability_modes_persist_the_final_state,
    test_failed_supersteps_resume_from_pending_writes,
    test_interrupt_then_resume,
    test_parallel_fan_out_and_send,
    test_replay_from_an_old_checkpoint,
    test_state_history_newest_first_with_steps_and_parents,
    test_stream_values_continues_the_stored_conversation,
    test_stream_values_of_a_pipeline,
    test_subgraph_state_and_interrupt_resume,
    test_update_state_forks_from_an_old_checkpoint,
)
from test_inspect import (  # noqa: F401
    test_inspection_input_errors_name_the_field,
    test_thread_status_counts_and_conversations,
    test_threads_history_show_diff_writes,
    test_write_stats_latest_and_storage,
)
from test_store import (  # noqa: F401
    test_batch_last_put_wins_and_results_in_order,
    test_batch_mixed_ops_in_constant_statements,
    test_batches_beyond_the_bound_parameter_limit,
    test_concurrent_writers_of_one_database_all_land,
    test_embedding_with_wrong_dims_is_refused,
    test_from_conn_string_owns_its_engine,
    test_hostile_filter_keys_and_values,
    test_invalid_input_names_the_field_and_writes_nothing,
    test_keys_and_namespaces_are_exact,
    test_list_namespaces,
    test_lone_get_and_put_skip_core_with_the_same_results,
    test_ordering_reads_json_number_strings_the_same_on_every_dialect,
    test_put_get_update_delete,
    test_refresh_on_read_false_and_the_other_twin,
    test_search_and_list_find_subtrees_around_the_indexed_head,
    test_search_prefix_filters_order_and_pages,
    test_search_reads_only_its_page,
    test_semantic_search,
    test_single_op_batches_are_one_statement_without_a_transaction,
    test_store_on_old_schema_names_the_fix,
    test_ttl_expiry_refresh_and_sweep,
    test_ttl_sweeper_runs_and_stops,
)
from test_thread_search import (  # noqa: F401
    test_bad_search_input_names_the_bad_part,
    test_the_operator_walk,
    test_value_filters_nested_metadata_and_counts,
)

from lg_sqla import SQLAlchemySaver, cli, migrate
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.dialects.citus import PLACEMENT, distribute, distributed_tables
from lg_sqla.distributing import distribute_on_citus
from lg_sqla.errors import SchemaError
from lg_sqla.inspection import Inspector
from lg_sqla.models import metadata
from lg_sqla.store import SQLAlchemyStore

pytestmark = pytest.mark.citus


TABLES = [t.name for t in metadata.sorted_tables]


def _distributed_database(request: pytest.FixtureRequest, tmp: Path) -> Iterator[Backend]:
    for db in new_database(request, CITUS, tmp):
        engine = db.engine()
        try:
            distribute_on_citus(engine)
        finally:
            engine.dispose()
        yield db


@contextlib.contextmanager
def _database(request: pytest.FixtureRequest, kind: str, tmp: Path) -> Iterator[Backend]:
    """A database of its own ("postgres", or "distributed": on the cluster, distributed),
    dropped after the block."""
    tmp.mkdir(parents=True, exist_ok=True)
    made = (
        _distributed_database(request, tmp)
        if kind == "distributed"
        else new_database(request, kind, tmp)
    )
    try:
        yield next(made)
    finally:
        next(made, None)


@pytest.fixture(scope="module")
def distributed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    """One database of the cluster, set up and distributed, for the whole module."""
    yield from _distributed_database(request, tmp_path_factory.mktemp("citus"))


@pytest.fixture(scope="module")
def backend(distributed: Backend) -> Backend:
    """The imported suites' database: the distributed one (overrides conftest's)."""
    return distributed


# --- placement -------------------------------------------------------------------


def test_every_table_is_distributed_co_located_and_at_head(distributed: Backend) -> None:
    engine = distributed.engine()
    try:
        with engine.connect() as conn:
            kinds = distributed_tables(conn, None)
            groups: dict[str, int] = dict(
                conn.exec_driver_sql(
                    "SELECT logicalrelid::regclass::text, colocationid FROM pg_dist_partition"
                ).all()
            )
            shards: dict[str, int] = dict(
                conn.exec_driver_sql(
                    "SELECT logicalrelid::regclass::text, count(*) FROM pg_dist_shard GROUP BY 1"
                ).all()
            )
            columns: dict[str, str] = dict(
                conn.exec_driver_sql(
                    "SELECT logicalrelid::regclass::text, column_to_column_name(logicalrelid, "
                    "partkey) FROM pg_dist_partition WHERE partkey IS NOT NULL"
                ).all()
            )
            migrate.check_schema(conn)
        assert kinds == {**{t: "distributed" for t in TABLES}, migrate.VERSION_TABLE: "reference"}
        assert columns == {t: p.column for t, p in PLACEMENT.items()}
        for table, placement in PLACEMENT.items():
            if placement.colocate_with is not None:
                assert groups[table] == groups[placement.colocate_with], table
            assert shards[table] == SHARD_COUNT
        assert len({groups["checkpoints"], groups["store_items"], groups["cache_entries"]}) == 3
        assert distribute_on_citus(engine) == []  # again: nothing to do
    finally:
        engine.dispose()


# --- the same answers as plain PostgreSQL -------------------------------------------


def _fill(savers: list[SQLAlchemySaver], tag: str) -> list[str]:
    """The same threads written into each saver, call by call (the same checkpoint ids;
    the same order of writes, so the same order of their timestamps): idle, interrupted,
    errored and pending threads, two namespaces, 1 to 4 checkpoints each."""
    threads = [f"{tag}-{n}" for n in range(6)]
    for n, thread_id in enumerate(threads):
        parents = [config(thread_id) for _ in savers]
        for step in range(1 + n % 4):
            cp = checkpoint({"m": [n, step], "n": n}, {"m": step + 1, "n": 1})
            if n == 3 and step == n % 4:  # its head: a step that triggered a node
                cp["updated_channels"] = ["branch:to:agent"]
            meta: Any = {"suite": tag, "step": step, "source": "loop", "n": n % 2}
            meta["run_id"] = f"{tag}-run-{n % 2}"
            parents = [
                s.put(p, cp.copy(), meta.copy(), {"m": step + 1})
                for s, p in zip(savers, parents, strict=True)
            ]
            for s, p in zip(savers, parents, strict=True):
                s.put_writes(p, [("m", f"w{n}-{step}")], f"task-{step}")
        status_write = {1: INTERRUPT, 2: ERROR}.get(n % 3)
        sub = checkpoint({"x": 1})
        for s, p in zip(savers, parents, strict=True):
            if status_write is not None:
                s.put_writes(p, [(status_write, "why")], "task-status")
            if n == 4:
                s.put(config(thread_id, "sub:1"), sub.copy(), _meta(suite=tag), {"x": 1})
    return threads


def _meta(**items: Any) -> Any:
    """Checkpoint metadata with keys of the test's own (LangGraph's type names its own)."""
    return items


def _tuple_key(t: CheckpointTuple) -> Any:
    return (
        t.config["configurable"],
        t.checkpoint["channel_values"],
        sorted(map(repr, t.pending_writes or [])),
        {k: v for k, v in t.metadata.items()},
        t.parent_config["configurable"] if t.parent_config else None,
    )


def _answers(saver: SQLAlchemySaver, tag: str, threads: list[str]) -> dict[str, Any]:
    inspector = Inspector(saver)
    out: dict[str, Any] = {
        "list": [_tuple_key(t) for t in saver.list(None, filter={"suite": tag})],
        "list_n": [_tuple_key(t) for t in saver.list(None, filter={"suite": tag, "n": 1})],
        "list_limit": [_tuple_key(t) for t in saver.list(None, filter={"suite": tag}, limit=3)],
        "count": inspector.count_threads(filter={"suite": tag}),
        "latest": {
            k: (v.checkpoint_id, v.value) for k, v in inspector.latest("m", threads).items()
        },
        "history": [
            [(h.checkpoint_id, h.step, h.pending_writes) for h in inspector.history(t)]
            for t in threads
        ],
        "stats": [
            (s.key, s.writes, s.bytes)
            for s in inspector.write_stats(by="channel", thread_id=threads[3])
        ],
    }
    for order in ("last_write", "first_write", "checkpoints", "thread_id"):
        page = inspector.threads(filter={"suite": tag}, order=order, limit=4, count=True)
        rest = inspector.threads(filter={"suite": tag}, order=order, limit=4, offset=4)
        out[f"threads_{order}"] = (
            [
                (t.thread_id, t.status, t.checkpoints, t.namespaces)
                for t in page.threads + rest.threads
            ],
            page.next_offset,
            page.total,
        )
    for status in ("idle", "interrupted", "error", "pending"):
        found = inspector.threads(filter={"suite": tag}, status=status, count=True)
        out[f"status_{status}"] = ([t.thread_id for t in found.threads], found.total)
    return out


def test_cross_thread_calls_answer_as_on_plain_postgresql(
    request: pytest.FixtureRequest, distributed: Backend, tmp_path: Path
) -> None:
    with _database(request, "postgres", tmp_path) as plain:
        _same_answers(plain, distributed)


def _same_answers(plain: Backend, distributed: Backend) -> None:
    engines = [plain.engine(), distributed.engine()]
    try:
        savers = [SQLAlchemySaver(e) for e in engines]
        savers[0].setup()
        tag = f"same-{uuid.uuid4().hex[:8]}"
        threads = _fill(savers, tag)
        on_plain, on_citus = (_answers(s, tag, threads) for s in savers)
        assert savers[1].dialect_ops.distributed and not savers[0].dialect_ops.distributed
        assert on_citus == on_plain
        # The data really covers the cases: each status, several pages, every thread.
        assert all(on_plain[f"status_{s}"][0] for s in ("idle", "interrupted", "error", "pending"))
        assert on_plain["count"] == len(threads) and len(on_plain["list_limit"]) == 3
        # Sweeps, on these threads only: a thread-TTL sweep (dry run), then pruning.
        later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=2)
        for saver in savers:
            for thread_id in threads[:3]:
                saver.set_thread_ttl(thread_id, 60)
        dry = [s.sweep_ttl(dry_run=True, now=later) for s in savers]
        assert sorted(dry[0].thread_ids) == sorted(dry[1].thread_ids) == sorted(threads[:3])
        assert dry[0].removed == dry[1].removed
    finally:
        for engine in engines:
            engine.dispose()


def test_sweep_and_cli_on_distributed_tables_as_on_plain(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The retention sweep and the CLI's cross-thread commands on a database of their
    own (a sweep takes every thread old enough), compared with plain PostgreSQL."""
    with (
        _database(request, "postgres", tmp_path / "plain") as plain,
        _database(request, "distributed", tmp_path / "citus") as citus,
    ):
        _sweeps_and_cli(plain, citus)


def _sweeps_and_cli(plain: Backend, citus: Backend) -> None:
    engines = [plain.engine(), citus.engine()]
    try:
        savers = [SQLAlchemySaver(e) for e in engines]
        savers[0].setup()
        tag = f"sweep-{uuid.uuid4().hex[:8]}"
        threads = _fill(savers, tag)
        outputs = []
        for db in (plain, citus):
            outputs.append(
                [
                    _cli(db.sync_url, *args)
                    for args in (
                        ["threads", "--json", "--limit", "3"],
                        ["threads", "--json", "--status", "interrupted"],
                        ["latest", "m", *threads, "--json"],
                        ["history", threads[3], "--json"],
                        ["stats", "--by", "thread", "--json"],
                    )
                ]
            )
        assert [_without_times(o) for o in outputs[0]] == [_without_times(o) for o in outputs[1]]
        # Runs span threads on several shards (its blobs locked a thread at a time).
        for saver in savers:
            saver.delete_for_runs([f"{tag}-run-1"])
        left = [[_tuple_key(t) for t in s.list(None, filter={"suite": tag})] for s in savers]
        assert left[0] == left[1] and len(left[0]) > 0
        assert all(t[3]["run_id"] == f"{tag}-run-0" for t in left[0] if "run_id" in t[3])
        reports = [s.sweep(dt.timedelta(0), strategy="keep_latest", keep_last=1) for s in savers]
        assert reports[0].removed == reports[1].removed and reports[0].removed.checkpoints > 0
        reports = [s.sweep(dt.timedelta(0)) for s in savers]
        assert reports[0].removed == reports[1].removed
        assert reports[0].removed.threads == len({t[0]["thread_id"] for t in left[0]}) == 3
        assert [list(s.list(None)) for s in savers] == [[], []]
    finally:
        for engine in engines:
            engine.dispose()


def _cli(url: str, *args: str) -> Any:
    """A CLI command's JSON, run in this process (its entry point is tested in
    test_cli.py: a process each would cost a second of imports here)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["--url", url, *args])
    assert code == 0, (args, out.getvalue())
    return json.loads(out.getvalue())


def _without_times(value: Any) -> Any:
    """CLI JSON without its timestamps (each database stamped its own writes)."""
    if isinstance(value, dict):
        return {
            k: _without_times(v)
            for k, v in value.items()
            if not any(w in k for w in ("write", "created", "updated", "at"))
        }
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


# --- Citus's work: one shard per thread, per namespace ------------------------------
#
# Read from what the coordinator sends the workers (``citus.log_remote_commands``: a
# NOTICE per command, naming the shards), not from EXPLAIN: Citus plans a statement with
# parameters when it runs it, and it is the commands sent that say how many shards a
# call touched and whether it committed in two phases (``PREPARE TRANSACTION``).


@dataclass
class Sent:
    commands: list[str] = field(default_factory=list)
    groups: dict[int, tuple[int, str]] = field(default_factory=dict)  # shard -> its group

    def shard_groups(self) -> set[tuple[int, str]]:
        """The shard groups the commands named: co-located shards of one hash range."""
        shards = {int(n) for c in self.commands for n in _SHARD.findall(c)}
        assert shards <= set(self.groups), (shards, self.commands)
        return {self.groups[n] for n in shards}

    def two_phase(self) -> bool:
        return any("PREPARE TRANSACTION" in c for c in self.commands)


_SHARD = re.compile(r"\b(?:" + "|".join(TABLES) + r")_(\d+)\b")


@pytest.fixture
def sent(make_engine: Any, distributed: Backend) -> Iterator[tuple[sa.Engine, Sent]]:
    """An engine whose sessions log the commands Citus sends the workers, into ``Sent``."""
    engine = make_engine(distributed, connect_args={"options": "-c citus.log_remote_commands=on"})
    log = Sent()

    @sa.event.listens_for(engine, "connect")
    def listen(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.add_notice_handler(
            lambda notice: log.commands.append(str(notice.message_primary))
        )

    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT s.shardid, p.colocationid, s.shardminvalue FROM pg_dist_shard s "
            "JOIN pg_dist_partition p USING (logicalrelid)"
        ).all()
    log.groups = {int(shard): (int(group), str(low)) for shard, group, low in rows}
    yield engine, log


def _sends(log: Sent, call: Callable[[], Any]) -> Sent:
    log.commands.clear()
    call()
    done = Sent(list(log.commands), log.groups)
    assert done.commands, "the call sent nothing to a worker"
    return done


def _one_shard(log: Sent, call: Callable[[], Any]) -> Sent:
    """``call`` touched one shard group (of co-located tables), committed in one phase."""
    done = _sends(log, call)
    assert len(done.shard_groups()) == 1, done.commands
    assert not done.two_phase(), done.commands
    return done


def test_per_thread_calls_touch_one_shard(sent: tuple[sa.Engine, Sent]) -> None:
    engine, log = sent
    saver = SQLAlchemySaver(engine)
    thread_id = new_thread()
    parent = config(thread_id)
    saver.get_tuple(parent)  # the first call learns the server and checks the schema
    for step in range(3):
        cp = checkpoint({"m": [step], "n": [1]}, {"m": step + 1, "n": 1})
        parent = saver.put(parent, cp, {"step": step}, {"m": step + 1, "n": 1})
        saver.put_writes(parent, [("m", step)], "task")
    _one_shard(log, lambda: saver.put_writes(parent, [("m", 1), ("n", 2)], "t2"))
    _one_shard(log, lambda: saver.get_tuple(config(thread_id)))
    _one_shard(log, lambda: saver.get_tuple(parent))
    _one_shard(log, lambda: list(saver.list(config(thread_id))))
    _one_shard(log, lambda: list(saver.list(config(thread_id), before=parent)))
    _one_shard(log, lambda: Inspector(saver).history(thread_id))
    _one_shard(log, lambda: saver.prune([thread_id], strategy="keep_latest"))
    # A put, with a new version and one named from its parent (locked, not rewritten):
    cp = checkpoint({"m": [9], "n": [1]}, {"m": 10, "n": 1})
    put = _one_shard(log, lambda: saver.put(parent, cp, {"step": 9}, {"m": 10}))
    assert sum("INSERT INTO" in c and "checkpoint_blobs" in c for c in put.commands) == 1
    assert saver.get_tuple(config(thread_id, checkpoint_id=cp["id"])) is not None
    _one_shard(log, lambda: saver.delete_thread(thread_id))
    assert saver.get_tuple(config(thread_id)) is None
    # A cross-thread list does fan out: what is measured is what is sent.
    fanned = _sends(log, lambda: list(saver.list(None, limit=2)))
    assert len(fanned.shard_groups()) == SHARD_COUNT


def test_store_key_operations_touch_one_shard(sent: tuple[sa.Engine, Sent]) -> None:
    engine, log = sent
    store = SQLAlchemyStore(
        engine, index={"dims": 2, "embed": lambda texts: [[1.0, 0.5] for _ in texts]}
    )
    store.setup()
    namespace = ("citus", uuid.uuid4().hex[:8])
    store.get(namespace, "warm-up")
    _one_shard(log, lambda: store.put(namespace, "a", {"text": "hello"}))
    _one_shard(log, lambda: store.batch([PutOp(namespace, k, {"text": k}) for k in "bcd"]))
    _one_shard(log, lambda: store.get(namespace, "a"))
    _one_shard(log, lambda: store.delete(namespace, "a"))
    assert store.get(namespace, "b") is not None and store.get(namespace, "a") is None
    # The node cache, by its namespace: one shard a namespace too.
    cache: SQLAlchemyCache[Any] = SQLAlchemyCache(engine)
    cached = ("node", uuid.uuid4().hex[:8])
    cache.get([(cached, "warm-up")])
    _one_shard(log, lambda: cache.set({(cached, "k1"): (1, None), (cached, "k2"): (2, None)}))
    _one_shard(log, lambda: cache.get([(cached, "k1"), (cached, "k2")]))
    _one_shard(log, lambda: cache.clear([cached]))
    # Two namespaces: their two shards (or one, when they hash alike), no more.
    other = ("citus", uuid.uuid4().hex[:8])
    both = _sends(log, lambda: store.batch([PutOp(namespace, "e", {}), PutOp(other, "e", {})]))
    assert 1 <= len(both.shard_groups()) <= 2


# --- migrations -------------------------------------------------------------------

_OLD = "0002_store_cache"  # before revision 0003 (vectors as real[]) and 0006 (retention)


def test_upgrade_and_downgrade_on_distributed_tables(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A database distributed at an old revision, with a stored vector: the upgrade
    converts it on the shards and distributes the tables it creates; the downgrade
    back converts it again; a second upgrade ends where the first did."""
    with _database(request, CITUS, tmp_path) as db:
        engine = db.engine()
        try:
            migrate.upgrade(engine, _OLD)
            with engine.begin() as conn:
                # What distribute_on_citus does, at this old revision's tables.
                done = distribute(conn, None, TABLES, migrate.VERSION_TABLE)
                assert "checkpoint_retention" not in done and "checkpoints" in done
                conn.exec_driver_sql(
                    "INSERT INTO store_vectors (prefix_hash, key_hash, field, embedding, "
                    "created_at) VALUES ('p', 'k', 'f', '\\x0000803f000000c0'::bytea, now())"
                )
            migrate.upgrade(engine)
            with engine.connect() as conn:
                assert distributed_tables(conn, None)["checkpoint_retention"] == "distributed"
                assert conn.exec_driver_sql("SELECT embedding FROM store_vectors").scalar() == [
                    1.0,
                    -2.0,
                ]
                migrate.downgrade_connection(conn, _OLD)
            with engine.connect() as conn:
                assert migrate.current_revision(conn) == _OLD
                stored = conn.exec_driver_sql("SELECT embedding FROM store_vectors").scalar_one()
                assert bytes(stored) == b"\x00\x00\x80\x3f\x00\x00\x00\xc0"
                assert "checkpoint_retention" not in distributed_tables(conn, None)
            migrate.upgrade(engine)
            with engine.connect() as conn:
                kinds = distributed_tables(conn, None)
            assert {t: kinds.get(t) for t in TABLES} == {t: "distributed" for t in TABLES}
            saver = SQLAlchemySaver(engine)
            thread_id = new_thread()
            saver.put(config(thread_id), checkpoint({"a": 1}), {}, {"a": 1})
            assert saver.get_tuple(config(thread_id)) is not None
        finally:
            engine.dispose()


def test_a_worker_names_the_coordinator(
    request: pytest.FixtureRequest, citus: CitusCluster, distributed: Backend, tmp_path: Path
) -> None:
    """Migrations run on the coordinator: setup() on a worker says so, with its address;
    on distributed tables set up there, savers run through a worker too."""
    coordinator_port = sa.make_url(citus.coordinator).port
    database = sa.make_url(distributed.sync_url).database
    on_worker = sqlalchemy_url(citus.workers[0], "psycopg", database)
    with SQLAlchemySaver.from_conn_string(on_worker) as saver:
        saver.setup()  # at head (the version table is on every node): nothing to do
        thread_id = new_thread()
        saver.put(config(thread_id), checkpoint({"a": 1}), _meta(w=thread_id), {"a": 1})
        assert saver.get_tuple(config(thread_id)) is not None
        page = Inspector(saver).threads(filter={"w": thread_id})  # across shards, too
        assert [t.thread_id for t in page.threads] == [thread_id]
    with SQLAlchemySaver.from_conn_string(distributed.sync_url) as on_coordinator:
        found = on_coordinator.get_tuple(config(thread_id))
        assert found is not None and found.checkpoint["channel_values"] == {"a": 1}
    with _database(request, CITUS, tmp_path) as db:
        empty_on_worker = sqlalchemy_url(
            citus.workers[1], "psycopg", sa.make_url(db.sync_url).database
        )
        with SQLAlchemySaver.from_conn_string(empty_on_worker) as saver:
            with pytest.raises(
                SchemaError, match=f"coordinator \\(127.0.0.1:{coordinator_port}\\)"
            ):
                saver.setup()
            with pytest.raises(SchemaError, match="Citus worker"):
                saver.get_tuple(config(new_thread()))
