"""One test body for the sync and the async API: the suite's only sync/async adapter.

A test takes the ``mode`` fixture (conftest.py: parametrized ``"sync"`` / ``"async"``,
so its ids end in ``-sync`` / ``-async``) and wraps what it drives, a saver, a store,
a node cache, an inspector, a compiled graph or an engine, in ``either(target, mode)``:

    saver = either(SQLAlchemySaver(engine), "sync")
    stored = await saver.put(cfg, cp, {}, {})   # saver.put(...): blocking, on purpose
    saver = either(AsyncSQLAlchemySaver(async_engine), "async")
    stored = await saver.put(cfg, cp, {}, {})   # await saver.aput(...)

``await wrapped.name(...)`` calls ``target.name(...)`` in sync mode. In async mode it
calls ``target.aname(...)`` when the target has one (LangGraph's naming: ``aput``,
``aget_tuple``, ``alist``, ``ainvoke``, ``aget_state_history``, ``aset``...), else
``target.name(...)`` (lg_sqla's own async classes name their coroutines plainly:
``AsyncSQLAlchemySaver.setup``, ``AsyncSQLAlchemyStore.sweep_ttl``, ``AsyncInspector``'s
methods; ``AsyncEngine.connect``), and awaits it. Generators (``list``, ``alist``,
``get_state_history``, ``stream``...) come back as lists; other results as they are
(a ``CursorResult`` is not read). A call of the wrong kind
fails loudly: an async-mode call whose result cannot be awaited, or a sync-mode call
that returned an awaitable, raises ``TypeError`` instead of passing unawaited.

``saver_on`` / ``store_on`` / ``cache_on`` build the object of the engine's kind
(sync or async) already wrapped; ``open_saver`` is ``from_conn_string`` in either mode.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Generic, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

Mode = Literal["sync", "async"]
MODES: tuple[Mode, ...] = ("sync", "async")

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


def async_name(target: object, name: str) -> str:
    """The name of ``name``'s async counterpart on ``target``: ``aname`` or ``name``."""
    return f"a{name}" if hasattr(target, f"a{name}") else name


def call_sync(target: object, name: str, *args: Any, **kwargs: Any) -> Any:
    """``target.name(*args, **kwargs)``, blocking, for a thread without an event loop
    (what :func:`call` does in sync mode); generators are collected into lists."""
    result = getattr(target, name)(*args, **kwargs)
    if inspect.isawaitable(result) or inspect.isasyncgen(result):
        raise TypeError(f"{type(target).__name__}.{name} is async: not a sync-mode call")
    return list(result) if inspect.isgenerator(result) else result


async def call(target: object, mode: str, name: str, *args: Any, **kwargs: Any) -> Any:
    """``target.name(*args, **kwargs)`` in sync mode, ``await target.aname(...)`` in
    async mode (module docstring); generators are collected into lists."""
    if mode == "sync":
        return call_sync(target, name, *args, **kwargs)
    if mode != "async":
        raise ValueError(f"mode is 'sync' or 'async', not {mode!r}")
    method = async_name(target, name)
    result = getattr(target, method)(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    if inspect.isasyncgen(result):
        return [item async for item in result]
    raise TypeError(f"{type(target).__name__}.{method} is not async: not an async-mode call")


class Either(Generic[T_co]):
    """``target`` driven in ``mode``: ``await either.name(...)`` is :func:`call`."""

    def __init__(self, target: T_co, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode is 'sync' or 'async', not {mode!r}")
        self.target = target
        self.mode = mode

    @property
    def is_async(self) -> bool:
        return self.mode == "async"

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_"):  # dunders and private names are never forwarded
            raise AttributeError(name)
        if not callable(getattr(self.target, name, None)) and not callable(
            getattr(self.target, f"a{name}", None)
        ):
            raise AttributeError(f"{type(self.target).__name__} has no method {name!r}")

        async def bound(*args: Any, **kwargs: Any) -> Any:
            return await call(self.target, self.mode, name, *args, **kwargs)

        return bound

    def __repr__(self) -> str:
        return f"either({self.target!r}, {self.mode!r})"


def either(target: T, mode: str) -> Either[T]:
    return Either(target, mode)


def mode_of(engine: sa.Engine | AsyncEngine) -> Mode:
    return "async" if isinstance(engine, AsyncEngine) else "sync"


def sync_engine(engine: sa.Engine | AsyncEngine) -> sa.Engine:
    """The engine statement listeners and pool checks go on (an async engine's sync one)."""
    return engine.sync_engine if isinstance(engine, AsyncEngine) else engine


def saver_on(
    engine: sa.Engine | AsyncEngine, **kwargs: Any
) -> Either[SQLAlchemySaver | AsyncSQLAlchemySaver]:
    """The saver of the engine's kind, driven in its mode."""
    if isinstance(engine, AsyncEngine):
        return Either(AsyncSQLAlchemySaver(engine, **kwargs), "async")
    return Either(SQLAlchemySaver(engine, **kwargs), "sync")


def store_on(
    engine: sa.Engine | AsyncEngine, **kwargs: Any
) -> Either[SQLAlchemyStore | AsyncSQLAlchemyStore]:
    """The store of the engine's kind, driven in its mode."""
    if isinstance(engine, AsyncEngine):
        return Either(AsyncSQLAlchemyStore(engine, **kwargs), "async")
    return Either(SQLAlchemyStore(engine, **kwargs), "sync")


def cache_on(engine: sa.Engine | AsyncEngine, **kwargs: Any) -> Either[SQLAlchemyCache[Any]]:
    """The node cache (one class for both kinds of engine), driven in the engine's mode."""
    return Either(SQLAlchemyCache(engine, **kwargs), mode_of(engine))


@asynccontextmanager
async def saver_from_url(
    mode: str, url: str, **kwargs: Any
) -> AsyncIterator[Either[SQLAlchemySaver | AsyncSQLAlchemySaver]]:
    """``SQLAlchemySaver.from_conn_string`` or ``AsyncSQLAlchemySaver.from_conn_string``."""
    if mode == "sync":
        with SQLAlchemySaver.from_conn_string(url, **kwargs) as saver:
            yield Either(saver, mode)
    else:
        async with AsyncSQLAlchemySaver.from_conn_string(url, **kwargs) as async_saver:
            yield Either(async_saver, mode)


@asynccontextmanager
async def store_from_url(
    mode: str, url: str, **kwargs: Any
) -> AsyncIterator[Either[SQLAlchemyStore | AsyncSQLAlchemyStore]]:
    """``SQLAlchemyStore.from_conn_string`` or ``AsyncSQLAlchemyStore.from_conn_string``."""
    if mode == "sync":
        with SQLAlchemyStore.from_conn_string(url, **kwargs) as store:
            yield Either(store, mode)
    else:
        async with AsyncSQLAlchemyStore.from_conn_string(url, **kwargs) as async_store:
            yield Either(async_store, mode)
