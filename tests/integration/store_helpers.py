"""One test body for the sync and the async store: ``Stores`` exposes awaitable calls
that run the sync store's sync methods (blocking, on purpose) or the async store's."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa
from backends import Backend, assert_no_leaked_connections
from langgraph.store.base import IndexConfig, Op, Result, TTLConfig

from lg_sqla.models import store_items
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

DIMS = 8


def fake_embed(texts: Sequence[str]) -> list[list[float]]:
    """Deterministic: a text's vector is derived from its SHA-256, so equal texts are
    identical vectors (similarity 1) and different texts differ."""
    vectors = []
    for text in texts:
        digest = hashlib.sha256(text.encode()).digest()
        vectors.append([(b - 127.5) / 127.5 for b in digest[:DIMS]])
    return vectors


def fake_index(fields: list[str] | None = None) -> IndexConfig:
    config: IndexConfig = {"dims": DIMS, "embed": fake_embed}
    if fields is not None:
        config["fields"] = fields
    return config


def root() -> str:
    """A namespace root of its own: tests share each dialect's database."""
    return f"t{uuid.uuid4().hex[:10]}"


class Stores:
    """The same awaitable API over a sync or an async store."""

    def __init__(
        self, store: SQLAlchemyStore | AsyncSQLAlchemyStore, engine: sa.Engine, backend: Backend
    ) -> None:
        self.store = store
        self.backend = backend
        self.engine = engine  # the sync engine (of the async one): for statement counts
        self.is_async = isinstance(store, AsyncSQLAlchemyStore)

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if isinstance(self.store, AsyncSQLAlchemyStore):
            return await getattr(self.store, "a" + name)(*args, **kwargs)
        return getattr(self.store, name)(*args, **kwargs)

    async def put(self, *args: Any, **kwargs: Any) -> None:
        await self._call("put", *args, **kwargs)

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("get", *args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> None:
        await self._call("delete", *args, **kwargs)

    async def search(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("search", *args, **kwargs)

    async def list_namespaces(self, *args: Any, **kwargs: Any) -> Any:
        return await self._call("list_namespaces", *args, **kwargs)

    async def batch(self, ops: Sequence[Op]) -> list[Result]:
        return await self._call("batch", ops)  # type: ignore[no-any-return]

    def stored_items(self, prefix: str) -> int:
        """Rows of ``store_items`` under this namespace, expired ones included (own engine)."""
        engine = self.backend.engine()
        try:
            with engine.connect() as conn:
                query = sa.select(sa.func.count()).where(store_items.c.prefix.startswith(prefix))
                return int(conn.execute(query).scalar_one())
        finally:
            engine.dispose()

    async def sweep_ttl(self) -> int:
        if isinstance(self.store, AsyncSQLAlchemyStore):
            return await self.store.sweep_ttl()
        return self.store.sweep_ttl()


@asynccontextmanager
async def open_store(
    backend: Backend,
    mode: str,
    *,
    index: IndexConfig | None = None,
    ttl: TTLConfig | None = None,
) -> AsyncIterator[Stores]:
    if mode == "sync":
        engine = backend.engine()
        try:
            yield Stores(SQLAlchemyStore(engine, index=index, ttl=ttl), engine, backend)
            assert_no_leaked_connections(engine)
        finally:
            engine.dispose()
    else:
        async_engine = backend.async_engine()
        store = AsyncSQLAlchemyStore(async_engine, index=index, ttl=ttl)
        try:
            yield Stores(store, async_engine.sync_engine, backend)
            assert_no_leaked_connections(async_engine.sync_engine)
        finally:
            await store.stop_ttl_sweeper()
            await async_engine.dispose()
