"""A delete stays deleted, a prune never breaks a checkpoint: forced interleavings.

Each test runs two parties, each on an engine (and a saver) of its own, on a thread of
its own (an async party runs its own event loop there, so a paused call blocks only
its loop). A party is paused at a chosen statement by a ``before_cursor_execute`` /
``after_cursor_execute`` listener on its engine, and released when the other party
reaches a statement of its own or finishes: never by time. Where the second party
must wait for a lock the first holds, the release comes when it is about to ask for
it; either order that can follow is one the guarantees must hold for.

After each interleaving, the thread is checked whole: every checkpoint has a blob for
each channel its ``channel_versions`` names (the values here are never None, so none is
inline), no blob is named by no checkpoint, and the outcome is one of those the docs
state (docs/operations.md, "Deletes, prunes and writers in flight").
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend
from helpers import checkpoint, config, new_thread
from langchain_core.runnables import RunnableConfig
from modes import call, call_sync

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.checkpoint import json_values
from lg_sqla.checkpoint.policy import CheckpointTTL
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C

# A party that never gets released, or never finishes, fails the test instead of
# hanging it (a bound on a wait, not a wait on time: nothing sleeps).
STUCK = 120.0

Statement = Callable[[str], bool]


def put_statement(sql: str) -> bool:
    """The put's statement that writes the checkpoint row (its only one on PostgreSQL)."""
    return "INSERT INTO checkpoints " in sql


def blob_insert(sql: str) -> bool:
    return sql.lstrip().startswith("INSERT INTO checkpoint_blobs")


def writes_insert(sql: str) -> bool:
    return "INSERT INTO checkpoint_writes" in sql


def blob_lock(sql: str) -> bool:
    """A deleter's ``lock_blobs`` (PostgreSQL, MySQL/MariaDB)."""
    return "FOR UPDATE" in sql and "checkpoint_blobs" in sql


def blob_delete(sql: str) -> bool:
    """The statement that deletes blobs (GC, a whole-thread delete)."""
    text = " ".join(sql.split())
    return "DELETE" in text and "checkpoint_blobs" in text and "FOR UPDATE" not in text


def begins_writing(sql: str) -> bool:
    """A party's first step towards a write: its lock, its BEGIN (SQLite), its put."""
    return blob_lock(sql) or sql.startswith("BEGIN") or put_statement(sql) or blob_insert(sql)


@dataclass
class Party:
    """One caller on an engine of its own: ``start`` runs ``name(*args)`` on its saver
    (sync, or async on a loop of its own) in a thread. ``pause``: stop before (or after)
    the first statement it matches until ``release``; ``signal``: report reaching the
    first statement it matches (the statement then runs)."""

    backend: Backend
    mode: str
    pause: Statement | None = None
    after: bool = False  # pause after the statement ran (its locks held) instead
    signal: Statement | None = None
    ttl: CheckpointTTL | None = None
    paused: threading.Event = field(default_factory=threading.Event)
    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    was_paused: bool = False
    result: Any = None
    error: BaseException | None = None
    _thread: threading.Thread | None = None

    def _listen(self, engine: sa.Engine) -> None:
        def hook(when: str) -> Callable[..., None]:
            def listener(conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
                if when == "before" and self.signal and self.signal(statement):
                    self.reached.set()
                pausing = (when == "after") == self.after and not self.was_paused
                if pausing and self.pause and self.pause(statement):
                    self.was_paused = True
                    self.paused.set()
                    if not self.released.wait(STUCK):
                        raise AssertionError("party never released")

            return listener

        sa.event.listen(engine, "before_cursor_execute", hook("before"))
        sa.event.listen(engine, "after_cursor_execute", hook("after"))

    def start(self, name: str, *args: Any, **kwargs: Any) -> Party:
        def sync_run() -> None:
            engine = self.backend.engine()
            self._listen(engine)
            try:
                self.result = call_sync(
                    SQLAlchemySaver(engine, ttl=self.ttl), name, *args, **kwargs
                )
            finally:
                engine.dispose()

        async def async_run() -> None:
            engine = self.backend.async_engine()
            self._listen(engine.sync_engine)
            try:
                saver = AsyncSQLAlchemySaver(engine, ttl=self.ttl)
                self.result = await call(saver, "async", name, *args, **kwargs)
            finally:
                await engine.dispose()

        def run() -> None:
            try:
                if self.mode == "sync":
                    sync_run()
                else:
                    asyncio.run(async_run())
            except BaseException as error:
                self.error = error
            finally:
                self.done.set()
                self.reached.set()  # a party that finished has passed every point
                self.paused.set()  # (wait_paused then reports it never paused)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def wait_paused(self) -> None:
        """Until the party is paused (it finishing without pausing is a failure)."""
        assert self.paused.wait(STUCK), "party never paused"
        assert self.was_paused, f"party finished without pausing: {self.error!r}"

    def finish(self) -> Any:
        self.released.set()
        assert self._thread is not None
        self._thread.join(STUCK)
        assert not self._thread.is_alive(), "party still running"
        if self.error is not None:
            raise self.error
        return self.result


def wait_for(party: Party) -> None:
    """Until ``party`` reached its signalled statement or finished.

    Not on SQLite: there, this process's writers of a file queue on one lock before
    their first statement (``runtime.locks``), so a second writer cannot get past the
    paused one, whenever it is released: it runs after it, the only order there is."""
    if party.backend.name == "sqlite":
        return
    assert party.reached.wait(STUCK), "party never reached its statement"


# --- what the thread holds afterwards ----------------------------------------------


@dataclass
class Stored:
    """A thread's rows, read directly."""

    checkpoints: dict[str, dict[str, str]]  # checkpoint_id -> channel_versions
    blobs: set[tuple[str, str]]  # (channel, version)
    writes: set[str]  # checkpoint_id of each write

    @property
    def dangling(self) -> dict[str, list[str]]:
        """Checkpoint id -> channels it names without a blob."""
        out = {
            cid: sorted(ch for ch, v in versions.items() if (ch, v) not in self.blobs)
            for cid, versions in self.checkpoints.items()
        }
        return {cid: missing for cid, missing in out.items() if missing}

    @property
    def orphan_blobs(self) -> set[tuple[str, str]]:
        named = {pair for versions in self.checkpoints.values() for pair in versions.items()}
        return self.blobs - named

    @property
    def empty(self) -> bool:
        return not (self.checkpoints or self.blobs or self.writes)


def stored(backend: Backend, thread_id: str) -> Stored:
    engine = backend.engine()
    try:
        with engine.connect() as conn:
            docs = conn.execute(
                sa.select(C.c.checkpoint_id, C.c.checkpoint).where(C.c.thread_id == thread_id)
            ).all()
            blobs = conn.execute(
                sa.select(B.c.channel, B.c.version).where(B.c.thread_id == thread_id)
            ).all()
            writes = conn.execute(
                sa.select(W.c.checkpoint_id).where(W.c.thread_id == thread_id)
            ).all()
    finally:
        engine.dispose()
    return Stored(
        checkpoints={
            r.checkpoint_id: dict(json_values.json_object(r.checkpoint)["channel_versions"])
            for r in docs
        },
        blobs={(r.channel, r.version) for r in blobs},
        writes={r.checkpoint_id for r in writes},
    )


def assert_whole(found: Stored) -> None:
    """No checkpoint names a blob that is gone; no blob is named by no checkpoint."""
    assert not found.dangling, f"checkpoints naming missing blobs: {found.dangling}"
    assert not found.orphan_blobs, f"blobs no checkpoint names: {found.orphan_blobs}"


# --- the scenes --------------------------------------------------------------------


def first_checkpoint(backend: Backend, thread_id: str) -> RunnableConfig:
    """Checkpoint N of the thread: x and y at version 1, with a pending write."""
    engine = backend.engine()
    try:
        saver = SQLAlchemySaver(engine)
        values = {"x": {"x": 1}, "y": {"y": 1}}
        stored_config = saver.put(config(thread_id), checkpoint(values), {}, {"x": 1, "y": 1})
        saver.put_writes(stored_config, [("x", {"x": 2})], task_id="task-1")
        return stored_config
    finally:
        engine.dispose()


def child(parent: RunnableConfig, changed: str, version: int) -> tuple[Any, ...]:
    """put arguments of a child of ``parent`` (x@1, y@1) where ``changed`` moves to
    ``version``: the other channel is named at version 1, unchanged (no blob written)."""
    versions = {"x": 1, "y": 1, changed: version}
    values = {"x": {"x": versions["x"]}, "y": {"y": versions["y"]}}
    return (parent, checkpoint(values, versions), {}, {changed: version})


KEEP_LAST = CheckpointTTL(keep_last=1)


def test_keep_last_beside_a_writer_with_a_stale_view(backend: Backend, mode: str) -> None:
    """Serialized: A's put prunes N and y@1; B, still at N, puts a child naming y@1."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    Party(backend, mode, ttl=KEEP_LAST).start("put", *child(n, "y", 2)).finish()
    assert ("y", "1") not in stored(backend, thread_id).blobs  # pruned, as keep_last does
    b = Party(backend, mode, ttl=KEEP_LAST).start("put", *child(n, "x", 2)).finish()
    found = stored(backend, thread_id)
    assert_whole(found)
    assert list(found.checkpoints) == [b["configurable"]["checkpoint_id"]]
    assert found.checkpoints[b["configurable"]["checkpoint_id"]] == {"x": "2", "y": "1"}


def test_prune_beside_a_writer_with_a_stale_view(backend: Backend, mode: str) -> None:
    """Serialized: A puts N+1, prune keeps it alone; B, still at N, puts a child."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    Party(backend, mode).start("put", *child(n, "y", 2)).finish()
    Party(backend, mode).start("prune", [thread_id]).finish()
    Party(backend, mode).start("put", *child(n, "x", 2)).finish()
    found = stored(backend, thread_id)
    assert_whole(found)
    assert len(found.checkpoints) == 2


def test_keep_last_pruner_paused_after_deleting_a_blob_a_writer_names(
    backend: Backend, mode: str
) -> None:
    """A (keep_last) has deleted y@1 and not committed; B puts a child of N naming y@1."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    a = Party(backend, mode, ttl=KEEP_LAST, pause=blob_delete, after=True)
    a.start("put", *child(n, "y", 2))
    a.wait_paused()
    b = Party(backend, mode, ttl=KEEP_LAST, signal=begins_writing).start("put", *child(n, "x", 2))
    wait_for(b)
    a.finish()
    b.finish()
    found = stored(backend, thread_id)
    assert_whole(found)
    assert found.checkpoints  # whichever pruned last kept its own checkpoint, whole


def test_writer_paused_before_its_checkpoint_while_keep_last_prunes(
    backend: Backend, mode: str
) -> None:
    """B is about to write its checkpoint naming y@1 (its blobs, if any, written);
    A puts N+1 (an older id than B's) and prunes N and y@1 meanwhile."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    a_args, b_args = child(n, "y", 2), child(n, "x", 2)
    b = Party(backend, mode, pause=put_statement).start("put", *b_args)
    b.wait_paused()
    a = Party(backend, mode, ttl=KEEP_LAST, signal=begins_writing).start("put", *a_args)
    wait_for(a)
    written = b.finish()
    a.finish()
    found = stored(backend, thread_id)
    assert_whole(found)
    # B's is the newest checkpoint: A's prune keeps it if it sees it, else it is stored after.
    assert written["configurable"]["checkpoint_id"] in found.checkpoints


def test_prune_paused_after_locking_while_a_writer_puts(backend: Backend, mode: str) -> None:
    """prune has taken its locks (or, SQLite, the write lock) and not decided yet; a
    writer at N puts a child naming y@1, which the prune would collect."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    Party(backend, mode).start("put", *child(n, "y", 2)).finish()
    pause = blob_lock if backend.name != "sqlite" else blob_delete
    pruner = Party(backend, mode, pause=pause, after=backend.name != "sqlite")
    pruner.start("prune", [thread_id])
    pruner.wait_paused()
    writer = Party(backend, mode, signal=begins_writing).start("put", *child(n, "x", 2))
    wait_for(writer)
    pruner.finish()
    written = writer.finish()
    found = stored(backend, thread_id)
    assert_whole(found)
    assert written["configurable"]["checkpoint_id"] in found.checkpoints


def test_prune_beside_a_keep_last_writer_paused_in_its_transaction(
    backend: Backend, mode: str
) -> None:
    """W (keep_last=5: its put and its prune, which removes nothing here, are one
    transaction) has written its checkpoint naming y@1, uncommitted, the blobs it
    names locked; prune keeps N+1 (the newest it can see) and would collect y@1."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    newer, w_args = child(n, "y", 2), child(n, "x", 2)
    Party(backend, mode).start("put", *newer).finish()
    w = Party(backend, mode, ttl=CheckpointTTL(keep_last=5), pause=put_statement, after=True)
    w.start("put", *w_args)
    w.wait_paused()
    pruner = Party(backend, mode, signal=lambda sql: blob_lock(sql) or blob_delete(sql))
    pruner.start("prune", [thread_id])
    wait_for(pruner)
    written = w.finish()
    pruner.finish()
    found = stored(backend, thread_id)
    assert_whole(found)
    assert written["configurable"]["checkpoint_id"] in found.checkpoints


# --- delete_thread and a call in flight: the six cases of LangGraph #7207 -----------


def _late(n: RunnableConfig, call_name: str) -> tuple[Any, ...]:
    if call_name == "put":
        return child(n, "x", 2)
    return (n, [("y", {"y": 9})], "task-late")


@pytest.mark.parametrize("late_call", ["put", "put_writes"])
def test_a_call_before_delete_thread_leaves_nothing(
    backend: Backend, mode: str, late_call: str
) -> None:
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    Party(backend, mode).start(late_call, *_late(n, late_call)).finish()
    Party(backend, mode).start("delete_thread", thread_id).finish()
    assert stored(backend, thread_id).empty


def assert_late_put_whole(found: Stored, written: RunnableConfig) -> None:
    """A put that commits after delete_thread: its checkpoint, whole, and nothing else
    of the thread (N, its write and its blobs stay deleted)."""
    assert_whole(found)
    assert list(found.checkpoints) == [written["configurable"]["checkpoint_id"]]
    assert found.checkpoints[written["configurable"]["checkpoint_id"]] == {"x": "2", "y": "1"}
    assert not found.writes


def test_a_put_after_delete_thread_writes_a_whole_checkpoint(backend: Backend, mode: str) -> None:
    """A late put with the pre-delete config: it names y@1, which the delete removed."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    Party(backend, mode).start("delete_thread", thread_id).finish()
    written = Party(backend, mode).start("put", *child(n, "x", 2)).finish()
    assert_late_put_whole(stored(backend, thread_id), written)


def test_put_writes_after_delete_thread_stay_pending_until_the_thread_is_cleaned(
    backend: Backend, mode: str
) -> None:
    """Writes for a checkpoint that does not exist are kept (LangGraph may store a
    step's writes before its checkpoint) but no read returns them, and the next delete
    of the thread removes them."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    Party(backend, mode).start("delete_thread", thread_id).finish()
    Party(backend, mode).start("put_writes", *_late(n, "put_writes")).finish()
    found = stored(backend, thread_id)
    assert not found.checkpoints and not found.blobs
    assert found.writes == {n["configurable"]["checkpoint_id"]}
    assert Party(backend, mode).start("get_tuple", config(thread_id)).finish() is None
    assert Party(backend, mode).start("get_tuple", n).finish() is None
    Party(backend, mode).start("delete_thread", thread_id).finish()
    assert stored(backend, thread_id).empty


def test_a_put_paused_mid_flight_across_delete_thread(backend: Backend, mode: str) -> None:
    """The put is about to write its checkpoint (its new blob written, where that is a
    statement of its own) when delete_thread runs; it then resumes."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    writer = Party(backend, mode, pause=put_statement).start("put", *child(n, "x", 2))
    writer.wait_paused()
    deleter = Party(backend, mode, signal=begins_writing).start("delete_thread", thread_id)
    wait_for(deleter)
    written = writer.finish()
    deleter.finish()
    found = stored(backend, thread_id)
    if found.empty:  # the deleter waited for the put (its locks), then deleted it whole
        return
    assert_late_put_whole(found, written)


def test_a_put_against_delete_thread_paused_before_commit(backend: Backend, mode: str) -> None:
    """delete_thread has deleted everything and not committed; the put runs meanwhile."""
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    deleter = Party(backend, mode, pause=blob_delete, after=True).start("delete_thread", thread_id)
    deleter.wait_paused()
    writer = Party(backend, mode, signal=begins_writing).start("put", *child(n, "x", 2))
    wait_for(writer)
    deleter.finish()
    written = writer.finish()
    assert_late_put_whole(stored(backend, thread_id), written)


def test_put_writes_paused_mid_flight_across_delete_thread(backend: Backend, mode: str) -> None:
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    writer = Party(backend, mode, pause=writes_insert).start("put_writes", *_late(n, "put_writes"))
    writer.wait_paused()
    deleter = Party(backend, mode, signal=begins_writing).start("delete_thread", thread_id)
    wait_for(deleter)
    writer.finish()
    deleter.finish()
    found = stored(backend, thread_id)
    assert not found.checkpoints and not found.blobs
    assert found.writes <= {n["configurable"]["checkpoint_id"]}  # pending, or deleted after
    assert Party(backend, mode).start("get_tuple", n).finish() is None


# --- the sweepers ------------------------------------------------------------------


def _age(backend: Backend, thread_id: str, days: int) -> None:
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)
    engine = backend.engine()
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.update(C)
                .where(C.c.thread_id == thread_id)
                # Written `days` ago under a one-hour TTL (revision 0008 stores it):
                # stale for the age sweep, expired for the TTL sweep.
                .values(updated_at=old, created_at=old, expires_at=old + dt.timedelta(hours=1))
            )
            conn.execute(sa.update(W).where(W.c.thread_id == thread_id).values(created_at=old))
    finally:
        engine.dispose()


SWEEPS: dict[str, tuple[str, tuple[Any, ...], dict[str, Any], CheckpointTTL | None]] = {
    "age sweep": ("sweep", (dt.timedelta(days=5),), {}, None),
    "ttl sweep": ("sweep_ttl", (), {}, CheckpointTTL(default_ttl=60.0)),
}


@pytest.mark.parametrize("sweep", list(SWEEPS))
def test_a_put_across_a_sweep_paused_before_commit(backend: Backend, mode: str, sweep: str) -> None:
    """The sweep has deleted the stale thread's rows and not committed; a writer that
    read N before puts a child naming y@1."""
    name, args, kwargs, ttl = SWEEPS[sweep]
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    _age(backend, thread_id, 10)
    sweeper = Party(backend, mode, pause=blob_delete, after=True, ttl=ttl)
    sweeper.start(name, *args, **kwargs)
    sweeper.wait_paused()
    writer = Party(backend, mode, signal=begins_writing).start("put", *child(n, "x", 2))
    wait_for(writer)
    report = sweeper.finish()
    written = writer.finish()
    found = stored(backend, thread_id)
    assert_whole(found)
    assert written["configurable"]["checkpoint_id"] in found.checkpoints
    assert report.removed.checkpoints >= 1


@pytest.mark.parametrize("sweep", list(SWEEPS))
def test_a_put_paused_mid_flight_across_a_sweep(backend: Backend, mode: str, sweep: str) -> None:
    name, args, kwargs, ttl = SWEEPS[sweep]
    thread_id = new_thread()
    n = first_checkpoint(backend, thread_id)
    _age(backend, thread_id, 10)
    writer = Party(backend, mode, pause=put_statement).start("put", *child(n, "x", 2))
    writer.wait_paused()
    sweeper = Party(backend, mode, signal=begins_writing, ttl=ttl).start(name, *args, **kwargs)
    wait_for(sweeper)
    written = writer.finish()
    sweeper.finish()
    found = stored(backend, thread_id)
    assert_whole(found)
    if found.checkpoints:
        assert written["configurable"]["checkpoint_id"] in found.checkpoints
