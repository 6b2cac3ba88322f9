# mypy: disable-error-code="arg-type,return-value,type-arg,typeddict-unknown-key"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Round trips per call, on every dialect: no N+1 anywhere.

get_tuple is one statement (checkpoint + blobs joined through channel_versions
+ pending writes); list is one statement per page however many checkpoints,
channels and writes the page holds; put is two (blobs, checkpoint), put_writes one;
a put whose values are all kept in the document (small primitives) is one.
"""

from __future__ import annotations

import pytest
from backends import Backend, EngineFactory
from helpers import checkpoint, config, count_statements, new_thread

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver

CHANNELS = 8


def _fill(saver: SQLAlchemySaver, thread_id: str, n: int) -> list[dict]:
    """n checkpoints of CHANNELS channels each, every checkpoint with 3 writes."""
    configs = []
    parent = config(thread_id)
    for i in range(n):
        values = {f"ch{c}": {"step": i, "c": c} for c in range(CHANNELS)}
        versions = {k: saver.get_next_version(None) if i == 0 else f"{i + 1:032}.0" for k in values}
        stored = saver.put(
            parent, checkpoint(values, versions), {"step": i, "source": "loop"}, versions
        )
        saver.put_writes(stored, [("a", 1), ("b", 2), ("c", 3)], task_id=f"task-{i}")
        configs.append(stored)
        parent = stored
    return configs


def test_sync_statement_counts(make_engine: EngineFactory, backend: Backend) -> None:
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine, list_page_size=10)
    thread_id = new_thread()
    saver.get_tuple(config(thread_id))  # the one-off schema check happens here

    with count_statements(engine) as put_count:
        configs = _fill(saver, thread_id, 25)
    # put: blobs + checkpoint (PostgreSQL: one statement, data-modifying CTE);
    # put_writes: one statement.
    put_statements = 1 if backend.name == "postgres" else 2
    assert put_count.count == 25 * (put_statements + 1)

    with count_statements(engine) as c:
        latest = saver.get_tuple(config(thread_id))
    assert c.count == 1, c.statements
    assert latest is not None
    assert len(latest.checkpoint["channel_values"]) == CHANNELS
    assert len(latest.pending_writes or []) == 3

    with count_statements(engine) as c:
        old = saver.get_tuple(configs[3])
    assert c.count == 1
    assert old is not None and old.checkpoint["channel_values"]["ch0"] == {"step": 3, "c": 0}

    with count_statements(engine) as c:
        page = list(saver.list(config(thread_id), limit=10))
    assert c.count == 1 and len(page) == 10
    assert all(len(t.checkpoint["channel_values"]) == CHANNELS for t in page)
    assert all(len(t.pending_writes or []) == 3 for t in page)

    with count_statements(engine) as c:
        everything = list(saver.list(config(thread_id)))
    # 25 checkpoints in pages of 10: 10 + 10 + 5, one statement each.
    assert c.count == 3 and len(everything) == 25
    ids = [t.config["configurable"]["checkpoint_id"] for t in everything]
    assert ids == sorted(ids, reverse=True)
    assert ids == [c["configurable"]["checkpoint_id"] for c in reversed(configs)]


async def test_async_statement_counts(make_engine: EngineFactory, backend: Backend) -> None:
    engine = make_engine.aio(backend)
    saver = AsyncSQLAlchemySaver(engine, list_page_size=10)
    thread_id = new_thread()
    await saver.aget_tuple(config(thread_id))
    parent = config(thread_id)
    for i in range(12):
        values = {f"ch{c}": [i, c] for c in range(CHANNELS)}
        versions = {k: f"{i + 1:032}.0" for k in values}
        parent = await saver.aput(parent, checkpoint(values, versions), {"step": i}, versions)
        await saver.aput_writes(parent, [("x", i)], task_id="t")

    with count_statements(engine.sync_engine) as c:
        latest = await saver.aget_tuple(config(thread_id))
    assert c.count == 1
    assert latest is not None and latest.checkpoint["channel_values"]["ch7"] == [11, 7]

    with count_statements(engine.sync_engine) as c:
        listed = [t async for t in saver.alist(config(thread_id))]
    assert c.count == 2 and len(listed) == 12
    assert [t.metadata["step"] for t in listed] == list(range(11, -1, -1))


@pytest.mark.parametrize("page_size", [1, 3, 100])
def test_list_pages_across_threads(
    make_engine: EngineFactory, backend: Backend, page_size: int
) -> None:
    """config=None lists every thread newest first; keyset pages neither skip nor repeat."""
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine, list_page_size=page_size)
    marker = new_thread()
    threads = [f"{marker}-{i}" for i in range(3)]
    expected = []
    for _i in range(4):
        for t in threads:
            for ns in ("", "child:1"):
                stored = saver.put(config(t, ns), checkpoint({}), {"marker": marker}, {})
                expected.append(stored["configurable"])
    listed = [t.config["configurable"] for t in saver.list(None, filter={"marker": marker})]
    assert sorted(map(repr, listed)) == sorted(map(repr, expected))
    assert len(listed) == len(expected)
    ids = [c["checkpoint_id"] for c in listed]
    assert ids == sorted(ids, reverse=True)
    limited = list(saver.list(None, filter={"marker": marker}, limit=5))
    assert [t.config["configurable"] for t in limited] == listed[:5]


@pytest.mark.parametrize("rows", [1, 2, 32, 33, 70])
def test_puts_of_any_size_keep_their_statement_counts(
    make_engine: EngineFactory, backend: Backend, rows: int
) -> None:
    """PostgreSQL builds a statement per row count up to dialects.VALUES_ROWS_MAX and
    sends arrays beyond it: every size is one statement and stores every row."""
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine)
    thread_id = new_thread()
    saver.get_tuple(config(thread_id))  # the one-off schema check
    values = {f"canal-{c}-ñ": {"c": c, "blob": bytes([c % 256]) * c} for c in range(rows)}
    versions = {k: saver.get_next_version(None) for k in values}
    writes = [(f"canal-{w % 3}", {"w": w}) for w in range(rows)]
    with count_statements(engine) as c:
        stored = saver.put(config(thread_id), checkpoint(values, versions), {}, versions)
        saver.put_writes(stored, writes, task_id="tâche")
    assert c.count == (1 if backend.name == "postgres" else 2) + 1, c.statements
    loaded = saver.get_tuple(stored)
    assert loaded is not None
    assert loaded.checkpoint["channel_values"] == values
    assert loaded.pending_writes == [("tâche", ch, v) for ch, v in writes]


def test_a_put_of_inline_values_is_one_statement(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """Small bool/int/str and None live in the checkpoint document: no blob statement
    for a put whose channels hold only those, none to read back for get_tuple."""
    engine = make_engine(backend)
    saver = SQLAlchemySaver(engine)
    thread_id = new_thread()
    saver.get_tuple(config(thread_id))  # the one-off schema check
    values = {"count": 0, "name": "ñame", "flag": True, "branch": None}
    stored = config(thread_id)
    for step in range(3):
        versions = {**dict.fromkeys(values, 1), "count": step + 1}
        new_versions = versions if step == 0 else {"count": step + 1}
        current = {**values, "count": step}
        with count_statements(engine) as c:
            stored = saver.put(stored, checkpoint(current, versions), {}, new_versions)
        assert c.count == 1, c.statements
        with count_statements(engine) as c:
            got = saver.get_tuple(stored)
        assert c.count == 1, c.statements
        assert got is not None and got.checkpoint["channel_values"] == current
