"""One test body for the sync and the async saver: a runner that drives graphs either way.

``await runner.invoke(graph, ...)`` is ``graph.invoke(...)`` on a ``SQLAlchemySaver``
and ``await graph.ainvoke(...)`` on an ``AsyncSQLAlchemySaver``; the same for state,
history, streaming and the saver's own reads. The test module's ``runner`` fixture
is parametrized ``mode="sync"`` / ``mode="async"`` (conftest.py keeps async modes
off the portable dialect, which has no async driver).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from backends import Backend, fresh_async_saver, fresh_saver
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.graph import StateGraph
from langgraph.types import StateSnapshot

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver

MODES = ("sync", "async")


@dataclass(frozen=True)
class Runner:
    mode: str  # "sync" or "async"
    backend: Backend
    saver: SQLAlchemySaver | AsyncSQLAlchemySaver

    @property
    def is_async(self) -> bool:
        return self.mode == "async"

    def compile(self, builder: StateGraph[Any]) -> Any:
        return builder.compile(checkpointer=self.saver)

    async def invoke(self, graph: Any, input: Any, config: RunnableConfig, **kwargs: Any) -> Any:
        if self.is_async:
            return await graph.ainvoke(input, config, **kwargs)
        return graph.invoke(input, config, **kwargs)

    async def get_state(self, graph: Any, config: RunnableConfig, **kwargs: Any) -> StateSnapshot:
        if self.is_async:
            return await graph.aget_state(config, **kwargs)  # type: ignore[no-any-return]
        return graph.get_state(config, **kwargs)  # type: ignore[no-any-return]

    async def history(
        self, graph: Any, config: RunnableConfig, **kwargs: Any
    ) -> list[StateSnapshot]:
        if self.is_async:
            return [s async for s in graph.aget_state_history(config, **kwargs)]
        return list(graph.get_state_history(config, **kwargs))

    async def update_state(self, graph: Any, config: RunnableConfig, values: Any) -> Any:
        if self.is_async:
            return await graph.aupdate_state(config, values)
        return graph.update_state(config, values)

    async def stream(
        self, graph: Any, input: Any, config: RunnableConfig, **kwargs: Any
    ) -> list[Any]:
        if self.is_async:
            return [chunk async for chunk in graph.astream(input, config, **kwargs)]
        return list(graph.stream(input, config, **kwargs))

    async def list(self, config: RunnableConfig) -> list[CheckpointTuple]:
        if isinstance(self.saver, AsyncSQLAlchemySaver):
            return [t async for t in self.saver.alist(config)]
        return list(self.saver.list(config))

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        if isinstance(self.saver, AsyncSQLAlchemySaver):
            return await self.saver.aget_tuple(config)
        return self.saver.get_tuple(config)

    @asynccontextmanager
    async def other(self) -> AsyncIterator[Runner]:
        """A runner of the same mode on a saver of its own (as another web request,
        worker or process would have); only the database is shared."""
        if self.is_async:
            async with fresh_async_saver(self.backend) as saver:
                yield Runner(self.mode, self.backend, saver)
        else:
            with fresh_saver(self.backend) as sync_saver:
                yield Runner(self.mode, self.backend, sync_saver)
