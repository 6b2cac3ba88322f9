"""Text outside a MySQL connection's character set: exact, or refused, never '?'.

lg_sqla's columns are utf8mb4, but a MariaDB/MySQL session with ``?charset=latin1``
(or ``utf8``, which is utf8mb3: no emoji) has the server send every stored character
outside that set back as '?', and refuses (or, with a lax sql_mode, mangles) such
text on the way in. lg_sqla's own engines (``from_conn_string``) always connect
with utf8mb4, whatever the URL says; a caller's engine with another session charset
is refused with an error naming the fix, before anything is written or read.

Run on MariaDB at utf8mb4 and at the server's default latin1 (``mysql-latin1``),
through PyMySQL and asyncmy (and mysqlclient for the refusal).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from langgraph.checkpoint.base import Checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from modes import cache_on, either, saver_from_url, saver_on, store_from_url, store_on
from sqlalchemy.ext.asyncio import create_async_engine

from lg_sqla.engines import configure_engine
from lg_sqla.errors import InvalidInputError

pytestmark = [
    pytest.mark.any_charset,
    pytest.mark.parametrize("backend", ["mysql", "mysql-latin1"], indirect=True),
]

# CJK, 4-byte emoji (not in utf8mb3), latin1's own upper half, and two emoji whose
# '?' spellings would be the same: each must stay itself.
TEXTS = ["日本語", "😀", "😁", "ñandú-ÿ", "中文🦜"]
NARROW_CHARSETS = ["latin1", "utf8"]


def _with_charset(url: str, charset: str) -> str:
    return url.split("?")[0] + f"?charset={charset}"


def _checkpoint(n: int, channels: list[str]) -> Checkpoint:
    versions: dict[str, str | int | float] = {channel: "1" for channel in channels}
    return {
        "v": 4,
        "id": f"1ef{n:05d}-0000-6000-8000-000000000000",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {channel: f"value {channel}" for channel in channels},
        "channel_versions": versions,
        "versions_seen": {"node": versions},
        "updated_channels": list(channels),
    }


def _config(thread_id: str, ns: str = "") -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}


def _stored_thread_ids(backend: Backend, prefix: str) -> dict[bytes, str]:
    """thread_id column bytes (HEX, through a utf8mb4 engine) of this test's rows."""
    engine = sa.create_engine(_with_charset(backend.sync_url, "utf8mb4"))
    try:
        with engine.connect() as conn:
            # (Filtered here: MariaDB 10.11's range scan for `thread_id LIKE 'prefix%'`
            # on this utf8mb4_nopad_bin key missed the rows ending in an emoji.)
            rows = conn.execute(sa.text("SELECT HEX(thread_id), thread_id FROM checkpoints"))
            return {bytes.fromhex(hexed): text for hexed, text in rows if text.startswith(prefix)}
    finally:
        engine.dispose()


@pytest.mark.parametrize("charset", NARROW_CHARSETS)
async def test_saver_from_conn_string_keeps_text_any_url_charset_cannot_carry(
    backend: Backend, mode: str, charset: str
) -> None:
    """``?charset=latin1`` / ``utf8`` on a from_conn_string URL: every name and value
    round-trips exactly (main: UnicodeEncodeError for CJK, 1366 for emoji)."""
    url = _with_charset(backend.sync_url if mode == "sync" else backend.async_url, charset)
    prefix = f"cs-{uuid.uuid4().hex[:8]}-"
    ref = InMemorySaver()
    async with saver_from_url(mode, url) as saver:
        for n, text in enumerate(TEXTS, start=1):
            thread_id, channels = prefix + text, [text, "plain"]
            config = _config(thread_id, ns=text)
            metadata: Any = {"source": "loop", "step": n, text: text}
            new_versions: dict[str, str | int | float] = {channel: "1" for channel in channels}
            stored = await saver.put(config, _checkpoint(n, channels), metadata, new_versions)
            ref_stored = ref.put(config, _checkpoint(n, channels), metadata, new_versions)
            writes = [(text, f"write {text}")]
            await saver.put_writes(stored, writes, f"task {text}", f"path {text}")
            ref.put_writes(ref_stored, writes, f"task {text}", f"path {text}")
        for text in TEXTS:
            config = _config(prefix + text, ns=text)
            found, expected = await saver.get_tuple(config), ref.get_tuple(config)
            assert found is not None and expected is not None
            assert found.config == expected.config
            assert found.checkpoint["channel_values"] == expected.checkpoint["channel_values"]
            assert found.metadata == expected.metadata
            assert found.pending_writes == expected.pending_writes
            [listed] = await saver.list(config, filter={text: text})
            assert listed.checkpoint["id"] == expected.checkpoint["id"]
    stored_ids = _stored_thread_ids(backend, prefix)
    assert stored_ids == {(prefix + text).encode(): prefix + text for text in TEXTS}


@pytest.mark.parametrize("charset", NARROW_CHARSETS)
async def test_store_from_conn_string_keeps_text_any_url_charset_cannot_carry(
    backend: Backend, mode: str, charset: str
) -> None:
    url = _with_charset(backend.sync_url if mode == "sync" else backend.async_url, charset)
    root = f"cs-{uuid.uuid4().hex[:8]}"
    async with store_from_url(mode, url) as store:
        for text in TEXTS:
            await store.put((root, text), text, {"text": text, text: [text]})
        for text in TEXTS:
            item = await store.get((root, text), text)
            assert item is not None
            assert (item.namespace, item.key, item.value) == (
                (root, text),
                text,
                {"text": text, text: [text]},
            )
            [found] = await store.search((root, text), filter={"text": text})
            assert found.key == text
        namespaces = await store.list_namespaces(prefix=(root,))
        assert sorted(namespaces) == sorted((root, text) for text in TEXTS)


async def test_a_callers_engine_with_a_narrow_charset_is_refused_before_any_statement(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    """A caller's engine on a latin1 or utf8 (utf8mb3) session: rows written through
    utf8mb4 would come back with '?' for '日本語' and '😀' (main: silently), and two
    thread ids would become one. Every call is refused, naming the fix; nothing is
    written."""
    prefix = f"cs-{uuid.uuid4().hex[:8]}-"
    writer = saver_on(make_engine.for_mode(mode, backend))
    for n, text in enumerate(TEXTS, start=1):
        await writer.put(_config(prefix + text), _checkpoint(n, [text]), {}, {text: "1"})
    before = _stored_thread_ids(backend, prefix)
    for charset in NARROW_CHARSETS:
        narrow = Backend(
            backend.name,
            _with_charset(backend.sync_url, charset),
            _with_charset(backend.async_url, charset),
            backend.variant,
        )
        engine = make_engine.for_mode(mode, narrow)
        saver, store, cache = saver_on(engine), store_on(engine), cache_on(engine)
        calls = [
            saver.list(None),
            saver.get_tuple(_config(prefix + "ñandú-ÿ")),
            saver.put(_config(prefix + "new"), _checkpoint(9, ["a"]), {}, {"a": "1"}),
            store.put(("cs", "a"), "k", {"v": 1}),
            store.get(("cs", "a"), "k"),
            cache.set({(("cs",), "k"): ({"v": 1}, None)}),
            cache.get([(("cs",), "k")]),
        ]
        for call in calls:
            with pytest.raises(InvalidInputError) as refused:
                await call
            message = str(refused.value)
            assert "utf8mb4" in message and "?charset=utf8mb4" in message, message
            assert (f"character_set_results={charset}") in message.replace("utf8mb3", "utf8")
    assert _stored_thread_ids(backend, prefix) == before
    assert len(before) == len(TEXTS)


@pytest.mark.parametrize("driver", ["mysqldb", "asyncmy"])
async def test_refusal_whichever_the_driver(backend: Backend, driver: str) -> None:
    """mysqlclient (sync) and asyncmy (async) sessions are checked the same way."""
    url = _with_charset(backend.sync_url.replace("+pymysql", f"+{driver}"), "latin1")
    if driver == "asyncmy":
        async_engine = configure_engine(create_async_engine(url))
        try:
            with pytest.raises(InvalidInputError, match="character_set_client=latin1"):
                await saver_on(async_engine).get_tuple(_config("x"))
        finally:
            await async_engine.dispose()
        return
    engine = configure_engine(sa.create_engine(url))
    try:
        with pytest.raises(InvalidInputError, match="character_set_client=latin1"):
            await either(saver_on(engine).target, "sync").get_tuple(_config("x"))
    finally:
        engine.dispose()
