"""One test body for the sync and the async saver: a runner that drives graphs either way.

``await runner.invoke(graph, ...)`` is ``graph.invoke(...)`` on a ``SQLAlchemySaver``
and ``await graph.ainvoke(...)`` on an ``AsyncSQLAlchemySaver``; the same for state,
history, streaming and the saver's own reads. The choice is made by modes.either,
the suite's one sync/async adapter; this module adds what graph tests need on top
(compiling, and another saver of the same mode). The ``runner`` fixture takes the
``mode`` fixture (conftest.py keeps async modes off the portable dialect, which has
no async driver).
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
from modes import either

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver


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
        return await either(graph, self.mode).invoke(input, config, **kwargs)

    async def get_state(self, graph: Any, config: RunnableConfig, **kwargs: Any) -> StateSnapshot:
        state: StateSnapshot = await either(graph, self.mode).get_state(config, **kwargs)
        return state

    async def history(
        self, graph: Any, config: RunnableConfig, **kwargs: Any
    ) -> list[StateSnapshot]:
        history: list[StateSnapshot] = await either(graph, self.mode).get_state_history(
            config, **kwargs
        )
        return history

    async def update_state(self, graph: Any, config: RunnableConfig, values: Any) -> Any:
        return await either(graph, self.mode).update_state(config, values)

    async def stream(
        self, graph: Any, input: Any, config: RunnableConfig, **kwargs: Any
    ) -> list[Any]:
        chunks: list[Any] = await either(graph, self.mode).stream(input, config, **kwargs)
        return chunks

    async def list(self, config: RunnableConfig) -> list[CheckpointTuple]:
        tuples: list[CheckpointTuple] = await either(self.saver, self.mode).list(config)
        return tuples

    async def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        found: CheckpointTuple | None = await either(self.saver, self.mode).get_tuple(config)
        return found

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
