"""lg_sqla.inspection on every dialect, sync and async: results checked against what
the savers' own API (get_state_history, get_tuple, list) and the raw tables say,
and every query counted: one statement each."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from graph_helpers import WEATHER, build_fan_graph, build_tool_chat_graph
from helpers import StatementCounter
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.types import Command
from modes import either, sync_engine
from sqlalchemy.ext.asyncio import AsyncEngine

from lg_sqla import AsyncSQLAlchemySaver, InvalidInputError, SQLAlchemySaver
from lg_sqla.errors import NotFoundError
from lg_sqla.inspection import AsyncInspector, Inspector, node_of, summarize
from lg_sqla.models import checkpoint_blobs, checkpoint_writes, checkpoints

TABLES = {t.name: t for t in (checkpoints, checkpoint_writes, checkpoint_blobs)}
# The queries compare strings computed from JSON with key columns: also on a
# MariaDB database left at the server's default charset.
pytestmark = pytest.mark.any_charset


class Harness:
    """One test body for both savers: ``await h.call(...)`` works on either (modes.py)."""

    def __init__(self, mode: str, saver: Any, engine: sa.Engine, raw_engine: sa.Engine) -> None:
        self.mode, self.engine, self.raw_engine = mode, engine, raw_engine
        self.saver = either(saver, mode)
        self.inspector = either(Inspector(saver) if mode == "sync" else AsyncInspector(saver), mode)
        self.graph = either(build_fan_graph().compile(checkpointer=saver), mode)
        self.chat = either(build_tool_chat_graph().compile(checkpointer=saver), mode)
        stop_before_tools = build_tool_chat_graph().compile(
            checkpointer=saver, interrupt_before=["tools"]
        )
        self.chat_stopping = either(stop_before_tools, mode)
        fan_stopping = build_fan_graph().compile(checkpointer=saver, interrupt_after=["plan"])
        self.fan_stopping = either(fan_stopping, mode)

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run one inspection and assert it cost exactly one statement (on distributed
        tables, Citus: ``threads`` reads its page's ids first, and counts apart)."""
        counter = StatementCounter()
        sa.event.listen(self.engine, "before_cursor_execute", counter)
        try:
            result = await getattr(self.inspector, name)(*args, **kwargs)
        finally:
            sa.event.remove(self.engine, "before_cursor_execute", counter)
        expected = 1
        if name == "threads" and self.saver.target.dialect_ops.distributed:
            expected = 2 + bool(kwargs.get("count"))
        assert counter.count == expected, (name, counter.statements)
        return result

    async def run_graph(self, thread_id: str, tag: str) -> None:
        cfg = {"configurable": {"thread_id": thread_id}, "metadata": {"suite": tag}}
        await self.graph.invoke({"items": [], "note": ""}, cfg)

    async def history(self, thread_id: str) -> list[Any]:
        history: list[Any] = await self.graph.get_state_history(
            {"configurable": {"thread_id": thread_id}}
        )
        return history

    async def tuples(self, thread_id: str) -> list[Any]:
        tuples: list[Any] = await self.saver.list(
            {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        )
        return tuples


@asynccontextmanager
async def harness(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> AsyncIterator[Harness]:
    """A saver of the mode on an engine of its own, and a sync engine for raw reads."""
    engine = make_engine.for_mode(mode, backend)
    saver = (
        AsyncSQLAlchemySaver(engine) if isinstance(engine, AsyncEngine) else SQLAlchemySaver(engine)
    )
    h = Harness(mode, saver, sync_engine(engine), make_engine(backend))
    await h.saver.get_tuple({"configurable": {"thread_id": "warm-up"}})  # schema check
    yield h


def raw(h: Harness, table: sa.Table, *columns: str, **where: Any) -> list[Any]:
    """Read a table directly, on a sync engine of its own."""
    stmt = sa.select(*(table.c[c] for c in columns)).where(
        *(table.c[k] == v for k, v in where.items())
    )
    with h.raw_engine.connect() as conn:
        return list(conn.execute(stmt))


async def test_threads_history_show_diff_writes(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    async with harness(make_engine, backend, mode) as h:
        tag = uuid.uuid4().hex
        threads = [f"insp-{tag}-{n}" for n in range(3)]
        started = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
        for n, thread_id in enumerate(threads):
            for _ in range(n + 1):  # 1, 2 and 3 runs: 4, 8 and 12 checkpoints
                await h.run_graph(thread_id, tag)

        # threads: counts, sizes and times agree with the tables; filter, sort, pages.
        page = await h.call("threads", filter={"suite": tag}, order="checkpoints")
        assert [t.thread_id for t in page.threads] == threads[::-1]
        assert page.next_offset is None
        for info in page.threads:
            assert info.checkpoints == len(await h.tuples(info.thread_id))
            assert info.namespaces == 1
            blobs = raw(h, checkpoint_blobs, "blob", thread_id=info.thread_id)
            writes = raw(h, checkpoint_writes, "blob", thread_id=info.thread_id)
            assert info.value_bytes == sum(len(r.blob or b"") for r in blobs) > 5000
            assert info.write_bytes == sum(len(r.blob) for r in writes) > 0
            assert started <= info.first_write <= info.last_write
        first = await h.call("threads", filter={"suite": tag}, order="thread_id", limit=2)
        assert [t.thread_id for t in first.threads] == threads[:2] and first.next_offset == 2
        rest = await h.call("threads", filter={"suite": tag}, order="thread_id", limit=2, offset=2)
        assert [t.thread_id for t in rest.threads] == threads[2:] and rest.next_offset is None
        future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
        assert (await h.call("threads", filter={"suite": tag}, written_after=future)).threads == []
        assert (
            len((await h.call("threads", filter={"suite": tag}, written_before=future)).threads)
            == 3
        )
        assert (await h.call("threads", filter={"suite": "no-such-tag"})).threads == []

        # history: the same checkpoints, parents, steps, sources and next nodes as LangGraph.
        thread_id = threads[1]
        entries = await h.call("history", thread_id)
        snapshots = await h.history(thread_id)
        tuples = await h.tuples(thread_id)
        assert [e.checkpoint_id for e in entries] == [
            s.config["configurable"]["checkpoint_id"] for s in snapshots
        ]
        for entry, snap, tup in zip(entries, snapshots, tuples, strict=True):
            parent = (
                snap.parent_config["configurable"]["checkpoint_id"] if snap.parent_config else None
            )
            assert entry.parent_id == parent
            assert (entry.step, entry.source) == (snap.metadata["step"], snap.metadata["source"])
            # Pull tasks are named; Send tasks are counted (their node is in the packet).
            assert sorted(entry.next) + ["work"] * entry.sends == sorted(snap.next)
            assert entry.pending_writes == len(tup.pending_writes)
        assert any(e.sends == 2 for e in entries) and any(e.next == ("plan",) for e in entries)
        older = await h.call("history", thread_id, before=entries[2].checkpoint_id, limit=3)
        assert [e.checkpoint_id for e in older] == [e.checkpoint_id for e in entries[3:6]]

        # show: the latest checkpoint, values summarized, metadata and pending writes.
        view = await h.call("show", thread_id)
        latest = tuples[0]
        assert view.checkpoint_id == latest.checkpoint["id"]
        assert view.metadata == latest.metadata
        assert set(view.values) == set(latest.checkpoint["channel_values"])
        assert view.values["note"].size == 5000 and len(view.values["note"].preview) <= 120
        assert view.values["items"].size == len(latest.checkpoint["channel_values"]["items"])
        pending_id = next(e.checkpoint_id for e in entries if e.pending_writes)
        pending_view = await h.call("show", thread_id, pending_id)
        pending_tuple = next(t for t in tuples if t.checkpoint["id"] == pending_id)
        assert [(t, c) for t, c, _ in pending_view.pending_writes] == [
            (t, c) for t, c, _ in pending_tuple.pending_writes
        ]
        assert await h.call("show", thread_id, "no-such-checkpoint") is None

        # diff: exactly the channels whose version changed, with both values.
        old, new = tuples[-1], tuples[0]
        changes = await h.call("diff", thread_id, old.checkpoint["id"], new.checkpoint["id"])
        old_v, new_v = old.checkpoint["channel_versions"], new.checkpoint["channel_versions"]
        assert {c.channel for c in changes} == {
            ch for ch in set(old_v) | set(new_v) if old_v.get(ch) != new_v.get(ch)
        }
        items = next(c for c in changes if c.channel == "items")
        assert items.old is None or items.old.size == len(
            old.checkpoint["channel_values"].get("items", [])
        )
        assert items.new is not None and items.new.size == len(
            new.checkpoint["channel_values"]["items"]
        )
        with pytest.raises(InvalidInputError, match="old checkpoint_id"):
            await h.inspector.diff(thread_id, "nope", new.checkpoint["id"])

        # writes: execution order with task ids, paths, channels, sizes; values only if asked.
        for tup in tuples:
            listed = await h.call("writes", thread_id, tup.checkpoint["id"])
            assert [(w.task_id, w.channel) for w in listed] == [
                (t, c) for t, c, _ in tup.pending_writes
            ]
            assert all(w.value is None for w in listed)
            stored = {
                (r.task_id, r.idx): len(r.blob)
                for r in raw(
                    h,
                    checkpoint_writes,
                    "task_id",
                    "idx",
                    "blob",
                    thread_id=thread_id,
                    checkpoint_id=tup.checkpoint["id"],
                )
            }
            assert {(w.task_id, w.idx): w.bytes for w in listed} == stored
        with_values = await h.call("writes", thread_id, pending_id, values=True)
        assert [w.value for w in with_values] == [
            summarize(v) for _, _, v in pending_tuple.pending_writes
        ]


async def test_write_stats_latest_and_storage(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    async with harness(make_engine, backend, mode) as h:
        tag = uuid.uuid4().hex
        threads = [f"stats-{tag}-{n}" for n in range(2)]
        for thread_id in threads:
            await h.run_graph(thread_id, tag)
        await h.run_graph(threads[1], tag)

        # Write statistics per node for one thread agree with the raw rows.
        rows = raw(h, checkpoint_writes, "task_path", "channel", "blob", thread_id=threads[1])
        expected: dict[str, list[int]] = {}
        for r in rows:
            acc = expected.setdefault(node_of(r.task_path), [0, 0])
            acc[0] += 1
            acc[1] += len(r.blob)
        stats = await h.call("write_stats", thread_id=threads[1])
        assert {s.key: [s.writes, s.bytes] for s in stats} == expected
        assert all(s.threads == 1 for s in stats)  # Send tasks of one thread count it once
        assert {"plan", "<send>", "__start__"} <= set(expected)
        assert [s.writes for s in stats] == sorted((s.writes for s in stats), reverse=True)
        by_channel = await h.call("write_stats", by="channel", thread_id=threads[1])
        assert sum(s.writes for s in by_channel) == len(rows)
        # A time window: nothing was written in the future; everything since a minute ago.
        future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
        assert await h.call("write_stats", thread_id=threads[1], since=future) == []
        recent = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
        windowed = await h.call("write_stats", thread_id=threads[1], since=recent, until=future)
        assert sum(s.writes for s in windowed) == len(rows)
        with pytest.raises(InvalidInputError, match="since"):
            await h.inspector.write_stats(since=dt.datetime(2020, 1, 1))

        # The latest value of one channel for a batch of threads, in one statement.
        values = await h.call("latest", "items", [*threads, "no-such-thread"])
        assert set(values) == set(threads)
        for thread_id in threads:
            state = (await h.history(thread_id))[0]
            assert values[thread_id].value == state.values["items"]
            assert values[thread_id].checkpoint_id == state.config["configurable"]["checkpoint_id"]
        assert await h.call("latest", "no-such-channel", threads) == {}

        # Storage: rows and payload bytes per table, for one thread.
        report = await h.call("storage", thread_id=threads[0])
        for table in ("checkpoints", "checkpoint_writes", "checkpoint_blobs"):
            count = len(raw(h, TABLES[table], "thread_id", thread_id=threads[0]))
            assert report.tables[table].rows == count > 0
        blobs = raw(h, checkpoint_blobs, "blob", thread_id=threads[0])
        assert report.tables["checkpoint_blobs"].bytes == sum(len(r.blob or b"") for r in blobs)
        writes = raw(h, checkpoint_writes, "blob", thread_id=threads[0])
        assert report.tables["checkpoint_writes"].bytes == sum(len(r.blob) for r in writes)
        assert report.tables["checkpoints"].bytes > 0
        assert report.writes_to_values == pytest.approx(
            report.tables["checkpoint_writes"].bytes / report.tables["checkpoint_blobs"].bytes
        )
        everything = await h.call("storage")
        assert everything.tables["checkpoints"].rows >= report.tables["checkpoints"].rows


async def test_inspection_input_errors_name_the_field(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    async with harness(make_engine, backend, mode) as h:
        cases: list[tuple[str, tuple[Any, ...], dict[str, Any], str]] = [
            ("threads", (), {"limit": 0}, "limit"),
            ("threads", (), {"order": "size"}, "order"),
            ("threads", (), {"offset": -1}, "offset"),
            ("history", (None,), {}, "thread_id"),
            ("writes", ("t", ""), {}, "checkpoint_id"),
            ("write_stats", (), {"by": "task"}, "by"),
            ("latest", ("", ["t"]), {}, "channel"),
        ]
        for name, args, kwargs, field in cases:
            with pytest.raises(InvalidInputError, match=field):
                await getattr(h.inspector, name)(*args, **kwargs)


async def test_thread_status_counts_and_conversations(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """Each thread's status agrees with LangGraph's own view of it (get_state's
    interrupts, tasks and errors); pages, totals and filters in one statement each;
    a conversation's values are the messages themselves; a diff lists appended ones."""
    async with harness(make_engine, backend, mode) as h:
        tag = uuid.uuid4().hex
        ids = {s: f"status-{tag}-{s}" for s in ("interrupted", "idle", "error", "stopped", "sends")}

        def cfg(name: str) -> dict[str, Any]:
            return {"configurable": {"thread_id": ids[name]}, "metadata": {"suite": tag}}

        paris = {"messages": [HumanMessage("Paris")]}
        await h.chat.invoke(paris, cfg("interrupted"))  # waits in tools' interrupt()
        await h.chat.invoke(paris, cfg("idle"))
        await h.chat.invoke(Command(resume=True), cfg("idle"))  # runs to the end
        with pytest.raises(RuntimeError, match="model is down"):
            await h.chat.invoke({"messages": [HumanMessage("fail")]}, cfg("error"))
        await h.chat_stopping.invoke(paris, cfg("stopped"))  # interrupt_before: pending
        await h.fan_stopping.invoke({"items": [], "note": ""}, cfg("sends"))  # Sends queued

        expected = {
            ids["interrupted"]: "interrupted",
            ids["idle"]: "idle",
            ids["error"]: "error",
            ids["stopped"]: "pending",
            ids["sends"]: "pending",
        }
        # LangGraph's own account of each thread says the same.
        for thread_id, status in expected.items():
            graph = h.fan_stopping if thread_id == ids["sends"] else h.chat
            state = await graph.get_state({"configurable": {"thread_id": thread_id}})
            errors = [t for t in state.tasks if t.error is not None]
            langgraph_says = (
                "error"
                if errors
                else "interrupted"
                if state.interrupts
                else "pending"
                if state.next
                else "idle"
            )
            assert langgraph_says == status, thread_id

        page = await h.call("threads", filter={"suite": tag}, count=True)
        assert {t.thread_id: t.status for t in page.threads} == expected
        assert page.total == 5 and page.next_offset is None
        # Newest last write first: the reverse of the order the threads were run in.
        assert [t.thread_id for t in page.threads] == list(ids.values())[::-1]
        first = await h.call("threads", filter={"suite": tag}, limit=2, count=True)
        rest = await h.call("threads", filter={"suite": tag}, limit=2, offset=2)
        assert (first.total, first.next_offset, rest.next_offset) == (5, 2, 4)
        assert [t.thread_id for t in first.threads + rest.threads] == list(ids.values())[::-1][:4]
        for status in ("interrupted", "pending", "idle", "error"):
            wanted = sorted(t for t, s in expected.items() if s == status)
            for order in ("last_write", "thread_id", "checkpoints"):
                found = await h.call(
                    "threads", filter={"suite": tag}, status=status, order=order, count=True
                )
                assert sorted(t.thread_id for t in found.threads) == wanted, (status, order)
                assert found.total == len(wanted)
        empty = await h.call("threads", filter={"suite": "no-such-tag"}, count=True)
        assert (empty.threads, empty.total) == ([], 0)
        with pytest.raises(InvalidInputError, match="status"):
            await h.inspector.threads(status="waiting")

        # show: the conversation's messages themselves, tool call and result included.
        view = await h.call("show", ids["idle"])
        messages = view.values["messages"].value
        assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
        state = await h.chat.get_state({"configurable": {"thread_id": ids["idle"]}})
        assert messages == state.values["messages"]
        assert messages[1].tool_calls[0]["name"] == "get_weather"
        assert messages[2].content == WEATHER
        waiting = await h.call("show", ids["interrupted"])
        assert [c for _, c, _ in waiting.pending_writes] == ["__interrupt__"]
        assert waiting.pending_writes[0][2].value[0].value["question"] == "run get_weather?"

        # diff of the messages channel: the messages appended, by id.
        history = await h.call("history", ids["idle"])
        oldest, newest = history[-1].checkpoint_id, history[0].checkpoint_id
        changes = {c.channel: c for c in await h.call("diff", ids["idle"], oldest, newest)}
        items = changes["messages"].items
        assert items is not None and items.removed == [] and items.replaced == []
        assert items.appended == messages  # the input checkpoint has no messages yet
        middle = history[2].checkpoint_id
        later = {c.channel: c for c in await h.call("diff", ids["idle"], middle, newest)}
        before = (await h.call("show", ids["idle"], middle)).values["messages"].value
        assert later["messages"].items is not None
        assert later["messages"].items.appended == messages[len(before) :]

        # Checkpoint ids by unique prefix, as git takes abbreviated hashes.
        assert await h.call("resolve_checkpoint", ids["idle"], newest[:-4]) == newest
        assert await h.call("resolve_checkpoint", ids["idle"], newest) == newest
        with pytest.raises(InvalidInputError, match="ambiguous"):
            await h.inspector.resolve_checkpoint(ids["idle"], newest[:4])
        with pytest.raises(NotFoundError, match="has no checkpoint"):
            await h.inspector.resolve_checkpoint(ids["idle"], "zzz")
