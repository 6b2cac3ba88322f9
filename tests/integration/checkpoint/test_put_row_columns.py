"""The key columns a put copies out of its config and metadata, on every database and
mode: ``parent_checkpoint_id`` (the config's checkpoint_id) and ``run_id`` (metadata's)
are stored when given and NULL when not, and a put of the same checkpoint again sets
``run_id`` to what that put says, NULL included. (On SQLite and MySQL, the stamped put
leaves the NULL ones out of its statement: the row must be the same.) What users rely on:
``list(filter={"run_id": ...})`` and ``delete_for_runs`` find a checkpoint by the run
that wrote it last, and the parent links of a thread's history."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from modes import saver_on

from lg_sqla.models import checkpoints


def _rows(engine: sa.Engine, thread_id: str) -> dict[str, tuple[str | None, str | None]]:
    """checkpoint_id: (parent_checkpoint_id, run_id) of the thread's rows."""
    c = checkpoints.c
    with engine.connect() as conn:
        found = conn.execute(
            sa.select(c.checkpoint_id, c.parent_checkpoint_id, c.run_id).where(
                c.thread_id == thread_id
            )
        )
        return {row.checkpoint_id: (row.parent_checkpoint_id, row.run_id) for row in found}


@pytest.mark.parametrize("run_id", ["run-1", None], ids=["run", "no-run"])
async def test_a_put_stores_its_parent_and_run_id_or_null(
    make_engine: EngineFactory, backend: Backend, mode: str, run_id: str | None
) -> None:
    saver = saver_on(make_engine.for_mode(mode, backend))
    reader = make_engine(backend)
    thread_id = new_thread()
    metadata = {"source": "loop", "step": 0, **({"run_id": run_id} if run_id else {})}
    first = checkpoint({"n": 1}, {"n": 1})
    stored = await saver.put(config(thread_id), first, metadata, {"n": 1})
    second = checkpoint({"n": 2}, {"n": 2})
    await saver.put(stored, second, {**metadata, "step": 1}, {"n": 2})

    assert _rows(reader, thread_id) == {
        first["id"]: (None, run_id),
        second["id"]: (first["id"], run_id),
    }
    # (a put's run_id: what list's run_id filter finds, by its index)
    found = await saver.list(config(thread_id), filter={"run_id": "run-1"})
    assert [t.checkpoint["id"] for t in found] == (
        [second["id"], first["id"]] if run_id == "run-1" else []
    )


async def test_a_put_again_without_run_id_clears_it(
    make_engine: EngineFactory, backend: Backend, mode: str
) -> None:
    saver = saver_on(make_engine.for_mode(mode, backend))
    reader = make_engine(backend)
    thread_id = new_thread()
    stored_checkpoint = checkpoint({"n": 1}, {"n": 1})
    with_run = {"source": "loop", "step": 0, "run_id": "run-2"}
    await saver.put(config(thread_id), stored_checkpoint, with_run, {"n": 1})
    assert _rows(reader, thread_id) == {stored_checkpoint["id"]: (None, "run-2")}

    await saver.put(config(thread_id), stored_checkpoint, {"source": "loop", "step": 0}, {})
    assert _rows(reader, thread_id) == {stored_checkpoint["id"]: (None, None)}
    assert await saver.list(config(thread_id), filter={"run_id": "run-2"}) == []
