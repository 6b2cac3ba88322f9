"""Inspector and AsyncInspector: the inspection plans run on a saver, sync or async."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lg_sqla.inspection.checkpoints import diff, history, latest, resolve_checkpoint, show
from lg_sqla.inspection.pending_writes import write_stats, writes
from lg_sqla.inspection.results import (
    ChannelChange,
    CheckpointView,
    DiskUsage,
    HistoryEntry,
    LatestValue,
    StorageReport,
    ThreadPage,
    WriteInfo,
    WriteStats,
)
from lg_sqla.inspection.table_sizes import disk_usage, storage
from lg_sqla.inspection.thread_pages import Windows
from lg_sqla.inspection.thread_queries import SCAN_LIMIT, count_threads, threads

if TYPE_CHECKING:
    from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
    from lg_sqla.checkpoint.saver import SQLAlchemySaver


# --- front ends ----------------------------------------------------------------------
# The same calls on both savers; each builds its plan with the plan function above,
# whose docstring describes it. Only ``await`` differs between the two classes.


class Inspector:
    """The inspection queries on a :class:`~lg_sqla.SQLAlchemySaver` (sync).

    Example:
        >>> inspector = Inspector(saver)
        >>> page = inspector.threads(filter={"user": "ada"}, limit=20)
        >>> [t.thread_id for t in page.threads], page.next_offset
    """

    def __init__(self, saver: SQLAlchemySaver) -> None:
        self.saver = saver

    def threads(
        self,
        *,
        filter: Mapping[str, Any] | None = None,
        values: Mapping[str, Any] | None = None,
        status: str | None = None,
        written_after: dt.datetime | None = None,
        written_before: dt.datetime | None = None,
        created_after: dt.datetime | None = None,
        created_before: dt.datetime | None = None,
        order: str | None = None,
        sort_by: str | None = None,
        sort_order: str | None = None,
        select: Sequence[str] | None = None,
        extract: Mapping[str, str] | None = None,
        limit: int = 50,
        offset: int = 0,
        count: bool = False,
        scan_limit: int = SCAN_LIMIT,
    ) -> ThreadPage:
        """A page of threads, found as LangGraph Platform's ``threads.search`` does.

        ``filter`` keeps threads with a checkpoint whose metadata matches (nested
        mappings by containment); ``values`` threads whose latest values match, by path
        (``{"order_id": 3, "messages[-1].type": "ai"}``); ``status`` (one of
        ``THREAD_STATUSES``) threads in that status; ``written_*`` bound the last write,
        ``created_*`` the first. ``sort_by`` (``THREAD_SORT_KEYS``) and ``sort_order``
        (``asc``/``desc``), or ``order`` (``THREAD_ORDERS``, the former names).
        ``select`` names the fields of ``ThreadPage.rows()``; ``extract`` maps aliases
        to paths (``values.messages[-1].content``, ``metadata.tenant``). ``count``
        also counts all matching threads (``ThreadPage.total``). With ``values``, a
        page examines at most ``scan_limit`` candidates (``thread_queries``: costs)."""
        return self.saver.run(
            threads(
                self.saver.context,
                filter=filter,
                values=values,
                status=status,
                windows=Windows(written_after, written_before, created_after, created_before),
                order=order,
                sort_by=sort_by,
                sort_order=sort_order,
                select=select,
                extract=extract,
                limit=limit,
                offset=offset,
                count=count,
                scan_limit=scan_limit,
            )
        )

    def count_threads(
        self,
        *,
        filter: Mapping[str, Any] | None = None,
        values: Mapping[str, Any] | None = None,
        status: str | None = None,
        written_after: dt.datetime | None = None,
        written_before: dt.datetime | None = None,
        created_after: dt.datetime | None = None,
        created_before: dt.datetime | None = None,
    ) -> int:
        """How many threads ``threads`` finds with these filters (Platform's
        ``threads.count``); with ``values``, every candidate is decoded."""
        windows = Windows(written_after, written_before, created_after, created_before)
        return self.saver.run(
            count_threads(
                self.saver.context, filter=filter, values=values, status=status, windows=windows
            )
        )

    def resolve_checkpoint(self, thread_id: str, prefix: str, *, checkpoint_ns: str = "") -> str:
        """The full id of the thread's checkpoint whose id is or uniquely begins with
        ``prefix`` (NotFoundError if none, InvalidInputError if several)."""
        return self.saver.run(
            resolve_checkpoint(self.saver.context, thread_id, prefix, checkpoint_ns=checkpoint_ns)
        )

    def history(
        self, thread_id: str, *, checkpoint_ns: str = "", before: str | None = None, limit: int = 50
    ) -> list[HistoryEntry]:
        """A thread's checkpoints in one namespace, newest first (``before``: paging)."""
        return self.saver.run(
            history(
                self.saver.context,
                thread_id,
                checkpoint_ns=checkpoint_ns,
                before=before,
                limit=limit,
            )
        )

    def show(
        self,
        thread_id: str,
        checkpoint_id: str | None = None,
        *,
        checkpoint_ns: str = "",
        width: int = 120,
    ) -> CheckpointView | None:
        """One checkpoint (default: the latest) with values summarized to ``width`` chars."""
        return self.saver.run(
            show(
                self.saver.context,
                thread_id,
                checkpoint_id,
                checkpoint_ns=checkpoint_ns,
                width=width,
            )
        )

    def diff(
        self,
        thread_id: str,
        old_id: str,
        new_id: str,
        *,
        checkpoint_ns: str = "",
        width: int = 120,
    ) -> list[ChannelChange]:
        """The channels whose version differs between two checkpoints, with both values."""
        return self.saver.run(
            diff(
                self.saver.context,
                thread_id,
                old_id,
                new_id,
                checkpoint_ns=checkpoint_ns,
                width=width,
            )
        )

    def writes(
        self,
        thread_id: str,
        checkpoint_id: str,
        *,
        checkpoint_ns: str = "",
        values: bool = False,
        width: int = 120,
    ) -> list[WriteInfo]:
        """A checkpoint's writes in execution order; values only with ``values=True``."""
        return self.saver.run(
            writes(
                self.saver.context,
                thread_id,
                checkpoint_id,
                checkpoint_ns=checkpoint_ns,
                values=values,
                width=width,
            )
        )

    def write_stats(
        self,
        *,
        by: str = "node",
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        limit: int = 100,
    ) -> list[WriteStats]:
        """Write count and bytes per node, channel or thread (``by``) in a time window."""
        return self.saver.run(
            write_stats(
                self.saver.context,
                by=by,
                since=since,
                until=until,
                thread_id=thread_id,
                checkpoint_ns=checkpoint_ns,
                limit=limit,
            )
        )

    def latest(
        self, channel: str, thread_ids: Sequence[str], *, checkpoint_ns: str = ""
    ) -> dict[str, LatestValue]:
        """The value of ``channel`` in each thread's latest checkpoint."""
        return self.saver.run(
            latest(self.saver.context, channel, thread_ids, checkpoint_ns=checkpoint_ns)
        )

    def storage(
        self, *, thread_id: str | None = None, thread_ids: Sequence[str] | None = None
    ) -> StorageReport:
        """Rows and payload bytes per table: all threads, one, or a few."""
        return self.saver.run(
            storage(self.saver.context, thread_id=thread_id, thread_ids=thread_ids)
        )

    def disk_usage(self) -> DiskUsage:
        """Bytes on disk per table (indexes included) and the SQLite file's size and
        free pages, where the database can tell (``table_sizes.disk_usage``)."""
        return self.saver.run(disk_usage(self.saver.context, self.saver.schema))


class AsyncInspector:
    """The same queries on an :class:`~lg_sqla.AsyncSQLAlchemySaver`."""

    def __init__(self, saver: AsyncSQLAlchemySaver) -> None:
        self.saver = saver

    async def threads(
        self,
        *,
        filter: Mapping[str, Any] | None = None,
        values: Mapping[str, Any] | None = None,
        status: str | None = None,
        written_after: dt.datetime | None = None,
        written_before: dt.datetime | None = None,
        created_after: dt.datetime | None = None,
        created_before: dt.datetime | None = None,
        order: str | None = None,
        sort_by: str | None = None,
        sort_order: str | None = None,
        select: Sequence[str] | None = None,
        extract: Mapping[str, str] | None = None,
        limit: int = 50,
        offset: int = 0,
        count: bool = False,
        scan_limit: int = SCAN_LIMIT,
    ) -> ThreadPage:
        return await self.saver.arun(
            threads(
                self.saver.context,
                filter=filter,
                values=values,
                status=status,
                windows=Windows(written_after, written_before, created_after, created_before),
                order=order,
                sort_by=sort_by,
                sort_order=sort_order,
                select=select,
                extract=extract,
                limit=limit,
                offset=offset,
                count=count,
                scan_limit=scan_limit,
            )
        )

    async def count_threads(
        self,
        *,
        filter: Mapping[str, Any] | None = None,
        values: Mapping[str, Any] | None = None,
        status: str | None = None,
        written_after: dt.datetime | None = None,
        written_before: dt.datetime | None = None,
        created_after: dt.datetime | None = None,
        created_before: dt.datetime | None = None,
    ) -> int:
        windows = Windows(written_after, written_before, created_after, created_before)
        return await self.saver.arun(
            count_threads(
                self.saver.context, filter=filter, values=values, status=status, windows=windows
            )
        )

    async def resolve_checkpoint(
        self, thread_id: str, prefix: str, *, checkpoint_ns: str = ""
    ) -> str:
        return await self.saver.arun(
            resolve_checkpoint(self.saver.context, thread_id, prefix, checkpoint_ns=checkpoint_ns)
        )

    async def history(
        self, thread_id: str, *, checkpoint_ns: str = "", before: str | None = None, limit: int = 50
    ) -> list[HistoryEntry]:
        return await self.saver.arun(
            history(
                self.saver.context,
                thread_id,
                checkpoint_ns=checkpoint_ns,
                before=before,
                limit=limit,
            )
        )

    async def show(
        self,
        thread_id: str,
        checkpoint_id: str | None = None,
        *,
        checkpoint_ns: str = "",
        width: int = 120,
    ) -> CheckpointView | None:
        return await self.saver.arun(
            show(
                self.saver.context,
                thread_id,
                checkpoint_id,
                checkpoint_ns=checkpoint_ns,
                width=width,
            )
        )

    async def diff(
        self,
        thread_id: str,
        old_id: str,
        new_id: str,
        *,
        checkpoint_ns: str = "",
        width: int = 120,
    ) -> list[ChannelChange]:
        return await self.saver.arun(
            diff(
                self.saver.context,
                thread_id,
                old_id,
                new_id,
                checkpoint_ns=checkpoint_ns,
                width=width,
            )
        )

    async def writes(
        self,
        thread_id: str,
        checkpoint_id: str,
        *,
        checkpoint_ns: str = "",
        values: bool = False,
        width: int = 120,
    ) -> list[WriteInfo]:
        return await self.saver.arun(
            writes(
                self.saver.context,
                thread_id,
                checkpoint_id,
                checkpoint_ns=checkpoint_ns,
                values=values,
                width=width,
            )
        )

    async def write_stats(
        self,
        *,
        by: str = "node",
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        limit: int = 100,
    ) -> list[WriteStats]:
        return await self.saver.arun(
            write_stats(
                self.saver.context,
                by=by,
                since=since,
                until=until,
                thread_id=thread_id,
                checkpoint_ns=checkpoint_ns,
                limit=limit,
            )
        )

    async def latest(
        self, channel: str, thread_ids: Sequence[str], *, checkpoint_ns: str = ""
    ) -> dict[str, LatestValue]:
        return await self.saver.arun(
            latest(self.saver.context, channel, thread_ids, checkpoint_ns=checkpoint_ns)
        )

    async def storage(
        self, *, thread_id: str | None = None, thread_ids: Sequence[str] | None = None
    ) -> StorageReport:
        return await self.saver.arun(
            storage(self.saver.context, thread_id=thread_id, thread_ids=thread_ids)
        )

    async def disk_usage(self) -> DiskUsage:
        return await self.saver.arun(disk_usage(self.saver.context, self.saver.schema))


def _document_the_async_face() -> None:
    """Each query is documented once, on ``Inspector``; ``AsyncInspector``'s method of
    the same name gets a docstring pointing there (a drift fails at import)."""
    for name, method in vars(Inspector).items():
        if name.startswith("_"):
            continue
        twin = vars(AsyncInspector)[name]  # KeyError: a query without its async face
        if twin.__doc__ is None:
            twin.__doc__ = f"``Inspector.{name}``, awaited on the async saver; see it."
        if method.__doc__ is None:
            raise TypeError(f"Inspector.{name} has no docstring")


_document_the_async_face()
