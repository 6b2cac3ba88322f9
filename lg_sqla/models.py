"""ORM models of lg_sqla's tables, importable by host applications.

Checkpoints since revision 0001; the store and the node cache since 0002; the index
in ``list``'s cross-thread order since 0005; retention settings since 0006; the stored
expiry of each checkpoint since 0008; the state revision of each checkpoint, blob
and write since 0009; the indexes of mostly-NULL columns partial since 0010.

Host apps that run their own Alembic env keep these tables out of it: pass
``include_name=exclude_lg_sqla_tables`` to ``context.configure`` and leave
``metadata`` out of their ``target_metadata`` (lg_sqla migrates its own tables;
docs/configuration.md, "Host applications with their own Alembic"). The models are
public for queries; the naming convention keeps constraint names stable across
dialects.

Keys use ``checkpoint_ns_hash`` (MD5 of ``checkpoint_ns``, computed in Python)
so nested subgraph namespaces of any length fit InnoDB's 3072-byte key limit;
the full namespace is kept in ``checkpoints.checkpoint_ns``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from sqlalchemy import Boolean, Double, Index, Integer, MetaData, Table, false, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from lg_sqla import limits
from lg_sqla.migrate import VERSION_TABLE
from lg_sqla.types import (
    MYSQL_TABLE_OPTIONS,
    big_binary,
    json_document,
    key_string,
    long_text,
    ordered_key_string,
    timestamp,
    vector_blob,
)

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Base(DeclarativeBase):
    metadata = metadata


def _when_set(column: str) -> dict[str, Any]:
    """Options of an index on a mostly-NULL column (revision 0010): on SQLite and
    PostgreSQL it holds only the rows where the column is set, so a write that leaves
    it NULL (most puts: no run id, no TTL) touches one b-tree less. Every query that
    reads these indexes compares the column (``=``, ``IN``, ``<``, ``<=``), which implies
    ``IS NOT NULL`` to both planners (tests/integration/schema/test_partial_indexes.py).
    MySQL/MariaDB have no partial indexes: theirs stay whole."""
    predicate = text(f"{column} IS NOT NULL")
    return {"sqlite_where": predicate, "postgresql_where": predicate}


class _CheckpointKey:
    """The key of a checkpoint: the first columns of its row and of its writes' rows,
    leading their primary keys (``sort_order``: a mixin's columns would come last)."""

    thread_id: Mapped[str] = mapped_column(
        key_string(limits.THREAD_ID_MAX), primary_key=True, sort_order=-1
    )
    checkpoint_ns_hash: Mapped[str] = mapped_column(
        key_string(limits.NS_HASH_LEN), primary_key=True, sort_order=-1
    )
    checkpoint_id: Mapped[str] = mapped_column(
        key_string(limits.CHECKPOINT_ID_MAX), primary_key=True, sort_order=-1
    )


class CheckpointRow(_CheckpointKey, Base):
    """One checkpoint: the chain/branch index plus the checkpoint document.

    ``checkpoint`` holds the LangGraph checkpoint without ``channel_values``:
    values live in ``checkpoint_blobs`` and are joined through
    ``checkpoint["channel_versions"]``.
    """

    __tablename__ = "checkpoints"

    checkpoint_ns: Mapped[str] = mapped_column(long_text(), nullable=False)
    parent_checkpoint_id: Mapped[str | None] = mapped_column(
        key_string(limits.CHECKPOINT_ID_MAX), nullable=True
    )
    # Copied out of metadata so delete_for_runs is an index lookup on every dialect.
    run_id: Mapped[str | None] = mapped_column(key_string(limits.RUN_ID_MAX), nullable=True)
    checkpoint: Mapped[dict[str, Any]] = mapped_column(json_document(), nullable=False)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", json_document(), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(timestamp(), nullable=False)
    updated_at: Mapped[dt.datetime] = mapped_column(timestamp(), nullable=False)
    # When the thread expires if this stays its newest checkpoint (revision 0008):
    # updated_at plus the TTL of the saver that wrote it, stamped by the put's own
    # statement; NULL: written under no TTL (it never expires unless given one).
    expires_at: Mapped[dt.datetime | None] = mapped_column(timestamp(), nullable=True)
    # The application's state revision the row's shape follows (revision 0009,
    # lg_sqla.checkpoint.state_migrations); NULL: revision zero.
    state_revision: Mapped[str | None] = mapped_column(
        key_string(limits.STATE_REVISION_MAX), nullable=True
    )

    __table_args__ = (
        # delete_for_runs and list(filter={"run_id": ...}): run_id = / IN.
        Index(None, "run_id", **_when_set("run_id")),
        # The age sweep's walk and `threads` newest first (scheduled and listed paths).
        Index(None, "updated_at"),
        # The TTL sweep's candidates: a range of this index (expires_at < now).
        Index(None, "expires_at", **_when_set("expires_at")),
        # `list`'s order across threads (revision 0005): a page reads its rows, not the table.
        Index(None, "checkpoint_id", "thread_id", "checkpoint_ns_hash"),
        MYSQL_TABLE_OPTIONS,
    )


class CheckpointWriteRow(_CheckpointKey, Base):
    """One pending write of a task against a checkpoint.

    No foreign key to ``checkpoints``: LangGraph may store a step's writes
    before the checkpoint they belong to.
    """

    __tablename__ = "checkpoint_writes"

    task_id: Mapped[str] = mapped_column(key_string(limits.TASK_ID_MAX), primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    task_path: Mapped[str] = mapped_column(long_text(), nullable=False)
    channel: Mapped[str] = mapped_column(key_string(limits.CHANNEL_MAX), nullable=False)
    type: Mapped[str] = mapped_column(key_string(limits.BLOB_TYPE_MAX), nullable=False)
    blob: Mapped[bytes] = mapped_column(big_binary(), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(timestamp(), nullable=False)
    # The application's state revision the row's shape follows (revision 0009,
    # lg_sqla.checkpoint.state_migrations); NULL: revision zero.
    state_revision: Mapped[str | None] = mapped_column(
        key_string(limits.STATE_REVISION_MAX), nullable=True
    )

    __table_args__ = (
        # stats --since: a time window is a range of this index (revision 0005).
        Index(None, "created_at"),
        MYSQL_TABLE_OPTIONS,
    )


class CheckpointBlobRow(Base):
    """A channel value at a version: immutable, shared by every checkpoint that
    carries that version (later checkpoints, forks), like a Git object."""

    __tablename__ = "checkpoint_blobs"

    thread_id: Mapped[str] = mapped_column(key_string(limits.THREAD_ID_MAX), primary_key=True)
    checkpoint_ns_hash: Mapped[str] = mapped_column(
        key_string(limits.NS_HASH_LEN), primary_key=True
    )
    channel: Mapped[str] = mapped_column(key_string(limits.CHANNEL_MAX), primary_key=True)
    version: Mapped[str] = mapped_column(key_string(limits.VERSION_MAX), primary_key=True)
    # "empty" marks a versioned channel without a value; blob is NULL then.
    type: Mapped[str] = mapped_column(key_string(limits.BLOB_TYPE_MAX), nullable=False)
    blob: Mapped[bytes | None] = mapped_column(big_binary(), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(timestamp(), nullable=False)
    # The application's state revision the row's shape follows (revision 0009,
    # lg_sqla.checkpoint.state_migrations); NULL: revision zero.
    state_revision: Mapped[str | None] = mapped_column(
        key_string(limits.STATE_REVISION_MAX), nullable=True
    )

    __table_args__ = (MYSQL_TABLE_OPTIONS,)


class CheckpointRetentionRow(Base):
    """A thread's retention settings (revision 0006): a TTL of its own, a pin, and
    when a read last refreshed its TTL.

    Only threads given a setting (or read with ``refresh_on_read``) have a row; every
    other thread expires as its newest checkpoint's ``expires_at`` says (stamped by the
    put), so a put costs no statement more (docs/operations.md, "Retention by policy").
    No row outlives its thread: whatever deletes a whole thread deletes its row too.
    """

    __tablename__ = "checkpoint_retention"

    thread_id: Mapped[str] = mapped_column(key_string(limits.THREAD_ID_MAX), primary_key=True)
    # Set by an operator (set_thread_ttl, `lg-sqla ttl set/apply`); it overrides the TTL
    # stamped on the thread's checkpoints. NULL: the stamped one applies.
    ttl_minutes: Mapped[float | None] = mapped_column(Double(), nullable=True)
    pinned: Mapped[bool] = mapped_column(Boolean(), nullable=False, server_default=false())
    # The last read that refreshed the TTL (refresh_on_read); NULL: never.
    touched_at: Mapped[dt.datetime | None] = mapped_column(timestamp(), nullable=True)
    updated_at: Mapped[dt.datetime] = mapped_column(timestamp(), nullable=False)

    __table_args__ = (
        # The sweep's shortest per-thread TTL is the first entry of this index.
        Index(None, "ttl_minutes"),
        MYSQL_TABLE_OPTIONS,
    )


class StoreItemRow(Base):
    """One item of the long-term memory store (``lg_sqla.store``).

    ``prefix`` is the namespace joined by ``.`` (LangGraph forbids dots in
    namespace labels), ``key`` the item's key; both are unbounded, so the key
    of the row is their MD5 hex digests (as ``checkpoint_ns_hash``).
    """

    __tablename__ = "store_items"

    prefix_hash: Mapped[str] = mapped_column(key_string(limits.NS_HASH_LEN), primary_key=True)
    key_hash: Mapped[str] = mapped_column(key_string(limits.NS_HASH_LEN), primary_key=True)
    prefix: Mapped[str] = mapped_column(long_text(), nullable=False)
    # prefix[:NS_HEAD_LEN] with its dots as U+0001 (revisions 0004, 0007), indexed: a
    # search of a namespace reads the index range of its subtree, not every item (the
    # full prefix is unbounded text), and list_namespaces walks the index in its order.
    prefix_head: Mapped[str] = mapped_column(
        ordered_key_string(limits.NS_HEAD_LEN), nullable=False, server_default=""
    )
    key: Mapped[str] = mapped_column(long_text(), nullable=False)
    value: Mapped[dict[str, Any]] = mapped_column(json_document(), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(timestamp(), nullable=False)
    updated_at: Mapped[dt.datetime] = mapped_column(timestamp(), nullable=False)
    # NULL: never expires. ttl_minutes is kept so a read can refresh expires_at.
    expires_at: Mapped[dt.datetime | None] = mapped_column(timestamp(), nullable=True)
    ttl_minutes: Mapped[float | None] = mapped_column(Double(), nullable=True)

    __table_args__ = (
        # The store's TTL sweep and `lg-sqla store stats` (expires_at <= now).
        Index(None, "expires_at", **_when_set("expires_at")),
        Index(None, "prefix_head"),
        MYSQL_TABLE_OPTIONS,
    )


class StoreVectorRow(Base):
    """The embedding of one indexed field of a store item (float32 little-endian bytes;
    ``real[]`` on PostgreSQL, revision 0003)."""

    __tablename__ = "store_vectors"

    prefix_hash: Mapped[str] = mapped_column(key_string(limits.NS_HASH_LEN), primary_key=True)
    key_hash: Mapped[str] = mapped_column(key_string(limits.NS_HASH_LEN), primary_key=True)
    field: Mapped[str] = mapped_column(key_string(limits.FIELD_PATH_MAX), primary_key=True)
    embedding: Mapped[Any] = mapped_column(vector_blob(), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(timestamp(), nullable=False)

    __table_args__ = (MYSQL_TABLE_OPTIONS,)


class CacheEntryRow(Base):
    """One entry of the node cache (``lg_sqla.cache``): a serialized value and its expiry."""

    __tablename__ = "cache_entries"

    namespace_hash: Mapped[str] = mapped_column(key_string(limits.NS_HASH_LEN), primary_key=True)
    key_hash: Mapped[str] = mapped_column(key_string(limits.NS_HASH_LEN), primary_key=True)
    namespace: Mapped[str] = mapped_column(long_text(), nullable=False)
    key: Mapped[str] = mapped_column(long_text(), nullable=False)
    type: Mapped[str] = mapped_column(key_string(limits.BLOB_TYPE_MAX), nullable=False)
    value: Mapped[bytes] = mapped_column(big_binary(), nullable=False)
    expires_at: Mapped[dt.datetime | None] = mapped_column(timestamp(), nullable=True)

    __table_args__ = (
        # `lg-sqla store stats`' count of expired entries (expires_at <= now).
        Index(None, "expires_at", **_when_set("expires_at")),
        MYSQL_TABLE_OPTIONS,
    )


checkpoints = cast(Table, CheckpointRow.__table__)
checkpoint_writes = cast(Table, CheckpointWriteRow.__table__)
checkpoint_blobs = cast(Table, CheckpointBlobRow.__table__)
checkpoint_retention = cast(Table, CheckpointRetentionRow.__table__)
store_items = cast(Table, StoreItemRow.__table__)
store_vectors = cast(Table, StoreVectorRow.__table__)
cache_entries = cast(Table, CacheEntryRow.__table__)

# Every table lg_sqla owns, its Alembic version table included.
LG_SQLA_TABLES = frozenset({*metadata.tables, VERSION_TABLE})


def exclude_lg_sqla_tables(name: str | None, type_: str, parent_names: object) -> bool:
    """An Alembic ``include_name`` hook for a host application's env.py: skip lg_sqla's
    tables, whose migrations belong to lg_sqla, so autogenerate and ``alembic check``
    neither report them nor propose to drop them."""
    return not (type_ == "table" and name in LG_SQLA_TABLES)


__all__ = [
    "LG_SQLA_TABLES",
    "NAMING_CONVENTION",
    "Base",
    "CacheEntryRow",
    "CheckpointBlobRow",
    "CheckpointRetentionRow",
    "CheckpointRow",
    "CheckpointWriteRow",
    "StoreItemRow",
    "StoreVectorRow",
    "cache_entries",
    "checkpoint_blobs",
    "checkpoint_retention",
    "checkpoint_writes",
    "checkpoints",
    "exclude_lg_sqla_tables",
    "metadata",
    "store_items",
    "store_vectors",
]
