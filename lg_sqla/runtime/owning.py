"""The life of an owner that ``from_conn_string`` opened on engines of its own.

The saver, the async saver, the store and the async store open the same way: the
engine lg_sqla created is renewed in forked children (``forks``), the owner is made
with ``keep_connection=True`` (``kept``: the engine is nobody else's), and on exit
its TTL sweeper is stopped, the kept connection given back and only then the engine
disposed. Each ``from_conn_string`` creates its engines (the feature knows
its URL rules and options) and hands them here; an engine a caller passes to a
constructor never comes here, so it is never disposed by lg_sqla.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Protocol, TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn

from lg_sqla.runtime import forks


class Owner(Protocol):
    """A sync owner: a kept connection to give back, and a sweeper to stop."""

    def release_connections(self) -> None: ...

    def stop_ttl_sweeper(self) -> object: ...


class AsyncOwner(Protocol):
    """An async owner: a kept connection to give back, and a sweeper task to stop."""

    def release_connections(self) -> None: ...

    def stop_ttl_sweeper(self) -> Awaitable[object]: ...


OwnerT = TypeVar("OwnerT", bound=Owner)
AsyncOwnerT = TypeVar("AsyncOwnerT", bound=AsyncOwner)


@contextmanager
def owned(engine: Engine, make: Callable[[Engine], OwnerT]) -> Iterator[OwnerT]:
    """``make(engine)``'s owner (made with ``keep_connection=True``: ``engine`` is
    its own): on exit the sweeper stops, the kept connection is released, the engine
    disposed (also when ``make`` raises)."""
    forks.renew_pool_in_children(engine)  # ours: a forked child connects anew
    owner = None
    try:
        owner = make(engine)
        yield owner
    finally:
        if owner is not None:
            owner.stop_ttl_sweeper()
            owner.release_connections()
        engine.dispose()


@asynccontextmanager
async def aowned(
    engine: AsyncEngine,
    make: Callable[[AsyncEngine], AsyncOwnerT],
    threaded: Callable[[], Engine | None],
    attach: Callable[[AsyncOwnerT, Engine], None],
) -> AsyncIterator[AsyncOwnerT]:
    """``make(engine)``'s owner, on ``engine``, which it owns. ``threaded()``: the
    pysqlite engine of the same SQLite file its calls run on in worker threads (None
    elsewhere), created after the owner, given to it by ``attach``; the owner is made
    with ``keep_connection=True`` (``runtime.kept``: psycopg's connections). On
    exit: sweeper stopped, kept connection released, both engines disposed."""
    forks.renew_pool_in_children(engine.sync_engine)  # ours: a forked child connects anew
    owner = None
    sync_engine = None
    try:
        owner = make(engine)
        sync_engine = threaded()
        if sync_engine is not None:
            forks.renew_pool_in_children(sync_engine)
            attach(owner, sync_engine)
        yield owner
    finally:
        if owner is not None:
            await owner.stop_ttl_sweeper()
            # (in a greenlet: giving a psycopg connection back may close it, which
            # SQLAlchemy's async adapter awaits)
            await greenlet_spawn(owner.release_connections)
        if sync_engine is not None:
            sync_engine.dispose()
        await engine.dispose()
