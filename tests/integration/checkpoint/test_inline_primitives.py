"""Small bool, int and str values kept in the checkpoint document, on every database.

What users rely on: a value reads back equal and of the same type whether it was kept
inline or in a blob (PostgreSQL stores the document as JSONB, MariaDB as JSON text,
SQLite as text); what JSON could change (floats, ints past 64 bits, NUL, long strings,
subclasses) stays in a blob; a put whose values are all inline is one statement;
history walks and inspection see inline values; and turning encryption on, then
``reencrypt``, leaves no inline value in plaintext.
"""

from __future__ import annotations

import enum
import math
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import PORTABLE, Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from modes import saver_on

from lg_sqla import SQLAlchemySaver
from lg_sqla.checkpoint import codec, json_values
from lg_sqla.inspection import Inspector
from lg_sqla.models import checkpoint_blobs, checkpoints
from lg_sqla.serde import EncryptedSerializer

pytestmark = pytest.mark.any_charset

BOUND = codec.INLINE_STR_MAX


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


INLINE: dict[str, Any] = {
    "true": True,
    "false": False,
    "zero": 0,
    "minus_one": -1,
    "int64_max": 2**63 - 1,
    "int64_min": -(2**63),
    "empty": "",
    "at_bound": "x" * BOUND,
    "quotes": 'say "hi" it\'s',
    "backslash": "back\\slash \\u0041 \\n",
    "unicode": "日本語 é 🔐 \u2028",
    "controls": "\n\t\r\x01\x1f",
    "json_like": '{"a": [1, null]}',
    "digits": "00012",
    "none": None,
}
IN_BLOBS: dict[str, Any] = {
    "int64_over": 2**63,
    "uint64_max": 2**64 - 1,  # (msgpack's limit: JsonPlusSerializer refuses larger)
    "past_bound": "x" * (BOUND + 1),
    "wide_past_bound": "日" * (BOUND + 1),
    "nul": "a\x00b",
    "float_big": 1e20,
    "float_negative_zero": -0.0,
    "float_nan": float("nan"),
    "float_plain": 1.5,
    "int_enum": Level.HIGH,
    "str_subclass": Name("n"),
    "bytes": b"x",
    "list": [1],
}


def _same(got: Any, expected: Any) -> bool:
    """Equal and of the same type (-0.0 keeps its sign, NaN is NaN)."""
    if type(got) is not type(expected):
        return False
    if isinstance(expected, float):
        if math.isnan(expected):
            return math.isnan(got)
        return got == expected and math.copysign(1, got) == math.copysign(1, expected)
    return bool(got == expected)


def _stored(engine: sa.Engine, thread_id: str) -> tuple[dict[str, Any], set[str]]:
    """The newest document's inline values, and the channels with a blob row."""
    with engine.connect() as conn:
        document = conn.execute(
            sa.select(checkpoints.c.checkpoint)
            .where(checkpoints.c.thread_id == thread_id)
            .order_by(checkpoints.c.checkpoint_id.desc())
            .limit(1)
        ).scalar_one()
        blobs = conn.execute(
            sa.select(checkpoint_blobs.c.channel).where(checkpoint_blobs.c.thread_id == thread_id)
        ).scalars()
        return codec.inline_values(json_values.json_object(document)), set(blobs)


@pytest.mark.any_dialect
async def test_values_read_back_exactly_inline_or_not(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    saver = saver_on(make_engine.for_mode(mode, backend))
    sync_engine = make_engine(backend)
    thread_id = new_thread()
    values = {**INLINE, **IN_BLOBS}
    # What reading gives: the values themselves, as the serializer reads a blob back (a
    # str subclass comes back a str, as it always did).
    serde = JsonPlusSerializer()
    expected = {
        **INLINE,
        **{ch: serde.loads_typed(serde.dumps_typed(v)) for ch, v in IN_BLOBS.items()},
    }
    assert type(expected["str_subclass"]) is str and type(expected["int_enum"]) is Level
    stored = await saver.put(config(thread_id), checkpoint(values), {}, dict.fromkeys(values, 1))

    inline, blobs = _stored(sync_engine, thread_id)
    assert set(inline) == set(INLINE)
    assert blobs == set(IN_BLOBS)
    assert all(_same(inline[ch], v) for ch, v in INLINE.items()), inline
    # Read back by id, as the latest, by list, and as a history seed: every value the same.
    got = await saver.get_tuple(stored)
    latest = await saver.get_tuple(config(thread_id))
    (listed,) = await saver.list(config(thread_id))
    for found in (got, latest, listed):
        assert found is not None
        read = found.checkpoint["channel_values"]
        assert read.keys() == values.keys()
        wrong = {ch: read[ch] for ch, v in expected.items() if not _same(read[ch], v)}
        assert not wrong, wrong
    # A child without new versions keeps them (inline again, the blobs named).
    child = await saver.put(stored, checkpoint(values), {}, {})
    if backend.name == PORTABLE:
        return  # (no SQL history walk there: test_delta_history does not run on it)
    history = await saver.get_delta_channel_history(config=child, channels=list(values))
    wrong = {ch: h for ch, h in history.items() if not _same(h.get("seed"), expected[ch])}
    assert not wrong, wrong


def test_inspection_sees_inline_values(engine: sa.Engine) -> None:
    saver = SQLAlchemySaver(engine)
    inspector = Inspector(saver)
    thread_id = new_thread()
    first = saver.put(config(thread_id), checkpoint(INLINE), {}, dict.fromkeys(INLINE, 1))
    changed = {"quotes": "x" * (BOUND + 1), "int64_max": 2**63, "unicode": "é"}
    new_versions: dict[str, Any] = dict.fromkeys(changed, 2)
    versions = {**dict.fromkeys(INLINE, 1), **new_versions}
    second = saver.put(first, checkpoint({**INLINE, **changed}, versions), {}, new_versions)
    for channel, value in INLINE.items():
        found = inspector.latest(channel, [thread_id]).get(thread_id)
        assert found is not None, channel
        assert _same(found.value, changed.get(channel, value)), (channel, found.value)
    diff = inspector.diff(
        thread_id, first["configurable"]["checkpoint_id"], second["configurable"]["checkpoint_id"]
    )
    assert {c.channel: (c.old.type, c.new.type) for c in diff if c.old and c.new} == {
        "quotes": ("str", "str"),
        "int64_max": ("int", "int"),
        "unicode": ("str", "str"),
    }


def test_history_of_a_channel_alternating_inline_and_blob(engine: sa.Engine) -> None:
    """The SQL walk finds each seed where get_tuple finds it: inline, blob, inline..."""
    saver = SQLAlchemySaver(engine)
    thread_id = new_thread()
    many = [f"other_{i}" for i in range(70)]  # past the walk's bit mask: the two-statement walk
    stored = config(thread_id)
    heads = []
    for step, value in enumerate(["short", [1, 2], 7, "x" * (BOUND + 5), True, 2**63, None]):
        versions: dict[str, Any] = {"c": step + 1}
        stored = saver.put(stored, checkpoint({"c": value}, versions), {}, versions)
        saver.put_writes(stored, [("c", f"w{step}")], task_id="t")
        # a delta step: a new version without a value
        versions = {"c": f"{step + 1}.5"}
        stored = saver.put(stored, checkpoint({}, versions), {}, versions)
        saver.put_writes(stored, [("c", f"d{step}")], task_id="t")
        heads.append(stored)
    for head in heads:
        for channels in (["c"], ["c", *many]):
            expected = BaseCheckpointSaver.get_delta_channel_history(
                saver, config=head, channels=channels
            )
            assert saver.get_delta_channel_history(config=head, channels=channels) == expected


SECRET = "s3cr3t-inline-token"
KEY = bytes(range(32))


def _raw_text(engine: sa.Engine, backend: Backend) -> bytes:
    """Every byte the database holds for lg_sqla's checkpoint tables: the SQLite file
    itself (after moving the WAL in and giving free pages back), the rows elsewhere."""
    if backend.name == "sqlite":
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM")
        path = Path(engine.url.database or "")
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    dumped = []
    with engine.connect() as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            for row in conn.execute(sa.text(f"SELECT * FROM {table}")):
                dumped.append(repr(tuple(row)).encode())
    return b"\n".join(dumped)


@pytest.mark.any_dialect
def test_reencrypt_moves_inline_values_out_of_the_documents(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    # A database of its own: re-encryption walks every row, and the raw bytes are read.
    engine = make_engine(fresh_database)
    SQLAlchemySaver(engine).setup()
    plain = SQLAlchemySaver(engine)
    thread_id = new_thread()
    values_1 = {"token": SECRET, "count": 41, "flag": True, "branch": None, "m": [1]}
    stored = plain.put(config(thread_id), checkpoint(values_1), {}, dict.fromkeys(values_1, 1))
    values_2 = {**values_1, "count": 42}
    stored = plain.put(
        stored, checkpoint(values_2, {**dict.fromkeys(values_1, 1), "count": 2}), {}, {"count": 2}
    )
    inline, _ = _stored(engine, thread_id)
    assert inline["token"] == SECRET  # the plain serializer keeps it inline...
    assert SECRET.encode() in _raw_text(engine, fresh_database)  # ...readable in the database

    encrypted = SQLAlchemySaver(engine, serde=EncryptedSerializer.gcm({"k1": KEY}))
    report = encrypted.reencrypt(batch_size=1)
    assert report.tables["checkpoints"].rewritten == 2
    assert SECRET.encode() not in _raw_text(engine, fresh_database)
    with engine.connect() as conn:
        documents = conn.execute(
            sa.select(checkpoints.c.checkpoint).where(checkpoints.c.thread_id == thread_id)
        ).scalars()
        for document in documents:  # only None stays inline
            assert codec.inline_values(json_values.json_object(document)) == {"branch": None}
        types = conn.execute(
            sa.select(checkpoint_blobs.c.channel, checkpoint_blobs.c.type).where(
                checkpoint_blobs.c.thread_id == thread_id
            )
        ).all()
    assert {ch for ch, _ in types} == {"token", "count", "flag", "m"}
    assert all(t.endswith("+aesgcm:k1") for _, t in types), types
    # The thread loads the same values, every checkpoint of it.
    listed = [t.checkpoint["channel_values"] for t in encrypted.list(config(thread_id))]
    assert listed == [values_2, values_1]
    # Nothing left to move, and new puts keep every value in (encrypted) blobs.
    assert encrypted.reencrypt().rewritten == 0
    encrypted.put(stored, checkpoint({**values_2, "token": "new"}), {}, {"token": 2})
    inline, _ = _stored(engine, thread_id)
    assert inline == {}
