"""A put is complete: when it commits, every blob its checkpoint names exists.

A checkpoint names a blob for each channel of its ``channel_versions`` that has a
stored value (``codec.dump_values``); a put writes blobs only for ``new_versions``,
so the other channels rely on blobs an earlier put wrote. Those may be gone by the
time the put commits: a prune or ``keep_last`` beside a second writer deleted them
(the other writer's checkpoint moved on), ``delete_thread`` or a sweep removed the
thread while the put was in flight. So the checkpoint row is written only where
every named blob is present (*guarded*): the same statement counts them, and writes
nothing when one is missing. Then the put writes every named blob (insert-or-ignore)
from the values in hand (``checkpoint["channel_values"]`` holds every channel's)
and the checkpoint again: the rare path, one or two more statements.

The count must see what a concurrent deleter did, not a snapshot from before it:
PostgreSQL locks the blobs it counts (``FOR KEY SHARE``: it waits for a transaction
deleting one and then skips the row), MySQL/MariaDB read them with the shared locks
InnoDB takes for the source of an ``INSERT ... SELECT`` (REPEATABLE READ), SQLite runs
one writer at a time. The deleters decide after locking (``maintenance``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import Executable

from lg_sqla.checkpoint import codec
from lg_sqla.checkpoint.context import Context
from lg_sqla.errors import LgSqlaError
from lg_sqla.models import checkpoint_blobs as B
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import Plan, Step

BlobKey = tuple[str, str]  # (channel, version) within the put's thread and namespace

# The checkpoint's parameter names in the put's statements (beside the blobs').
CHECKPOINT_PARAMS = {c.name: f"c_{c.name}" for c in C.columns}
_COUNT = "k_count"
# A guarded write that keeps failing means blobs are deleted as fast as they are
# written: say so instead of looping.
_ATTEMPTS = 3


class IncompleteCheckpointError(LgSqlaError, RuntimeError):
    """A put could not store its checkpoint with every blob it names."""


def named_blobs(
    values: Mapping[str, Any], versions: Mapping[str, str], inline: Mapping[str, Any]
) -> list[BlobKey]:
    """The (channel, version) of every blob the checkpoint names: its versioned
    channels with a value that is not inline in the document (``codec.dump_values``)."""
    return [(ch, v) for ch, v in versions.items() if ch in values and ch not in inline]


def _key_param(kind: str, n: int) -> str:
    return f"k_{kind}_{n}"


def key_params(keys: Sequence[BlobKey]) -> dict[str, Any]:
    """The parameters of ``_present`` for these keys."""
    params: dict[str, Any] = {_COUNT: len(keys)}
    for n, (channel, version) in enumerate(keys):
        params[_key_param("channel", n)] = channel
        params[_key_param("version", n)] = version
    return params


def _present(keys: int) -> sa.Select[Any]:
    """The put's named blobs that exist (``keys`` of them, bound by ``key_params``)."""
    thread = sa.bindparam(CHECKPOINT_PARAMS["thread_id"], type_=C.c.thread_id.type)
    nsh = sa.bindparam(CHECKPOINT_PARAMS["checkpoint_ns_hash"], type_=C.c.checkpoint_ns_hash.type)
    return sa.select(sa.literal_column("1").label("present")).where(
        B.c.thread_id == thread,
        B.c.checkpoint_ns_hash == nsh,
        sa.or_(
            *(
                sa.and_(
                    B.c.channel == sa.bindparam(_key_param("channel", n), type_=B.c.channel.type),
                    B.c.version == sa.bindparam(_key_param("version", n), type_=B.c.version.type),
                )
                for n in range(keys)
            )
        ),
    )


def _guarded(upsert: sa.Insert, found: sa.ColumnElement[Any]) -> sa.Insert:
    """``upsert`` of the checkpoint row as an ``INSERT ... SELECT`` that selects it only
    where ``found`` (the named blobs present) equals their number."""
    source = sa.select(
        *(sa.bindparam(CHECKPOINT_PARAMS[c.name], type_=c.type) for c in C.columns)
    ).where(found == sa.bindparam(_COUNT, type_=sa.Integer))
    # The rowcount says whether it was written: SQLAlchemy keeps an INSERT's only when
    # asked (else -1 on psycopg).
    return upsert.from_select([c.name for c in C.columns], source).execution_options(
        preserve_rowcount=True
    )


def _is_key(n: int) -> list[sa.ColumnElement[bool]]:
    """The primary key of named blob ``n`` of the put (bound by ``key_params``)."""
    thread = sa.bindparam(CHECKPOINT_PARAMS["thread_id"], type_=C.c.thread_id.type)
    nsh = sa.bindparam(CHECKPOINT_PARAMS["checkpoint_ns_hash"], type_=C.c.checkpoint_ns_hash.type)
    return [
        B.c.thread_id == thread,
        B.c.checkpoint_ns_hash == nsh,
        B.c.channel == sa.bindparam(_key_param("channel", n), type_=B.c.channel.type),
        B.c.version == sa.bindparam(_key_param("version", n), type_=B.c.version.type),
    ]


def _sum(terms: Sequence[sa.ColumnElement[Any]]) -> sa.ColumnElement[Any]:
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def guarded_upsert(upsert: sa.Insert, keys: int) -> sa.Insert:
    """The checkpoint upsert, written only if its ``keys`` named blobs all exist
    (blobs this transaction wrote included).

    One primary-key lookup per blob, added up: for an OR of the keys (or a row-value
    IN) SQLite reads the thread's whole range of the index, a cost that grew with the
    thread (1.46 M instructions a put on a 220-checkpoint thread instead of 0.21 M)."""
    return _guarded(
        upsert,
        _sum(
            [sa.select(sa.func.count()).where(*_is_key(n)).scalar_subquery() for n in range(keys)]
        ),
    )


def held_blobs(keys: int) -> sa.Select[Any]:
    """The put's named blobs that exist, each locked ``FOR KEY SHARE`` (a deleter's
    transaction is waited for; a row it deleted is not returned): the first statement of
    a put on distributed tables (Citus), where one statement would not be routed."""
    thread = sa.bindparam(CHECKPOINT_PARAMS["thread_id"], type_=C.c.thread_id.type)
    nsh = sa.bindparam(CHECKPOINT_PARAMS["checkpoint_ns_hash"], type_=C.c.checkpoint_ns_hash.type)
    named = sa.or_(*(sa.and_(*_is_key(n)[2:]) for n in range(keys)))
    return (
        sa.select(B.c.channel, B.c.version)
        .where(B.c.thread_id == thread, B.c.checkpoint_ns_hash == nsh, named)
        .with_for_update(read=True, key_share=True)
    )


def guarded_one_statement(blobs: sa.Insert | None, upsert: sa.Insert, keys: int) -> sa.Insert:
    """PostgreSQL's put in one statement: the blobs' insert-or-ignore and the guarded
    checkpoint upsert. The statement's snapshot cannot see the rows its own CTE
    inserts, so present = named blobs that existed (each locked ``FOR KEY SHARE`` by a
    primary-key lookup of its own) + those it inserted (``RETURNING``)."""
    held = [
        sa.select(sa.literal_column("1").label("held"))
        .where(*_is_key(n))
        .with_for_update(read=True, key_share=True)
        .cte(f"held_{n}")
        for n in range(keys)
    ]
    terms = [sa.select(sa.func.count()).select_from(h).scalar_subquery() for h in held]
    written = None
    if blobs is not None:
        written = blobs.returning(sa.literal_column("1").label("written")).cte("written_blobs")
        terms.append(sa.select(sa.func.count()).select_from(written).scalar_subquery())
    statement = _guarded(upsert, _sum(terms))
    for cte in [*held, *([written] if written is not None else [])]:
        statement = statement.add_cte(cte)
    return statement


def missing_blob_rows(
    ctx: Context,
    values: Mapping[str, Any],
    versions: Mapping[str, str],
    keys: Sequence[BlobKey],
    shared: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """Blob rows for every named blob, from the values in hand (the rare path)."""
    _, rows = codec.dump_values(ctx.serde, values, versions, dict(keys), ctx.inline_types, shared)
    return rows


def check_stored(rowcount: int, attempt: int) -> bool:
    """Whether a guarded write stored the checkpoint; raise after too many misses."""
    if rowcount > 0:
        return True
    if attempt + 1 >= _ATTEMPTS:
        raise IncompleteCheckpointError(
            f"put: the blobs of the checkpoint were deleted {_ATTEMPTS} times while it was "
            "being written (a prune or delete_thread looping on this thread?); nothing stored"
        )
    return False


def portable_missing(keys: Sequence[BlobKey], params: Mapping[str, Any]) -> Plan[list[BlobKey]]:
    """The named blobs that do not exist (dialects without a native upsert, which
    cannot guard the checkpoint row in its own statement)."""
    stmt: Executable = _present(len(keys)).with_only_columns(B.c.channel, B.c.version)
    rows = (yield Step(stmt, {**params, **key_params(keys)}, fetch=True)).rows
    found = {(r.channel, r.version) for r in rows}
    return [key for key in keys if key not in found]
