# mypy: disable-error-code="arg-type"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Any name is a name: channel names (state keys), thread ids, namespaces and
metadata keys that are not plain ASCII identifiers round-trip on every dialect.

MariaDB compares JSON path member names with the stored document byte for byte
and its path parser refuses some names, SQLite's path labels have no escapes:
names built into JSON paths used to come back without their channels (silent
state loss) or never matched a filter. Every result here is compared with
LangGraph's own InMemorySaver, sync and async.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory, fresh_saver
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from modes import Either, either, saver_from_url, saver_on
from typing_extensions import TypedDict

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver

# Also on a MariaDB database at the server's default charset (conftest.py).
pytestmark = pytest.mark.any_charset

HOSTILE = [
    "ñandú",
    "日本語",
    "😀",
    "🦜🔗",
    "u\u0308",  # a combining diaeresis
    "-k",
    "-",
    "k-",
    "a\x01b",
    "\x1f",
    "\t",
    "\x7f",
    "\u2028",
    'say "hi"',
    '"',
    'a"',
    "back\\slash",
    "\\",
    '\\"',
    "a.b",
    ".",
    "$",
    "$.x",
    "a*b",
    "*",
    "[0]",
    "a[0]",
    " lead",
    "trail ",
    "a'b",
    "') OR 1=1 --",
    "",
    "A",
    "a",
]


# One test body for both savers: ``await api.put(...)`` is the sync saver's put or the
# async saver's aput (modes.py).
Api = Either[SQLAlchemySaver | AsyncSQLAlchemySaver]


# Names as hypothesis draws them: any code point but NUL (stripped from documents
# by design, like LangGraph's own savers) and lone surrogates (not UTF-8).
names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)


@pytest.fixture
def api(make_engine: EngineFactory, backend: Backend, mode: str) -> Api:
    return saver_on(make_engine.for_mode(mode, backend))


def _config(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _checkpoint(n: int, values: dict[str, Any], versions: dict[str, str]) -> dict[str, Any]:
    return {
        "v": 4,
        "id": f"1ef{n:05d}-0000-6000-8000-000000000000",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": dict(values),
        "channel_versions": dict(versions),
        "versions_seen": {"node": dict(versions)},
        "updated_channels": list(versions),
    }


def _view(found: CheckpointTuple | None) -> Any:
    """What a user reads from a tuple (saver-independent parts)."""
    if found is None:
        return None
    checkpoint = found.checkpoint
    return (
        found.config,
        found.parent_config,
        dict(found.metadata),
        checkpoint["id"],
        checkpoint["channel_values"],
        {k: str(v) for k, v in checkpoint["channel_versions"].items()},
        checkpoint["versions_seen"],
        found.pending_writes,
    )


async def _store_both(
    api: Api, ref: InMemorySaver, thread_id: str, ns: str, channels: list[str], meta_key: str
) -> list[RunnableConfig]:
    """Two checkpoints (the second changes half the channels) and writes, in both savers."""
    configs: list[RunnableConfig] = []
    parent = _config(thread_id, ns)
    versions = {ch: "1" for ch in channels}
    values: dict[str, Any] = {ch: f"value of {ch!r}" for ch in channels}
    for n in (1, 2):
        if n == 2:
            changed = channels[::2]
            versions.update({ch: "2" for ch in changed})
            # Every other one to None: kept inline, under the channel's name as a JSON key.
            values.update({ch: None if i % 2 else [n, ch] for i, ch in enumerate(changed)})
            new_versions = {ch: "2" for ch in changed}
        else:
            new_versions = dict(versions)
        checkpoint: Any = _checkpoint(n, values, versions)
        metadata: Any = {"step": n, meta_key: f"m{n}", "source": "loop"}
        stored = await api.put(parent, checkpoint, metadata, new_versions)
        ref.put(parent, checkpoint, metadata, new_versions)
        configs.append(stored)
        parent = stored
    writes = [(ch, f"write to {ch!r}") for ch in channels]
    await api.put_writes(configs[-1], writes, "task-1", "path")
    ref.put_writes(configs[-1], writes, "task-1", "path")
    return configs


async def _assert_same(
    api: Api, ref: InMemorySaver, thread_id: str, ns: str, configs: list[RunnableConfig], key: str
) -> None:
    for cfg in [_config(thread_id, ns), *configs]:
        assert _view(await api.get_tuple(cfg)) == _view(ref.get_tuple(cfg))
    listed = [_view(t) for t in await api.list(_config(thread_id, ns))]
    assert listed == [_view(t) for t in ref.list(_config(thread_id, ns))]
    assert len(listed) == 2
    for query in ({key: "m1"}, {key: "m2"}, {key: "nope"}, {key: None}, {"source": "loop"}):
        ours = [t.checkpoint["id"] for t in await api.list(_config(thread_id, ns), filter=query)]
        theirs = [t.checkpoint["id"] for t in ref.list(_config(thread_id, ns), filter=query)]
        assert ours == theirs, query


async def test_hostile_names_round_trip_like_in_memory_saver(api: Api) -> None:
    """Every name at once: channels, metadata keys, thread ids and namespaces."""
    ref = InMemorySaver()
    for name in HOSTILE:
        thread_id = f"t-{uuid.uuid4().hex[:8]}-{name}"
        configs = await _store_both(api, ref, thread_id, name, HOSTILE, name)
        await _assert_same(api, ref, thread_id, name, configs, name)


async def test_each_hostile_channel_name_alone_is_kept(api: Api) -> None:
    """One hostile channel beside a plain one: neither is dropped from get_tuple or list."""
    for name in HOSTILE:
        thread_id = f"t-{uuid.uuid4().hex[:8]}"
        channels = ["plain", name] if name != "plain" else [name]
        stored = await api.put(
            _config(thread_id),
            _checkpoint(1, {ch: ch for ch in channels}, {ch: "1" for ch in channels}),
            {name: 1},
            {ch: "1" for ch in channels},
        )
        found = await api.get_tuple(stored)
        assert found is not None
        assert found.checkpoint["channel_values"] == {ch: ch for ch in channels}, repr(name)
        [listed] = await api.list(_config(thread_id), filter={name: 1})
        assert listed.checkpoint["channel_values"] == {ch: ch for ch in channels}, repr(name)


@settings(
    max_examples=12,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    channels=st.lists(names, min_size=1, max_size=6, unique=True),
    thread=names,
    ns=names,
    meta_key=names,
)
async def test_any_names_match_in_memory_saver(
    api: Api, channels: list[str], thread: str, ns: str, meta_key: str
) -> None:
    ref = InMemorySaver()
    thread_id = f"{uuid.uuid4().hex[:8]}{thread}"
    configs = await _store_both(api, ref, thread_id, ns, channels, meta_key)
    await _assert_same(api, ref, thread_id, ns, configs, meta_key)


# --- a real graph whose state keys are hostile ------------------------------------

GRAPH_KEYS = ["ñandú", "日本語", "😀", "-k", 'say "hi"', "back\\slash", "a.b", "$", "[0]", "\x01"]
HostileState = TypedDict("HostileState", {key: int for key in GRAPH_KEYS})  # type: ignore[misc]


def _hostile_graph() -> StateGraph[Any]:
    def bump(state: Any) -> dict[str, int]:
        return {key: state.get(key, 0) + i + 1 for i, key in enumerate(GRAPH_KEYS)}

    builder = StateGraph(HostileState)
    builder.add_node("bump", bump)
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    return builder


def _graph_start() -> dict[str, int]:
    return dict.fromkeys(GRAPH_KEYS, 0)


def _graph_expected(turns: int) -> dict[str, int]:
    return {key: turns * (i + 1) for i, key in enumerate(GRAPH_KEYS)}


async def test_graph_state_keeps_hostile_keys(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    saver = saver_on(make_engine.for_mode(mode, backend))
    graph = either(_hostile_graph().compile(checkpointer=saver.target), mode)
    cfg: RunnableConfig = {"configurable": {"thread_id": f"g-{uuid.uuid4()}"}}
    await graph.invoke(_graph_start(), cfg)
    assert (await graph.get_state(cfg)).values == _graph_expected(1)
    await graph.invoke({}, cfg)
    assert (await graph.get_state(cfg)).values == _graph_expected(2)
    history = await graph.get_state_history(cfg)
    assert all(set(s.values) == set(GRAPH_KEYS) for s in history if s.values)


# --- a database created with the server's default charset -------------------------


def test_our_text_columns_are_utf8_whatever_the_database_default(
    engine: sa.Engine, backend: Backend
) -> None:
    """Every text column of lg_sqla's tables stores UTF-8, emoji included, even in a
    MariaDB database left at latin1 (the `mysql-latin1` backend)."""
    with engine.connect() as conn:
        if backend.name == "mysql":
            charsets = conn.execute(
                sa.text(
                    "SELECT table_name, column_name, character_set_name"
                    " FROM information_schema.columns WHERE table_schema = DATABASE()"
                    " AND table_name IN"
                    " ('checkpoints', 'checkpoint_writes', 'checkpoint_blobs')"
                    " AND character_set_name IS NOT NULL"
                )
            ).all()
            assert len(charsets) >= 10, charsets
            assert {row[2] for row in charsets} == {"utf8mb4"}, charsets
            tables = conn.execute(
                sa.text(
                    "SELECT table_collation FROM information_schema.tables"
                    " WHERE table_schema = DATABASE() AND table_name LIKE 'checkpoint%'"
                )
            ).scalars()
            assert {t.split("_")[0] for t in tables} == {"utf8mb4"}
        elif backend.name == "postgres":
            encoding = conn.execute(sa.text("SHOW server_encoding")).scalar_one()
            assert encoding == "UTF8"
        else:
            encoding = conn.execute(sa.text("PRAGMA encoding")).scalar_one()
            assert encoding == "UTF-8"


def _latin1_url(backend: Backend, mode: str) -> str:
    """The same database; on MySQL/MariaDB a URL asking for latin1 connections.

    (psycopg decodes JSON as UTF-8 whatever the client_encoding, and SQLite has
    no connection charset: those keep their URLs.)
    """
    url = backend.sync_url if mode == "sync" else backend.async_url
    return url.split("?")[0] + "?charset=latin1" if backend.name == "mysql" else url


async def test_reads_and_filters_with_a_latin1_url(backend: Backend, mode: str) -> None:
    """from_conn_string with ``?charset=latin1``: reads and filters find every name,
    those outside latin1 too (its engine connects with utf8mb4 whatever the URL
    asks; a caller's latin1 engine is refused: test_connection_charset.py)."""
    channels = ["ñandú", "日本語", "😀", "-k", 'say "hi"', "a.b", "plain"]
    ref = InMemorySaver()
    thread_id = f"ñ-{uuid.uuid4().hex[:8]}-日本"
    async with saver_from_url(mode, _latin1_url(backend, mode)) as api:
        configs = await _store_both(api, ref, thread_id, "ns-é🦜", channels, "clé-キー")
        await _assert_same(api, ref, thread_id, "ns-é🦜", configs, "clé-キー")


# Channel names as any JSON writer may spell them (raw UTF-8, no quote, no leading "-").
OTHER_SPELLING = ["ñandú", "日本語", "😀", "a\x01b", "\u2028", "back\\slash", "a.b", "$", "[0]", ""]


async def test_documents_spelled_by_other_writers_keep_their_channels(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """Rows whose JSON another writer spelled differently (raw UTF-8: earlier lg_sqla
    versions with an engine's own json_serializer, an import, a manual fix) keep
    their channels: the MySQL join names each key as the document spells it."""
    ref = InMemorySaver()
    thread_id = f"t-{uuid.uuid4().hex[:8]}"
    with fresh_saver(backend) as saver:
        configs = await _store_both(
            either(saver, "sync"), ref, thread_id, "", OTHER_SPELLING, "step-key"
        )
    engine = make_engine(backend)
    placeholder = "CAST(:d AS JSONB)" if backend.name == "postgres" else ":d"
    with engine.begin() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT checkpoint_id, checkpoint, metadata FROM checkpoints WHERE thread_id = :t"
            ),
            {"t": thread_id},
        ).all()
        assert len(rows) == 2
        for checkpoint_id, checkpoint, metadata in rows:
            for column, value in (("checkpoint", checkpoint), ("metadata", metadata)):
                document = value if isinstance(value, dict) else json.loads(value)
                conn.execute(
                    sa.text(
                        f"UPDATE checkpoints SET {column} = {placeholder}"
                        " WHERE thread_id = :t AND checkpoint_id = :c"
                    ),
                    {
                        "d": json.dumps(document, ensure_ascii=False),
                        "t": thread_id,
                        "c": checkpoint_id,
                    },
                )
    api = saver_on(make_engine.for_mode(mode, backend))
    await _assert_same(api, ref, thread_id, "", configs, "step-key")
