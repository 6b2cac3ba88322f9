"""One test body for the sync and the async store: ``Stores`` is modes.Either over a
store, with the engine and backend tests look at."""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import sqlalchemy as sa
from backends import Backend, assert_no_leaked_connections
from langgraph.store.base import IndexConfig, TTLConfig
from modes import Either

from lg_sqla.models import cache_entries, store_items
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


def age_rows_in(
    conn: sa.Connection, table: sa.Table, match: sa.ColumnElement[bool], by: dt.timedelta
) -> int:
    """Move the ``expires_at`` of the rows ``match`` selects ``by`` into the past: a test
    ages items instead of sleeping past their TTL, so it neither waits nor depends on
    how fast a loaded machine runs it. Returns the rows aged.

    Read and written back through the column's type, so every dialect's timestamp
    storage (SQLite text, PostgreSQL timestamptz, MariaDB DATETIME(6)) is handled."""
    keys = list(table.primary_key.columns)
    rows = conn.execute(
        sa.select(*keys, table.c.expires_at).where(match, table.c.expires_at.is_not(None))
    ).all()
    for row in rows:
        where = sa.and_(*(key == row._mapping[key.name] for key in keys))
        conn.execute(table.update().where(where).values(expires_at=row.expires_at - by))
    return len(rows)


def age_rows(
    backend: Backend, table: sa.Table, match: sa.ColumnElement[bool], by: dt.timedelta
) -> int:
    """``age_rows_in`` on an engine of its own, committed."""
    engine = backend.engine()
    try:
        with engine.begin() as conn:
            aged = age_rows_in(conn, table, match, by)
        assert_no_leaked_connections(engine)
        return aged
    finally:
        engine.dispose()


def age_store_items(backend: Backend, prefix: str, by: dt.timedelta) -> int:
    """``age_rows`` for the store items under the namespace root ``prefix``."""
    return age_rows(backend, store_items, store_items.c.prefix.startswith(prefix), by)


def age_cache_entries(backend: Backend, prefix: str, by: dt.timedelta) -> int:
    """``age_rows`` for the node-cache entries whose namespace starts with ``prefix``."""
    return age_rows(backend, cache_entries, cache_entries.c.namespace.startswith(prefix), by)


def root() -> str:
    """A namespace root of its own: tests share each dialect's database."""
    return f"t{uuid.uuid4().hex[:10]}"


class Stores(Either[SQLAlchemyStore | AsyncSQLAlchemyStore]):
    """A sync or an async store behind the same awaitable API (modes.Either): ``await
    s.put(...)`` runs the sync store's ``put`` (blocking, on purpose) or awaits the async
    store's ``aput``; ``await s.sweep_ttl()`` either store's own."""

    def __init__(
        self, store: SQLAlchemyStore | AsyncSQLAlchemyStore, engine: sa.Engine, backend: Backend
    ) -> None:
        super().__init__(store, "async" if isinstance(store, AsyncSQLAlchemyStore) else "sync")
        self.store = store
        self.backend = backend
        self.engine = engine  # the sync engine (of the async one): for statement counts

    def stored_items(self, prefix: str) -> int:
        """Rows of ``store_items`` under this namespace, expired ones included (own engine)."""
        engine = self.backend.engine()
        try:
            with engine.connect() as conn:
                query = sa.select(sa.func.count()).where(store_items.c.prefix.startswith(prefix))
                return int(conn.execute(query).scalar_one())
        finally:
            assert_no_leaked_connections(engine)
            engine.dispose()


@asynccontextmanager
async def open_store(
    backend: Backend,
    mode: str,
    *,
    index: IndexConfig | None = None,
    ttl: TTLConfig | None = None,
    setup: bool = False,
    **engine_kwargs: Any,
) -> AsyncIterator[Stores]:
    """A store on an engine of its own (``engine_kwargs`` to ``create_engine``), checked
    for leaked connections at the end; ``setup``: its ``setup()`` is run first."""
    if mode == "sync":
        engine = backend.engine(**engine_kwargs)
        try:
            sync_store = SQLAlchemyStore(engine, index=index, ttl=ttl)
            if setup:
                sync_store.setup()
            yield Stores(sync_store, engine, backend)
            assert_no_leaked_connections(engine)
        finally:
            engine.dispose()
    else:
        async_engine = backend.async_engine(**engine_kwargs)
        store = AsyncSQLAlchemyStore(async_engine, index=index, ttl=ttl)
        try:
            if setup:
                await store.setup()
            yield Stores(store, async_engine.sync_engine, backend)
            assert_no_leaked_connections(async_engine)
        finally:
            await store.stop_ttl_sweeper()
            await async_engine.dispose()
