"""LangGraph's ``BaseStore`` (long-term memory) on any SQLAlchemy database.

:class:`SQLAlchemyStore` runs on a sync ``Engine``, :class:`AsyncSQLAlchemyStore`
on an ``AsyncEngine``; both run the same I/O-free batch plan (``_plan.py`` and its
parts), in one transaction and a constant number of statements per batch. Tables come
from lg_sqla's own migrations (revision ``0002_store_cache``): ``setup()`` creates them.
See docs/store.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from functools import partial
from typing import Any, Generic, Literal, NamedTuple, TypeAlias, TypeVar, cast

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import ensure_embeddings
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from lg_sqla import internals, migrate
from lg_sqla.dialects import AnnIndex, ops_for, sqlite_vec_engine_options, store_sql_for
from lg_sqla.engines import configure_engine, engine_options, in_schema, threaded_sqlite_url
from lg_sqla.errors import InvalidInputError, ReadOnlyError
from lg_sqla.models import StoreItemRow
from lg_sqla.plans import Plan, T, declared_prebuilt
from lg_sqla.runtime import Runtime
from lg_sqla.runtime.bound import AsyncBinding, Binding, bound_view, refuse_on_view
from lg_sqla.runtime.kept import keeps_connections
from lg_sqla.runtime.owning import aowned, owned
from lg_sqla.runtime.retry import DEFAULT_RECONNECT_WINDOW_S
from lg_sqla.runtime.timeouts import check_driver
from lg_sqla.runtime.workers import in_worker_thread
from lg_sqla.shared import utc_now
from lg_sqla.store._common import Embedded, NativeVectors, Settings, Statements
from lg_sqla.store._gather import Gatherers
from lg_sqla.store._lane import (
    lone_get_plan,
    lone_plan_of,
    lone_put_plan,
    named,
    put_lane_open,
    takes_put_lane,
    undeclared,
)
from lg_sqla.store._plan import batch_plan
from lg_sqla.store._read import FIXED_KEYS_MAX, get_statement
from lg_sqla.store._validate import check_key, check_op, check_put_values
from lg_sqla.store._vectors import ann_index_of, distance_of
from lg_sqla.store._write import effective_puts, sweep_plan, texts_to_embed
from lg_sqla.sweeper import TaskSweeper, ThreadSweeper

__all__ = ["AsyncSQLAlchemyStore", "SQLAlchemyStore"]

EngineT = TypeVar("EngineT", Engine, AsyncEngine)
StoreT = TypeVar("StoreT", bound="_StoreBase[Any, Any]")
OpenedT = TypeVar("OpenedT")  # from_conn_string's: a sync or async context manager


@dataclasses.dataclass(frozen=True)
class _Opening:
    """What ``from_conn_string`` was given, for its face's ``_opened``."""

    url: str
    index: IndexConfig | None
    schema: str | None
    engine_kwargs: dict[str, Any]
    # made(keep_connection)(owned_engine): the store on the engine it owns.
    made: Callable[[bool], Callable[[Any], Any]]


# The vectors of a batch's documents and of its queries, from the index's embeddings.
Vectors: TypeAlias = tuple[Sequence[Sequence[float]], Sequence[Sequence[float]]]


def _read_only(op: Op) -> Op:
    """``op`` as a read-only store runs it: a put is refused, a read refreshes no TTL."""
    if isinstance(op, PutOp):
        raise ReadOnlyError(
            f"put {op.namespace!r}/{op.key!r}: this store was opened read_only=True "
            "(for a replica); write through a store of the primary"
        )
    if isinstance(op, (GetOp, SearchOp)) and op.refresh_ttl:
        return op._replace(refresh_ttl=False)
    return op


class _StoreBase(BaseStore, Generic[EngineT, OpenedT]):
    """Configuration shared by the sync and async stores (``EngineT``: the engine of
    their face), and their constructor (its arguments: ``SQLAlchemyStore``)."""

    supports_ttl = True

    def __init__(
        self,
        engine: EngineT,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        check_schema: bool = True,
        schema: str | None = None,
        direct_path: bool = True,
        read_only: bool = False,
        keep_connection: bool = False,
        reconnect_window: float = DEFAULT_RECONNECT_WINDOW_S,
        call_timeout: float | None = None,
    ) -> None:
        self._runtime = Runtime(
            ops_for(engine.dialect),
            check_schema=check_schema,
            direct_path=direct_path,
            keep_connection=keep_connection,
            reconnect_window=reconnect_window,
            call_timeout=call_timeout,
        )
        check_driver(engine.dialect, self._runtime.call_timeout)
        self._configure(engine, index, ttl, read_only)
        self.engine: EngineT = in_schema(engine, schema)
        self._set_up_face()

    def _set_up_face(self) -> None:
        """What the sync or the async face adds: its sweeper and its gathering."""
        raise NotImplementedError

    @classmethod
    def from_conn_string(
        cls,
        url: str,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        schema: str | None = None,
        direct_path: bool = True,
        read_only: bool = False,
        reconnect_window: float = DEFAULT_RECONNECT_WINDOW_S,
        call_timeout: float | None = None,
        **engine_kwargs: Any,
    ) -> OpenedT:
        """Open a store on a database URL: ``with SQLAlchemyStore.from_conn_string(url)
        as store`` (``async with`` for ``AsyncSQLAlchemyStore``); on exit the TTL sweeper
        is stopped and the engine disposed. ``engine_kwargs`` go to
        ``sqlalchemy.create_engine`` (async: to ``create_async_engine``, and on a SQLite
        file to the pysqlite engine of the same file its batches run on)."""
        options: dict[str, Any] = {
            "index": index,
            "ttl": ttl,
            "schema": schema,
            "direct_path": direct_path,
            "read_only": read_only,
            "reconnect_window": reconnect_window,
            "call_timeout": call_timeout,
        }

        def made(keep_connection: bool) -> Callable[[Any], Any]:
            return lambda owned_engine: cls(
                owned_engine, keep_connection=keep_connection, **options
            )

        return cls._opened(_Opening(url, index, schema, engine_kwargs, made))

    # The face's: from_conn_string's context manager (``made(keep_connection)`` makes the
    # store on the engine it owns).
    _opened: Callable[..., OpenedT]

    def _configure(
        self,
        engine: Engine | AsyncEngine,
        index: IndexConfig | None,
        ttl: TTLConfig | None,
        read_only: bool,
    ) -> None:
        self.read_only = read_only
        # The dialect's object (lg_sqla.dialects), not a batch's ops (LangGraph's Op).
        self.dialect_ops = self._runtime.dialect_ops
        self.sql = store_sql_for(self.dialect_ops)
        self.ttl_config = ttl
        self.index_config = index
        self.embeddings = None
        self._fields: list[str] = ["$"]
        self._distance = "cosine"
        self._ann: AnnIndex | None = None
        if index is not None:
            if not isinstance(index.get("dims"), int) or index["dims"] < 1:
                raise InvalidInputError(
                    f"index dims must be an int >= 1, got {index.get('dims')!r}"
                )
            if "embed" not in index:
                raise InvalidInputError("index needs 'embed': an Embeddings or a function")
            self.embeddings = ensure_embeddings(index["embed"])
            self._fields = list(index.get("fields") or ["$"])
            self._distance = distance_of(index)
            self._ann = ann_index_of(index, self.sql, engine.dialect.name)
        # Whether searches rank in SQL (sqlite-vec, pgvector) or in Python (docs/store.md):
        # known now from the driver, or None: asked on the first ranking search.
        sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
        self._sync_dialect = sync_engine.dialect
        # A distance the native path has no function for ranks in Python.
        native = index is not None and self._distance in self.sql.native_distances
        self._native_vectors = self.sql.native_vectors(sync_engine) if native else False
        if ttl is not None:
            for name in ("default_ttl", "sweep_interval_minutes"):
                value = ttl.get(name)
                if value is not None and (not isinstance(value, (int, float)) or value <= 0):
                    raise InvalidInputError(f"ttl {name} must be a positive number, got {value!r}")

    @property
    def _settings(self) -> Settings:
        # Built once (a get is ~100 µs on SQLite: every µs of bookkeeping shows).
        settings: Settings | None = self.__dict__.get("_settings_once")
        if settings is None:
            settings = Settings(
                self.dialect_ops,
                self.sql,
                indexed=self.embeddings is not None,
                native_vectors=NativeVectors(self._native_vectors),
                dims=self.index_config["dims"] if self.index_config else 0,
                distance=self._distance,
                ann=self._ann,
                fields=len(self._fields),
                statements=Statements(kept=self._statement_kept),
            )
            self.__dict__["_settings_once"] = settings
        return settings

    def _statement_kept(self, statement: Any, kept: bool) -> None:
        """The store's statements by shape (searches, namespace lists) count as cached
        while its LRU keeps them (a lone search may take the direct path); what the LRU
        drops is forgotten by the direct path's compiler too, so both stay bounded."""
        self.dialect_ops.hold(statement, kept)
        if not kept:
            self._runtime.forget(statement)

    def release_connections(self) -> None:
        """Give the connection kept between calls (``keep_connection``) back to its
        pool; call it before you dispose the engine (a later call keeps one again)."""
        self._runtime.release_connections()

    @property
    def native_vectors(self) -> bool | None:
        """Whether searches with ``query`` rank in SQL (sqlite-vec, pgvector) rather than
        in Python; None until the first such search asked the database (PostgreSQL)."""
        return self._settings.native_vectors.known

    def _vectors_set_up(self, connection: Connection) -> None:
        """After ``setup()``: what native ranking needs (pgvector), the approximate
        index if configured, and ask again."""
        if self.index_config is not None:
            self.sql.vector_setup(connection)
            if self._ann is not None:
                self.sql.ann_setup(connection, self._ann, self._distance, self.index_config["dims"])
            if self._native_vectors is None:
                self._settings.native_vectors.known = None

    @staticmethod
    def _checked(ops: Iterable[Op]) -> list[Op]:
        """Validate every op (nothing runs if one is bad)."""
        ops = list(ops)
        for op in ops:
            check_op(op)
        return ops

    def _prepare(self, ops: list[Op]) -> tuple[list[Op], list[tuple[Any, ...]], list[str]]:
        """Validated ops as the store runs them, and what to embed."""
        if self.read_only:
            ops = [_read_only(op) for op in ops]
        if self.embeddings is None:
            return ops, [], []
        documents = texts_to_embed(effective_puts(ops).values(), self._fields)
        queries = sorted({op.query for op in ops if isinstance(op, SearchOp) and op.query})
        return ops, documents, queries

    def _embedded(
        self,
        documents: Sequence[tuple[Any, ...]],
        queries: Sequence[str],
        doc_vectors: Sequence[Sequence[float]],
        query_vectors: Sequence[Sequence[float]],
    ) -> Embedded:
        """The batch's vectors, of ``documents`` and of ``queries``, their dimensions
        checked, as the plan takes them."""
        assert self.index_config is not None
        dims = self.index_config["dims"] if self.index_config else 0
        for vector in [*doc_vectors, *query_vectors]:
            if len(vector) != dims:
                raise InvalidInputError(
                    f"the embedding function returned {len(vector)} dimensions; "
                    f"index dims is {dims}"
                )
        embedded = Embedded(queries=dict(zip(queries, map(list, query_vectors), strict=True)))
        for (namespace, key, path, _), vector in zip(documents, doc_vectors, strict=True):
            embedded.documents.setdefault((namespace, key), []).append((path, list(vector)))
        return embedded

    def _writing(self, call: str) -> None:
        if self.read_only:
            raise ReadOnlyError(
                f"{call}: this store was opened read_only=True (for a replica); "
                "write through a store of the primary"
            )

    def _plan_of(
        self, ops: Sequence[Op], embedded: Embedded
    ) -> tuple[Callable[[], Plan[list[Result]]], bool]:
        """The plan factory of a batch of prepared ops, stamped now, and whether it
        writes. A lone get, and a lone put of one statement, take the lean lanes
        (``_lane.py``: the same statements, less bookkeeping). Declared prebuilt
        (``plans.declared_prebuilt``) when ``_kind`` finds it so: whether it is depends
        on the ops and the store's index."""
        settings, now = self._settings, utc_now()
        prebuilt, writes = self._kind(ops)
        if len(ops) == 1 and (
            type(ops[0]) is GetOp or (type(ops[0]) is PutOp and takes_put_lane(settings, ops[0]))
        ):
            lone = lone_plan_of(settings, ops[0], now)  # (declared prebuilt)
            return (lone if prebuilt else lambda: undeclared(lone())), writes
        if prebuilt:
            return lambda: declared_prebuilt(batch_plan(settings, ops, embedded, now)), writes
        return lambda: batch_plan(settings, ops, embedded, now), writes

    def _kind(self, ops: Sequence[Op]) -> tuple[bool, bool]:
        """(prebuilt: every statement the batch will run is cached and compiles for
        the direct path, so that it may take it; writes: the batch has a put).

        Cached: a store without an index (its vector statements are built per batch);
        each search and namespace list by shape in the store's LRU. Compiles: gets of
        up to ``FIXED_KEYS_MAX`` keys take a statement of that many keys; the
        statements of more keys, and deletes, take the expanding ``IN`` list of
        ``in_keys`` on SQLite and MySQL, which only Core can run, so there a batch of
        those runs on Core; ``choose_path`` checks the first statement itself."""
        writes = False
        key_lists = False  # the batch runs a statement of a list of keys
        got: set[tuple[tuple[str, ...], str]] = set()
        for op in ops:
            if type(op) is PutOp:
                writes = True
                key_lists = key_lists or op.value is None
            elif type(op) is GetOp:
                got.add((op.namespace, op.key))
        key_lists = key_lists or len(got) > FIXED_KEYS_MAX
        if self.embeddings is not None or not self.sql.in_sql:
            return False, writes
        if len(ops) == 1 or not key_lists:
            return True, writes
        return self._key_lists_direct(), writes

    def _key_lists_direct(self) -> bool:
        """Whether the statements of several keys compile for the direct path (they do
        where the dialect binds the keys as arrays, PostgreSQL); asked once."""
        known: bool | None = self.__dict__.get("_key_lists_direct_once")
        if known is None:
            statement = get_statement(self._settings, many=True)
            known = self._runtime.runs_direct(statement, self._sync_dialect)
            self.__dict__["_key_lists_direct_once"] = known
        return known

    def _not_bound(self, call: str) -> None:
        """Refuse ``call`` on a bound view: it would need a connection of its own."""
        refuse_on_view(self, call, "store")

    def _sweep_plan(self) -> Callable[[], Plan[int]]:
        """``sweep_ttl``'s plan factory (a read-only store refuses it)."""
        self._writing("sweep_ttl")
        now = utc_now()
        return lambda: sweep_plan(now)

    def _sweeper_minutes(self, minutes: float | None) -> float:
        """``start_ttl_sweeper``'s interval (refused on a read-only store or a view)."""
        self._writing("start_ttl_sweeper")
        self._not_bound("start_ttl_sweeper")
        if minutes is None:
            minutes = (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        if not isinstance(minutes, (int, float)) or minutes <= 0:
            raise InvalidInputError(f"sweep_interval_minutes must be > 0, got {minutes!r}")
        return float(minutes)


class _Lanes(NamedTuple):
    """The sync store's lean ``get`` and ``put`` (``_lane.py``): its settings,
    LangGraph's own checks, whether a lone put with a value is one upsert, and whether
    the lane plans are declared prebuilt."""

    settings: Settings
    validate_get: Callable[[tuple[str, ...]], None]
    ensure_refresh: Callable[..., bool]
    validate_put: Callable[[tuple[str, ...]], None]
    ensure_ttl: Callable[..., Any]
    puts: bool
    declared: bool


class SQLAlchemyStore(_StoreBase[Engine, AbstractContextManager["SQLAlchemyStore"]]):
    """LangGraph's ``BaseStore`` on a sync SQLAlchemy ``Engine`` (any thread).

    Args:
        engine: It stays yours: the store never disposes it (``from_conn_string``'s does).
        index: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``) to
            enable semantic search; embeddings are computed on put.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl``, ``refresh_on_read``,
            ``sweep_interval_minutes``).
        check_schema: Verify on first use that the schema is at lg_sqla's head.
        schema: Keep the tables in this PostgreSQL schema / MySQL database.
        direct_path: Let a lone get or put skip SQLAlchemy Core's execution layer on
            the drivers it is tested for (``lg_sqla.runtime``); False keeps Core.
        read_only: For a replica: reads only. A batch with a put, a TTL sweep and the
            sweeper raise ``ReadOnlyError``; reads never refresh TTLs (refresh on read
            is an UPDATE); ``setup()`` only checks the schema (docs/scaling.md).
        keep_connection: Keep one connection of the engine's pool between direct-path
            calls, where nothing can tell (``SQLAlchemySaver``'s argument, the same
            rules); call ``release_connections()`` before you dispose the engine.
            ``from_conn_string`` turns it on for the engine it owns.
        reconnect_window, call_timeout: As ``SQLAlchemySaver``'s: seconds a call waits
            for a database that went away (a failover, a restart) before raising, where
            running it again is safe (reads; a batch of puts, which sets each item
            whole); seconds a call may wait on its connection before it is cut with
            ``CallTimeoutError`` (psycopg, psycopg2).
    """

    def _set_up_face(self) -> None:
        self._sweeper = ThreadSweeper(
            "lg_sqla-ttl-sweeper", lambda: f"{self.sweep_ttl()} expired item(s)"
        )
        # Concurrent abatch calls (aget, aput...) of one loop run as few batches, each
        # in a worker thread: not a thread and a connection each (_gather.py).
        self._gatherers = Gatherers(
            lambda ops: in_worker_thread(functools.partial(self._batch_now, ops))
        )

    # Set on the views bound() returns (runtime.bound); None: batches run on the engine.
    _binding: Binding | None = None

    def bound(self, target: Connection | Session) -> SQLAlchemyStore:
        """This store's batches on your ``Connection`` or ORM ``Session``, inside your
        transaction: each batch in a SAVEPOINT, never committed, rolled back or retried
        by the store (see ``SQLAlchemySaver.bound``; docs/application.md)."""
        view = bound_view(self, Binding(target, self._runtime, self.engine, StoreItemRow))
        view._gatherers = Gatherers(
            lambda ops: in_worker_thread(functools.partial(view._batch_now, ops))
        )
        return view

    @staticmethod
    @contextmanager
    def _opened(opening: _Opening) -> Iterator[SQLAlchemyStore]:
        url, index, engine_kwargs = opening.url, opening.index, opening.engine_kwargs
        if index is not None:  # SQLite: a driver that can load sqlite-vec, if installed
            engine_kwargs = sqlite_vec_engine_options(url, engine_kwargs)
        engine = configure_engine(create_engine(url, **engine_options(url, engine_kwargs)))
        # The engine is the store's: it may keep a connection between calls
        # (runtime.kept; none where sqlite-vec's checkout listener must see each
        # call), given back on exit before the engine is disposed.
        with owned(engine, opening.made(True)) as store:
            yield store

    def setup(self) -> None:
        """Create or upgrade lg_sqla's tables (checkpoints, store, cache) to the head.
        A read-only store only checks the schema."""
        self._not_bound("setup")
        migrate.set_up(self.engine, read_only=self.read_only)
        if not self.read_only:
            with self.engine.begin() as connection:
                self._vectors_set_up(connection)
        self._runtime.learn(self.engine)
        self._runtime.set_up(self.engine)

    def _run(self, factory: Callable[[], Plan[T]], writes: bool = True) -> T:
        if self._binding is not None:
            return self._binding.run(factory)
        # (reads, a TTL refresh too, may run again after an unknown outcome: idempotent)
        return self._runtime.run(self.engine, factory, writes=writes, idempotent=not writes)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in one transaction, a constant number of statements (docs/store.md)."""
        return self._batch_now(self._checked(ops))

    def _lanes(self) -> _Lanes | None:
        """What ``get`` and ``put`` read on every call, found once; None: they are
        BaseStore's (a subclass's batch sees every op, or LangGraph lacks the helpers
        of its checks)."""
        get_checks, put_checks = internals.langgraph_get_checks(), internals.langgraph_put_checks()
        if (
            get_checks is None
            or put_checks is None
            or type(self).batch is not SQLAlchemyStore.batch
        ):
            return None
        settings = self._settings
        lanes = _Lanes(
            settings,
            *get_checks,
            *put_checks,
            # (a read-only store refuses a put in the batch: _read_only)
            puts=not self.read_only and put_lane_open(settings),
            # (_kind of a lone op: prebuilt where the store's statements are)
            declared=self.embeddings is None and self.sql.in_sql,
        )
        self.__dict__["_lanes_once"] = lanes
        return lanes

    def get(
        self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """``BaseStore.get``, the same checks and errors, straight to the lean plan of a
        lone get (``_lane.py``) rather than through ``batch``'s list of ops."""
        lanes = self.__dict__.get("_lanes_once") or self._lanes()
        if lanes is None:
            # (A subclass's batch sees every op; a LangGraph without these helpers
            # gets BaseStore's own get.)
            return super().get(namespace, key, refresh_ttl=refresh_ttl)
        settings = lanes.settings
        name = named(settings.get_named, namespace, lanes.validate_get)
        key = str(key)
        check_key(key)  # (check_op less the namespace labels: checked just now)
        # (a read-only store refreshes no TTL: _read_only)
        refresh = lanes.ensure_refresh(self.ttl_config, refresh_ttl) and not self.read_only
        now = utc_now()
        # (_kind of a lone get: prebuilt where the store's statements are, without
        # the loop over a batch of ops)
        if lanes.declared:
            found = self._run(
                lambda: lone_get_plan(settings, name, namespace, key, refresh, now), writes=False
            )
        else:
            found = self._run(
                lambda: undeclared(lone_get_plan(settings, name, namespace, key, refresh, now)),
                writes=False,
            )
        return cast("Item | None", found[0])  # (a get's result)

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | NotProvided | None = NOT_PROVIDED,
    ) -> None:
        """``BaseStore.put``, the same checks and errors, straight to the lean plan of a
        lone put (``_lane.py``) where a batch of it would take that plan, rather than
        through ``batch``'s list of ops; else that batch."""
        lanes = self.__dict__.get("_lanes_once") or self._lanes()
        if lanes is None or not self.supports_ttl:
            # (as get: a subclass's batch sees every op; a LangGraph without these
            # helpers, or a subclass without TTLs, gets BaseStore's own put.)
            return super().put(namespace, key, value, index, ttl=ttl)
        settings = lanes.settings
        name = named(settings.put_named, namespace, lanes.validate_put)
        key = str(key)
        ttl_config = self.ttl_config
        # (LangGraph's _ensure_ttl, for no TTL given and no default: None, without its frame)
        minutes: float | None = (
            None if ttl is NOT_PROVIDED and not ttl_config else lanes.ensure_ttl(ttl_config, ttl)
        )
        check_put_values(key, value, minutes, index)  # (check_op less the namespace: just now)
        if value is None or not lanes.puts:
            # (a read-only store refuses it there: _read_only)
            self._batch_now([PutOp(namespace, key, value, index, minutes)])
            return None
        # (_kind of a lone put: prebuilt where the store's statements are)
        if lanes.declared:
            self._run(lambda: lone_put_plan(settings, name, key, value, minutes))
        else:
            self._run(lambda: undeclared(lone_put_plan(settings, name, key, value, minutes)))
        return None

    def _batch_now(self, checked: list[Op]) -> list[Result]:
        ops, documents, queries = self._prepare(checked)
        if not ops:
            return []
        embedded = Embedded()
        if documents or queries:  # (only a store with an index has any: _prepare)
            embedded = self._embedded(documents, queries, *self._embed(documents, queries))
        return self._run(*self._plan_of(ops, embedded))

    def _embed(self, documents: Sequence[tuple[Any, ...]], queries: Sequence[str]) -> Vectors:
        """The vectors of the documents' texts, and of the queries (the index's embeddings)."""
        assert self.embeddings is not None
        texts = [d[3] for d in documents]
        doc_vectors = self.embeddings.embed_documents(texts) if texts else []
        return doc_vectors, [self.embeddings.embed_query(q) for q in queries]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The sync store from async code: the batch runs in a worker thread; batches
        called at once on one loop run together, as the async store's (_gather.py)."""
        checked = self._checked(ops)
        if not checked:
            return []
        return await self._gatherers.here().submit(checked)

    def sweep_ttl(self) -> int:
        """Delete expired items (and their vectors) now; returns how many."""
        return self._run(self._sweep_plan())

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the TTLConfig's,
        else 5) in a daemon thread until :meth:`stop_ttl_sweeper`."""
        return self._sweeper.start(self._sweeper_minutes(sweep_interval_minutes))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True when it ended (or none was running)."""
        return self._sweeper.stop(timeout)


class AsyncSQLAlchemyStore(
    _StoreBase[AsyncEngine, AbstractAsyncContextManager["AsyncSQLAlchemyStore"]]
):
    """LangGraph's ``BaseStore`` on a SQLAlchemy ``AsyncEngine``; see :class:`SQLAlchemyStore`
    (the same arguments; of the async drivers, psycopg keeps a connection
    (``from_conn_string`` sets ``keep_connection``); it applies to the pysqlite engine
    ``from_conn_string`` runs a SQLite file's batches on too)."""

    def _set_up_face(self) -> None:
        self._sweeper = TaskSweeper("lg_sqla-ttl-sweeper", self._sweep_once)
        # A sync engine on the same SQLite file, owned by from_conn_string (see _run).
        self._threaded: Engine | None = None
        # The loop the store runs on (sync calls from worker threads are sent there):
        # the one it is created on, else the one of its latest async call.
        self._loop: asyncio.AbstractEventLoop | None = None
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()
        # Concurrent calls of one loop run as few batches, one at a time (_gather.py).
        self._gatherers = Gatherers(self._abatch_now)

    # Set on the views bound() returns (runtime.bound); None: batches run on the engine.
    _binding: AsyncBinding | None = None

    def bound(self, target: AsyncConnection | AsyncSession) -> AsyncSQLAlchemyStore:
        """This store's batches on your ``AsyncConnection`` or ``AsyncSession``, inside
        your transaction; see ``SQLAlchemyStore.bound`` (docs/application.md)."""
        view = bound_view(self, AsyncBinding(target, self._runtime, self.engine, StoreItemRow))
        view._gatherers = Gatherers(view._abatch_now)
        with contextlib.suppress(RuntimeError):
            view._loop = asyncio.get_running_loop()
        return view

    @staticmethod
    @asynccontextmanager
    async def _opened(opening: _Opening) -> AsyncIterator[AsyncSQLAlchemyStore]:
        url, index, engine_kwargs = opening.url, opening.index, opening.engine_kwargs
        # On a SQLite file (sqlite+aiosqlite:///...) batches run whole on a pysqlite
        # engine of the same file, as the async saver's calls do (see _run):
        # engine_kwargs go to both engines.
        async_kwargs = engine_kwargs
        if index is not None:  # SQLite: a driver that can load sqlite-vec, if installed
            async_kwargs = sqlite_vec_engine_options(url, engine_kwargs)
        engine = configure_engine(create_async_engine(url, **engine_options(url, async_kwargs)))
        sync_url = threaded_sqlite_url(url)

        def threaded() -> Engine | None:
            if sync_url is None:
                return None
            sync_kwargs = engine_kwargs
            if index is not None:
                sync_kwargs = sqlite_vec_engine_options(sync_url, engine_kwargs)
            return configure_engine(
                create_engine(sync_url, **engine_options(sync_url, sync_kwargs))
            )

        def attach(store: AsyncSQLAlchemyStore, sync_engine: Engine) -> None:
            store._threaded = in_schema(sync_engine, opening.schema)
            if index is not None and store._distance in store.sql.native_distances:
                # Batches run there: so does the ranking.
                store._native_vectors = store.sql.native_vectors(sync_engine)

        # Its engines are the store's alone: it keeps a connection where runtime.kept
        # keeps one (a SQLite file's pysqlite engine, psycopg's; elsewhere nothing to
        # ask per call), given back on exit before the engines are disposed.
        def made(owned_engine: AsyncEngine) -> AsyncSQLAlchemyStore:
            keep = sync_url is not None or keeps_connections(owned_engine.sync_engine)
            store: AsyncSQLAlchemyStore = opening.made(keep)(owned_engine)
            return store

        async with aowned(engine, made, threaded, attach) as store:
            yield store

    async def setup(self) -> None:
        """Create or upgrade lg_sqla's tables (checkpoints, store, cache) to the head.
        A read-only store only checks the schema."""
        self._not_bound("setup")
        await migrate.aset_up(self.engine, read_only=self.read_only)
        if not self.read_only:
            async with self.engine.begin() as connection:
                await connection.run_sync(self._vectors_set_up)
        await self._runtime.alearn(self.engine)
        self._runtime.set_up(self.engine.sync_engine)

    async def _run(self, factory: Callable[[], Plan[T]], writes: bool = True) -> T:
        # On a SQLite file opened by from_conn_string, batches run whole on its
        # pysqlite engine in one of lg_sqla's worker threads (``runtime.workers``).
        if self._binding is not None:
            return await self._binding.run(factory)
        if self._threaded is not None:
            return await in_worker_thread(
                partial(
                    self._runtime.run, self._threaded, factory, writes=writes, idempotent=not writes
                )
            )
        return await self._runtime.arun(self.engine, factory, writes=writes, idempotent=not writes)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in one transaction, a constant number of statements (docs/store.md).
        Calls made while another runs wait and run together as the next batches (the
        gathering of LangGraph's async stores; _gather.py): many concurrent calls take
        one connection, not one each."""
        self._loop = asyncio.get_running_loop()
        checked = self._checked(ops)
        if not checked:
            return []
        return await self._gatherers.here().submit(checked)

    async def _abatch_now(self, checked: list[Op]) -> list[Result]:
        ops, documents, queries = self._prepare(checked)
        if not ops:
            return []
        embedded = Embedded()
        if documents or queries:
            embedded = self._embedded(documents, queries, *await self._aembed(documents, queries))
        return await self._run(*self._plan_of(ops, embedded))

    async def _aembed(
        self, documents: Sequence[tuple[Any, ...]], queries: Sequence[str]
    ) -> Vectors:
        """The vectors of the documents' texts, and of the queries (at once)."""
        assert self.embeddings is not None
        texts = [d[3] for d in documents]
        doc_vectors = await self.embeddings.aembed_documents(texts) if texts else []
        gathered = await asyncio.gather(*(self.embeddings.aembed_query(q) for q in queries))
        return doc_vectors, list(gathered)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The async store from sync code (a sync node of an ``ainvoke``d graph runs in
        a worker thread): the batch runs on the store's event loop, whose engine
        connections belong to it, and this thread waits."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        store_loop = self._loop if self._loop is not None and self._loop.is_running() else None
        if running is not None and (store_loop is None or running is store_loop):
            # Waiting here would block the loop that must run the batch: LangGraph's
            # async stores raise this type too, and callers (its tests) expect it.
            raise asyncio.InvalidStateError(
                "AsyncSQLAlchemyStore's sync methods block: on its event loop, use the "
                "a-prefixed methods (await store.aget(...), aput, asearch); call the sync "
                "ones from another thread"
            )
        ops = list(ops)
        if store_loop is not None:
            return asyncio.run_coroutine_threadsafe(self.abatch(ops), store_loop).result()
        return asyncio.run(self.abatch(ops))

    async def sweep_ttl(self) -> int:
        """Delete expired items (and their vectors) now; returns how many."""
        return await self._run(self._sweep_plan())

    async def _sweep_once(self) -> str:
        """One sweep of the background sweeper; what it removed, for the debug log."""
        return f"{await self.sweep_ttl()} expired item(s)"

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep expired items every interval in a task of the running loop."""
        return self._sweeper.start(self._sweeper_minutes(sweep_interval_minutes))

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper task; True when it ended (or none was running)."""
        return await self._sweeper.stop(timeout)
