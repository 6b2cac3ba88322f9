"""The synchronous saver: a thin shell that runs operations on a SQLAlchemy Engine."""

from __future__ import annotations

import concurrent.futures
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from lg_sqla import migrate
from lg_sqla.checkpoint import calls, maintenance, operations, retention, rotation
from lg_sqla.checkpoint.base import SaverBase
from lg_sqla.checkpoint.maintenance import SweepReport
from lg_sqla.checkpoint.retention import ThreadTTL
from lg_sqla.checkpoint.rotation import RotationReport
from lg_sqla.checkpoint.twins import (
    in_worker_thread,
    iterated_in_worker_thread,
    iterates_on_engine,
    runs_on_engine,
    sync_bridged,
)
from lg_sqla.models import CheckpointRow
from lg_sqla.plans import PlanSource, T
from lg_sqla.runtime import workers
from lg_sqla.runtime.bound import Binding
from lg_sqla.runtime.owning import owned
from lg_sqla.sweeper import ThreadSweeper


@sync_bridged
class SQLAlchemySaver(SaverBase[Engine, AbstractContextManager["SQLAlchemySaver"]]):
    """A LangGraph checkpointer on any SQLAlchemy database (sync engine).

    Every call runs in one transaction of the engine's pool: no global lock, so
    threads sharing one saver work concurrently. A ``put`` writes its blobs and
    its checkpoint atomically; a failed call leaves nothing behind.

    Args:
        engine: A SQLAlchemy ``Engine``. It stays yours: the saver never disposes it.
        serde: The serializer of channel values and writes (default: LangGraph's
            ``JsonPlusSerializer``; see ``lg_sqla.serde`` for encryption/compression).
        list_page_size: ``list`` fetches checkpoints in pages of this many rows,
            one statement per page, so memory stays bounded on long threads.
        check_schema: Verify once, on first use, that the schema is at the
            latest migration (raises ``SchemaError`` naming the fix).
        schema: Keep lg_sqla's tables in this PostgreSQL schema or MySQL/MariaDB
            database (e.g. beside LangGraph's own saver's ``checkpoints`` table);
            ``setup()`` creates it. Default: the connection's default schema.
        direct_path: Let the hot calls (get_tuple, list, put, put_writes) skip
            SQLAlchemy Core's execution layer on the drivers it is tested for
            (``lg_sqla.runtime``); never a change of behaviour. False keeps every
            call on Core, as does ``engine.execution_options(lg_sqla_direct_path=False)``.
        read_only: For a replica (a PostgreSQL hot standby, a MySQL replica): reads
            only. Every writing call raises ``ReadOnlyError`` before reaching the
            database, and ``setup()`` only checks the schema. For inspection,
            dashboards and history browsing, never for a running graph
            (docs/scaling.md).
        ttl: A retention policy (``CheckpointTTL``: ``default_ttl`` minutes,
            ``refresh_on_read``, ``sweep_interval_minutes``, ``keep_last``,
            ``max_run_minutes``). Each put stamps its checkpoint with ``default_ttl``:
            the thread's expiry is stored with it, never decided by another process's
            policy. Threads whose stored expiry passed read as absent; ``sweep_ttl``
            or ``start_ttl_sweeper`` delete them; ``keep_last`` prunes on every put
            (docs/operations.md, "Retention by policy"). None: no policy, puts stamp
            no expiry, and no extra statement on any call.
        reconnect_window: Seconds a call waits for a database that went away (a
            failover, a restart): it reconnects with growing pauses instead of
            raising, where that is safe (nothing ran, or the call is idempotent:
            reads, ``put``, ``put_writes``, ``delete_thread``; docs/scaling.md,
            "Failover"). 0: one immediate retry only. Default 30.
        call_timeout: Seconds a call may wait on its connection before lg_sqla cuts
            it and raises ``CallTimeoutError`` (e.g. a COMMIT waiting for a
            synchronous standby that is gone). Default None: no limit. psycopg and
            psycopg2 only.
        state_migrations: The application's state revisions
            (``lg_sqla.checkpoint.state_migrations.StateMigrations``): every read returns
            checkpoints in the newest state shape, whatever revision they were written
            at, and writes stamp the newest revision (docs/state-migrations.md). None:
            rows are read as stored; a row written at a state revision raises
            ``StateRevisionError``.
        keep_connection: Keep one connection of the engine's pool checked out
            between direct-path calls, for whichever thread calls next: a checkout
            and check-in cost about a tenth of a small call. Only where nothing can
            tell (a SQLite file on pysqlite, PostgreSQL on sync psycopg, a queue pool
            of two or more, no pool listeners, pre-ping or recycle; see
            docs/configuration.md); a connection is kept only after a call
            committed. Call ``release_connections()`` before you dispose the
            engine. ``from_conn_string`` turns it on for the engine it owns.

    Example:
        >>> from lg_sqla import SQLAlchemySaver
        >>> with SQLAlchemySaver.from_conn_string("sqlite:///checkpoints.sqlite") as saver:
        ...     saver.setup()
        ...     graph = builder.compile(checkpointer=saver)
    """

    # Set on the views bound() returns (runtime.bound); None: calls run on the engine.
    _binding: Binding | None = None

    def _set_up_face(self) -> None:
        self._sweeper = ThreadSweeper("lg_sqla-checkpoint-ttl-sweeper", self._sweep_once)

    _is_async = False
    _new_engine = staticmethod(create_engine)

    @staticmethod
    @contextmanager
    def _opened(
        engine: Engine,
        url: str,
        engine_kwargs: dict[str, Any],
        saver: Callable[[Engine, bool], SQLAlchemySaver],
    ) -> Iterator[SQLAlchemySaver]:
        # keep_connection: the engine is the saver's alone.
        with owned(engine, lambda owned_engine: saver(owned_engine, True)) as opened:
            yield opened

    # --- plumbing ------------------------------------------------------------

    def run(self, source: PlanSource[T]) -> T:
        """Run one of lg_sqla's plans on this saver's engine, in one transaction per
        attempt, retried as every call is (``lg_sqla.runtime``). Semi-public: what
        ``lg_sqla.inspect``, the importer and the CLI run their own queries with.
        A plan whose function is declared ``plans.prebuilt`` (the checkpointer's hot
        calls) may take the direct path."""
        if self._binding is not None:
            return self._binding.run(source)
        return self._runtime.run(self.engine, source)

    def _checkpointer_call(self, source: PlanSource[T]) -> T:
        """One of LangGraph's checkpointer calls (``get_tuple``, ``list``'s pages,
        ``put``, ``put_writes``, ``delete_thread``, the delta history): each is
        idempotent (``runtime.retry``), so it may run again after an unknown outcome
        (a connection lost at COMMIT) within the reconnect window."""
        if self._binding is not None:
            return self._binding.run(source)
        return self._runtime.run(self.engine, source, idempotent=True)

    def bound(self, target: Connection | Session) -> SQLAlchemySaver:
        """This saver's calls on your ``Connection`` or ORM ``Session``, inside your
        transaction (docs/application.md, "Use it inside your application").

        The returned view is a ``SQLAlchemySaver`` (compile a graph with it, pass it to
        ``import_threads``) whose calls run on ``target``: no connection of their own,
        no COMMIT, no ROLLBACK; each call in a SAVEPOINT, so a failed call leaves your
        transaction usable with nothing of it applied; never retried (a deadlock or
        serialization failure is raised to you: run your transaction again). A
        ``Session`` is flushed first when it autoflushes. Calls of every view bound to
        one target run one at a time. ``setup()`` and the TTL sweeper stay on the saver.

        Example:
            >>> with Session(engine) as session, session.begin():
            ...     session.delete(conversation)
            ...     saver.bound(session).delete_thread(conversation.thread_id)
        """
        return cast(
            SQLAlchemySaver,
            self._bound_copy(Binding(target, self._runtime, self.engine, CheckpointRow)),
        )

    def setup(self) -> None:
        """Create or upgrade lg_sqla's tables to the latest migration (``alembic upgrade head``).

        Idempotent, and safe to call from several threads, tasks and processes at
        once: one caller per process runs Alembic at a time, and the migration holds
        the database's lock (PostgreSQL advisory lock, MySQL ``GET_LOCK``, SQLite
        write lock), so exactly one applies each revision. A schema already at head
        costs one read.

        Example:
            >>> with SQLAlchemySaver.from_conn_string("sqlite:///checkpoints.sqlite") as saver:
            ...     saver.setup()
        """
        self._not_bound("setup")
        migrate.set_up(self.engine, read_only=self.read_only)
        self._runtime.learn(self.engine)
        self._runtime.set_up(self.engine)

    # --- the checkpointer contract ----------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple: the one named by ``checkpoint_id``, else the latest.

        One statement on PostgreSQL, SQLite and MySQL/MariaDB: the checkpoint,
        the blobs its ``channel_versions`` point at, and its pending writes.

        Args:
            config: ``{"configurable": {"thread_id": ..., "checkpoint_ns": "",
                "checkpoint_id": ...}}``; without ``checkpoint_id``, the thread's
                latest checkpoint in that namespace.

        Returns:
            The checkpoint, its metadata, parent config and pending writes (in
            ``writes_sort_key`` order), or ``None`` if there is no such checkpoint.

        Raises:
            InvalidInputError: ``thread_id`` is missing, too long or holds a NUL.
            SchemaError: the tables are missing or at another revision (first call).

        Example:
            >>> saver.get_tuple({"configurable": {"thread_id": "user-42", "checkpoint_ns": ""}})
        """
        if self._expiry is not None:  # a TTL policy: the expiry check, same transaction
            policy, refresh = self._expiry, self._refresh
            return self.run(lambda: retention.get_tuple(self.context, config, policy, refresh))
        return self._checkpointer_call(lambda: operations.get_tuple(self.context, config))

    list = iterates_on_engine(calls.list_, "Iterator[CheckpointTuple]")

    put = runs_on_engine(calls.put)

    put_writes = runs_on_engine(calls.put_writes)

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and blob of a thread (all namespaces), atomically.

        A call on the thread already in flight either leaves nothing (it committed
        before the delete decided: deleted with the rest) or commits after it as a
        write to a new thread: a ``put`` stores a complete checkpoint (values the
        delete removed are written again), a ``put_writes`` pending writes. What
        was deleted stays deleted; there is no tombstone, so a later writer may start
        the thread again (docs/operations.md, "Deletes, prunes and writers in flight").

        Args:
            thread_id: The thread to delete; unknown threads are a no-op.
        """
        self._writing("delete_thread")
        self._checkpointer_call(lambda: operations.delete_thread(self.context, thread_id))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed per DeltaChannel from the target's ancestors, in one statement.

        Same contract as the base class (which does one ``get_tuple`` per
        ancestor): writes oldest→newest in ``writes_sort_key`` order within a
        checkpoint, the target's own writes excluded, ``seed`` the nearest
        stored value, absent when the walk reaches the root without one.
        """
        if not channels:
            return {}
        if self.state_migrations is not None:
            # Ancestors at older state revisions name the channels by their old names:
            # the walk of migrated tuples (one get_tuple per ancestor) reads them as new.
            return super().get_delta_channel_history(config=config, channels=channels)
        return self._checkpointer_call(
            lambda: operations.delta_history(self.context, config, channels)
        )

    # --- the extended surface: deleting runs, copying, pruning, retention -----------

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose ``metadata["run_id"]`` is listed, their writes,
        and the blobs no remaining checkpoint uses, in one transaction.

        Beware with DeltaChannel threads: deleting a run whose writes later
        checkpoints replay breaks their reconstruction (see ``prune``).
        """
        self._writing("delete_for_runs")
        self.run(lambda: maintenance.delete_for_runs(self.context, list(run_ids)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's whole history (every namespace, same checkpoint ids,
        metadata, writes and blobs) to a new thread, in one transaction.

        Raises:
            InvalidInputError: the target already has checkpoints, or the source has none.
        """
        self._writing("copy_thread")
        self.run(lambda: maintenance.copy_thread(self.context, source_thread_id, target_thread_id))

    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int = 1,
    ) -> None:
        """Prune threads, one transaction per thread.

        Args:
            thread_ids: The threads to prune.
            strategy: ``"keep_latest"`` keeps the newest ``keep_last`` checkpoints of
                each namespace (with their writes) and, for DeltaChannel state,
                every ancestor back to the nearest stored snapshot with its writes,
                so the kept state reconstructs exactly; ``"delete"`` removes the threads.
            keep_last: How many of the newest checkpoints per namespace to keep
                (``"keep_latest"`` only); e.g. 5 keeps room for time travel.

        Blobs no remaining checkpoint references are deleted, after locking the
        thread's blobs (PostgreSQL, MySQL/MariaDB): a put in flight beside the prune
        commits first and keeps what it names, a later one writes back what it needs.
        """
        self._writing("prune")
        self.run(lambda: maintenance.prune(self.context, list(thread_ids), strategy, keep_last))

    sweep = runs_on_engine(calls.sweep)

    def reencrypt(
        self,
        *,
        batch_size: int = 500,
        source: SerializerProtocol | None = None,
        progress: Callable[[RotationReport], None] | None = None,
    ) -> RotationReport:
        """Rewrite stored blobs and writes into this saver's serializer's current form.

        Use after adding a new primary key (rotation) or enabling encryption on
        existing data. Runs in batches of ``batch_size`` rows, one transaction
        each; data stays readable throughout and an interrupted run resumes by
        running again. See ``lg_sqla.checkpoint.rotation``.

        Args:
            batch_size: Rows scanned per transaction.
            source: A serializer that can decrypt rows this saver's cannot (e.g. one
                still holding a retired key).
            progress: Called after every batch with the running report.
        """
        self._writing("reencrypt")
        return self.run(
            lambda: rotation.reencrypt(
                self.context, batch_size=batch_size, source=source, progress=progress
            )
        )

    # --- retention by policy: TTLs, pins, the TTL sweeper ---------------------------

    def _listed(self, pages: operations.Pages, refresh: bool) -> Iterator[CheckpointTuple]:
        """``list``'s walk of its pages (``calls.list_``), one transaction each."""
        visible = self._visibility(refresh)
        while (query := pages.next_query()) is not None:
            page = self._checkpointer_call(lambda: operations.load_page(self.context, query))
            if visible is None:
                yield from pages.advance(page)
            else:
                yield from (t for t in pages.advance(page) if visible(t))

    def _visibility(self, refresh: bool) -> Callable[[CheckpointTuple], bool] | None:
        """None without a TTL policy; else a check of each listed tuple's thread, asked
        once per thread (``refresh``: refreshed on read, as a policy may ask)."""
        if self._expiry is None:
            return None
        seen: dict[str, bool] = {}

        def visible(found: CheckpointTuple) -> bool:
            thread_id = found.config["configurable"]["thread_id"]
            if thread_id not in seen:
                seen[thread_id] = self._is_visible(thread_id, refresh)
            return seen[thread_id]

        return visible

    def _is_visible(self, thread_id: str, refresh: bool) -> bool:
        policy = self._expiry
        assert policy is not None
        return self.run(lambda: retention.visible(self.context, thread_id, policy, refresh=refresh))

    def thread_ttl(self, thread_id: str) -> ThreadTTL:
        """A thread's TTL report from what is stored: last write, its own TTL or the one
        its last write was stamped with, pin, expiry, whether a run is in progress and
        whether it has expired. Reads only."""
        policy = self._policy()
        return self.run(lambda: retention.describe(thread_id, policy))

    def set_thread_ttl(self, thread_id: str, ttl_minutes: float | None) -> ThreadTTL:
        """Give a thread a TTL of its own, in minutes, overriding the one its writes were
        stamped with (None: back to the stamped one).

        Raises:
            InvalidInputError: ``ttl_minutes`` is not a positive number.
        """
        self._writing("set_thread_ttl")
        retention.check_ttl_minutes(ttl_minutes)
        self.run(lambda: retention.set_thread(self.context, thread_id, ttl_minutes=ttl_minutes))
        return self.thread_ttl(thread_id)

    def pin_thread(self, thread_id: str, pinned: bool = True) -> ThreadTTL:
        """Pin a thread (it never expires) or, with ``pinned=False``, unpin it."""
        self._writing("pin_thread")
        self.run(lambda: retention.set_thread(self.context, thread_id, pinned=pinned))
        return self.thread_ttl(thread_id)

    def unpin_thread(self, thread_id: str) -> ThreadTTL:
        """Unpin a thread: its TTL applies again, from its last write."""
        return self.pin_thread(thread_id, False)

    sweep_ttl = runs_on_engine(calls.sweep_ttl)

    set_threads_ttl = runs_on_engine(calls.set_threads_ttl)

    def _sweep_once(self) -> str:
        """One pass of the background sweeper; what it removed, for the debug log."""
        report = self.sweep_ttl()
        if self._on_sweep is not None:
            self._on_sweep(report)
        return f"{report.removed.threads} thread(s), {report.pinned_skipped} pinned kept"

    def start_ttl_sweeper(
        self,
        sweep_interval_minutes: float | None = None,
        *,
        on_pass: Callable[[SweepReport], None] | None = None,
    ) -> concurrent.futures.Future[None]:
        """Run ``sweep_ttl`` every ``sweep_interval_minutes`` (default: the policy's, else
        5) in a daemon thread until :meth:`stop_ttl_sweeper` (``from_conn_string`` stops
        it on exit). ``on_pass`` is called with each pass's report (in the sweeper's
        thread; metrics, or a test waiting for a pass). The future completes when the
        thread ends."""
        self._writing("start_ttl_sweeper")
        self._not_bound("start_ttl_sweeper")
        self._on_sweep = on_pass
        return self._sweeper.start(self._sweep_minutes(sweep_interval_minutes))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread (a sweep under way finishes its thread first); True
        when it ended, or none was running."""
        return self._sweeper.stop(timeout)

    # --- async methods: the sync work runs in a worker thread ---------------------
    # The event loop is never blocked; for native async I/O use AsyncSQLAlchemySaver.
    # Each is the sync method's face (checkpoint/twins.py), documented there.

    async def arun(self, source: PlanSource[T]) -> T:
        return await workers.in_worker_thread(functools.partial(self.run, source))

    alist = iterated_in_worker_thread(list)
    aget_tuple = in_worker_thread(get_tuple)
    aput = in_worker_thread(put)
    aput_writes = in_worker_thread(put_writes)
    adelete_thread = in_worker_thread(delete_thread)
    adelete_for_runs = in_worker_thread(delete_for_runs)
    acopy_thread = in_worker_thread(copy_thread)
    aprune = in_worker_thread(prune)
    asweep = in_worker_thread(sweep)
    aget_delta_channel_history = in_worker_thread(get_delta_channel_history)
    areencrypt = in_worker_thread(reencrypt)
    athread_ttl = in_worker_thread(thread_ttl)
    aset_thread_ttl = in_worker_thread(set_thread_ttl)
    apin_thread = in_worker_thread(pin_thread)
    aunpin_thread = in_worker_thread(unpin_thread)
    asweep_ttl = in_worker_thread(sweep_ttl)
    aset_threads_ttl = in_worker_thread(set_threads_ttl)
