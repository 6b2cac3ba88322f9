"""Values and keys reach the database and come back byte for byte, whatever wire format
the driver uses for them.

On PostgreSQL a put's blobs and a put_writes' writes travel as arrays (one statement
per call), sent by psycopg in binary format; these tests hold every byte value and the
characters that are special in array literals (braces, commas, quotes, backslashes,
``NULL``, spaces) in channel names, versions, task ids and values, several rows per
call, compared with what LangGraph's InMemorySaver returns for the same calls. Every
dialect, sync and async.
"""

from __future__ import annotations

from typing import Any

from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from modes import Either, either, saver_on

ODD = ["NULL", "{a,b}", 'q"uo\\te', " padded ", "x,y", "", "ñandú 🦜", "\\x00ff", "{}"]
VALUES: dict[str, Any] = {
    **{f"ch {name}": name.encode() + bytes(range(256)) for name in ODD},
    "big": bytes(range(256)) * 400,
    "text": "\\x41 {NULL} \"'",
}
VERSIONS = {channel: f'{n:032}.0 {{"v"}},\\' for n, channel in enumerate(VALUES, 1)}
WRITES = [(f"w {name}", name.encode() + b"\x00\\{}" + bytes(range(256))) for name in ODD]
TASK = 'task {"1"}, \\NULL'


def stored(saved: CheckpointTuple | None) -> tuple[Any, ...]:
    assert saved is not None
    return (
        saved.checkpoint["channel_values"],
        saved.checkpoint["channel_versions"],
        sorted(saved.pending_writes or [], key=repr),
    )


async def replay(saver: Either[BaseCheckpointSaver[Any]], thread_id: str) -> tuple[Any, ...]:
    done = await saver.put(config(thread_id), checkpoint(VALUES, VERSIONS), {"step": 0}, VERSIONS)
    await saver.put_writes(done, WRITES, TASK, task_path="~p {,}")
    return stored(await saver.get_tuple(done))


async def test_array_special_characters_and_all_bytes_round_trip(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    expected = await replay(either(InMemorySaver(), "sync"), "t")
    saver = saver_on(make_engine.for_mode(mode, backend))
    assert await replay(saver, new_thread()) == expected
