"""What the sync and async savers share: construction, versions, serde handling."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol, maybe_add_typed_methods
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine

from lg_sqla.checkpoint.context import (
    DEFAULT_LIST_PAGE_SIZE,
    Context,
    check_page_size,
    checked_migrations,
    next_version,
)
from lg_sqla.checkpoint.policy import CheckpointTTL, Policy, policy_from, positive_minutes
from lg_sqla.dialects import DialectOps, ops_for
from lg_sqla.engines import configure_engine, driver_hint, engine_options, in_schema, saver_url
from lg_sqla.errors import InvalidInputError, ReadOnlyError
from lg_sqla.plans import Plan
from lg_sqla.runtime import Runtime
from lg_sqla.runtime.bound import bound_view, refuse_on_view
from lg_sqla.runtime.retry import DEFAULT_RECONNECT_WINDOW_S
from lg_sqla.runtime.timeouts import check_driver
from lg_sqla.serde import with_msgpack_allowlist
from lg_sqla.shared import utc_now

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from lg_sqla.checkpoint.maintenance import SweepReport
    from lg_sqla.checkpoint.operations import Pages
    from lg_sqla.checkpoint.state_migrations import StateMigrations
    from lg_sqla.checkpoint.ttl_sweep import ApplyReport

# The engine a saver runs on, and what its ``from_conn_string`` returns: a context
# manager (sync saver) or an async one (async saver) of the saver.
EngineT = TypeVar("EngineT", Engine, AsyncEngine)
OpenedT = TypeVar("OpenedT")


class SaverBase(BaseCheckpointSaver[str], Generic[EngineT, OpenedT]):
    """State and helpers common to SQLAlchemySaver and AsyncSQLAlchemySaver: their
    constructor and ``from_conn_string`` are this class's (the arguments are
    documented on each saver's class)."""

    engine: EngineT
    dialect_ops: DialectOps
    list_page_size: int

    def __init__(
        self,
        engine: EngineT,
        *,
        serde: SerializerProtocol | None = None,
        list_page_size: int = DEFAULT_LIST_PAGE_SIZE,
        check_schema: bool = True,
        schema: str | None = None,
        direct_path: bool = True,
        read_only: bool = False,
        ttl: CheckpointTTL | None = None,
        reconnect_window: float = DEFAULT_RECONNECT_WINDOW_S,
        call_timeout: float | None = None,
        state_migrations: StateMigrations | None = None,
        keep_connection: bool = False,
    ) -> None:
        # First: a bad policy is refused before anything else is set up.
        self.retention: Policy | None = policy_from(ttl)
        dialect_ops = ops_for(engine.dialect)
        self.state_migrations = checked_migrations(state_migrations, dialect_ops)
        self.ttl_config = ttl
        # Reads check expiry unless the policy only prunes on write (keep_last alone):
        # with no policy, and in that case, a read costs what it did.
        self._expiry: Policy | None = self.retention
        if self.retention is not None and set(ttl or ()) == {"keep_last"}:
            self._expiry = None
        # refresh_on_read is a write: never on a read-only saver.
        self._refresh = bool(self.retention and self.retention.refresh_on_read and not read_only)
        BaseCheckpointSaver.__init__(self, serde=serde)
        check_page_size(list_page_size)
        self.dialect_ops = dialect_ops
        self._runtime = Runtime(
            dialect_ops,
            check_schema=check_schema,
            direct_path=direct_path,
            keep_connection=keep_connection,
            reconnect_window=reconnect_window,
            call_timeout=call_timeout,
        )
        check_driver(engine.dialect, self._runtime.call_timeout)
        self.list_page_size = list_page_size
        self.read_only = read_only
        self._on_sweep: Callable[[SweepReport], None] | None = None
        self.schema = schema
        self.engine = in_schema(engine, schema)
        self._set_up_face()

    def _set_up_face(self) -> None:
        """What the sync or the async saver adds to a new saver (its TTL sweeper)."""
        raise NotImplementedError

    @classmethod
    def from_conn_string(
        cls,
        url: str,
        *,
        serde: SerializerProtocol | None = None,
        list_page_size: int = DEFAULT_LIST_PAGE_SIZE,
        schema: str | None = None,
        direct_path: bool = True,
        read_only: bool = False,
        ttl: CheckpointTTL | None = None,
        reconnect_window: float = DEFAULT_RECONNECT_WINDOW_S,
        call_timeout: float | None = None,
        state_migrations: StateMigrations | None = None,
        **engine_kwargs: Any,
    ) -> OpenedT:
        """Open a saver on a database URL: ``with SQLAlchemySaver.from_conn_string(url)
        as saver`` (``async with`` for ``AsyncSQLAlchemySaver``). On exit the TTL sweeper
        is stopped and the engine disposed.

        Args:
            url: A SQLAlchemy URL, e.g. ``sqlite:///checkpoints.sqlite``,
                ``postgresql+psycopg://user:pw@host/db``, ``mysql+pymysql://user:pw@host/db``
                (async: ``sqlite+aiosqlite:///checkpoints.sqlite``,
                ``mysql+asyncmy://user:pw@host/db``).
            serde, list_page_size, schema, direct_path, read_only, ttl,
                reconnect_window, call_timeout, state_migrations: See the saver's class
                docstring.
            **engine_kwargs: Passed to ``sqlalchemy.create_engine`` (``pool_size``,
                ``pool_pre_ping``, ``connect_args``, ...); async: to
                ``create_async_engine`` (and, for a SQLite file, to the
                ``create_engine`` of the pysqlite engine the saver runs its
                checkpointer calls on, one worker thread per call).

        A URL without a driver gets lg_sqla's (``postgres://`` and ``postgresql://``:
        psycopg 3; ``mysql://``: PyMySQL, async: asyncmy; ``sqlite://`` async:
        aiosqlite). A driver that is not installed raises ``MissingDriverError``
        naming the extra to install.
        """

        def saver(engine: EngineT, keep_connection: bool) -> Any:
            return cls(
                engine,
                serde=serde,
                list_page_size=list_page_size,
                schema=schema,
                direct_path=direct_path,
                read_only=read_only,
                ttl=ttl,
                reconnect_window=reconnect_window,
                call_timeout=call_timeout,
                state_migrations=state_migrations,
                keep_connection=keep_connection,
            )

        url = saver_url(url, is_async=cls._is_async)
        with driver_hint(url):
            engine = configure_engine(cls._new_engine(url, **engine_options(url, engine_kwargs)))
        return cls._opened(engine, url, engine_kwargs, saver)

    _is_async: bool
    _new_engine: Callable[..., EngineT]  # create_engine or create_async_engine
    # The saver's: from_conn_string's context manager, ``saver(engine, keep_connection)``
    # on ``engine`` (made from ``url`` and ``engine_kwargs``), both closed on exit.
    _opened: Callable[..., OpenedT]

    @property
    def context(self) -> Context:
        """What this saver's plans need (dialect, serializer), for ``run``/``arun``."""
        # Built again when the serializer changed: `with_allowlist` clones carry
        # another serde (and a copy of this attribute).
        context: Context | None = self.__dict__.get("_context")
        if context is None or context.serde is not self.serde:
            stamp = None if self.retention is None else self.retention.default_ttl
            state = self.state_migrations
            context = self._context = Context(
                self.dialect_ops,
                self.serde,
                self._first_version,
                stamp,
                state,
                None if state is None else state.head,
            )
        return context

    def _pages(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Pages:
        """``list``'s pages of this saver's size, filtered in SQL where the dialect can."""
        from lg_sqla.checkpoint.operations import list_pages

        return list_pages(
            config,
            filter=filter,
            before=before,
            limit=limit,
            page_size=self.list_page_size,
            filter_in_sql=self.dialect_ops.filters_metadata_in_sql,
        )

    def release_connections(self) -> None:
        """Give the connection kept between calls (``keep_connection``) back to its
        pool; call it before you dispose the engine (a later call keeps one again)."""
        self._runtime.release_connections()

    def _writing(self, call: str) -> None:
        """Refuse ``call`` on a read-only saver, before anything reaches the database."""
        if self.read_only:
            raise ReadOnlyError(
                f"{call}: this saver was opened read_only=True (for a replica: inspection, "
                "dashboards, history); run graphs and maintenance on a saver of the primary"
            )

    def _bound_copy(self, binding: object) -> Any:
        """A shallow clone whose calls run on ``binding`` (``runtime.bound``): the same
        runtime, serializer and policy; only where its statements run differs."""
        return bound_view(self, binding)

    def _not_bound(self, call: str) -> None:
        """Refuse ``call`` on a bound view: it would need a connection of its own."""
        refuse_on_view(self, call, "saver")

    def _keep_last(self) -> int | None:
        return None if self.retention is None else self.retention.keep_last

    def _policy(self) -> Policy:
        """The policy a TTL call works under; a saver without one has per-thread TTLs only."""
        return self.retention or Policy()

    def _ttl_sweep(
        self,
        batch_size: int,
        progress: Callable[[SweepReport], None] | None,
        dry_run: bool,
        now: dt.datetime | None,
    ) -> Callable[[], Plan[SweepReport]]:
        """The TTL sweep's plan source: the stored expiries decide; this saver's
        policy gives only max_run (a run in progress is kept)."""
        from lg_sqla.checkpoint import ttl_sweep

        max_run = self._policy().max_run
        return lambda: ttl_sweep.sweep(
            self.context, max_run, batch_size, progress, dry_run=dry_run, now=now
        )

    def _apply_ttl(
        self,
        ttl_minutes: float,
        replace_existing: bool,
        idle_for: dt.timedelta | None,
        batch_size: int,
        dry_run: bool,
    ) -> Callable[[], Plan[ApplyReport]]:
        from lg_sqla.checkpoint import ttl_sweep

        if not dry_run:
            self._writing("set_threads_ttl")
        if idle_for is not None and (
            not isinstance(idle_for, dt.timedelta) or idle_for < dt.timedelta(0)
        ):
            raise InvalidInputError(f"idle_for must be a non-negative timedelta, got {idle_for!r}")
        idle_since = None if idle_for is None else utc_now() - idle_for
        return lambda: ttl_sweep.set_threads_ttl(
            self.context,
            ttl_minutes,
            replace_existing=replace_existing,
            idle_since=idle_since,
            batch_size=batch_size,
            dry_run=dry_run,
        )

    def _sweep_minutes(self, minutes: float | None) -> float:
        if minutes is None:
            return self._policy().sweep_interval_minutes
        return positive_minutes("sweep_interval_minutes", minutes)

    def get_next_version(self, current: str | None, channel: None = None) -> str:
        return next_version(current)

    def _first_version(self) -> str:
        return self.get_next_version(None, None)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> Any:
        """A shallow clone whose serializer also allows these msgpack types.

        Unlike the base class, this reaches through lg_sqla's encrypting and
        compressing serializers to the JsonPlusSerializer inside them.
        """
        serde = with_msgpack_allowlist(self.serde, tuple(extra_allowlist))
        if serde is self.serde:
            return self
        clone = copy.copy(self)
        clone.serde = maybe_add_typed_methods(serde)
        return clone
