"""OpenTelemetry (lg_sqla.telemetry): a span and metrics for every public call of the
savers, stores and node cache, on each database, sync and async.

The public methods are enumerated from the classes themselves: a new method that is
neither called here (``CALLS``) nor declared untraced (``telemetry.UNTRACED``, with its
reason) fails ``test_every_public_call_has_a_span``. The counts a span carries are
checked against the database's side: the statements the driver's cursors were given
(``faults.Faults`` wraps the DBAPI connections, so both paths are seen), and a real
driver conflict at COMMIT shows as a retry and a conflict.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from faults import Faults
from helpers import DirectRuns, checkpoint, config, new_thread
from langgraph.store.base import GetOp
from modes import saver_on, store_on
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy.ext.asyncio import AsyncEngine
from test_retries import _conflict

from lg_sqla import AsyncSQLAlchemySaver, InvalidInputError, SQLAlchemySaver, telemetry
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.runtime.executor import Runtime
from lg_sqla.store import AsyncSQLAlchemyStore, SQLAlchemyStore

SYSTEMS = {"sqlite": "sqlite", "postgres": "postgresql", "mysql": "mariadb"}
NS = ("telemetry", "docs")


class Telemetry:
    """In-memory span exporter and metric reader, with lg_sqla instrumented on them."""

    def __init__(self, record_thread_ids: bool = False) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        telemetry.instrument(
            tracer_provider=tracer_provider,
            meter_provider=MeterProvider(metric_readers=[self.reader]),
            record_thread_ids=record_thread_ids,
        )

    def finished(self) -> list[ReadableSpan]:
        spans = list(self.spans.get_finished_spans())
        self.spans.clear()
        return spans

    def points(self, metric: str) -> list[Any]:
        found: list[Any] = []
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for each in scope.metrics:
                    if each.name == metric:
                        found.extend(each.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    yield Telemetry()
    telemetry.uninstrument()


# How each public call is made: the base name (without the async ``a``) -> a function
# of the object and the test's thread (a thread with a stored checkpoint) giving the
# arguments. ``None`` marks a call that reaches no statement of lg_sqla's runtime
# (``setup`` runs Alembic).
Arguments = tuple[tuple[Any, ...], dict[str, Any]]
SAVER_CALLS: dict[str, Callable[[str], Arguments]] = {
    "setup": lambda t: ((), {}),
    "get_tuple": lambda t: ((config(t),), {}),
    "get": lambda t: ((config(t),), {}),
    "list": lambda t: ((config(t),), {}),
    # (bytes: a blob, counted in bytes_written; a short str would be kept in the document)
    "put": lambda t: ((config(t), checkpoint({"a": b"x" * 100}), {}, {"a": 1}), {}),
    "put_writes": lambda t: ((config(t, checkpoint_id="1"), [("a", b"w")], "task"), {}),
    "delete_thread": lambda t: ((t + "-gone",), {}),
    "delete_for_runs": lambda t: ((["no-such-run"],), {}),
    "copy_thread": lambda t: ((t, t + "-copy-" + new_thread()), {}),
    "prune": lambda t: (([t],), {}),
    "sweep": lambda t: ((dt.timedelta(days=3650),), {}),
    "reencrypt": lambda t: ((), {"batch_size": 10}),
    "get_delta_channel_history": lambda t: ((), {"config": config(t), "channels": ["a"]}),
    "thread_ttl": lambda t: ((t,), {}),
    "set_thread_ttl": lambda t: ((t, 60.0), {}),
    "pin_thread": lambda t: ((t,), {}),
    "unpin_thread": lambda t: ((t,), {}),
    "sweep_ttl": lambda t: ((), {"dry_run": True}),
    "set_threads_ttl": lambda t: ((60.0,), {"dry_run": True}),
}
STORE_CALLS: dict[str, Callable[[str], Arguments]] = {
    "setup": lambda t: ((), {}),
    "put": lambda t: ((NS, t, {"v": 1}), {}),
    "get": lambda t: ((NS, t), {}),
    "search": lambda t: ((NS,), {}),
    "list_namespaces": lambda t: ((), {}),
    "delete": lambda t: ((NS, t + "-gone"), {}),
    "batch": lambda t: (([GetOp(NS, t)],), {}),
    "sweep_ttl": lambda t: ((), {}),
}
CACHE_CALLS: dict[str, Callable[[str], Arguments]] = {
    "set": lambda t: (({(NS, t): ({"v": 1}, 60)},), {}),
    "get": lambda t: (([(NS, t)],), {}),
    "clear": lambda t: (([NS],), {}),
}
NO_RUNTIME = {"setup"}


def _public_calls(cls: type) -> list[str]:
    """Every public method of ``cls``, as a user sees them (minus the declared untraced)."""
    return sorted(
        name
        for name in dir(cls)
        if not name.startswith("_")
        and name not in telemetry.UNTRACED
        and inspect.isfunction(inspect.getattr_static(cls, name))
    )


def _base_name(name: str, calls: dict[str, Any]) -> str:
    if name not in calls and name.startswith("a") and name[1:] in calls:
        return name[1:]
    return name


async def _invoke(target: Any, name: str, arguments: Arguments) -> Any:
    """One call as its user makes it: awaited, iterated, or (a blocking face) in a
    thread of its own, never on the event loop's."""
    args, kwargs = arguments
    method = getattr(target, name)
    if inspect.iscoroutinefunction(method):
        return await method(*args, **kwargs)
    if inspect.isasyncgenfunction(method):
        return [item async for item in method(*args, **kwargs)]

    def blocking() -> Any:
        result = method(*args, **kwargs)
        return list(result) if inspect.isgenerator(result) else result

    return await asyncio.to_thread(blocking)


def _objects(backend: Backend, engine: sa.Engine | AsyncEngine) -> list[tuple[Any, dict[str, Any]]]:
    if isinstance(engine, AsyncEngine):
        return [
            (AsyncSQLAlchemySaver(engine), SAVER_CALLS),
            (AsyncSQLAlchemyStore(engine), STORE_CALLS),
            (SQLAlchemyCache[Any](engine), CACHE_CALLS),
        ]
    return [
        (SQLAlchemySaver(engine), SAVER_CALLS),
        (SQLAlchemyStore(engine), STORE_CALLS),
        (SQLAlchemyCache[Any](engine), CACHE_CALLS),
    ]


def _one_span(spans: list[ReadableSpan], name: str) -> dict[str, Any]:
    assert [span.attributes["db.operation.name"] for span in spans if span.attributes] == [name]
    attributes = spans[0].attributes
    assert attributes is not None
    return dict(attributes)


async def test_every_public_call_has_a_span(
    fresh_database: Backend, mode: str, make_engine: Any, otel: Telemetry
) -> None:
    # A database of its own: reencrypt, the sweeps and list_namespaces span the whole
    # database, and other tests leave rows there (encrypted ones, say) no plain saver reads.
    backend = fresh_database
    engine = make_engine.for_mode(mode, backend)
    called: set[str] = set()
    for target, calls in _objects(backend, engine):
        thread = new_thread()
        if isinstance(target, (SQLAlchemySaver, AsyncSQLAlchemySaver)):
            await _invoke(target, "setup", SAVER_CALLS["setup"](thread))
            await _invoke(target, "aput", SAVER_CALLS["put"](thread))
        otel.finished()
        for name in _public_calls(type(target)):
            base = _base_name(name, calls)
            assert base in calls, f"{type(target).__name__}.{name}: no call in this test"
            if isinstance(target, SQLAlchemyCache) and mode == "async" and base == name:
                # The cache's blocking faces refuse an AsyncEngine: an error span.
                with pytest.raises(InvalidInputError):
                    await _invoke(target, name, calls[base](thread))
                attributes = _one_span(otel.finished(), name)
                assert attributes["error.type"] == "InvalidInputError"
                called.add(name)
                continue
            await _invoke(target, name, calls[base](thread))
            attributes = _one_span(otel.finished(), name)
            assert "error.type" not in attributes
            assert attributes["db.system.name"] == SYSTEMS[backend.name]
            assert attributes["lg_sqla.component"] in ("checkpointer", "store", "cache")
            assert "lg_sqla.thread_id" not in attributes  # not without record_thread_ids
            if base not in NO_RUNTIME:
                assert attributes["lg_sqla.statements"] >= 1, name
                assert attributes["lg_sqla.path"] in ("core", "direct", "core+direct"), name
            called.add(name)
    timed = {
        point.attributes["db.operation.name"]
        for point in otel.points("db.client.operation.duration")
    }
    assert timed == called
    written = sum(point.value for point in otel.points("lg_sqla.payload.bytes_written"))
    assert written >= 100  # the puts' values, at least


async def test_span_counts_are_the_statements_the_driver_ran(
    backend: Backend, mode: str, make_engine: Any, otel: Telemetry
) -> None:
    """Statements and retries as the driver saw them; a conflict at COMMIT is a retry."""
    engine = make_engine.for_mode(mode)
    sync = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
    faults = Faults()
    faults.install(sync)
    saver: Any = AsyncSQLAlchemySaver(engine) if mode == "async" else SQLAlchemySaver(engine)
    aio = mode == "async"
    thread = new_thread()
    await _invoke(saver, "aput" if aio else "put", SAVER_CALLS["put"](thread))
    otel.finished()
    counted: dict[str, int] = {}
    names = ("put", "get_tuple", "put_writes", "copy_thread", "prune")
    for name in names:
        with faults.at(10**9) as seen:  # (armed far away: it only records)
            await _invoke(saver, ("a" + name) if aio else name, SAVER_CALLS[name](thread))
        attributes = _one_span(otel.finished(), ("a" + name) if aio else name)
        assert attributes["lg_sqla.statements"] == len(seen) >= 1, (name, seen)
        counted[name] = len(seen)
    telemetry.uninstrument()  # the same calls, not instrumented: the same statements
    for name in names:
        with faults.at(10**9) as seen:
            await _invoke(saver, ("a" + name) if aio else name, SAVER_CALLS[name](thread))
        assert len(seen) == counted[name], name
    otel = Telemetry()  # instrumented again, for the retry below
    faults.commit_errors = [_conflict(sync)]
    await _invoke(saver, "acopy_thread" if aio else "copy_thread", ((thread, thread + "-c"), {}))
    attributes = _one_span(otel.finished(), "acopy_thread" if aio else "copy_thread")
    assert faults.commit_errors == []
    assert (attributes["lg_sqla.retries"], attributes["lg_sqla.conflicts"]) == (1, 1)
    assert sum(point.value for point in otel.points("lg_sqla.retries")) == 1
    assert sum(point.value for point in otel.points("lg_sqla.conflicts")) == 1


async def _pull_one_then_close(saver: Any, name: str, arguments: Arguments) -> None:
    """The caller stops a listing after its first item (closing it, as a ``break`` does)."""
    args, kwargs = arguments
    listing = getattr(saver, name)(*args, **kwargs)
    if inspect.isasyncgen(listing):
        await listing.__anext__()
        await listing.aclose()
        return

    def blocking() -> None:
        next(listing)
        listing.close()

    await asyncio.to_thread(blocking)


async def test_a_listing_span_covers_the_pages_pulled(
    backend: Backend, mode: str, make_engine: Any, otel: Telemetry
) -> None:
    """``list``/``alist`` is one span over every page the caller pulls; it ends when the
    listing is exhausted, when the caller stops early (no error: closing is not one), or
    with the error that stopped it."""
    engine = make_engine.for_mode(mode)
    aio = mode == "async"
    saver: Any = (AsyncSQLAlchemySaver if aio else SQLAlchemySaver)(engine, list_page_size=2)
    thread = new_thread()
    for version in (1, 2, 3):  # three checkpoints: two pages
        stored = checkpoint({"a": f"v{version}"}, {"a": version})
        await _invoke(saver, "aput" if aio else "put", ((config(thread), stored, {}, {}), {}))
    otel.finished()
    name = "alist" if aio else "list"
    assert len(await _invoke(saver, name, ((config(thread),), {}))) == 3
    whole = _one_span(otel.finished(), name)
    assert "error.type" not in whole
    await _pull_one_then_close(saver, name, ((config(thread),), {}))
    early = _one_span(otel.finished(), name)
    assert "error.type" not in early
    assert 1 <= early["lg_sqla.statements"] < whole["lg_sqla.statements"]
    with pytest.raises(InvalidInputError, match="limit"):
        await _invoke(saver, name, ((config(thread),), {"limit": -1}))
    assert _one_span(otel.finished(), name)["error.type"] == "InvalidInputError"
    ended = [
        point.count
        for point in otel.points("db.client.operation.duration")
        if point.attributes["db.operation.name"] == name
    ]
    assert sum(ended) == 3  # each listing recorded its end once


def test_thread_ids_removed_rows_and_dedup_hits(tmp_path: Path) -> None:
    """Thread ids only when allowed; sweeps' and prunes' removals as metrics; a blob
    offered twice is a dedup hit (SQLite, where the put's blobs are a statement of their
    own whose rowcount tells; PostgreSQL's and MariaDB's put is one statement)."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'telemetry.sqlite'}")
    otel = Telemetry(record_thread_ids=True)
    try:
        saver = SQLAlchemySaver(engine)
        saver.setup()
        otel.finished()
        thread = new_thread()
        arguments = SAVER_CALLS["put"](thread)
        saver.put(*arguments[0])
        saver.put(*arguments[0])  # the same values, versions: nothing new to store
        first, second = otel.finished()
        assert first.attributes is not None and second.attributes is not None
        assert first.attributes["lg_sqla.thread_id"] == thread
        assert first.attributes["lg_sqla.blob.dedup_hits"] == 0
        assert second.attributes["lg_sqla.blob.dedup_hits"] == 1
        saver.put(config(thread), checkpoint({"a": "y"}, {"a": 2}), {}, {"a": 2})
        saver.prune([thread], keep_last=1)
        report = saver.sweep(dt.timedelta(0))
        removed = {
            (point.attributes["db.operation.name"], point.attributes["lg_sqla.kind"]): point.value
            for point in otel.points("lg_sqla.removed")
        }
        assert removed[("prune", "rows")] >= 2  # a checkpoint and the blob only it named
        assert removed[("sweep", "threads")] == report.removed.threads >= 1
    finally:
        telemetry.uninstrument()
        engine.dispose()


async def test_telemetry_keeps_each_calls_path(
    backend: Backend, mode: str, make_engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting a call does not change how it runs: the same calls take the direct path
    as often with telemetry on as off (its plan wrapper once made every call a Core one,
    a third to half more instructions), and their spans say so."""
    engine = make_engine.for_mode(mode, backend)
    saver, store = saver_on(engine), store_on(engine)
    thread_id = new_thread()
    versions = {"a": "1"}
    stored = await saver.put(config(thread_id), checkpoint({"a": 1}, versions), {}, versions)

    async def calls() -> None:
        # (values kept in the document: a put of one statement, as put_writes)
        await saver.put(stored, checkpoint({"a": 2}, {"a": "2"}), {}, {"a": "2"})
        await saver.put_writes(stored, [("a", 3)], "task")
        await saver.get_tuple(config(thread_id))
        await store.put(("telemetry", thread_id), "k", {"v": 1})
        await store.get(("telemetry", thread_id), "k")

    await calls()  # (warm: the runtime learns each statement's path)
    direct = DirectRuns(monkeypatch)
    await calls()
    plain = direct.count
    otel = Telemetry()
    try:
        direct.count = 0
        await calls()
        assert direct.count == plain, "telemetry changed how many calls took the direct path"
        paths = [span.attributes["lg_sqla.path"] for span in otel.finished() if span.attributes]
        assert len(paths) == 5
        if plain == 5:  # (the drivers where every such call is direct)
            assert paths == ["direct"] * 5
    finally:
        telemetry.uninstrument()


def test_uninstrumented_is_the_plain_code() -> None:
    """Off (the default, and after uninstrument), no wrapper is left on any path."""
    plain = {
        (cls, name): inspect.getattr_static(cls, name)
        for cls in telemetry.instrumented_classes()
        for name in telemetry.public_calls(cls)
    }
    run, run_lean = Runtime.run, Runtime._run_lean
    Telemetry()
    assert Runtime.run is not run
    assert all(inspect.getattr_static(cls, name) is not f for (cls, name), f in plain.items())
    assert Runtime._run_lean is not run_lean
    telemetry.uninstrument()
    assert Runtime.run is run
    assert Runtime._run_lean is run_lean
    assert all(inspect.getattr_static(cls, name) is f for (cls, name), f in plain.items())
