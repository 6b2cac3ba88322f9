"""SQLAlchemySaver and AsyncSQLAlchemySaver expose the same public API.

LangGraph's pattern: every operation ``X`` has an async twin ``aX``, and both
savers implement both (the async saver's ``X`` runs on its loop from another
thread, the sync saver's ``aX`` in a worker thread). ``setup`` and
``from_conn_string`` keep one name: sync on the sync saver, async on the async one, as do
the retention sweeper's ``start_ttl_sweeper`` / ``stop_ttl_sweeper`` (the store's names).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver

SAVERS = (SQLAlchemySaver, AsyncSQLAlchemySaver)
# Same name on both savers, sync on the sync saver and async on the async one.
SAME_NAME = {"setup", "from_conn_string", "start_ttl_sweeper", "stop_ttl_sweeper"}
# Sync on both savers: no I/O, a view of the saver is returned (``bound``).
SAME_NAME_SYNC = {"bound"}


def _own_public(cls: type) -> set[str]:
    """Public methods the class itself (not LangGraph's base class) implements."""
    names = set()
    for klass in cls.__mro__:
        if klass is BaseCheckpointSaver:
            break
        names |= {n for n, v in vars(klass).items() if not n.startswith("_") and callable(v)}
    names |= {n for n, v in vars(cls).items() if isinstance(v, classmethod)}
    return names


def _pairs() -> list[str]:
    names = _own_public(SQLAlchemySaver) | _own_public(AsyncSQLAlchemySaver)
    base = {n for n in dir(BaseCheckpointSaver) if not n.startswith("_")}
    return sorted(n for n in names | base if f"a{n}" in names | base and not n.startswith("a"))


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)


def _parameters(function: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    return [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(function).parameters.values()
    ]


def test_the_pairs_are_langgraphs_and_ours() -> None:
    assert _pairs() == [
        "copy_thread",
        "delete_for_runs",
        "delete_thread",
        "get",  # BaseCheckpointSaver's, built on get_tuple / aget_tuple
        "get_delta_channel_history",
        "get_tuple",
        "list",
        "pin_thread",  # retention by policy: per-thread settings
        "prune",
        "put",
        "put_writes",
        "reencrypt",
        "run",  # lg_sqla's plans (inspection, import): run / arun
        "set_thread_ttl",
        "set_threads_ttl",
        "sweep",
        "sweep_ttl",
        "thread_ttl",
        "unpin_thread",
    ]


@pytest.mark.parametrize("name", [n for n in _pairs() if n != "get"])
def test_both_savers_implement_both_twins_with_one_signature(name: str) -> None:
    for cls in SAVERS:
        own = _own_public(cls)
        assert name in own and f"a{name}" in own, (cls.__name__, name)
        assert not _is_async(getattr(cls, name)), (cls.__name__, name)
        assert _is_async(getattr(cls, f"a{name}")), (cls.__name__, f"a{name}")
    signatures = {
        (cls.__name__, n): _parameters(getattr(cls, n))
        for cls in SAVERS
        for n in (name, f"a{name}")
    }
    first = signatures[("SQLAlchemySaver", name)]
    assert all(s == first for s in signatures.values()), signatures
    # Return types: the same for X on both savers, and for aX on both savers.
    for n in (name, f"a{name}"):
        sync_ret, async_ret = (
            inspect.signature(getattr(cls, n)).return_annotation for cls in SAVERS
        )
        assert sync_ret == async_ret, (n, sync_ret, async_ret)


@pytest.mark.parametrize("name", sorted(SAME_NAME))
def test_same_name_methods_are_sync_on_the_sync_saver_and_async_on_the_async_one(
    name: str,
) -> None:
    sync, async_ = (getattr(cls, name) for cls in SAVERS)
    assert _parameters(sync) == _parameters(async_)
    if name != "from_conn_string":
        assert not _is_async(sync) and _is_async(async_)
    else:  # a context manager: `with` on the sync saver, `async with` on the async one
        assert hasattr(sync("sqlite://"), "__enter__")
        opened = async_("sqlite+aiosqlite://")
        assert hasattr(opened, "__aenter__") and not hasattr(opened, "__enter__")


@pytest.mark.parametrize("name", sorted(SAME_NAME_SYNC))
def test_same_name_sync_methods_are_sync_on_both_savers(name: str) -> None:
    sync, async_ = (getattr(cls, name) for cls in SAVERS)
    # (The same names and kinds; the annotations differ: a sync or an async connection.)
    assert [p[:2] for p in _parameters(sync)] == [p[:2] for p in _parameters(async_)]
    assert not _is_async(sync) and not _is_async(async_)


def test_no_public_method_without_its_counterpart() -> None:
    """Every public method is in a pair or the same-name set (or the shared base)."""
    shared = set(vars(SQLAlchemySaver.__mro__[1]))  # SaverBase: one implementation for both
    paired = set(_pairs()) | {f"a{n}" for n in _pairs()}
    for cls in SAVERS:
        extra = _own_public(cls) - paired - SAME_NAME - SAME_NAME_SYNC - shared
        assert extra == set(), (cls.__name__, extra)
    assert _own_public(SQLAlchemySaver) == _own_public(AsyncSQLAlchemySaver)


def test_every_public_method_of_both_savers_is_documented() -> None:
    # The bridges get theirs from checkpoint/twins.py, pointing at the face that holds
    # the documentation: help() on either face says what the call does.
    undocumented = [
        f"{cls.__name__}.{name}"
        for cls in SAVERS
        for name in sorted(_own_public(cls))
        if not inspect.getdoc(getattr(cls, name))
    ]
    assert undocumented == []


def test_the_bridge_table_names_every_pair_the_savers_implement() -> None:
    from lg_sqla.checkpoint.twins import FACES

    own = _own_public(SQLAlchemySaver) & _own_public(AsyncSQLAlchemySaver)
    implemented = {n for n in own if not n.startswith("a") and f"a{n}" in own}
    assert set(FACES) == implemented - SAME_NAME
    assert inspect.getdoc(AsyncSQLAlchemySaver.get_tuple) == (
        "``aget_tuple`` for sync code: run on the saver's event loop, from another thread"
        " than the loop's own; see ``AsyncSQLAlchemySaver.aget_tuple``."
    )
