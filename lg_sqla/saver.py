"""The synchronous saver: a thin shell that runs operations on a SQLAlchemy Engine."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.exc import DBAPIError

from lg_sqla import direct, maintenance, migrate, operations, retry, rotation
from lg_sqla.base import DEFAULT_LIST_PAGE_SIZE, SaverBase, in_schema
from lg_sqla.dialects import DialectOps
from lg_sqla.direct import DirectCompiler
from lg_sqla.engines import configure_engine, driver_hint, engine_options, saver_url
from lg_sqla.maintenance import SweepReport
from lg_sqla.plans import Plan, PlanSource, Step, T, drive
from lg_sqla.rotation import RotationReport


def attempt_plan(shell: Shell, engine: Engine, plan: Plan[T], *, in_event_loop: bool = False) -> T:
    """One attempt at a plan, on a connection of ``engine`` (sync; any thread).

    A plan that writes takes the database's writer lock, if it has one (SQLite's
    in-process lock, ``DialectOps.writer_lock``), *before* it checks out a
    connection and returns the connection before it lets the lock go, so that
    writers never hold a pooled connection while they queue, and the next writer
    gets the same connection back from the pool (SQLite: its page cache stays
    valid: see ``engines.engine_options``).

    ``in_event_loop``: run by the async saver in a greenlet on the event loop's
    thread, where other tasks interleave at each driver call: a thread lock held
    across those calls would block the loop (a task waiting for it would never let
    the holder resume), so SQLite's in-process writer lock is not taken there.
    """
    if not shell._direct.warm:
        # Plans build their statements only once a connection was made: some depend
        # on what the first connection taught the dialect (e.g. MariaDB or MySQL).
        with engine.connect() as connection:
            shell._direct.warm = True
            try:
                first = next(plan)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            if _writer_lock(shell, engine, first, in_event_loop) is None:
                return attempt_on(shell, connection, plan, first)
        return _attempt_started(shell, engine, plan, first, in_event_loop)
    # The plan serializes and validates its data before a connection is checked
    # out: the pool's connections are held for I/O only.
    try:
        first = next(plan)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    return _attempt_started(shell, engine, plan, first, in_event_loop)


def _attempt_started(
    shell: Shell, engine: Engine, plan: Plan[T], first: Step, in_event_loop: bool
) -> T:
    """A started plan: writer lock (if any), then a connection, then the plan, in one
    transaction; on the direct path when it can (lg_sqla.direct)."""
    with _writer_lock(shell, engine, first, in_event_loop) or contextlib.nullcontext():
        if not (
            shell._schema_checked
            and direct.engine_allows(engine)
            and runs_directly(shell, engine.dialect, first)
        ):
            # One transaction per call (plans may COMMIT between threads); an error
            # rolls back whatever the current transaction wrote.
            with engine.connect() as connection:
                return attempt_on(shell, connection, plan, first)
        # A hot plan runs on the pooled DBAPI connection, without a Core Connection.
        pooled = direct.checkout(engine)
        wrapped: list[Connection] = []

        def core() -> Connection:
            # Only on an error: SQLAlchemy's Connection wraps it, and invalidates a
            # dead connection, as on the Core path.
            wrapped.append(Connection(engine, connection=pooled))
            return wrapped[0]

        try:
            autocommit = first.whole_plan and shell.ops.autocommit_single_statements
            return direct.run(
                pooled, engine.dialect, core, shell._direct, plan, first, autocommit=autocommit
            )
        finally:
            (wrapped[0] if wrapped else pooled).close()


def _writer_lock(
    shell: Shell, engine: Engine, first: Step, in_event_loop: bool
) -> threading.Lock | None:
    """SQLite's in-process writer lock for a plan that writes (DialectOps.writer_lock)."""
    return None if first.fetch or in_event_loop else shell.ops.writer_lock(engine)


class Shell(Protocol):
    """What running a plan needs of its owner: a saver, a store or the node cache."""

    ops: DialectOps
    _direct: DirectCompiler
    _schema_checked: bool


def attempt_on(
    shell: Shell, connection: Connection, plan: Plan[T], first: Step, *, may_go_direct: bool = True
) -> T:
    """Run a started plan on ``connection`` in one transaction: on the direct path
    where it can (lg_sqla.direct), else through Core; check the schema on first use."""
    autocommit = first.whole_plan and shell.ops.autocommit_single_statements
    go_direct = (
        may_go_direct
        and direct.usable_on(connection)
        and runs_directly(shell, connection.dialect, first)
    )
    if autocommit and not go_direct:  # before any statement: it autobegins
        connection.execution_options(isolation_level="AUTOCOMMIT")
    if not shell._schema_checked:
        migrate.check_schema(connection)
        if go_direct:  # the direct path starts from no transaction
            connection.commit()
        shell._schema_checked = True
    if go_direct:
        return direct.run(
            connection.connection,
            connection.dialect,
            lambda: connection,
            shell._direct,
            plan,
            first,
            autocommit=autocommit,
        )
    result = drive(connection, plan, first)
    try:
        connection.commit()
    except DBAPIError as error:
        retry.mark_after_commit(error)  # the outcome is unknown: never run it again
        raise
    return result


def runs_directly(shell: Shell, dialect: Dialect, first: Step) -> bool:
    """Whether this plan may skip SQLAlchemy Core's execution layer (lg_sqla.direct)."""
    return (
        shell.ops.runs_plans_directly
        and first.statement is not None
        and shell.ops.is_cached(first.statement)
        and shell._direct.get(first.statement, dialect) is not None
    )


class SQLAlchemySaver(SaverBase):
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

    Example:
        >>> from lg_sqla import SQLAlchemySaver
        >>> with SQLAlchemySaver.from_conn_string("sqlite:///checkpoints.sqlite") as saver:
        ...     saver.setup()
        ...     graph = builder.compile(checkpointer=saver)
    """

    engine: Engine

    def __init__(
        self,
        engine: Engine,
        *,
        serde: SerializerProtocol | None = None,
        list_page_size: int = DEFAULT_LIST_PAGE_SIZE,
        check_schema: bool = True,
        schema: str | None = None,
    ) -> None:
        self._init_common(engine.dialect, serde, list_page_size, check_schema)
        self.schema = schema
        self.engine = in_schema(engine, schema)

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        url: str,
        *,
        serde: SerializerProtocol | None = None,
        list_page_size: int = DEFAULT_LIST_PAGE_SIZE,
        schema: str | None = None,
        **engine_kwargs: Any,
    ) -> Iterator[SQLAlchemySaver]:
        """Open a saver on a database URL; the engine is disposed on exit.

        Args:
            url: A SQLAlchemy URL, e.g. ``sqlite:///checkpoints.sqlite``,
                ``postgresql+psycopg://user:pw@host/db``, ``mysql+pymysql://user:pw@host/db``.
            serde: See the class docstring.
            list_page_size: See the class docstring.
            **engine_kwargs: Passed to ``sqlalchemy.create_engine`` (``pool_size``,
                ``pool_pre_ping``, ``connect_args``, ...).

        A URL without a driver gets lg_sqla's (``postgres://`` and ``postgresql://``:
        psycopg 3; ``mysql://``: PyMySQL). A driver that is not installed raises
        ``MissingDriverError`` naming the extra to install.
        """
        url = saver_url(url, is_async=False)
        with driver_hint(url):
            engine = configure_engine(create_engine(url, **engine_options(url, engine_kwargs)))
        try:
            yield cls(engine, serde=serde, list_page_size=list_page_size, schema=schema)
        finally:
            engine.dispose()

    # --- plumbing ------------------------------------------------------------

    def _run(self, source: PlanSource[T]) -> T:
        """Run a plan; given a plan factory, run it again from scratch when the database
        rolled the attempt back (deadlock, serialization failure, dead pooled
        connection; see ``lg_sqla.retry``)."""
        if not callable(source):
            return self._attempt(source)
        return retry.with_retries(lambda: self._attempt(source()))

    def _attempt(self, plan: Plan[T]) -> T:
        return attempt_plan(self, self.engine, plan)

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
        migrate.upgrade(self.engine)
        self._schema_checked = True

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
        return self._run(lambda: operations.get_tuple(self._ctx, config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoints newest first, filtered in SQL before the limit.

        Args:
            config: ``thread_id`` (and optionally ``checkpoint_ns``,
                ``checkpoint_id``) to list; ``None`` lists every thread.
            filter: Top-level metadata equality, e.g. ``{"source": "input", "step": 1}``.
                Keys and values are bound parameters.
            before: Only checkpoints whose id is smaller than this config's ``checkpoint_id``.
            limit: At most this many checkpoints.
        """
        pages = operations.list_pages(
            config,
            filter=filter,
            before=before,
            limit=limit,
            page_size=self.list_page_size,
            filter_in_sql=self.ops.filters_metadata_in_sql,
        )
        while (query := pages.next_query()) is not None:
            page = self._run(lambda: operations.load_page(self._ctx, query))
            yield from pages.advance(page)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: blobs of ``new_versions`` and the checkpoint row, atomically.

        Channel values are written once per version (insert-or-ignore: blobs are
        immutable); the checkpoint row is an upsert. The parent is
        ``config["configurable"]["checkpoint_id"]``. Metadata is merged with the
        config's as LangGraph does (NUL characters stripped, ``writes`` dropped).

        Args:
            config: The config of the parent (thread_id, checkpoint_ns, checkpoint_id).
            checkpoint: The checkpoint to store.
            metadata: Its metadata; must be JSON (it is stored as such, for filters).
            new_versions: The channels whose version is new in this checkpoint.

        Returns:
            The config of the stored checkpoint (thread_id, checkpoint_ns, checkpoint_id).

        Raises:
            InvalidInputError: a key is too long or holds a NUL, or metadata is not
                JSON; nothing is written. A serializer error also writes nothing.
        """
        return self._run(
            lambda: operations.put(self._ctx, config, checkpoint, metadata, new_versions)
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes against the checkpoint in ``config``.

        Writes to special channels (errors, interrupts, ...) replace earlier ones
        of the same task; others are first-wins, so retries are idempotent.

        Args:
            config: The config ``put`` returned (it names the checkpoint).
            writes: ``(channel, value)`` pairs, in the task's order.
            task_id: The task that produced them.
            task_path: The task's path, stored so reads can sort writes as
                LangGraph applies them (``writes_sort_key``).

        Raises:
            InvalidInputError: ``config`` has no ``checkpoint_id``, or a key is too long.
        """
        self._run(lambda: operations.put_writes(self._ctx, config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and blob of a thread (all namespaces), atomically.

        Args:
            thread_id: The thread to delete; unknown threads are a no-op.
        """
        self._run(lambda: operations.delete_thread(self._ctx, thread_id))

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed per DeltaChannel from the target's ancestors, in two statements.

        Same contract as the base class (which does one ``get_tuple`` per
        ancestor): writes oldest→newest in ``writes_sort_key`` order within a
        checkpoint, the target's own writes excluded, ``seed`` the nearest
        stored value, absent when the walk reaches the root without one.
        """
        if not channels:
            return {}
        return self._run(lambda: operations.delta_history(self._ctx, config, channels))

    # --- the extended surface: deleting runs, copying, pruning, retention -----------

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose ``metadata["run_id"]`` is listed, their writes,
        and the blobs no remaining checkpoint uses, in one transaction.

        Beware with DeltaChannel threads: deleting a run whose writes later
        checkpoints replay breaks their reconstruction (see ``prune``).
        """
        self._run(lambda: maintenance.delete_for_runs(self._ctx, list(run_ids)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's whole history (every namespace, same checkpoint ids,
        metadata, writes and blobs) to a new thread, in one transaction.

        Raises:
            InvalidInputError: the target already has checkpoints, or the source has none.
        """
        self._run(lambda: maintenance.copy_thread(self._ctx, source_thread_id, target_thread_id))

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

        Blobs no remaining checkpoint references are deleted.
        """
        self._run(lambda: maintenance.prune(self._ctx, list(thread_ids), strategy, keep_last))

    def sweep(
        self,
        older_than: dt.timedelta,
        *,
        strategy: str = "delete",
        keep_last: int = 1,
        batch_size: int = 100,
        progress: Callable[[SweepReport], None] | None = None,
    ) -> SweepReport:
        """Retention: remove what has not been written for ``older_than``.

        ``"delete"`` deletes whole threads whose newest checkpoint is older than
        the cut-off; ``"keep_latest"`` prunes, in every thread, checkpoints older
        than the cut-off except the newest ``keep_last`` per namespace (DeltaChannel
        safe, as ``prune``). Threads are visited ``batch_size`` at a time, each in
        its own short transaction, so it can run beside live traffic.

        Returns:
            What was removed: threads, checkpoints, writes, blobs, batches.
        """
        return self._run(
            lambda: maintenance.sweep(
                self._ctx, older_than, strategy, keep_last, batch_size, progress
            )
        )

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
        running again. See ``lg_sqla.rotation``.

        Args:
            batch_size: Rows scanned per transaction.
            source: A serializer that can decrypt rows this saver's cannot (e.g. one
                still holding a retired key).
            progress: Called after every batch with the running report.
        """
        return self._run(
            lambda: rotation.reencrypt(
                self._ctx, batch_size=batch_size, source=source, progress=progress
            )
        )

    # --- async methods: the sync work runs in a worker thread ---------------------
    # The event loop is never blocked; for native async I/O use AsyncSQLAlchemySaver.

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        iterator = self.list(config, filter=filter, before=before, limit=limit)
        done = object()
        while (item := await asyncio.to_thread(next, iterator, done)) is not done:
            yield item  # type: ignore[misc]

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int = 1
    ) -> None:
        await asyncio.to_thread(
            lambda: self.prune(thread_ids, strategy=strategy, keep_last=keep_last)
        )

    async def asweep(
        self,
        older_than: dt.timedelta,
        *,
        strategy: str = "delete",
        keep_last: int = 1,
        batch_size: int = 100,
        progress: Callable[[SweepReport], None] | None = None,
    ) -> SweepReport:
        return await asyncio.to_thread(
            lambda: self.sweep(
                older_than,
                strategy=strategy,
                keep_last=keep_last,
                batch_size=batch_size,
                progress=progress,
            )
        )

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )

    async def areencrypt(
        self,
        *,
        batch_size: int = 500,
        source: SerializerProtocol | None = None,
        progress: Callable[[RotationReport], None] | None = None,
    ) -> RotationReport:
        return await asyncio.to_thread(
            lambda: self.reencrypt(batch_size=batch_size, source=source, progress=progress)
        )
