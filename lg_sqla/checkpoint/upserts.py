"""The upserts of the hot put and put_writes (``operations.put``, ``operations.put_writes``):
the statements each call runs when it writes no blob, built once per form and cached
by the dialect (``DialectOps.cached``); ``Context.hot_statements`` keeps them per saver."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql import Executable

from lg_sqla.checkpoint.context import Context
from lg_sqla.models import checkpoint_writes as W
from lg_sqla.models import checkpoints as C

CHECKPOINT_UPDATE = (
    "checkpoint",
    "metadata",
    "run_id",
    "updated_at",
    "expires_at",
    "state_revision",
)

WRITE_UPDATE = ("channel", "type", "blob", "task_path", "state_revision")
# Special channels (WRITES_IDX_MAP) have negative idx; idx is a key column, so
# the stored row's idx tells whether a conflicting write may replace it. The 0
# is SQL text, not a parameter: executemany drivers (asyncmy) rewrite the VALUES
# list per row and cannot bind a parameter in ON DUPLICATE KEY UPDATE.
SPECIAL_WRITE = W.c.idx < sa.literal_column("0")

# (DialectOps.upsert_rows' cache key of the same statement: one statement cached)
UPSERT_KEY = ("upsert", C.name, CHECKPOINT_UPDATE)


def upsert_builder(ctx: Context) -> Callable[[], Executable]:
    """The builder of the checkpoint upsert (``UPSERT_KEY``)."""
    return functools.partial(ctx.dialect_ops.upsert, C, CHECKPOINT_UPDATE)


# The upsert of a put stamped with the clock's text (``Context.stamps_text``, no TTL):
# created_at and updated_at bind that text as it is (no bind processor per column, one
# parameter for both) and expires_at is NULL in the SQL. The row written is the same.
# The columns a put leaves NULL are left out of its VALUES (their default is NULL, and
# the upsert's SET copies excluded's NULL): pysqlite adapts a None parameter through
# its adapt protocol, whose failed ``__adapt__`` lookup raises and clears an
# AttributeError (~3.3k instructions a parameter). A variant per pair of the two that
# vary by put (``HOT_PUTS``: no parent; no run_id); state_revision by the context.
STAMPED_UPSERT_KEY = ("upsert stamped", C.name, CHECKPOINT_UPDATE)
NULL_PAIRS = ((), ("parent_checkpoint_id",), ("run_id",), ("parent_checkpoint_id", "run_id"))
# ctx.hot_statements' keys of the lone upsert, by ``NULL_PAIRS``' index: (parent_checkpoint_id
# is None) + 2 * (run_id is None).
HOT_PUTS = ("put", "put without parent", "put without run", "put without parent or run")


def lone_upsert(ctx: Context, nulls: int) -> Executable:
    """The upsert of a put that writes and names no blob (``UPSERT_KEY``'s, or the
    stamped one where ``Context.stamps_text``, without the columns ``NULL_PAIRS[nulls]``
    names), cached by the dialect."""
    ops = ctx.dialect_ops
    if not ctx.stamps_text:
        return ops.cached(UPSERT_KEY, upsert_builder(ctx))
    left_null = (*NULL_PAIRS[nulls], *(("state_revision",) if ctx.state_head is None else ()))

    def build() -> Executable:
        values: dict[str, Any] = {c.name: sa.bindparam(c.name, type_=c.type) for c in C.columns}
        values["created_at"] = values["updated_at"] = sa.bindparam("created_at", type_=sa.String())
        values["expires_at"] = sa.null()
        for name in left_null:
            del values[name]
        return ops.upsert(C, CHECKPOINT_UPDATE).values(values)

    return ops.cached((STAMPED_UPSERT_KEY, left_null), build)


def writes_upsert(ctx: Context) -> Executable:
    """put_writes' upsert: created_at binds the clock's text as it is (``Context.stamps_text``);
    state_revision is left to its default, NULL, where rows carry none (a parameter less
    per row). Cached per form; in ``ctx.hot_statements`` as ``"put_writes"``."""
    ops, stamped, unrevised = ctx.dialect_ops, ctx.stamps_text, ctx.state_head is None

    def build() -> Executable:
        values = {c.name: sa.bindparam(c.name, type_=c.type) for c in W.columns}
        if stamped:
            values["created_at"] = sa.bindparam("created_at", type_=sa.String())
        if unrevised:  # (the upsert's SET still copies it: excluded's NULL)
            del values["state_revision"]
        return ops.upsert_where(W, WRITE_UPDATE, replace=SPECIAL_WRITE).values(values)

    return ops.cached(("put_writes upsert", stamped, unrevised), build)
