"""Finding threads as LangGraph Platform's ``threads.search`` / ``threads.count`` do
(issue 33): metadata (nested, by containment), status, time ranges, values by JSON
path, sort_by/sort_order, select and extract; on every dialect, sync and async.
Expected answers come from LangGraph's own view of each thread (get_state)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
from backends import Backend, EngineFactory
from helpers import checkpoint, config
from langchain_core.messages import HumanMessage
from langgraph.types import Command
from test_inspect import harness

from lg_sqla import InvalidInputError

pytestmark = pytest.mark.any_charset


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


async def test_the_operator_walk(make_engine: EngineFactory, backend: Backend, mode: str) -> None:
    """Threads of tenant acme that errored or wait on a human, started in a time range,
    newest first, with their last message: the same answer LangGraph gives."""
    async with harness(make_engine, backend, mode) as h:
        tag = uuid.uuid4().hex

        def cfg(name: str, tenant: str) -> dict[str, Any]:
            return {
                "configurable": {"thread_id": f"{tag}-{name}"},
                "metadata": {"suite": tag, "tenant": tenant},
            }

        async def fail(name: str, tenant: str) -> None:
            with pytest.raises(RuntimeError, match="model is down"):
                await h.chat.invoke({"messages": [HumanMessage(f"fail {name}")]}, cfg(name, tenant))

        paris = {"messages": [HumanMessage("Paris")]}
        await fail("early-error", "acme")  # before the range
        start = _now()
        await fail("error-1", "acme")
        await h.chat.invoke(paris, cfg("waiting", "acme"))  # interrupt(): waits
        await h.chat.invoke(paris, cfg("done", "acme"))
        await h.chat.invoke(Command(resume=True), cfg("done", "acme"))  # idle
        await fail("other-tenant", "globex")
        await fail("error-2", "acme")
        end = _now()

        walk = {"filter": {"tenant": "acme", "suite": tag}, "created_after": start}
        last = {"last": "values.messages[-1].content", "tenant": "metadata.tenant"}
        for status, names in (("error", ["error-2", "error-1"]), ("interrupted", ["waiting"])):
            page = await h.inspector.threads(
                **walk, created_before=end, status=status, sort_by="updated_at",
                extract=last, count=True,
            )  # fmt: skip
            assert [t.thread_id for t in page.threads] == [f"{tag}-{n}" for n in names], status
            assert (
                page.total == len(names) == await h.inspector.count_threads(**walk, status=status)
            )
            for t in page.threads:
                state = await h.chat.get_state({"configurable": {"thread_id": t.thread_id}})
                expected = state.values["messages"][-1].content
                assert t.extracted == {"last": expected, "tenant": "acme"}
                assert t.state_updated is not None and start <= t.first_write <= t.last_write
            assert page.decoded == len(names)
        # Oldest first, and before the range.
        oldest = await h.call("threads", **walk, sort_by="created_at", sort_order="asc")
        assert [t.thread_id.removeprefix(f"{tag}-") for t in oldest.threads] == [
            "error-1",
            "waiting",
            "done",
            "error-2",
        ]
        before = await h.call(
            "threads", filter={"suite": tag}, created_before=start, select=["thread_id"]
        )
        assert before.rows() == [{"thread_id": f"{tag}-early-error"}]
        assert await h.inspector.count_threads(filter={"suite": tag}, created_before=start) == 1
        # By the last state update, newest first: the resumed thread's last checkpoint.
        latest = await h.call("threads", filter={"suite": tag}, sort_by="state_updated_at")
        updated = [t.state_updated for t in latest.threads]
        assert updated == sorted(updated, reverse=True) and len(updated) == 6
        # A value filter on a path into a message: the last one of the finished thread.
        done = await h.chat.get_state({"configurable": {"thread_id": f"{tag}-done"}})
        answer = done.values["messages"][-1].content
        assert answer.startswith("It is ")
        calls = await h.inspector.threads(
            filter={"suite": tag}, values={"messages[-1].content": answer}
        )
        assert [t.thread_id for t in calls.threads] == [f"{tag}-done"]
        asked = await h.inspector.threads(
            filter={"suite": tag}, values={"messages[1].tool_calls[0].name": "get_weather"}
        )
        assert sorted(t.thread_id for t in asked.threads) == [f"{tag}-done", f"{tag}-waiting"]


async def test_value_filters_nested_metadata_and_counts(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    async with harness(make_engine, backend, mode) as h:
        tag = uuid.uuid4().hex
        versions = {"order_id": 1, "customer": 1}
        for n in range(6):
            values = {"order_id": n, "customer": {"tier": "gold" if n % 2 else "silver"}}
            metadata = {"suite": tag, "org": {"tenant": "acme" if n % 2 else "globex", "n": n}}
            await h.saver.put(
                config(f"{tag}-order-{n}"), checkpoint(values, versions), metadata, versions
            )
        mine = {"suite": tag}

        async def ids(**kwargs: Any) -> list[str]:
            page = await h.inspector.threads(filter=mine, sort_by="thread_id", **kwargs)
            return [t.thread_id.removeprefix(f"{tag}-") for t in page.threads]

        assert await ids(values={"order_id": 3}) == ["order-3"]
        assert await h.inspector.count_threads(filter=mine, values={"order_id": 3}) == 1
        assert await ids(values={"order_id": True}) == []  # JSON: true is not 1
        gold = ["order-1", "order-3", "order-5"]
        assert await ids(values={"customer": {"tier": "gold"}}) == gold
        assert await ids(values={"customer.tier": "gold"}) == gold
        assert await h.inspector.count_threads(filter=mine, values={"customer.tier": "gold"}) == 3
        # Nested metadata: containment, on the database.
        acme = await h.call("threads", filter={**mine, "org": {"tenant": "acme"}}, count=True)
        assert sorted(t.thread_id for t in acme.threads) == [f"{tag}-{n}" for n in gold]
        assert acme.total == 3
        assert await ids(**{"values": {"order_id": 1}}) == ["order-1"]
        assert await h.inspector.count_threads(filter={**mine, "org": {"n": 4}}) == 1
        assert await ids(sort_order="desc") == [f"order-{n}" for n in range(5, -1, -1)]
        # Paging a value filter: next_offset walks the candidates; pages add up.
        seen: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = await h.inspector.threads(
                filter=mine, values={"customer": {"tier": "silver"}}, sort_by="thread_id",
                limit=2, scan_limit=2, offset=offset,
            )  # fmt: skip
            seen += [t.thread_id.removeprefix(f"{tag}-") for t in page.threads]
            offset = page.next_offset
        assert seen == ["order-0", "order-2", "order-4"]
        page = await h.inspector.threads(
            filter=mine, values={"order_id": 4}, extract={"tier": "values.customer.tier"},
            select=["thread_id", "extracted"],
        )  # fmt: skip
        assert page.rows() == [{"thread_id": f"{tag}-order-4", "extracted": {"tier": "silver"}}]


async def test_bad_search_input_names_the_bad_part(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    async with harness(make_engine, backend, mode) as h:
        cases: list[tuple[dict[str, Any], str]] = [
            ({"sort_by": "size"}, "sort_by must be one of"),
            ({"sort_by": "thread_id", "sort_order": "up"}, "sort_order"),
            ({"sort_by": "thread_id", "order": "last_write"}, "not both"),
            ({"values": {"messages[-1": "x"}}, r"'messages\[-1' at character 9"),
            ({"values": {"a..b": 1}}, "malformed path 'a..b'"),
            ({"extract": {"x": "values"}}, "must name a channel"),
            ({"extract": {"x": "state.a"}}, "must begin with values"),
            ({"select": ["thread_id", "size"]}, "unknown field.*'size'"),
            ({"scan_limit": 0}, "scan_limit"),
        ]
        for kwargs, message in cases:
            with pytest.raises(InvalidInputError, match=message):
                await h.inspector.threads(**kwargs)
        with pytest.raises(InvalidInputError, match=r"values filter '\[0\]'"):
            await h.inspector.count_threads(values={"[0]": 1})


@pytest.mark.sqlite
def test_the_cli_searches_counts_and_names_bad_input(tmp_path: Any) -> None:
    from test_cli import assert_one_error_line, run_cli

    from lg_sqla import SQLAlchemySaver

    url = f"sqlite:///{tmp_path}/search.db"
    with SQLAlchemySaver.from_conn_string(url) as saver:
        saver.setup()
        versions: dict[str, str | int | float] = {"order_id": 1, "note": 1}
        for n in range(4):
            values = {"order_id": n, "note": f"order {n} " + "x" * 60}
            saver.put(config(f"t-{n}"), checkpoint(values, versions), {"step": n}, versions)
    done = run_cli(
        ["threads", "--value", "order_id=3", "--extract", "note=values.note", "--count"], url
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "1 of 1 thread(s)"
    assert "t-3" in lines[2] and "order 3 x" in lines[2]
    assert max(map(len, lines)) <= 80
    for args, fragment in (
        (["--value", "order_id[=1"], "malformed path 'order_id['"),
        (["--extract", "state.x"], "must begin with values"),
    ):
        assert_one_error_line(run_cli(["threads", *args], url), fragment)
