"""The asynchronous saver: the same operations as saver.py, run on an AsyncEngine."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, create_async_engine

from lg_sqla import migrate
from lg_sqla.checkpoint import calls, maintenance, operations, retention, rotation
from lg_sqla.checkpoint.base import SaverBase
from lg_sqla.checkpoint.maintenance import SweepReport
from lg_sqla.checkpoint.retention import ThreadTTL
from lg_sqla.checkpoint.rotation import RotationReport
from lg_sqla.checkpoint.twins import (
    aiterates_on_engine,
    aruns_on_engine,
    async_bridged,
    iterated_on_loop,
    on_loop,
)
from lg_sqla.engines import (
    configure_engine,
    engine_options,
    in_schema,
    threaded_sqlite_url,
)
from lg_sqla.models import CheckpointRow
from lg_sqla.plans import PlanSource, T
from lg_sqla.runtime.bound import AsyncBinding
from lg_sqla.runtime.kept import keeps_connections
from lg_sqla.runtime.owning import aowned
from lg_sqla.runtime.workers import in_worker_thread
from lg_sqla.sweeper import TaskSweeper


@async_bridged
class AsyncSQLAlchemySaver(
    SaverBase[AsyncEngine, AbstractAsyncContextManager["AsyncSQLAlchemySaver"]]
):
    """A LangGraph checkpointer on any SQLAlchemy database (async engine).

    Drivers: ``sqlite+aiosqlite``, ``postgresql+psycopg`` (psycopg 3 async),
    ``mysql+asyncmy``. Every call runs in one transaction from the engine's
    pool; there is no saver-wide lock.

    The sync methods (``get_tuple``, ``put``, ...) work from *other* threads
    while the saver's event loop runs (as LangGraph's own async savers do);
    calling them on the loop's thread raises instead of deadlocking.

    Args:
        engine: A SQLAlchemy ``AsyncEngine``; never disposed by the saver.
        serde: Serializer of channel values and writes.
        list_page_size: ``alist`` fetches this many checkpoints per statement.
        check_schema: Verify on first use that the schema is at the latest migration.
        schema: Keep the tables in this PostgreSQL schema or MySQL/MariaDB database.
        direct_path: See ``SQLAlchemySaver``.
        read_only: See ``SQLAlchemySaver``: reads only, for a replica.
        ttl: A retention policy; see ``SQLAlchemySaver``. The sweeper is a task of
            the saver's loop (``start_ttl_sweeper``).
        reconnect_window: Seconds a call waits for a database that went away (a
            failover, a restart), reconnecting where that is safe; see
            ``SQLAlchemySaver``. Default 30.
        call_timeout: Seconds a call may wait on its connection before lg_sqla cuts
            it (``CallTimeoutError``); see ``SQLAlchemySaver``. Default None: no limit.
            psycopg only (of the async drivers).
        state_migrations: The application's state revisions; see ``SQLAlchemySaver``.
        keep_connection: See ``SQLAlchemySaver``; of the async drivers, psycopg keeps
            one (``from_conn_string`` sets it); it applies to the pysqlite engine
            ``from_conn_string`` runs a SQLite file's calls on too.

    Example:
        >>> async with AsyncSQLAlchemySaver.from_conn_string(
        ...     "postgresql+psycopg://user:pw@localhost/app"
        ... ) as saver:
        ...     await saver.setup()
        ...     graph = builder.compile(checkpointer=saver)
    """

    # Set on the views bound() returns (runtime.bound); None: calls run on the engine.
    _binding: AsyncBinding | None = None

    def _set_up_face(self) -> None:
        self._sweeper = TaskSweeper("lg_sqla-checkpoint-ttl-sweeper", self._sweep_once)
        # A sync engine on the same SQLite file, owned by from_conn_string (see _run).
        self._threaded: Engine | None = None
        try:
            self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self.loop = None

    _is_async = True
    _new_engine = staticmethod(create_async_engine)

    @staticmethod
    @asynccontextmanager
    async def _opened(
        engine: AsyncEngine,
        url: str,
        engine_kwargs: dict[str, Any],
        saver: Callable[[AsyncEngine, bool], AsyncSQLAlchemySaver],
    ) -> AsyncIterator[AsyncSQLAlchemySaver]:
        sync_url = threaded_sqlite_url(url)

        def attach(opened: AsyncSQLAlchemySaver, sync_engine: Engine) -> None:
            opened._threaded = in_schema(sync_engine, opened.schema)

        async with aowned(
            engine,
            # keep_connection: its engines are the saver's alone (kept: a SQLite file's
            # pysqlite engine, and psycopg's; elsewhere nothing to ask per call).
            lambda owned_engine: saver(
                owned_engine, sync_url is not None or keeps_connections(owned_engine.sync_engine)
            ),
            _threaded_engine(sync_url, engine_kwargs),
            attach,
        ) as opened:
            yield opened

    # --- plumbing ------------------------------------------------------------

    async def arun(self, source: PlanSource[T]) -> T:
        """Run one of lg_sqla's plans on this saver's engine; see ``SQLAlchemySaver.run``.
        It may call user code (maintenance's progress callbacks; any plan of yours), so
        it runs on the event loop's thread."""
        if self._binding is not None:
            return await self._binding.run(source)
        return await self._runtime.arun(self.engine, source)

    def _checkpointer_call(self, source: PlanSource[T]) -> Awaitable[T]:
        """One of LangGraph's checkpointer calls (``aget_tuple``, ``alist``'s pages,
        ``aput``, ``aput_writes``, ``adelete_thread``, the delta history), which call no
        user code: on a SQLite file opened by ``from_conn_string`` it runs whole on the
        pysqlite engine in one of lg_sqla's worker threads (``runtime.workers``). Each is
        idempotent (``runtime.retry``), so it may run again after an unknown outcome.
        What to await at once (not a coroutine function: one frame less per call)."""
        if self._binding is not None:
            return self._binding.run(source)
        if self._threaded is not None:
            return in_worker_thread(
                partial(self._runtime.run, self._threaded, source, idempotent=True)
            )
        return self._runtime.arun(self.engine, source, idempotent=True)

    def bound(self, target: AsyncConnection | AsyncSession) -> AsyncSQLAlchemySaver:
        """This saver's calls on your ``AsyncConnection`` or ``AsyncSession``, inside your
        transaction; see ``SQLAlchemySaver.bound`` (docs/application.md).

        Example:
            >>> async with AsyncSession(engine) as session, session.begin():
            ...     await session.delete(conversation)
            ...     await saver.bound(session).adelete_thread(conversation.thread_id)
        """
        view = cast(
            AsyncSQLAlchemySaver,
            self._bound_copy(AsyncBinding(target, self._runtime, self.engine, CheckpointRow)),
        )
        with contextlib.suppress(RuntimeError):  # (its sync methods: the loop it is bound on)
            view.loop = asyncio.get_running_loop()
        return view

    async def setup(self) -> None:
        """Create or upgrade lg_sqla's tables (``alembic upgrade head``); concurrency-safe.
        Read-only savers only check the schema."""
        self._not_bound("setup")
        await migrate.aset_up(self.engine, read_only=self.read_only)
        await self._runtime.alearn(self.engine)
        self._runtime.set_up(self.engine.sync_engine)

    # --- the checkpointer contract ----------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint tuple (one statement): ``checkpoint_id``'s, else the latest."""
        if self._expiry is not None:  # a TTL policy: the expiry check, same transaction
            policy, refresh = self._expiry, self._refresh
            return await self.arun(
                lambda: retention.get_tuple(self.context, config, policy, refresh)
            )
        return await self._checkpointer_call(lambda: operations.get_tuple(self.context, config))

    alist = aiterates_on_engine(calls.list_, "AsyncIterator[CheckpointTuple]")

    aput = aruns_on_engine(calls.put)

    aput_writes = aruns_on_engine(calls.put_writes)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, write and blob of a thread, in one transaction; a call
        in flight meanwhile leaves nothing or a complete checkpoint (see
        ``SQLAlchemySaver.delete_thread``)."""
        self._writing("adelete_thread")
        await self._checkpointer_call(lambda: operations.delete_thread(self.context, thread_id))

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """Writes and seed per DeltaChannel, in one statement; see the sync saver."""
        if not channels:
            return {}
        if self.state_migrations is not None:
            # See the sync saver: ancestors at older state revisions, read migrated.
            return await super().aget_delta_channel_history(config=config, channels=channels)
        return await self._checkpointer_call(
            lambda: operations.delta_history(self.context, config, channels)
        )

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete checkpoints of these runs, their writes and orphan blobs; see the sync saver."""
        self._writing("adelete_for_runs")
        await self.arun(lambda: maintenance.delete_for_runs(self.context, list(run_ids)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's whole history to a new thread; see ``SQLAlchemySaver.copy_thread``."""
        self._writing("acopy_thread")
        await self.arun(
            lambda: maintenance.copy_thread(self.context, source_thread_id, target_thread_id)
        )

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest", keep_last: int = 1
    ) -> None:
        """Prune threads (DeltaChannel safe); see ``SQLAlchemySaver.prune``."""
        self._writing("aprune")
        await self.arun(
            lambda: maintenance.prune(self.context, list(thread_ids), strategy, keep_last)
        )

    asweep = aruns_on_engine(calls.sweep)

    async def areencrypt(
        self,
        *,
        batch_size: int = 500,
        source: SerializerProtocol | None = None,
        progress: Callable[[RotationReport], None] | None = None,
    ) -> RotationReport:
        """Rewrite stored values into the current serializer form; see the sync saver."""
        self._writing("areencrypt")
        return await self.arun(
            lambda: rotation.reencrypt(
                self.context, batch_size=batch_size, source=source, progress=progress
            )
        )

    # --- retention by policy: TTLs, pins, the TTL sweeper ---------------------------

    async def _alisted(
        self, pages: operations.Pages, refresh: bool
    ) -> AsyncIterator[CheckpointTuple]:
        """``alist``'s walk of its pages (``calls.list_``), one transaction each; with a
        TTL policy, each listed thread's expiry asked once."""
        seen: dict[str, bool] = {}
        while (query := pages.next_query()) is not None:
            page = await self._checkpointer_call(lambda: operations.load_page(self.context, query))
            for item in pages.advance(page):
                if self._expiry is not None:
                    thread_id = item.config["configurable"]["thread_id"]
                    if thread_id not in seen:
                        seen[thread_id] = await self._is_visible(thread_id, refresh)
                    if not seen[thread_id]:
                        continue
                yield item

    async def _is_visible(self, thread_id: str, refresh: bool) -> bool:
        policy = self._expiry
        assert policy is not None
        return await self.arun(
            lambda: retention.visible(self.context, thread_id, policy, refresh=refresh)
        )

    async def athread_ttl(self, thread_id: str) -> ThreadTTL:
        """A thread's TTL report; see ``SQLAlchemySaver.thread_ttl``."""
        policy = self._policy()
        return await self.arun(lambda: retention.describe(thread_id, policy))

    async def aset_thread_ttl(self, thread_id: str, ttl_minutes: float | None) -> ThreadTTL:
        """Give a thread a TTL of its own (None: the default); see the sync saver."""
        self._writing("aset_thread_ttl")
        retention.check_ttl_minutes(ttl_minutes)
        await self.arun(
            lambda: retention.set_thread(self.context, thread_id, ttl_minutes=ttl_minutes)
        )
        return await self.athread_ttl(thread_id)

    async def apin_thread(self, thread_id: str, pinned: bool = True) -> ThreadTTL:
        """Pin a thread (it never expires), or unpin it with ``pinned=False``."""
        self._writing("apin_thread")
        await self.arun(lambda: retention.set_thread(self.context, thread_id, pinned=pinned))
        return await self.athread_ttl(thread_id)

    async def aunpin_thread(self, thread_id: str) -> ThreadTTL:
        """Unpin a thread: its TTL applies again, from its last write."""
        return await self.apin_thread(thread_id, False)

    asweep_ttl = aruns_on_engine(calls.sweep_ttl)

    aset_threads_ttl = aruns_on_engine(calls.set_threads_ttl)

    async def _sweep_once(self) -> str:
        """One pass of the background sweeper; what it removed, for the debug log."""
        report = await self.asweep_ttl()
        if self._on_sweep is not None:
            self._on_sweep(report)
        return f"{report.removed.threads} thread(s), {report.pinned_skipped} pinned kept"

    async def start_ttl_sweeper(
        self,
        sweep_interval_minutes: float | None = None,
        *,
        on_pass: Callable[[SweepReport], None] | None = None,
    ) -> asyncio.Task[None]:
        """Run ``asweep_ttl`` every interval (default: the policy's, else 5 minutes) in a
        task of the running loop until :meth:`stop_ttl_sweeper` (``from_conn_string``
        stops it on exit); ``on_pass`` is called with each pass's report."""
        self._writing("start_ttl_sweeper")
        self._not_bound("start_ttl_sweeper")
        self._on_sweep = on_pass
        return self._sweeper.start(self._sweep_minutes(sweep_interval_minutes))

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper task (a sweep under way finishes first); True when it ended,
        or none was running."""
        return await self._sweeper.stop(timeout)

    # --- sync methods: run on the saver's loop from another thread ------------------

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self.loop
        if loop is None or loop.is_closed():
            coro.close()
            raise RuntimeError(
                "AsyncSQLAlchemySaver's sync methods need the event loop the saver was "
                "created on; create it inside `async with` / a running loop, "
                "or use SQLAlchemySaver for sync code"
            )
        try:
            if asyncio.get_running_loop() is loop:
                coro.close()
                raise asyncio.InvalidStateError(
                    "synchronous calls to AsyncSQLAlchemySaver are only allowed from a "
                    "different thread than the event loop; from async code, use the "
                    "`a`-prefixed methods (e.g. `await saver.aget_tuple(...)`)"
                )
        except RuntimeError:
            pass
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def run(self, source: PlanSource[T]) -> T:
        return self._on_loop(self.arun(source))

    list = iterated_on_loop(alist)
    get_tuple = on_loop(aget_tuple)
    put = on_loop(aput)
    put_writes = on_loop(aput_writes)
    delete_thread = on_loop(adelete_thread)
    delete_for_runs = on_loop(adelete_for_runs)
    copy_thread = on_loop(acopy_thread)
    prune = on_loop(aprune)
    sweep = on_loop(asweep)
    thread_ttl = on_loop(athread_ttl)
    set_thread_ttl = on_loop(aset_thread_ttl)
    pin_thread = on_loop(apin_thread)
    unpin_thread = on_loop(aunpin_thread)
    sweep_ttl = on_loop(asweep_ttl)
    set_threads_ttl = on_loop(aset_threads_ttl)
    get_delta_channel_history = on_loop(aget_delta_channel_history)
    reencrypt = on_loop(areencrypt)


def _threaded_engine(
    sync_url: str | None, engine_kwargs: dict[str, Any]
) -> Callable[[], Engine | None]:
    """What makes the pysqlite engine a SQLite file's checkpointer calls run on, in a
    worker thread each (``from_conn_string``; None: not a SQLite file)."""

    def threaded() -> Engine | None:
        if sync_url is None:
            return None
        return configure_engine(create_engine(sync_url, **engine_options(sync_url, engine_kwargs)))

    return threaded
