"""The lean lanes: a batch of one ``GetOp`` or of one ``PutOp``, the hottest calls a graph
makes on its store.

Through the batch plan (``_plan.py``) a lone get pays for what a batch of any size
needs: its ops sorted by kind, a set of key pairs, a ``Batch`` with its results, and
four sub-plans that each find nothing to do. This plan runs the same statements (the
cached SELECT of one key, less the two key-hash columns it knows already, then the
same UPDATE when the item's TTL is refreshed on read), with the same parameters,
through the same runtime, and builds the same Item; it only skips that bookkeeping.
The store takes it for a batch of one ``GetOp`` wherever the batch plan would run
(``_StoreBase._plan_of``).

A lone put with a value, on a store without an index, on a dialect with a native
upsert, is one statement in the batch plan too (``write_plan``: the upsert of its
row, ``whole_plan`` as ``needs_no_transaction`` finds it); :func:`lone_put_plan`
yields that step straight, its statement in fewer parameters (``_write.lone_upsert``:
the same row written).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, cast

from langgraph.store.base import GetOp, Item, PutOp, Result

from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash
from lg_sqla.store._common import Settings, join_namespace, parse_json, utc
from lg_sqla.store._read import lone_get_statement, refresh_statement
from lg_sqla.store._write import lone_upsert


def takes_put_lane(settings: Settings, op: PutOp) -> bool:
    """Whether a batch of ``op`` alone is one upsert (see :func:`lone_put_plan`)."""
    return op.value is not None and not settings.indexed and settings.dialect_ops.native_upsert


def lone_put_plan(settings: Settings, op: PutOp, now: dt.datetime) -> Plan[list[Result]]:
    """The batch plan of ``op`` alone (``takes_put_lane``): the upsert of its row
    (``lone_upsert``)."""
    yield Step(*lone_upsert(settings, op, now), whole_plan=True)
    return [None]


def lone_get_plan(settings: Settings, op: GetOp, now: dt.datetime) -> Plan[list[Result]]:
    """``op``'s item alive at ``now`` (as the batch plan's result list: one entry), its
    expiry restarted if ``op.refresh_ttl`` and it has a TTL. A read alone needs no
    common transaction (the UPDATE is atomic by itself): ``whole_plan``, as the batch
    plan marks a batch of reads."""
    prefix = join_namespace(op.namespace)
    prefix_hash, item_hash = key_hash(prefix), key_hash(op.key)
    params = {"prefix_hash": prefix_hash, "key_hash": item_hash, "now": now}
    names_in_sql = settings.sql.lone_get_names_in_sql
    if names_in_sql:
        params.update(prefix=prefix, key=op.key)
    outcome = yield Step(
        lone_get_statement(settings), params, fetch=True, whole_plan=True, positional=True
    )
    for fetched in outcome.rows:
        # (the statement leaves out the key hashes, and maybe the names the SQL
        # compared: they are the parameters')
        row = (prefix, op.key, *fetched) if names_in_sql else fetched
        prefix_text, key, value, created_at, updated_at, ttl_minutes = cast(Sequence[Any], row)
        # (by hash, as the batch plan: then the row whose names are the op's)
        if prefix_text != prefix or key != op.key:
            continue
        if op.refresh_ttl and ttl_minutes is not None:
            yield Step(
                refresh_statement(settings),
                [
                    {
                        "b_prefix_hash": prefix_hash,
                        "b_key_hash": item_hash,
                        "b_expires_at": now + dt.timedelta(minutes=ttl_minutes),
                    }
                ],
            )
        # The Item as_item makes of the row's GotRow, without the GotRow: its
        # namespace is the op's (the same labels: the prefix is their join).
        if isinstance(value, (str, bytes)):  # SQLite's and MySQL's JSON is text
            value = parse_json(value)
        item = Item(
            value=value,
            key=key,
            namespace=op.namespace,
            created_at=utc(created_at),
            updated_at=utc(updated_at),
        )
        return [item]
    return [None]
