"""Rewriting stored rows to one state revision, in place (``lg-sqla state upgrade``).

Threads are visited in ``thread_id`` order, ``batch_size`` at a time, each batch in
one transaction: its blobs locked first (``maintenance.lock_blobs``: a put in flight
commits before the batch reads), then every row of its threads read, migrated in
Python through the saver's serializer (encryption and compression included) and
written back. A crash loses at most the batch under way, which committed nothing:
a second run picks up the rows still at another revision.

A thread a graph is running on (its newest root checkpoint has tasks to run and no
interrupt or error, written within ``max_run``: the TTL sweep's rule) is skipped and
counted; run again once it paused. A checkpoint whose migration raises (on its
document, a value it names or one of its writes) is left exactly as it was, with the
blobs it names, and reported; the rest of its thread is migrated. Rows at different
revisions stay readable side by side: each row records its own (``state_reads``).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import sqlalchemy as sa

from lg_sqla.checkpoint import codec, json_values, maintenance
from lg_sqla.checkpoint.codec import EMPTY_TYPE, INLINE_KEY
from lg_sqla.checkpoint.context import Context
from lg_sqla.checkpoint.policy import Policy
from lg_sqla.checkpoint.retention import runs_in_progress
from lg_sqla.checkpoint.state_migrations import (
    DROPPED,
    MissingDowngradeError,
    StateMigrations,
    channel_through,
    migrate_metadata,
    migrate_names,
    migrate_value,
    unknown_revision,
)
from lg_sqla.checkpoint.twins import arun_by, run_by
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import COMMIT, Plan, Record, Step
from lg_sqla.shared import utc_now

if TYPE_CHECKING:
    from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
    from lg_sqla.checkpoint.saver import SQLAlchemySaver

    SaverBase = SQLAlchemySaver | AsyncSQLAlchemySaver

TABLES = {"checkpoints": C, "blobs": B, "writes": W}
# A row already at the target: nothing to write.
_UNCHANGED: Any = object()
# None stays inline whatever the serializer (it carries no data to encrypt).
_NONE: frozenset[type] = frozenset({type(None)})


@dataclass(frozen=True)
class StateFailure:
    """A checkpoint (or a pending write of none) left as it was: why."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    error: str


@dataclass
class StateUpgradeReport:
    """What ``upgrade_state`` did (``dry_run``: would do)."""

    target: str | None
    dry_run: bool = False
    # Rows not at the target before the run, per table (a dry run's answer).
    pending: dict[str, int] = field(default_factory=dict)
    pending_threads: int = 0
    threads_visited: int = 0
    threads_running: list[str] = field(default_factory=list)  # skipped: a run in progress
    checkpoints: int = 0  # rewritten
    blobs: int = 0
    writes: int = 0
    batches: int = 0
    failures: list[StateFailure] = field(default_factory=list)


# --- the Python calls ----------------------------------------------------------------


def _upgrade(
    saver: SaverBase,
    *,
    to: str = "head",
    batch_size: int = 100,
    dry_run: bool = False,
    progress: Callable[[StateUpgradeReport], None] | None = None,
) -> Callable[[], Plan[StateUpgradeReport]]:
    """``upgrade_state``'s plan source, after its checks (they raise before anything
    runs)."""
    state = saver.state_migrations
    if state is None:
        raise InvalidInputError(
            "upgrade_state: the saver was given no state_migrations (pass "
            "state_migrations=... to the saver, --migrations module:attribute to the CLI)"
        )
    target = state.head if to == "head" else state.resolve(to)
    if not dry_run:
        saver._writing("upgrade_state")
    max_run = (saver.retention or Policy()).max_run
    return lambda: upgrade_plan(
        saver.context,
        state,
        target,
        batch_size=batch_size,
        dry_run=dry_run,
        max_run=max_run,
        progress=progress,
    )


upgrade_state = run_by(
    _upgrade,
    "upgrade_state",
    """Rewrite the stored checkpoints, blobs and writes of ``saver``'s tables at the
    state revision ``to`` ("head": the newest of ``saver.state_migrations``; "base":
    revision zero; or a revision's id), ``batch_size`` threads per transaction.

    ``dry_run``: change nothing; the report's ``pending`` counts the rows per table
    not at ``to``. ``progress`` is called after each batch. Threads a graph is running
    on are skipped (``threads_running``); a checkpoint a migration function raises
    on is left as it was (``failures``). Running it again finishes an interrupted run.

    Raises:
        StateRevisionError: a stored row is at a revision the migrations do not know.
        MissingDowngradeError: ``to`` is older than stored rows and an operation on the
            way has no down function (nothing changed).
    """,
)
aupgrade_state = arun_by(
    _upgrade, "aupgrade_state", ":func:`upgrade_state` from a coroutine (the saver's ``arun``)."
)


def _count_plans(saver: SaverBase) -> Callable[[], Plan[dict[str, dict[str | None, int]]]]:
    return _counts


state_counts = run_by(
    _count_plans,
    "state_counts",
    """Rows per state revision (None: revision zero) of each table: ``checkpoints``,
    ``blobs``, ``writes``.""",
)
astate_counts = arun_by(
    _count_plans, "astate_counts", ":func:`state_counts` from a coroutine (the saver's ``arun``)."
)


def _counts() -> Plan[dict[str, dict[str | None, int]]]:
    counts = {}
    for name, table in TABLES.items():
        counts[name] = yield from revision_counts(table)
    return counts


# --- the plan -------------------------------------------------------------------------


def _stale(table: sa.Table, target: str | None) -> sa.ColumnElement[bool]:
    column = table.c.state_revision
    if target is None:
        return column.is_not(None)
    return sa.or_(column.is_(None), column != target)


def revision_counts(table: sa.Table = C) -> Plan[dict[str | None, int]]:
    """How many rows of ``table`` sit at each state revision (None: revision zero)."""
    rows = (
        yield Step(
            sa.select(table.c.state_revision, sa.func.count()).group_by(table.c.state_revision),
            fetch=True,
        )
    ).rows
    return {row[0]: row[1] for row in cast(Any, rows)}


def check_path(state: StateMigrations, present: Sequence[str | None], target: str | None) -> None:
    """Refuse, before anything changes, a revision the migrations do not know or a way
    down they do not have (naming every operation that has none)."""
    for revision in present:
        if revision is not None and not state.known(revision):
            raise unknown_revision(revision, "a stored checkpoint", state)
    lowest = state.position(target)
    above = [r for r in present if state.position(r) > lowest]
    if not above:
        return
    highest = max(above, key=state.position)
    missing = state.missing_downgrades(highest, target)
    if missing:
        raise MissingDowngradeError(
            f"cannot take the stored state down to {target or 'base'!r}; nothing was "
            "changed: " + "; ".join(missing)
        )


def upgrade_plan(
    ctx: Context,
    state: StateMigrations,
    target: str | None,
    *,
    batch_size: int,
    dry_run: bool,
    max_run: dt.timedelta,
    progress: Callable[[StateUpgradeReport], None] | None = None,
) -> Plan[StateUpgradeReport]:
    """Every row to ``target`` (see the module docstring); a plan with one transaction
    per batch of threads."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InvalidInputError(f"batch_size must be an int >= 1, got {batch_size!r}")
    report = StateUpgradeReport(target=target, dry_run=dry_run)
    present: set[str | None] = set()
    for name, table in TABLES.items():
        counts = yield from revision_counts(table)
        present.update(counts)
        report.pending[name] = sum(n for r, n in counts.items() if r != target)
    check_path(state, sorted(present, key=lambda r: r or ""), target)
    report.pending_threads = yield from _count_threads(target)
    yield COMMIT
    if dry_run:
        return report
    after: str | None = None
    while True:
        threads = yield from _next_threads(target, after, batch_size)
        if not threads:
            return report
        after = threads[-1]
        yield from _upgrade_batch(ctx, state, target, threads, max_run, report)
        yield COMMIT
        report.batches += 1
        if progress is not None:
            progress(report)


def _stale_threads(target: str | None, after: str | None = None) -> sa.CompoundSelect[Any]:
    parts = []
    for table in TABLES.values():
        query = sa.select(table.c.thread_id).where(_stale(table, target))
        if after is not None:
            query = query.where(table.c.thread_id > after)
        parts.append(query)
    return sa.union(*parts)


def _count_threads(target: str | None) -> Plan[int]:
    stale = _stale_threads(target).subquery()
    rows = (yield Step(sa.select(sa.func.count()).select_from(stale), fetch=True)).rows
    return int(rows[0][0])


def _next_threads(target: str | None, after: str | None, batch_size: int) -> Plan[list[str]]:
    """The next ``batch_size`` threads (by id, after ``after``) with a row to rewrite;
    each table walked in its primary key's order from ``after``."""
    found: set[str] = set()
    for table in TABLES.values():
        query = (
            sa.select(table.c.thread_id)
            .where(_stale(table, target))
            .group_by(table.c.thread_id)
            .order_by(table.c.thread_id)
            .limit(batch_size)
        )
        if after is not None:
            query = query.where(table.c.thread_id > after)
        found.update(row[0] for row in (yield Step(query, fetch=True)).rows)
    return sorted(found)[:batch_size]


def _running(threads: list[str], max_run: dt.timedelta) -> Plan[set[str]]:
    """The threads a graph is running on: mid-run, last written within ``max_run``."""
    mid_run = yield from runs_in_progress(threads)
    if not mid_run:
        return set()
    rows = (
        yield Step(
            sa.select(C.c.thread_id, sa.func.max(C.c.updated_at))
            .where(C.c.thread_id.in_(sorted(mid_run)))
            .group_by(C.c.thread_id),
            fetch=True,
        )
    ).rows
    since = utc_now() - max_run
    return {row[0] for row in cast(Any, rows) if row[1] is not None and _aware(row[1]) > since}


def _aware(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.timezone.utc)


def _upgrade_batch(
    ctx: Context,
    state: StateMigrations,
    target: str | None,
    threads: list[str],
    max_run: dt.timedelta,
    report: StateUpgradeReport,
) -> Plan[None]:
    yield from maintenance.lock_blobs(ctx, threads)
    running = yield from _running(threads, max_run)
    report.threads_running.extend(t for t in threads if t in running)
    threads = [t for t in threads if t not in running]
    report.threads_visited += len(threads)
    if not threads:
        return
    rows = {}
    for name, table in TABLES.items():
        query = sa.select(table).where(table.c.thread_id.in_(threads))
        rows[name] = [r._mapping for r in (yield Step(query, fetch=True)).rows]
    rewrite = _Rewrite(ctx, state, target)
    rewrite.plan(rows["checkpoints"], rows["blobs"], rows["writes"])
    yield from rewrite.write()
    report.checkpoints += len(rewrite.documents)
    report.blobs += len(rewrite.blob_updates) + len(rewrite.blob_inserts)
    report.writes += len(rewrite.write_updates) + len(rewrite.write_deletes)
    report.failures.extend(rewrite.failures)


BlobKey = tuple[str, str, str, str]  # thread_id, ns_hash, channel, version
WriteKey = tuple[str, str, str, str, int]  # thread_id, ns_hash, checkpoint_id, task_id, idx


class _Rewrite:
    """The rows of a batch's threads at ``target``: computed first (nothing written
    while any migration function may still raise), then written."""

    def __init__(self, ctx: Context, state: StateMigrations, target: str | None) -> None:
        self.ctx, self.state, self.target = ctx, state, target
        self.documents: list[Record] = []
        self.blob_updates: dict[BlobKey, Record] = {}
        self.blob_inserts: dict[BlobKey, Record] = {}
        self.blob_deletes: set[BlobKey] = set()
        self.write_updates: list[Record] = []
        self.write_deletes: list[WriteKey] = []
        self.failures: list[StateFailure] = []
        self._kept_blobs: set[BlobKey] = set()  # named by a checkpoint left as it was

    def plan(
        self, checkpoints: Sequence[Record], blobs: Sequence[Record], writes: Sequence[Record]
    ) -> None:
        by_key = {_blob_key(b): b for b in blobs}
        writes_of: dict[tuple[str, str, str], list[Record]] = defaultdict(list)
        for w in writes:
            writes_of[(w["thread_id"], w["checkpoint_ns_hash"], w["checkpoint_id"])].append(w)
        # A blob's migrated row (None: dropped; _UNCHANGED: at the target already).
        done: dict[BlobKey, Any] = {}
        for row in checkpoints:
            key = (row["thread_id"], row["checkpoint_ns_hash"], row["checkpoint_id"])
            try:
                planned = self._checkpoint(row, by_key, writes_of.pop(key, []), done)
            except Exception as error:
                self._fail(row, error)
                continue
            self._take(*planned)
        for orphans in writes_of.values():  # writes of no stored checkpoint: one by one
            for w in orphans:
                try:
                    change = self._write(w)
                    if change[1] is not _UNCHANGED:
                        self._take(None, {}, [change])
                except Exception as error:
                    self._fail(w, error)
        # A blob a checkpoint left as it was still names keeps its key and value.
        for kept in self._kept_blobs:
            self.blob_updates.pop(kept, None)
            self.blob_deletes.discard(kept)

    def _fail(self, row: Record, error: Exception) -> None:
        self.failures.append(
            StateFailure(
                row["thread_id"],
                row.get("checkpoint_ns", ""),
                row["checkpoint_id"],
                f"{type(error).__name__}: {error}",
            )
        )
        if "checkpoint" in row:
            document = json_values.json_object(row["checkpoint"])
            for channel, version in (document.get("channel_versions") or {}).items():
                self._kept_blobs.add(
                    (row["thread_id"], row["checkpoint_ns_hash"], channel, version)
                )

    def _take(
        self,
        document: Record | None,
        blob_changes: dict[BlobKey, Record | None],
        write_changes: list[tuple[WriteKey, Record | None]],
        new_blobs: Sequence[Record] = (),
    ) -> None:
        if document is not None:
            self.documents.append(document)
        for new_blob in new_blobs:
            self.blob_inserts[_blob_key(new_blob)] = new_blob
        for old, new in blob_changes.items():
            if new is None:
                self.blob_deletes.add(old)
            elif _blob_key(new) == old:
                self.blob_updates[old] = new
            else:
                self.blob_deletes.add(old)
                self.blob_inserts[_blob_key(new)] = new
        for key, change in write_changes:
            if change is None:
                self.write_deletes.append(key)
            else:
                self.write_updates.append(change)

    def _checkpoint(
        self,
        row: Record,
        by_key: dict[BlobKey, Record],
        writes: list[Record],
        done: dict[BlobKey, Any],
    ) -> tuple[
        Record | None,
        dict[BlobKey, Record | None],
        list[tuple[WriteKey, Record | None]],
        list[Record],
    ]:
        """The checkpoint's migrated document, named blobs, writes and the blobs its
        inline values become; raises on any."""
        document = json_values.json_object(row["checkpoint"])
        steps = self.state.steps(row["state_revision"], self.target)
        migrated = migrate_names(document, steps)
        thread, nsh = row["thread_id"], row["checkpoint_ns_hash"]
        blob_changes: dict[BlobKey, Record | None] = {}
        for channel, version in (document.get("channel_versions") or {}).items():
            key = (thread, nsh, channel, version)
            if key in by_key and key not in done:
                done[key] = self._blob(by_key[key])
            if done.get(key, _UNCHANGED) is not _UNCHANGED:
                blob_changes[key] = done[key]
        inline = codec.inline_values(document)
        moved: list[Record] = []
        if inline:
            kept, moved = self._inline(row, steps, inline, migrated["channel_versions"])
            migrated[INLINE_KEY] = kept
            if not kept:
                del migrated[INLINE_KEY]
        # (values moved to blobs, channels renamed: whether it names a blob, again)
        migrated = codec.marked_all_inline(migrated, self.ctx.dialect_ops.reads_all_inline)
        write_changes = [c for c in map(self._write, writes) if c[1] is not _UNCHANGED]
        if row["state_revision"] == self.target:
            return None, blob_changes, write_changes, moved
        return (
            {
                "k_thread_id": thread,
                "k_ns_hash": nsh,
                "k_checkpoint_id": row["checkpoint_id"],
                "v_checkpoint": migrated,
                "v_metadata": migrate_metadata(json_values.json_object(row["metadata"]), steps),
                "v_revision": self.target,
            },
            blob_changes,
            write_changes,
            moved,
        )

    def _inline(
        self,
        row: Record,
        steps: Any,
        inline: dict[str, Any],
        versions: dict[str, str],
    ) -> tuple[dict[str, list[Any]], list[Record]]:
        """Values kept in the document (None, small primitives): a value that still
        fits there (``codec.fits_inline``) stays; one a transform made bigger or of
        another type goes to a blob at the channel's version."""
        kept: dict[str, list[Any]] = {}
        moved: list[Record] = []
        for channel, value in inline.items():
            name, new = migrate_value(steps, channel, value)
            if new is DROPPED:
                continue
            if name not in versions or codec.fits_inline(new, self.ctx.inline_types | _NONE):
                kept[name] = [new]
                continue
            type_, blob = self.ctx.serde.dumps_typed(new)
            moved.append(
                {
                    "thread_id": row["thread_id"],
                    "checkpoint_ns_hash": row["checkpoint_ns_hash"],
                    "channel": name,
                    "version": versions[name],
                    "type": type_,
                    "blob": blob,
                    "created_at": utc_now(),
                    "state_revision": self.target,
                }
            )
        return kept, moved

    def _blob(self, blob: Record) -> Any:
        """A blob row at the target (None: its channel was dropped; ``_UNCHANGED``: it is
        there already)."""
        if blob["state_revision"] == self.target:
            return _UNCHANGED
        steps = self.state.steps(blob["state_revision"], self.target)
        if blob["type"] == EMPTY_TYPE:
            name = channel_through(steps, blob["channel"])
            if name is None:
                return None
            return {**blob, "channel": name, "state_revision": self.target}
        value = codec.load_value(self.ctx.serde, blob["type"], blob["blob"])
        name, new = migrate_value(steps, blob["channel"], value)
        if new is DROPPED:
            return None
        type_, data = self.ctx.serde.dumps_typed(new)
        return {**blob, "channel": name, "type": type_, "blob": data, "state_revision": self.target}

    def _write(self, write: Record) -> tuple[WriteKey, Any]:
        """The write's new row (None: its channel was dropped; ``_UNCHANGED``)."""
        key = (
            write["thread_id"],
            write["checkpoint_ns_hash"],
            write["checkpoint_id"],
            write["task_id"],
            write["idx"],
        )
        if write["state_revision"] == self.target:
            return key, _UNCHANGED
        steps = self.state.steps(write["state_revision"], self.target)
        value = codec.load_value(self.ctx.serde, write["type"], write["blob"])
        name, new = migrate_value(steps, write["channel"], value, write=True)
        if new is DROPPED:
            return key, None
        type_, data = self.ctx.serde.dumps_typed(new)
        return key, {
            **_write_keys(key),
            "v_channel": name,
            "v_type": type_,
            "v_blob": data,
            "v_revision": self.target,
        }

    def write(self) -> Plan[None]:
        """The statements: documents, blobs (deleted, inserted, rewritten), writes."""
        if self.documents:
            yield Step(_update_documents(), self.documents)
        if self.blob_deletes:
            yield Step(_delete_blobs(), [_blob_params(k) for k in sorted(self.blob_deletes)])
        inserts = [r for k, r in self.blob_inserts.items() if k not in self._kept_blobs]
        yield from self.ctx.dialect_ops.insert_ignore_rows(B, inserts)
        updates = [
            {**_blob_params(k), "v_type": r["type"], "v_blob": r["blob"], "v_revision": self.target}
            for k, r in self.blob_updates.items()
        ]
        if updates:
            yield Step(_update_blobs(), updates)
        if self.write_updates:
            yield Step(_update_writes(), self.write_updates)
        if self.write_deletes:
            yield Step(_delete_writes(), [_write_keys(k) for k in self.write_deletes])


def _blob_key(blob: Record) -> BlobKey:
    return (blob["thread_id"], blob["checkpoint_ns_hash"], blob["channel"], blob["version"])


def _blob_params(key: BlobKey) -> dict[str, Any]:
    return dict(zip(("k_thread_id", "k_ns_hash", "k_channel", "k_version"), key, strict=True))


def _write_keys(key: WriteKey) -> dict[str, Any]:
    names = ("k_thread_id", "k_ns_hash", "k_checkpoint_id", "k_task_id", "k_idx")
    return dict(zip(names, key, strict=True))


def _key(table: sa.Table, **columns: str) -> list[sa.ColumnElement[bool]]:
    return [table.c[column] == sa.bindparam(param) for column, param in columns.items()]


def _rewrite(
    table: sa.Table, key: dict[str, str], plain: tuple[str, ...], typed: tuple[str, ...]
) -> sa.Update:
    """The UPDATE of one row of ``table`` at ``key`` (column -> parameter): its ``plain``
    and ``typed`` columns (parameter ``v_<column>``; ``typed``: bound with the column's
    type) and its ``state_revision`` (``v_revision``)."""
    values: dict[str, sa.BindParameter[Any]] = {c: sa.bindparam(f"v_{c}") for c in plain}
    values |= {column: sa.bindparam(f"v_{column}", type_=table.c[column].type) for column in typed}
    values["state_revision"] = sa.bindparam("v_revision", type_=table.c.state_revision.type)
    return sa.update(table).where(*_key(table, **key)).values(values)


_DOCUMENT_KEY = {
    "thread_id": "k_thread_id",
    "checkpoint_ns_hash": "k_ns_hash",
    "checkpoint_id": "k_checkpoint_id",
}
_BLOB_KEY = {
    "thread_id": "k_thread_id",
    "checkpoint_ns_hash": "k_ns_hash",
    "channel": "k_channel",
    "version": "k_version",
}
_WRITE_KEY = {**_DOCUMENT_KEY, "task_id": "k_task_id", "idx": "k_idx"}


def _update_documents() -> sa.Update:
    return _rewrite(C, _DOCUMENT_KEY, (), ("checkpoint", "metadata"))


def _delete_blobs() -> sa.Delete:
    return sa.delete(B).where(*_key(B, **_BLOB_KEY))


def _update_blobs() -> sa.Update:
    return _rewrite(B, _BLOB_KEY, ("type",), ("blob",))


def _update_writes() -> sa.Update:
    return _rewrite(W, _WRITE_KEY, ("channel", "type"), ("blob",))


def _delete_writes() -> sa.Delete:
    return sa.delete(W).where(*_key(W, **_WRITE_KEY))
