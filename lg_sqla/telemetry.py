"""OpenTelemetry spans and metrics for every saver, store and node-cache call.

Optional: ``pip install lg_sqla[otel]`` (the OpenTelemetry API), then, once at start-up::

    from lg_sqla import telemetry
    telemetry.instrument()  # the global tracer and meter providers, or pass your own

Until :func:`instrument` is called, nothing of this runs: the public methods and the
runtime's entry points are the plain ones, whether the API is installed or not.
:func:`instrument` wraps each public method of the savers, stores and node cache
(:data:`INSTRUMENTED`, every name :func:`public_calls` lists) in one place, here, and
the runtime's entry points in ``lg_sqla.runtime.telemetry``; :func:`uninstrument`
puts them back. A call made inside another instrumented call (``pin_thread`` reading
the thread's TTL, the store's ``put`` running a ``batch``, an async saver's sync face
running its ``a*`` one) is counted in the outer call's span, not a span of its own.

What an operator sees is described, with real output, in docs/telemetry.md. Span and
metric attributes follow OpenTelemetry's database semantic conventions
(``db.system.name``, ``db.namespace``, ``db.operation.name``, ``server.address``,
``server.port``, ``error.type``, ``db.response.returned_rows``) and add lg_sqla's own
under ``lg_sqla.*``. Thread ids are personal data in many applications: they are
recorded (``lg_sqla.thread_id``) only with ``record_thread_ids=True``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from lg_sqla.errors import MissingDriverError
from lg_sqla.runtime import telemetry as counting
from lg_sqla.runtime.telemetry import CallStats

# Public names that are not calls on the database, so get no span: why, each.
UNTRACED: dict[str, str] = {
    "from_conn_string": "opens an engine; the calls made on what it yields have spans",
    "get_next_version": "computes a version string, no I/O",
    "bound": "returns a view on the caller's connection; the calls made on it have spans",
    "with_allowlist": "returns a copy of the saver with another serializer allowlist",
    "start_ttl_sweeper": "starts a thread; each of its passes is a sweep_ttl call, with its span",
    "stop_ttl_sweeper": "stops that thread",
    "release_connections": "gives the connection kept between calls back to its pool",
    "run": "semi-public plumbing of the inspector and the CLI: counted in the caller's span",
    "arun": "semi-public plumbing of the inspector and the CLI: counted in the caller's span",
}

_COMPONENTS = {
    "SQLAlchemySaver": "checkpointer",
    "AsyncSQLAlchemySaver": "checkpointer",
    "SQLAlchemyStore": "store",
    "AsyncSQLAlchemyStore": "store",
    "SQLAlchemyCache": "cache",
}


def instrumented_classes() -> tuple[type, ...]:
    """The classes whose public calls get spans: both savers, both stores, the cache."""
    from lg_sqla.cache import SQLAlchemyCache
    from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
    from lg_sqla.checkpoint.saver import SQLAlchemySaver
    from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

    return (
        SQLAlchemySaver,
        AsyncSQLAlchemySaver,
        SQLAlchemyStore,
        AsyncSQLAlchemyStore,
        SQLAlchemyCache,
    )


def public_calls(cls: type) -> list[str]:
    """The public methods of ``cls`` (its own and inherited) that get a span."""
    names = []
    for name in dir(cls):
        if name.startswith("_") or name in UNTRACED:
            continue
        attribute = inspect.getattr_static(cls, name)
        if isinstance(attribute, (staticmethod, classmethod, property)):
            continue
        if inspect.isfunction(attribute):
            names.append(name)
    return names


@dataclass(frozen=True)
class _Settings:
    tracer: Any
    instruments: _Instruments
    record_thread_ids: bool


@dataclass(frozen=True)
class _Instruments:
    duration: Any
    statements: Any
    retries: Any
    conflicts: Any
    bytes_written: Any
    removed: Any


_settings: _Settings | None = None
# (class, name) -> the attribute the class had of its own before (None: inherited).
_wrapped: dict[tuple[type, str], Any] = {}


def _import_api() -> tuple[Any, Any]:
    try:
        from opentelemetry import metrics, trace
    except ImportError as error:
        raise MissingDriverError(
            "OpenTelemetry is not installed: pip install 'lg_sqla[otel]'"
        ) from error
    return trace, metrics


def _instruments(meter: Any) -> _Instruments:
    return _Instruments(
        duration=meter.create_histogram(
            "db.client.operation.duration",
            unit="s",
            description="Duration of lg_sqla's saver, store and cache calls",
        ),
        statements=meter.create_counter(
            "lg_sqla.statements", unit="{statement}", description="Statements executed"
        ),
        retries=meter.create_counter(
            "lg_sqla.retries", unit="{retry}", description="Calls run again from scratch"
        ),
        conflicts=meter.create_counter(
            "lg_sqla.conflicts",
            unit="{conflict}",
            description="Lock conflicts (deadlock, serialization failure, SQLITE_BUSY)",
        ),
        bytes_written=meter.create_counter(
            "lg_sqla.payload.bytes_written",
            unit="By",
            description="Bytes of serialized values and writes sent to the database",
        ),
        removed=meter.create_counter(
            "lg_sqla.removed",
            unit="{row}",
            description="What sweeps, TTL sweeps and prunes removed, by kind",
        ),
    )


def instrument(
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    record_thread_ids: bool = False,
) -> None:
    """Turn spans and metrics on for every saver, store and node cache of the process.

    Args:
        tracer_provider: An OpenTelemetry ``TracerProvider`` (default: the global one).
        meter_provider: A ``MeterProvider`` (default: the global one).
        record_thread_ids: Put the call's thread id on its span (``lg_sqla.thread_id``);
            off by default, as thread ids often name users.

    Raises:
        MissingDriverError: the OpenTelemetry API is not installed.
    """
    global _settings
    trace, metrics = _import_api()
    tracer = trace.get_tracer("lg_sqla", tracer_provider=tracer_provider)
    meter = metrics.get_meter("lg_sqla", meter_provider=meter_provider)
    _settings = _Settings(tracer, _instruments(meter), record_thread_ids)
    if _wrapped:
        return  # already wrapped: the new providers and settings apply from now on
    counting.install()
    for cls in instrumented_classes():
        for name in public_calls(cls):
            _wrapped[(cls, name)] = vars(cls).get(name)
            setattr(cls, name, _traced(getattr(cls, name), cls.__name__, name))


def uninstrument() -> None:
    """Turn telemetry off: every method and runtime entry point is the plain one again."""
    global _settings
    for (cls, name), own in _wrapped.items():
        if own is None:
            delattr(cls, name)
        else:
            setattr(cls, name, own)
    _wrapped.clear()
    counting.uninstall()
    _settings = None


def is_instrumented() -> bool:
    return _settings is not None


# --- one call ------------------------------------------------------------------


def _system(dialect: Any) -> str:
    """OpenTelemetry's ``db.system.name``: a mysql:// URL on a MariaDB server, and a
    mariadb:// URL (whose SQLAlchemy dialect is named "mariadb"), are both mariadb."""
    name = str(dialect.name)
    if name in ("mysql", "mariadb") and getattr(dialect, "is_mariadb", False):
        return "mariadb"
    known = {"postgresql": "postgresql", "sqlite": "sqlite", "mysql": "mysql", "mariadb": "mariadb"}
    return known.get(name, "other_sql")


# Per saver, store or cache: its engine's attributes, read once.
_ATTRIBUTES: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _connection_attributes(owner: Any) -> dict[str, Any]:
    try:
        return _ATTRIBUTES[owner]
    except (KeyError, TypeError):  # (TypeError: an owner without weak references)
        pass
    attributes = _read_attributes(owner)
    engine = getattr(owner, "engine", None)
    # Kept once the engine has connected: MySQL's dialect tells MariaDB only then.
    if engine is not None and engine.dialect.server_version_info is not None:
        with contextlib.suppress(TypeError):
            _ATTRIBUTES[owner] = attributes
    return attributes


def _read_attributes(owner: Any) -> dict[str, Any]:
    engine = getattr(owner, "engine", None)
    if engine is None:
        return {}
    url = engine.url
    attributes: dict[str, Any] = {"db.system.name": _system(engine.dialect)}
    if url.database:
        schema = getattr(owner, "schema", None)
        attributes["db.namespace"] = f"{url.database}|{schema}" if schema else url.database
    if url.host:
        attributes["server.address"] = url.host
    if url.port:
        attributes["server.port"] = url.port
    return attributes


def _thread_id(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        bound = inspect.signature(function).bind(*args, **kwargs).arguments
    except TypeError:
        return None
    if "thread_id" in bound:
        return bound["thread_id"]
    config = bound.get("config")
    if isinstance(config, dict):
        return config.get("configurable", {}).get("thread_id")
    return None


class _Call:
    """One instrumented call: its span, its counts, and its metrics at its end."""

    def __init__(
        self, settings: _Settings, component: str, name: str, attributes: dict[str, Any]
    ) -> None:
        self.settings = settings
        self.name = name
        self.attributes = {**attributes, "db.operation.name": name, "lg_sqla.component": component}
        target = attributes.get("db.namespace")
        from opentelemetry.trace import SpanKind

        self.span = settings.tracer.start_span(
            f"{name} {target}" if target else name,
            kind=SpanKind.CLIENT,
            attributes=self.attributes,
        )
        self.stats = CallStats()
        self.started = time.perf_counter()

    def finish(self, error: BaseException | None, result: Any = None) -> None:
        stats, span = self.stats, self.span
        if span.is_recording():
            self._describe(span, stats)
        metric_attributes: dict[str, Any] = {
            key: self.attributes[key]
            for key in ("db.system.name", "db.namespace", "db.operation.name", "lg_sqla.component")
            if key in self.attributes
        }
        if error is not None:
            error_type = type(error).__qualname__
            metric_attributes["error.type"] = error_type
            span.set_attribute("error.type", error_type)
            from opentelemetry.trace import Status, StatusCode

            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, str(error)[:200]))
        self._record(metric_attributes, result if error is None else None)
        span.end()

    @staticmethod
    def _describe(span: Any, stats: CallStats) -> None:
        measured: dict[str, Any] = {
            "lg_sqla.statements": stats.statements,
            "db.response.returned_rows": stats.rows_returned,
            "lg_sqla.rows_affected": stats.rows_affected,
            "lg_sqla.payload.bytes_written": stats.bytes_written,
            "lg_sqla.payload.bytes_read": stats.bytes_read,
            "lg_sqla.retries": stats.retries,
            "lg_sqla.conflicts": stats.conflicts,
        }
        if stats.paths:
            measured["lg_sqla.path"] = "+".join(sorted(stats.paths))
        if (hits := stats.blob_dedup_hits) is not None:
            measured["lg_sqla.blob.dedup_hits"] = hits
        span.set_attributes(measured)

    def _record(self, attributes: dict[str, Any], result: Any) -> None:
        instruments, stats = self.settings.instruments, self.stats
        instruments.duration.record(time.perf_counter() - self.started, attributes)
        instruments.statements.add(stats.statements, attributes)
        instruments.retries.add(stats.retries, attributes)
        instruments.conflicts.add(stats.conflicts, attributes)
        instruments.bytes_written.add(stats.bytes_written, attributes)
        for kind, count in _removed(self.name, result, stats).items():
            instruments.removed.add(count, {**attributes, "lg_sqla.kind": kind})


def _removed(name: str, result: Any, stats: CallStats) -> dict[str, int]:
    """What a sweep, TTL sweep or prune removed, by kind (nothing for other calls)."""
    if name in ("prune", "aprune"):
        return {"rows": stats.rows_affected}
    if not name.endswith(("sweep", "sweep_ttl")):
        return {}
    if isinstance(result, int):  # the store's sweep_ttl: items
        return {"items": result}
    removed = getattr(result, "removed", None)
    if removed is None or getattr(result, "dry_run", False):
        return {}
    return {kind: getattr(removed, kind) for kind in ("threads", "checkpoints", "writes", "blobs")}


def _start(owner: Any, component: str, name: str, function: Any, args: Any, kwargs: Any) -> _Call:
    settings = _settings
    assert settings is not None
    attributes = _connection_attributes(owner)
    if settings.record_thread_ids:
        thread_id = _thread_id(function, (owner, *args), kwargs)
        if thread_id is not None:  # (a copy: the engine's attributes are shared)
            attributes = {**attributes, "lg_sqla.thread_id": str(thread_id)}
    return _Call(settings, component, name, attributes)


def _traced(function: Any, class_name: str, name: str) -> Any:
    """``function`` (a plain, async, generator or async generator method) with a span."""
    component = _COMPONENTS[class_name]
    if inspect.isasyncgenfunction(function):
        return _traced_async_generator(function, component, name)
    if inspect.isgeneratorfunction(function):
        return _traced_generator(function, component, name)
    if inspect.iscoroutinefunction(function):

        @functools.wraps(function)
        async def traced_coroutine(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _untraced():
                return await function(self, *args, **kwargs)
            call = _start(self, component, name, function, args, kwargs)
            with _Counting(call):
                result = await function(self, *args, **kwargs)
            call.finish(None, result)
            return result

        return traced_coroutine

    @functools.wraps(function)
    def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _untraced():
            return function(self, *args, **kwargs)
        call = _start(self, component, name, function, args, kwargs)
        with _Counting(call):
            result = function(self, *args, **kwargs)
        call.finish(None, result)
        return result

    return traced


def _untraced() -> bool:
    """Whether a call runs as it is: telemetry is off, or the call is made inside
    another instrumented call (counted in that one's span)."""
    return _settings is None or counting.current.get() is not None


class _Counting:
    """Inside: the statements run are counted in ``call``'s stats (``runtime.
    telemetry``); an error raised inside ends the call, its span recording it."""

    __slots__ = ("call", "token")

    def __init__(self, call: _Call) -> None:
        self.call = call

    def __enter__(self) -> None:
        self.token = counting.current.set(self.call.stats)

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        try:
            if error is not None:
                self.call.finish(error)
        finally:
            counting.current.reset(self.token)


# What a listing's pull returns when its generator is exhausted.
_END: Any = object()


class _Listing:
    """A traced listing (a generator method): its span covers every page the caller
    pulls, each pull counted in it, until the listing ends, fails or the caller stops
    (closing it early ends the span without an error)."""

    __slots__ = ("call", "inner")

    def __init__(self, call: _Call, inner: Any) -> None:
        self.call = call
        self.inner = inner

    def pull(self) -> Any:
        """The next item of a generator, or ``_END``."""
        token = counting.current.set(self.call.stats)
        try:
            return next(self.inner)
        except StopIteration:
            return _END
        finally:
            counting.current.reset(token)

    async def apull(self) -> Any:
        """The next item of an async generator, or ``_END``."""
        token = counting.current.set(self.call.stats)
        try:
            return await self.inner.__anext__()
        except StopAsyncIteration:
            return _END
        finally:
            counting.current.reset(token)

    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, kind: object, raised: BaseException | None, traceback: object) -> None:
        self.inner.close()
        self.call.finish(self._error(raised))

    async def __aenter__(self) -> _Listing:
        return self

    async def __aexit__(
        self, kind: object, raised: BaseException | None, traceback: object
    ) -> None:
        await self.inner.aclose()
        self.call.finish(self._error(raised))

    @staticmethod
    def _error(raised: BaseException | None) -> BaseException | None:
        return None if isinstance(raised, GeneratorExit) else raised


def _traced_generator(function: Any, component: str, name: str) -> Any:
    """A listing: its span covers every page the caller pulls, until it stops."""

    @functools.wraps(function)
    def traced(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        if _untraced():
            yield from function(self, *args, **kwargs)
            return
        call = _start(self, component, name, function, args, kwargs)
        with _Listing(call, function(self, *args, **kwargs)) as listing:
            while (item := listing.pull()) is not _END:
                yield item

    return traced


def _traced_async_generator(function: Any, component: str, name: str) -> Any:
    @functools.wraps(function)
    async def traced(self: Any, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        if _untraced():
            async for item in function(self, *args, **kwargs):
                yield item
            return
        call = _start(self, component, name, function, args, kwargs)
        async with _Listing(call, function(self, *args, **kwargs)) as listing:
            while (item := await listing.apull()) is not _END:
                yield item

    return traced
