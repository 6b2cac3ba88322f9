"""The batch's writes (puts and deletes), the TTL sweep, and what a put embeds."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from langgraph.store.base import Op, PutOp

from lg_sqla import limits
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import store_items, store_vectors
from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash
from lg_sqla.store._common import (
    Embedded,
    Settings,
    in_keys,
    join_namespace,
    key_chunks,
    namespace_head,
)


def effective_puts(ops: Sequence[Op]) -> dict[tuple[tuple[str, ...], str], PutOp]:
    """The last put of each (namespace, key): earlier ones in the batch are overwritten."""
    puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
    for op in ops:
        if isinstance(op, PutOp):
            puts[(op.namespace, op.key)] = op
    return puts


def write_plan(
    settings: Settings,
    puts: Mapping[tuple[tuple[str, ...], str], PutOp],
    embedded: Embedded,
    now: dt.datetime,
    step: Callable[..., Step] = Step,
) -> Plan[None]:
    """Every effective put of the batch: the vectors of its keys and the items it deletes
    (without a native upsert: all its keys) go, then one upsert of the items it writes and
    one insert of their vectors."""
    if not puts:
        return
    dialect_ops = settings.dialect_ops
    # Every put's key pair: what an index or the lack of an upsert deletes first.
    keys = (
        sorted((key_hash(join_namespace(ns)), key_hash(key)) for ns, key in puts)
        if settings.indexed or not dialect_ops.native_upsert
        else []
    )
    # Vectors of every put item go: a put re-indexes (or un-indexes) its item.
    if settings.indexed:
        delete_vectors = dialect_ops.cached(
            "store.delete_vectors",
            lambda: sa.delete(store_vectors).where(in_keys(settings, store_vectors)),
        )
        for chunk in key_chunks(settings, keys):
            yield step(delete_vectors, chunk)
    written = [op for op in puts.values() if op.value is not None]
    deleted = [
        (key_hash(join_namespace(op.namespace)), key_hash(op.key))
        for op in puts.values()
        if op.value is None
    ]
    if not dialect_ops.native_upsert:
        # No portable upsert: delete every key, then insert (created_at restarts).
        deleted = keys
    if deleted:
        delete_items = dialect_ops.cached(
            "store.delete_items",
            lambda: sa.delete(store_items).where(in_keys(settings, store_items)),
        )
        for chunk in key_chunks(settings, sorted(deleted)):
            yield step(delete_items, chunk)
    if written:
        rows = _item_rows(written, now)
        # One row: a plain execute, not the executemany machinery.
        yield step(upsert_statement(settings), rows[0] if len(rows) == 1 else rows)
    if settings.indexed:
        vector_rows = _vector_rows(settings, embedded, now)
        if vector_rows:
            yield Step(sa.insert(store_vectors), vector_rows)


def upsert_statement(settings: Settings) -> Any:
    """The INSERT of items, updating an item already there where the dialect has a
    native upsert (else the batch deleted its keys first); built once per store."""
    dialect_ops = settings.dialect_ops
    update = ("value", "updated_at", "expires_at", "ttl_minutes")
    return dialect_ops.cached(
        "store.upsert",
        lambda: (
            dialect_ops.upsert(store_items, update)
            if dialect_ops.native_upsert
            else sa.insert(store_items)
        ),
    )


def lone_upsert_statement(settings: Settings, expires: bool) -> Any:
    """``upsert_statement`` of one row, in fewer parameters (``_lane.lone_put_plan``):
    both timestamps one, ``stamped``; without ``expires``, the TTL columns NULL, and
    ``stamped`` the column's text where ``StoreSQL.lone_put_stamps_text``."""

    def build() -> Any:
        t = store_items.c
        given = ("prefix_hash", "key_hash", "prefix", "prefix_head", "key", "value")
        values: dict[str, Any] = {name: sa.bindparam(name, type_=t[name].type) for name in given}
        as_text = settings.sql.lone_put_stamps_text and not expires
        stamped = sa.bindparam("stamped", type_=sa.String() if as_text else t.created_at.type)
        values.update(created_at=stamped, updated_at=stamped)
        for name in ("expires_at", "ttl_minutes"):
            values[name] = sa.bindparam(name, type_=t[name].type) if expires else sa.null()
        return upsert_statement(settings).values(values)

    return settings.dialect_ops.cached(("store.upsert.lone", expires), build)


def _item_rows(written: Sequence[PutOp], now: dt.datetime) -> list[dict[str, Any]]:
    """The ``store_items`` rows of puts with a value."""
    return [item_row(op, now) for op in written]


def item_row(op: PutOp, now: dt.datetime) -> dict[str, Any]:
    """The ``store_items`` row of a put with a value, stamped ``now``."""
    prefix = join_namespace(op.namespace)
    return {
        "prefix_hash": key_hash(prefix),
        "key_hash": key_hash(op.key),
        "prefix": prefix,
        "prefix_head": namespace_head(prefix),
        "key": op.key,
        "value": dict(op.value or {}),
        "created_at": now,
        "updated_at": now,
        "expires_at": None if op.ttl is None else now + dt.timedelta(minutes=op.ttl),
        "ttl_minutes": op.ttl,
    }


def _vector_rows(settings: Settings, embedded: Embedded, now: dt.datetime) -> list[dict[str, Any]]:
    """The ``store_vectors`` rows of the batch's embedded puts."""
    return [
        {
            "prefix_hash": key_hash(join_namespace(ns)),
            "key_hash": key_hash(key),
            "field": path,
            "embedding": settings.sql.vector_value(vector),
            "created_at": now,
        }
        for (ns, key), fields in embedded.documents.items()
        for path, vector in fields
    ]


def sweep_plan(now: dt.datetime) -> Plan[int]:
    """Delete expired items and their vectors; returns how many items went."""
    t, v = store_items.c, store_vectors.c
    expired = sa.select(t.prefix_hash, t.key_hash).where(t.expires_at <= now)
    yield Step(sa.delete(store_vectors).where(sa.tuple_(v.prefix_hash, v.key_hash).in_(expired)))
    outcome = yield Step(sa.delete(store_items).where(t.expires_at <= now))
    return outcome.rowcount


def texts_to_embed(
    puts: Iterable[PutOp], default_fields: Sequence[str] | None
) -> list[tuple[tuple[str, ...], str, str, str]]:
    """(namespace, key, field path, text) for each text to embed, in put order."""
    from langgraph.store.base.embed import get_text_at_path

    found = []
    for op in puts:
        if op.value is None or op.index is False:
            continue
        paths = list(op.index) if op.index else list(default_fields or ["$"])
        for path in paths:
            texts = get_text_at_path(op.value, path)
            for n, text in enumerate(texts):
                where = path if len(texts) == 1 else f"{path}.{n}"
                if len(where) > limits.FIELD_PATH_MAX:
                    raise InvalidInputError(
                        f"index field {where!r} is longer than {limits.FIELD_PATH_MAX}"
                    )
                found.append((op.namespace, op.key, where, text))
    return found
