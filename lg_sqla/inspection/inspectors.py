"""Inspector and AsyncInspector: the inspection plans run on a saver, sync or async.

Each query is defined once, as its plan function (``threads``, ``history``...: the
same arguments, after the saver's context, and the docstring users read). The two
faces are made from it here: ``Inspector.history`` runs the plan on a sync saver
(the plan function's signature, result type and docstring), ``AsyncInspector.history``
awaits it on an async one (the same signature; its docstring points at Inspector's).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from lg_sqla.checkpoint.context import Context
from lg_sqla.inspection import checkpoints, pending_writes, table_sizes, thread_queries
from lg_sqla.inspection.results import DiskUsage
from lg_sqla.plans import Plan

if TYPE_CHECKING:
    from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
    from lg_sqla.checkpoint.saver import SQLAlchemySaver

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _face(plan_function: Callable[..., Any], query: Callable[..., Any], face: str) -> None:
    """``query`` presents itself as ``plan_function`` (its name, arguments after the
    context, docstring), returning what the plan returns."""
    name = plan_function.__name__
    query.__name__, query.__qualname__ = name, f"{face}.{name}"
    query.__doc__ = plan_function.__doc__
    signature = inspect.signature(plan_function)
    result = signature.return_annotation  # ("Plan[X]": annotations are strings here)
    if isinstance(result, str) and result.startswith("Plan[") and result.endswith("]"):
        result = result[len("Plan[") : -1]
    own = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    _, *arguments = signature.parameters.values()  # (without the context)
    query.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[own, *arguments], return_annotation=result
    )
    query.__wrapped__ = plan_function  # type: ignore[attr-defined]


def _sync(
    plan_function: Callable[Concatenate[Context, _P], Plan[_R]],
) -> Callable[Concatenate[Inspector, _P], _R]:
    def query(self: Inspector, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return self.saver.run(plan_function(self.saver.context, *args, **kwargs))

    _face(plan_function, query, "Inspector")
    return query


def _async(
    plan_function: Callable[Concatenate[Context, _P], Plan[_R]],
) -> Callable[Concatenate[AsyncInspector, _P], Coroutine[Any, Any, _R]]:
    async def query(self: AsyncInspector, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await self.saver.arun(plan_function(self.saver.context, *args, **kwargs))

    _face(plan_function, query, "AsyncInspector")
    # Documented once, on Inspector; this face says where.
    query.__doc__ = f"``Inspector.{query.__name__}``, awaited on the async saver; see it."
    return query


class Inspector:
    """The inspection queries on a :class:`~lg_sqla.SQLAlchemySaver` (sync).

    Example:
        >>> inspector = Inspector(saver)
        >>> page = inspector.threads(filter={"user": "ada"}, limit=20)
        >>> [t.thread_id for t in page.threads], page.next_offset
    """

    def __init__(self, saver: SQLAlchemySaver) -> None:
        self.saver = saver

    threads = _sync(thread_queries.threads)
    count_threads = _sync(thread_queries.count_threads)
    resolve_checkpoint = _sync(checkpoints.resolve_checkpoint)
    history = _sync(checkpoints.history)
    show = _sync(checkpoints.show)
    diff = _sync(checkpoints.diff)
    latest = _sync(checkpoints.latest)
    writes = _sync(pending_writes.writes)
    write_stats = _sync(pending_writes.write_stats)
    storage = _sync(table_sizes.storage)

    def disk_usage(self) -> DiskUsage:
        """Bytes on disk per table (indexes included) and the SQLite file's size and
        free pages, where the database can tell (``table_sizes.disk_usage``)."""
        return self.saver.run(table_sizes.disk_usage(self.saver.context, self.saver.schema))


class AsyncInspector:
    """The same queries on an :class:`~lg_sqla.AsyncSQLAlchemySaver`, awaited."""

    def __init__(self, saver: AsyncSQLAlchemySaver) -> None:
        self.saver = saver

    threads = _async(thread_queries.threads)
    count_threads = _async(thread_queries.count_threads)
    resolve_checkpoint = _async(checkpoints.resolve_checkpoint)
    history = _async(checkpoints.history)
    show = _async(checkpoints.show)
    diff = _async(checkpoints.diff)
    latest = _async(checkpoints.latest)
    writes = _async(pending_writes.writes)
    write_stats = _async(pending_writes.write_stats)
    storage = _async(table_sizes.storage)

    async def disk_usage(self) -> DiskUsage:
        """``Inspector.disk_usage``, awaited on the async saver; see it."""
        return await self.saver.arun(table_sizes.disk_usage(self.saver.context, self.saver.schema))
