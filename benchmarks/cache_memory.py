"""Memory of calls whose statements are built per call: flat, however many calls.

    .venv/bin/python benchmarks/cache_memory.py [--calls 100000] [--url sqlite:///...]

Runs, on a new sync saver and store opened by ``from_conn_string`` for each kind
(default: a SQLite file in a fresh temporary directory), ``--calls`` calls of each
kind of call whose statement is built per call or per shape:

* ``list_filter``: ``saver.list(config, filter={"step": 1})``;
* ``delete_thread``: ``saver.delete_thread`` of a thread that does not exist;
* ``search_filter``: ``store.search`` with a filter on a member name never used
  before (a new statement shape each call: the store's LRU of shapes drops the
  oldest, and the direct path's compiler forgets it too);
* ``list_namespaces``: ``store.list_namespaces`` with a new prefix each call.

For each: Python's traced memory (``tracemalloc``) between the tenth of the calls
(by then every bounded cache is full: the store's 512 shapes, SQLAlchemy's compiled
cache) and the last, and the sizes of the direct path's caches (``DirectCompiler``:
compiled forms, path decisions; ``DialectOps``: the statements counted as cached).
Prints one JSON line per kind (and the growth so far at every tenth of the calls, on
stderr). On main at 69253b6 (before the caches were bounded) ``list_filter`` grew
about 76 KB per call; ``tests/integration/runtime/test_bounded_caches.py`` runs the same
kinds with fewer calls.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from lg_sqla import SQLAlchemySaver
from lg_sqla.store import SQLAlchemyStore

KINDS = ("list_filter", "delete_thread", "search_filter", "list_namespaces")


@dataclass
class Owners:
    saver: SQLAlchemySaver
    store: SQLAlchemyStore


@contextmanager
def owners(url: str) -> Iterator[Owners]:
    """A migrated saver and store on ``url`` (both ``from_conn_string``), with one
    checkpoint and one item to find."""
    with ExitStack() as stack:
        saver = stack.enter_context(SQLAlchemySaver.from_conn_string(url))
        saver.setup()
        store = stack.enter_context(SQLAlchemyStore.from_conn_string(url))
        store.setup()
        saver.put(_config("probe"), empty_checkpoint(), {"source": "input", "step": 1}, {})
        store.put(("probe",), "item", {"step": 1})
        yield Owners(saver, store)


def _config(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}


def call_of(kind: str, found: Owners) -> Callable[[int], None]:
    """One call of ``kind``, numbered (the number makes a new shape where one is
    wanted; thread ids repeat, so the key-check caches stay as they are)."""
    saver, store = found.saver, found.store
    if kind == "list_filter":
        return lambda i: _expect(len(list(saver.list(_config("probe"), filter={"step": 1}))), 1)
    if kind == "delete_thread":
        return lambda i: saver.delete_thread(f"absent-{i % 100}")
    if kind == "search_filter":
        return lambda i: _expect(len(store.search(("probe",), filter={f"m{i}": i})), 0)
    if kind == "list_namespaces":
        return lambda i: _expect(len(store.list_namespaces(prefix=(f"p{i}",))), 0)
    raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")


def _expect(got: int, wanted: int) -> None:
    if got != wanted:
        raise AssertionError(f"{got} rows, expected {wanted}")


def cache_sizes(found: Owners) -> dict[str, int]:
    """Entries of the direct path's caches of the saver and the store."""
    sizes = {}
    for name, owner in (("saver", found.saver), ("store", found.store)):
        runtime = owner._runtime
        sizes[f"{name}_compiled"] = len(runtime.compiler.compiled)
        sizes[f"{name}_paths"] = runtime.router.remembered()
        sizes[f"{name}_cached_statements"] = len(owner.dialect_ops._kept_statements)
    return sizes


@dataclass
class Growth:
    kind: str
    calls: int
    traced_growth: int  # bytes, from the first tenth of the calls to the last
    sizes_at_tenth: dict[str, int]
    sizes_at_end: dict[str, int]
    seconds: float


def measure(kind: str, found: Owners, calls: int) -> Growth:
    """``calls`` calls of ``kind``, all traced; the growth from the tenth to the last.
    (Traced from the first call: memory that a bounded cache frees as it turns over
    counts only if it was traced when it was allocated.)"""
    call = call_of(kind, found)
    warm = max(calls // 10, 1)
    started = time.perf_counter()
    tracemalloc.start()
    try:
        for i in range(warm):
            call(i)
        sizes_at_tenth = cache_sizes(found)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for i in range(warm, calls):
            call(i)
            if (i + 1) % warm == 0 and i + 1 < calls:  # progress, every tenth
                print(json.dumps(_progress(kind, i + 1, before)), file=sys.stderr, flush=True)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return Growth(
        kind,
        calls,
        after - before,
        sizes_at_tenth,
        cache_sizes(found),
        time.perf_counter() - started,
    )


def _progress(kind: str, done: int, before: int) -> dict[str, Any]:
    gc.collect()
    growth = tracemalloc.get_traced_memory()[0] - before
    return {"kind": kind, "calls": done, "traced_growth": growth}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--url", help="a database URL (default: a new SQLite file)")
    parser.add_argument("--kinds", default=",".join(KINDS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'cache_memory.sqlite'}"
        for kind in args.kinds.split(","):
            with owners(url) as found:  # new ones per kind: its caches start empty
                growth = measure(kind, found, args.calls)
            print(json.dumps(growth.__dict__), flush=True)


if __name__ == "__main__":
    main()
