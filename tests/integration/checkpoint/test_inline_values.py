"""``None`` and small primitive values inline in the checkpoint document, no row for a
value-less version.

What users rely on: a checkpoint reads back exactly as written whichever way its
values are stored; databases written before (a ``"null"`` blob for ``None``, an
``"empty"`` blob for a versioned channel without a value) keep reading, mixed with
checkpoints written now; an encrypting serializer keeps everything in blobs; history
walks, inspection and blob garbage collection see inline values.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread, table_counts
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, Checkpoint
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from modes import saver_on

from lg_sqla import SQLAlchemySaver
from lg_sqla.checkpoint import codec, json_values
from lg_sqla.inspection import Inspector
from lg_sqla.models import checkpoint_blobs, checkpoints
from lg_sqla.serde import EncryptedSerializer
from lg_sqla.shared import key_hash, utc_now

KEY = bytes(range(32))


def _blob_channels(engine: sa.Engine, thread_id: str) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(checkpoint_blobs.c.channel, checkpoint_blobs.c.type).where(
                checkpoint_blobs.c.thread_id == thread_id
            )
        )
        return sorted((r.channel, r.type) for r in rows)


def _documents(engine: sa.Engine, thread_id: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(checkpoints.c.checkpoint)
            .where(checkpoints.c.thread_id == thread_id)
            .order_by(checkpoints.c.checkpoint_id)
        )
        return [json_values.json_object(r.checkpoint) for r in rows]


def _put_old_format(
    engine: sa.Engine,
    serde: SerializerProtocol,
    parent: RunnableConfig,
    cp: Checkpoint,
    new_versions: dict[str, Any],
) -> RunnableConfig:
    """A checkpoint as lg_sqla stored it before inline values: a blob row for every new
    version, ``None`` included, and an ``"empty"`` one for a version without a value."""
    thread_id = parent["configurable"]["thread_id"]
    nsh, now = key_hash(""), utc_now()
    document = codec.dump_checkpoint_document(cp)
    with engine.begin() as conn:
        for channel, version in new_versions.items():
            if channel in cp["channel_values"]:
                type_, blob = serde.dumps_typed(cp["channel_values"][channel])
            else:
                type_, blob = codec.EMPTY_TYPE, None
            conn.execute(
                sa.insert(checkpoint_blobs).values(
                    thread_id=thread_id,
                    checkpoint_ns_hash=nsh,
                    channel=channel,
                    version=codec.version_str(version),
                    type=type_,
                    blob=blob,
                    created_at=now,
                )
            )
        conn.execute(
            sa.insert(checkpoints).values(
                thread_id=thread_id,
                checkpoint_ns_hash=nsh,
                checkpoint_id=cp["id"],
                checkpoint_ns="",
                parent_checkpoint_id=parent["configurable"].get("checkpoint_id"),
                run_id=None,
                checkpoint=document,
                metadata={"step": 0},
                created_at=now,
                updated_at=now,
            )
        )
    return config(thread_id, checkpoint_id=cp["id"])


async def test_none_is_inline_and_a_value_less_version_has_no_row(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    saver = saver_on(make_engine.for_mode(mode, backend))
    sync_engine = make_engine(backend)  # reads the rows themselves
    thread_id = new_thread()
    values = {"branch": None, "count": 3, "name": "x", "messages": ["hi"]}
    versions = {**{k: 1 for k in values}, "delta": 1}  # delta: versioned, no value
    stored = await saver.put(config(thread_id), checkpoint(values, versions), {}, versions)

    # None and the small int and str are inline; the list is a blob.
    assert _blob_channels(sync_engine, thread_id) == [("messages", "msgpack")]
    assert _documents(sync_engine, thread_id)[0][codec.INLINE_KEY] == {
        "branch": [None],
        "count": [3],
        "name": ["x"],
    }
    got = await saver.get_tuple(stored)
    assert got is not None
    assert got.checkpoint["channel_values"] == values
    assert codec.INLINE_KEY not in got.checkpoint
    # The next checkpoint keeps None inline (its own document) without a new version.
    child = checkpoint({**values, "count": 4}, {**versions, "count": 2})
    stored = await saver.put(stored, child, {}, {"count": 2})
    (latest,) = await saver.list(config(thread_id), limit=1)
    assert latest.checkpoint["channel_values"] == {**values, "count": 4}


def test_rows_written_before_read_alongside_inline_ones(engine: sa.Engine) -> None:
    saver = SQLAlchemySaver(engine)
    thread_id = new_thread()
    values_1 = {"branch": None, "messages": ["a"]}
    versions_1 = {"branch": 1, "messages": 1, "delta": 1}
    old = _put_old_format(
        engine, saver.serde, config(thread_id), checkpoint(values_1, versions_1), versions_1
    )
    assert ("branch", "null") in _blob_channels(engine, thread_id)
    assert ("delta", codec.EMPTY_TYPE) in _blob_channels(engine, thread_id)
    # New-format children; the first keeps branch at the version the old row holds.
    values_2 = {"branch": None, "messages": ["a", "b"]}
    versions_2 = {**versions_1, "messages": 2}
    new = saver.put(old, checkpoint(values_2, versions_2), {"step": 1}, {"messages": 2})
    versions_3 = {**versions_2, "branch": 2, "delta": 2}
    values_3 = {"messages": ["a", "b"], "delta": _DeltaSnapshot(["d"])}
    newest = saver.put(
        new, checkpoint(values_3, versions_3), {"step": 2}, {"branch": 2, "delta": 2}
    )
    # ...and an old-format one after them.
    values_4 = {"branch": None, "messages": ["a", "b", "c"]}
    versions_4 = {**versions_3, "branch": 3, "messages": 3, "delta": 3}
    last = _put_old_format(
        engine,
        saver.serde,
        newest,
        checkpoint(values_4, versions_4),
        {"branch": 3, "messages": 3, "delta": 3},
    )

    expected = [values_4, values_3, values_2, values_1]
    listed = list(saver.list(config(thread_id)))
    assert [t.checkpoint["channel_values"] for t in listed] == expected
    for stored, values in zip((last, newest, new, old), expected, strict=True):
        got = saver.get_tuple(stored)
        assert got is not None and got.checkpoint["channel_values"] == values
    # The SQL walk sees the old null blob, the new inline None and the snapshot alike.
    for target in (last, newest, new):
        for channels in (["branch"], ["delta"], ["branch", "delta", "messages"]):
            assert saver.get_delta_channel_history(
                config=target, channels=channels
            ) == BaseCheckpointSaver.get_delta_channel_history(
                saver, config=target, channels=channels
            )


def test_an_encrypting_serializer_keeps_none_in_blobs(engine: sa.Engine) -> None:
    serde = EncryptedSerializer.gcm({"k1": KEY})
    saver = SQLAlchemySaver(engine, serde=serde)
    thread_id = new_thread()
    values = {"branch": None, "secret": "s3cr3t"}
    stored = saver.put(config(thread_id), checkpoint(values), {}, {"branch": 1, "secret": 1})
    (document,) = _documents(engine, thread_id)
    assert codec.INLINE_KEY not in document
    assert "s3cr3t" not in str(document)
    types = dict(_blob_channels(engine, thread_id))
    assert set(types) == {"branch", "secret"}
    assert all("+" in t for t in types.values()), types  # layered: encrypted
    got = saver.get_tuple(stored)
    assert got is not None and got.checkpoint["channel_values"] == values


def test_inspection_and_garbage_collection_see_inline_values(engine: sa.Engine) -> None:
    saver = SQLAlchemySaver(engine)
    inspector = Inspector(saver)
    thread_id = new_thread()
    first = saver.put(
        config(thread_id), checkpoint({"branch": "go", "m": [1]}), {}, {"branch": 1, "m": 1}
    )
    versions: dict[str, str | int | float] = {"branch": 2, "m": 2}
    second = saver.put(first, checkpoint({"branch": None, "m": [1, 2]}, versions), {}, versions)

    latest = inspector.latest("branch", [thread_id])
    assert latest[thread_id].value is None
    assert latest[thread_id].checkpoint_id == second["configurable"]["checkpoint_id"]
    changes = {
        c.channel: c
        for c in inspector.diff(
            thread_id,
            first["configurable"]["checkpoint_id"],
            second["configurable"]["checkpoint_id"],
        )
    }
    assert changes["branch"].old is not None and "go" in changes["branch"].old.preview
    assert changes["branch"].new is not None and changes["branch"].new.type == "NoneType"

    # Keeping only the latest checkpoint deletes the old blobs; the inline None stays.
    saver.prune([thread_id], strategy="keep_latest")
    assert table_counts(engine, thread_id)["checkpoint_blobs"] == 1  # m at version 2
    got = saver.get_tuple(config(thread_id))
    assert got is not None and got.checkpoint["channel_values"] == {"branch": None, "m": [1, 2]}


HOSTILE = ['say "hi"', "a.b", "$.x", "back\\slash", "日本語", "[0]", "a'b", "", " lead"]


def test_history_finds_inline_seeds_under_any_channel_name(engine: sa.Engine) -> None:
    """The SQL walk reads inline values by JSON path: names that need quoting included."""
    saver = SQLAlchemySaver(engine)
    thread_id = new_thread()
    versions: dict[str, str | int | float] = {ch: 1 for ch in HOSTILE}
    stored = saver.put(
        config(thread_id), checkpoint(dict.fromkeys(HOSTILE), versions), {}, versions
    )
    saver.put_writes(stored, [(ch, f"w-{ch}") for ch in HOSTILE], task_id="t")
    versions = {ch: 2 for ch in HOSTILE}  # a delta step: new versions, no values
    head = saver.put(stored, checkpoint({}, versions), {}, versions)
    expected = BaseCheckpointSaver.get_delta_channel_history(saver, config=head, channels=HOSTILE)
    assert all(expected[ch].get("seed", "absent") is None for ch in HOSTILE), expected
    assert saver.get_delta_channel_history(config=head, channels=HOSTILE) == expected


@pytest.mark.any_dialect
def test_a_checkpoint_naming_no_blob_is_read_whole_after_every_writer(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """A checkpoint whose values are all inline records it on SQLite
    (``codec.ALL_INLINE_KEY``) and is read without its blobs there; one with a value in a blob,
    a checkpoint claiming the record itself, and a document whose inline values
    ``reencrypt`` moved to blobs are read with theirs, by get_tuple and list alike. The
    record never reaches the caller."""
    # A database of its own: re-encryption walks every row.
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    plain = SQLAlchemySaver(engine)
    thread_id = new_thread()
    inline = {"count": 1, "name": "x", "branch": None}
    first = plain.put(config(thread_id), checkpoint(inline), {}, dict.fromkeys(inline, 1))
    big = {"count": 2, "name": "x" * (codec.INLINE_STR_MAX + 1), "branch": None}
    versions = {"count": 2, "name": 2, "branch": 1}
    second = plain.put(first, checkpoint(big, versions), {}, {"count": 2, "name": 2})
    # A checkpoint of the caller's own with the member: not taken for the record.
    claiming: Any = {codec.ALL_INLINE_KEY: True, **checkpoint({**big, "count": 3})}
    claiming["channel_versions"] = {**versions, "count": 3}
    third = plain.put(second, claiming, {}, {"count": 3})
    documents = _documents(engine, thread_id)
    # (recorded where a load reads it: SQLite)
    records = engine.dialect.name == "sqlite"
    assert [codec.ALL_INLINE_KEY in d for d in documents] == [records, False, False]
    assert _blob_channels(engine, thread_id) == [("name", "msgpack")]

    def read_back(saver: SQLAlchemySaver) -> None:
        expected = [inline, big, {**big, "count": 3}]
        for stored, values in zip((first, second, third), expected, strict=True):
            got = saver.get_tuple(stored)
            assert got is not None and got.checkpoint["channel_values"] == values
            assert codec.ALL_INLINE_KEY not in got.checkpoint
        listed = [t.checkpoint for t in saver.list(config(thread_id))]
        assert [c["channel_values"] for c in listed] == expected[::-1]
        assert all(codec.ALL_INLINE_KEY not in c for c in listed)

    read_back(plain)
    # Re-encryption moves the inline values to blobs: the first names blobs now.
    encrypted = SQLAlchemySaver(engine, serde=EncryptedSerializer.gcm({"k1": KEY}))
    assert encrypted.reencrypt(batch_size=1).tables["checkpoints"].rewritten == 3
    assert all(codec.ALL_INLINE_KEY not in d for d in _documents(engine, thread_id))
    read_back(encrypted)
