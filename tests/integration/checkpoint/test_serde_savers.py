# mypy: disable-error-code="func-returns-value"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""Serializers through the savers on every dialect: round trips, strict mode, rotation.

Property tests push LangGraph-typical values through put/put_writes/get_tuple
with each serializer stack; a crafted row shows strict mode refusing object
revival from the database; re-encryption rotates keys on a live database while
every checkpoint stays readable, and resumes after an interruption.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from typing import Any

import ormsgpack
import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from hypothesis import HealthCheck, given, settings
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from serde_strategies import COMBINATIONS, canon, top_level

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.models import checkpoint_blobs, checkpoint_writes
from lg_sqla.serde import CompressedSerializer, EncryptedSerializer, MissingKeyError, parse_type_tag

K1, K2 = bytes(range(32)), bytes(range(100, 132))
SAVER_COMBINATIONS = ["plain", "compressed+gcm", "eax"]


@pytest.mark.parametrize("name", SAVER_COMBINATIONS)
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(value=top_level)
def test_values_round_trip_through_the_saver(engine: sa.Engine, name: str, value: Any) -> None:
    saver = SQLAlchemySaver(engine, serde=COMBINATIONS[name])
    thread_id = new_thread()
    stored = saver.put(config(thread_id), checkpoint({"v": value}), {}, {"v": 1})
    saver.put_writes(stored, [("w", value)], task_id="t")
    got = saver.get_tuple(stored)
    assert got is not None
    assert canon(got.checkpoint["channel_values"]["v"]) == canon(value)
    assert got.pending_writes is not None and canon(got.pending_writes[0][2]) == canon(value)


def _plant(engine: sa.Engine, thread_id: str, blob: bytes) -> None:
    """What someone with write access to the table could store."""
    with engine.begin() as conn:
        conn.execute(
            sa.update(checkpoint_blobs)
            .where(checkpoint_blobs.c.thread_id == thread_id)
            .values(type="msgpack", blob=blob)
        )


def test_strict_mode_refuses_revival_from_a_crafted_row(
    make_engine: EngineFactory, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(os, "system", lambda cmd: calls.append(cmd) or 0)
    crafted = ormsgpack.packb(
        {"x": ormsgpack.Ext(0, ormsgpack.packb(("os", "system", "echo pwned")))}
    )
    engine = make_engine(backend)
    thread_id = new_thread()
    permissive = SQLAlchemySaver(engine)
    permissive.put(config(thread_id), checkpoint({"v": {"x": 1}}), {}, {"v": 1})
    _plant(engine, thread_id, crafted)

    strict = SQLAlchemySaver(engine, serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    got = strict.get_tuple(config(thread_id))
    assert calls == []  # nothing ran
    assert got is not None and got.checkpoint["channel_values"]["v"] == {"x": "echo pwned"}

    # The default (permissive) serde does call it: the reason strict mode exists.
    permissive.get_tuple(config(thread_id))
    assert calls == ["echo pwned"]


def _types(engine: sa.Engine, thread_ids: list[str]) -> set[str]:
    with engine.connect() as conn:
        tags = set()
        for table in (checkpoint_blobs, checkpoint_writes):
            tags |= set(
                conn.execute(
                    sa.select(table.c.type).where(
                        table.c.thread_id.in_(thread_ids), table.c.type != "empty"
                    )
                ).scalars()
            )
    return tags


def test_key_rotation_on_a_live_database(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    # A database of its own: re-encryption walks every row of the tables.
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    threads = [new_thread() for _ in range(6)]
    expected: dict[str, Any] = {}
    plain = SQLAlchemySaver(engine)
    for i, t in enumerate(threads):
        value = {"i": i, "text": "x" * (50 * i), "blob": os.urandom(20)}
        stored = plain.put(config(t), checkpoint({"v": value}), {}, {"v": 1})
        plain.put_writes(stored, [("w", [i])], task_id="t")
        expected[t] = value
    assert {parse_type_tag(t).encryption for t in _types(engine, threads)} == {None}

    def readable(saver: SQLAlchemySaver) -> None:
        for t in threads:
            got = saver.get_tuple(config(t))
            assert got is not None and got.checkpoint["channel_values"]["v"] == expected[t]

    # 1. Enable encryption (k1): old plaintext rows still load; re-encrypt them.
    k1 = SQLAlchemySaver(engine, serde=EncryptedSerializer.gcm({"k1": K1}, CompressedSerializer()))
    readable(k1)
    report = k1.reencrypt(batch_size=3, progress=lambda r: readable(k1))
    assert report.rewritten >= 12
    assert {parse_type_tag(t).key_id for t in _types(engine, threads)} == {"k1"}

    # 2. Rotate to k2 while k1 still decrypts; interrupted half-way, then resumed.
    both = SQLAlchemySaver(
        engine, serde=EncryptedSerializer.gcm({"k2": K2, "k1": K1}, CompressedSerializer())
    )

    class Stop(Exception):
        pass

    def stop_after_first_batch(r: Any) -> None:
        readable(both)
        raise Stop

    with pytest.raises(Stop):
        both.reencrypt(batch_size=2, progress=stop_after_first_batch)
    mid = {parse_type_tag(t).key_id for t in _types(engine, threads)}
    readable(both)
    both.reencrypt(batch_size=2, progress=lambda r: readable(both))
    assert {parse_type_tag(t).key_id for t in _types(engine, threads)} == {"k2"}
    assert "k2" in mid

    # 3. Retire k1: everything reads with k2 alone; nothing needs rewriting.
    k2_only = SQLAlchemySaver(engine, serde=EncryptedSerializer.gcm({"k2": K2}))
    readable(k2_only)
    assert k2_only.reencrypt().rewritten == 0
    # A saver without the key gets a clear error naming the key id, never garbage.
    with pytest.raises(MissingKeyError, match="k2"):
        SQLAlchemySaver(engine, serde=EncryptedSerializer.gcm({"k1": K1})).get_tuple(
            config(threads[0])
        )


def test_reencrypt_command(make_engine: EngineFactory, tmp_path: Any) -> None:
    """One subprocess run proves the CLI wiring (the code is the API tested above)."""
    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    engine = make_engine.track(sa.create_engine(url))
    SQLAlchemySaver(engine).setup()
    thread_id = new_thread()
    SQLAlchemySaver(engine).put(config(thread_id), checkpoint({"v": [1, 2]}), {}, {"v": 1})
    env = {
        **os.environ,
        "LG_SQLA_AES_KEYS": "main:" + base64.b64encode(K1).decode(),
        "LG_SQLA_DATABASE_URL": url,
    }
    done = subprocess.run(
        [sys.executable, "-m", "lg_sqla", "reencrypt", "--batch-size", "50"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "done:" in done.stdout and "batch 1:" in done.stdout
    engine = make_engine.track(sa.create_engine(url))
    assert {parse_type_tag(t).key_id for t in _types(engine, [thread_id])} == {"main"}


def test_langgraph_encrypted_rows_interoperate_through_the_savers(
    make_engine: EngineFactory, backend: Backend
) -> None:
    """Rows written with LangGraph's own EncryptedSerializer (pycryptodome AES-EAX) load
    through our EAX serializer, and ours load through LangGraph's."""
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LangGraphEncrypted

    key = b"0123456789abcdef0123456789abcdef"
    value = {"messages": ["secret \U0001f510", b"\x00\x01"], "n": 7}
    engine = make_engine(backend)
    theirs = SQLAlchemySaver(engine, serde=LangGraphEncrypted.from_pycryptodome_aes(key=key))
    ours = SQLAlchemySaver(engine, serde=EncryptedSerializer.eax(key))
    a = theirs.put(config(new_thread()), checkpoint({"v": value}), {}, {"v": 1})
    b = ours.put(config(new_thread()), checkpoint({"v": value}), {}, {"v": 1})
    for reader in (ours, theirs):
        for stored in (a, b):
            got = reader.get_tuple(stored)
            assert got is not None and got.checkpoint["channel_values"]["v"] == value


async def test_reencrypt_twins_on_both_savers(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """reencrypt/areencrypt on both savers: the sync saver's areencrypt runs in a worker
    thread, the async saver's reencrypt on its loop from another thread (and refuses
    on the loop's own thread instead of deadlocking)."""
    engine, async_engine = make_engine(fresh_database), make_engine.aio(fresh_database)
    SQLAlchemySaver(engine).setup()
    threads = [new_thread() for _ in range(3)]
    plain = SQLAlchemySaver(engine)
    for i, t in enumerate(threads):
        stored = plain.put(config(t), checkpoint({"v": [i, "x" * i]}), {}, {"v": 1})
        plain.put_writes(stored, [("w", i)], task_id="t")

    def keys() -> set[str | None]:
        return {parse_type_tag(t).key_id for t in _types(engine, threads)}

    def readable(saver: SQLAlchemySaver | AsyncSQLAlchemySaver) -> None:
        for i, t in enumerate(threads):
            got = saver.get_tuple(config(t))
            assert got is not None and got.checkpoint["channel_values"]["v"] == [i, "x" * i]
            assert got.pending_writes == [("t", "w", i)]

    k1 = EncryptedSerializer.gcm({"k1": K1})
    report = await SQLAlchemySaver(engine, serde=k1).areencrypt(batch_size=2)
    assert report.rewritten == 6 and keys() == {"k1"}

    k2 = EncryptedSerializer.gcm({"k2": K2, "k1": K1})
    async_k2 = AsyncSQLAlchemySaver(async_engine, serde=k2)
    assert (await async_k2.areencrypt(batch_size=2)).rewritten == 6 and keys() == {"k2"}

    k3 = EncryptedSerializer.gcm({"k3": bytes(range(50, 82)), "k2": K2})
    async_k3 = AsyncSQLAlchemySaver(async_engine, serde=k3)
    with pytest.raises(asyncio.InvalidStateError, match="different thread"):
        async_k3.reencrypt()
    worker = asyncio.create_task(asyncio.to_thread(async_k3.reencrypt, batch_size=4))
    assert (await worker).rewritten == 6 and keys() == {"k3"}
    readable(SQLAlchemySaver(engine, serde=k3))
