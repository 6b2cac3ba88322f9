"""LangGraph's ``BaseCache`` (node caching with ``CachePolicy``) on any SQLAlchemy database.

Entries live in lg_sqla's ``cache_entries`` table (revision ``0002_store_cache``),
serialized with the cache's serde. Each call is one statement in one
transaction, whatever the number of keys: ``get`` one SELECT, ``set`` one
upsert (executemany), ``clear`` one DELETE.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

import sqlalchemy as sa
from langgraph.cache.base import BaseCache, FullKey, Namespace
from langgraph.checkpoint.serde.base import SerializerProtocol
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from sqlalchemy.orm import Session

from lg_sqla.dialects import ops_for
from lg_sqla.engines import in_schema
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import CacheEntryRow, cache_entries
from lg_sqla.plans import Plan, Step, T
from lg_sqla.runtime import Runtime, workers
from lg_sqla.runtime.bound import AsyncBinding, Binding
from lg_sqla.runtime.retry import DEFAULT_RECONNECT_WINDOW_S
from lg_sqla.runtime.timeouts import check_driver
from lg_sqla.shared import key_hash, utc_now

__all__ = ["SQLAlchemyCache"]

ValueT = TypeVar("ValueT")


def _namespace_text(namespace: Namespace) -> str:
    if not isinstance(namespace, tuple) or not all(isinstance(p, str) for p in namespace):
        raise InvalidInputError(f"cache namespace must be a tuple of str, got {namespace!r}")
    # A NUL cannot occur in text on PostgreSQL; it is a safe separator elsewhere too.
    for label in namespace:
        if "\x00" in label:
            raise InvalidInputError(f"cache namespace label contains a NUL: {label!r}")
    return "\x1f".join(namespace)


def _key_text(key: str) -> str:
    if not isinstance(key, str) or "\x00" in key:
        raise InvalidInputError(f"cache key must be a str without NUL, got {key!r}")
    return key


def _row_key(full: FullKey) -> tuple[str, str]:
    namespace, key = full
    return key_hash(_namespace_text(namespace)), key_hash(_key_text(key))


class SQLAlchemyCache(BaseCache[ValueT], Generic[ValueT]):
    """A node cache for ``graph.compile(cache=...)`` on a sync ``Engine`` or an ``AsyncEngine``.

    With an ``Engine`` both the sync and the async methods work (async ones in a
    worker thread); with an ``AsyncEngine`` only the async ones (``aget``,
    ``aset``, ``aclear``: what ``ainvoke``/``astream`` call).

    Args:
        engine: Stays yours: the cache never disposes it.
        serde: How values are serialized (default: LangGraph's JsonPlusSerializer).
        check_schema: Verify once, on first use, that the schema is at lg_sqla's head.
        schema: Keep the table in this PostgreSQL schema / MySQL database.
        reconnect_window, call_timeout: As ``SQLAlchemySaver``'s: seconds a call waits
            for a database that went away before raising (every call of the cache may
            run again: a ``set`` writes the same entries again, a ``clear`` deletes), and
            seconds a call may wait on its connection before it is cut with
            ``CallTimeoutError`` (psycopg, psycopg2).
    """

    def __init__(
        self,
        engine: Engine | AsyncEngine,
        *,
        serde: SerializerProtocol | None = None,
        check_schema: bool = True,
        schema: str | None = None,
        reconnect_window: float = DEFAULT_RECONNECT_WINDOW_S,
        call_timeout: float | None = None,
    ) -> None:
        super().__init__(serde=serde)
        # Two calls: in_schema is generic over the engine type, not over their union.
        self.engine: Engine | AsyncEngine
        if isinstance(engine, Engine):
            self.engine = in_schema(engine, schema)
        else:
            self.engine = in_schema(engine, schema)
        self.dialect_ops = ops_for(engine.dialect)
        # The cache's statements are built per call: its plans always run on Core.
        self._runtime = Runtime(
            self.dialect_ops,
            check_schema=check_schema,
            reconnect_window=reconnect_window,
            call_timeout=call_timeout,
        )
        check_driver(engine.dialect, self._runtime.call_timeout)

    # --- plans ---------------------------------------------------------------

    def _get_plan(self, keys: Sequence[FullKey], now: dt.datetime) -> Plan[dict[FullKey, ValueT]]:
        wanted = {_row_key(k): k for k in keys}
        if not wanted:
            return {}
        c = cache_entries.c
        outcome = yield Step(
            sa.select(c.namespace_hash, c.key_hash, c.type, c.value).where(
                sa.tuple_(c.namespace_hash, c.key_hash).in_(sorted(wanted)),
                sa.or_(c.expires_at.is_(None), c.expires_at > now),
            ),
            fetch=True,
        )
        return {
            wanted[(row.namespace_hash, row.key_hash)]: self.serde.loads_typed(
                (row.type, row.value)
            )
            for row in outcome.rows
        }

    def _set_plan(
        self, pairs: Mapping[FullKey, tuple[ValueT, int | None]], now: dt.datetime
    ) -> Plan[None]:
        rows = {}
        for (namespace, key), (value, ttl) in pairs.items():
            if ttl is not None and (not isinstance(ttl, (int, float)) or ttl <= 0):
                raise InvalidInputError(f"cache ttl must be > 0 seconds or None, got {ttl!r}")
            type_, blob = self.serde.dumps_typed(value)
            namespace_hash, item_hash = _row_key((namespace, key))
            rows[(namespace_hash, item_hash)] = {
                "namespace_hash": namespace_hash,
                "key_hash": item_hash,
                "namespace": _namespace_text(namespace),
                "key": key,
                "type": type_,
                "value": blob,
                "expires_at": None if ttl is None else now + dt.timedelta(seconds=ttl),
            }
        if not rows:
            return
        yield from self.dialect_ops.upsert_rows(
            cache_entries, [rows[k] for k in sorted(rows)], ("type", "value", "expires_at")
        )

    def _clear_plan(self, namespaces: Sequence[Namespace] | None) -> Plan[None]:
        statement = sa.delete(cache_entries)
        if namespaces is not None:
            hashes = sorted({key_hash(_namespace_text(ns)) for ns in namespaces})
            if not hashes:
                return
            statement = statement.where(cache_entries.c.namespace_hash.in_(hashes))
        yield Step(statement)

    # --- shells --------------------------------------------------------------

    def _sync_engine(self) -> Engine:
        if isinstance(self.engine, AsyncEngine):
            raise InvalidInputError(
                "this SQLAlchemyCache has an AsyncEngine: use aget/aset/aclear "
                "(ainvoke, astream), or give it a sync Engine"
            )
        return self.engine

    # Set on the views bound() returns (runtime.bound); None: calls run on the engine.
    _binding: Binding | AsyncBinding | None = None

    def bound(
        self, target: Connection | Session | AsyncConnection | AsyncSession
    ) -> SQLAlchemyCache[ValueT]:
        """This cache's calls on your connection or ORM session, inside your transaction
        (a SAVEPOINT each, never committed, rolled back or retried by the cache; see
        ``SQLAlchemySaver.bound``, docs/application.md). A sync ``Connection`` or
        ``Session`` for a cache on an ``Engine``, an async one for an ``AsyncEngine``."""
        clone = copy.copy(self)
        if isinstance(self.engine, AsyncEngine):
            clone._binding = AsyncBinding(target, self._runtime, self.engine, CacheEntryRow)  # type: ignore[arg-type]
        else:
            clone._binding = Binding(target, self._runtime, self.engine, CacheEntryRow)  # type: ignore[arg-type]
        return clone

    def _run(self, factory: Callable[[], Plan[T]]) -> T:
        """Run a plan in one transaction, again from scratch when the database rolled
        it back, as the savers do (``lg_sqla.runtime``); idempotent: a lost COMMIT's
        call runs again within the reconnect window (entries are set whole)."""
        if isinstance(self._binding, Binding):
            return self._binding.run(factory)
        return self._runtime.run(self._sync_engine(), factory, idempotent=True)

    async def _arun(self, factory: Callable[[], Plan[T]]) -> T:
        if isinstance(self._binding, AsyncBinding):
            return await self._binding.run(factory)
        if not isinstance(self.engine, AsyncEngine):
            return await workers.in_worker_thread(functools.partial(self._run, factory))
        return await self._runtime.arun(self.engine, factory, idempotent=True)

    # --- BaseCache -----------------------------------------------------------

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        """The unexpired cached values of ``keys`` (missing keys are absent)."""
        now = utc_now()
        return self._run(lambda: self._get_plan(keys, now))

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, ValueT]:
        now = utc_now()
        return await self._arun(lambda: self._get_plan(keys, now))

    def set(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        """Store values with a TTL in seconds each (None: until cleared)."""
        now = utc_now()
        self._run(lambda: self._set_plan(pairs, now))

    async def aset(self, pairs: Mapping[FullKey, tuple[ValueT, int | None]]) -> None:
        now = utc_now()
        await self._arun(lambda: self._set_plan(pairs, now))

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Delete the entries of these namespaces (all entries when None)."""
        self._run(lambda: self._clear_plan(namespaces))

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        await self._arun(lambda: self._clear_plan(namespaces))
