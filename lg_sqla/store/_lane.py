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
yields that step straight, its statement in fewer parameters (``_write.lone_upsert_statement``:
the same row written).

``SQLAlchemyStore.put`` and ``get`` take these lanes without an op: the namespace,
once LangGraph's own check found it valid, is kept with what its rows hold
(:func:`named`: the joined prefix, its hash and head), so a put or get of a namespace
seen before neither checks its labels again nor joins and hashes it again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from langgraph.store.base import GetOp, Item, PutOp, Result

from lg_sqla.plans import Plan, Step, T, prebuilt
from lg_sqla.shared import key_hash, utc_now
from lg_sqla.store._common import Named, Settings, parse_json, utc
from lg_sqla.store._read import lone_get_statement, refresh_statement
from lg_sqla.store._write import lone_upsert_statement
from lg_sqla.types import naive_utc_text_now

# ``tuple.__new__``: a Step of all its fields without the named tuple's Python ``__new__``.
_new_tuple: Callable[..., Any] = tuple.__new__

# How many namespaces each of ``Settings.put_named`` and ``get_named`` keeps: a graph's
# are few; past this (namespaces of ever new names) the map starts again, empty.
NAMED_MAX = 1024


def named(
    known: dict[tuple[str, ...], Named],
    namespace: tuple[str, ...],
    validate: Callable[[tuple[str, ...]], None],
) -> Named:
    """``namespace``'s :class:`Named`, once ``validate`` (LangGraph's own check, which
    raises its own error) passed it; kept in ``known`` (one map per check). A
    namespace that is no tuple of hashables is checked and joined each time."""
    try:
        return known[namespace]
    except KeyError:
        pass
    except TypeError:  # (unhashable: a list, a label of another type)
        validate(namespace)
        return Named.of(namespace)
    validate(namespace)
    found = Named.of(namespace)
    if len(known) >= NAMED_MAX:
        known.clear()  # (threads may race here: an entry lost is only made again)
    known[namespace] = found
    return found


def takes_put_lane(settings: Settings, op: PutOp) -> bool:
    """Whether a batch of ``op`` alone is one upsert (see :func:`lone_put_plan`)."""
    return op.value is not None and not settings.indexed and settings.dialect_ops.native_upsert


def put_lane_open(settings: Settings) -> bool:
    """Whether a lone put with a value is one upsert on this store (``takes_put_lane``
    of any such put)."""
    return not settings.indexed and settings.dialect_ops.native_upsert


@prebuilt
def lone_put_plan(
    settings: Settings,
    name: Named,
    key: str,
    value: Mapping[str, Any],
    ttl: float | None,
) -> Plan[list[Result]]:
    """The batch plan of a lone put with a value (``takes_put_lane``): the upsert of its
    row, in fewer parameters than the batch's (``lone_upsert_statement``: both
    timestamps one, ``stamped``; for an item without TTL its two columns NULL in the
    SQL). Every parameter costs per call (PyMySQL escapes each in Python, SQLite binds
    each); the row written is the same. Stamped now (each attempt: a put alone shares
    its time with nothing else), on SQLite without TTL as the column's text
    (``StoreSQL.lone_put_stamps_text``). Prebuilt (its statement is built once); a
    store whose batches are not runs it through :func:`undeclared`."""
    params: dict[str, Any] = {
        "prefix_hash": name.prefix_hash,
        "key_hash": key_hash(key),
        "prefix": name.prefix,
        "prefix_head": name.head,
        "key": key,
        # (a Mapping as a dict, for the JSON writers; a dict as it is: a copy would
        # guard nothing, the plan runs in the caller's call, or its worker thread)
        "value": value if type(value) is dict else dict(value),
    }
    expires = ttl is not None
    if expires:
        params["stamped"] = now = utc_now()
        params["expires_at"] = now + dt.timedelta(minutes=cast(float, ttl))
        params["ttl_minutes"] = ttl
    else:
        stamps_text = settings.sql.lone_put_stamps_text
        params["stamped"] = naive_utc_text_now() if stamps_text else utc_now()
    statement = settings.lane_statements.get(expires)
    if statement is None:
        statement = settings.lane_statements[expires] = lone_upsert_statement(settings, expires)
    # (every field given, by tuple's own constructor: a named tuple's ``__new__`` is
    # a Python frame, ~3k instructions a step)
    yield _new_tuple(Step, (statement, params, False, True, False))
    return [None]


def undeclared(plan: Plan[T]) -> Plan[T]:
    """``plan`` (of a function declared prebuilt) not declared so: for a store whose
    batches are not (``_StoreBase._kind``)."""
    return (yield from plan)


@prebuilt
def lone_get_plan(
    settings: Settings,
    name: Named,
    namespace: tuple[str, ...],
    key: str,
    refresh_ttl: bool,
    now: dt.datetime,
) -> Plan[list[Result]]:
    """The item of ``key`` in ``namespace`` (``name``: its joined form) alive at
    ``now`` (as the batch plan's result list: one entry), its expiry restarted if
    ``refresh_ttl`` and it has a TTL. A read alone needs no common transaction (the
    UPDATE is atomic by itself): ``whole_plan``, as the batch plan marks a batch of
    reads. Prebuilt, as :func:`lone_put_plan`."""
    prefix, prefix_hash, item_hash = name.prefix, name.prefix_hash, key_hash(key)
    params = {"prefix_hash": prefix_hash, "key_hash": item_hash, "now": now}
    names_in_sql = settings.sql.lone_get_names_in_sql
    if names_in_sql:
        params.update(prefix=prefix, key=key)
    statement = settings.lane_statements.get("get")
    if statement is None:
        statement = settings.lane_statements["get"] = lone_get_statement(settings)
    outcome = yield Step(statement, params, True, True, True)
    for fetched in outcome.rows:
        # (the statement leaves out the key hashes, and maybe the names the SQL
        # compared: they are the parameters')
        row = (prefix, key, *fetched) if names_in_sql else fetched
        prefix_text, found_key, value, created_at, updated_at, ttl_minutes = cast(
            Sequence[Any], row
        )
        # (by hash, as the batch plan: then the row whose names are the op's)
        if prefix_text != prefix or found_key != key:
            continue
        if refresh_ttl and ttl_minutes is not None:
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
            key=found_key,
            namespace=namespace,
            created_at=utc(created_at),
            updated_at=utc(updated_at),
        )
        return [item]
    return [None]


def lone_plan_of(
    settings: Settings, op: GetOp | PutOp, now: dt.datetime
) -> Callable[[], Plan[list[Result]]]:
    """The factory of a batch of ``op`` alone (a get, or a put that ``takes_put_lane``),
    validated already, on its lean lane (declared prebuilt: see ``undeclared``)."""
    name = Named.of(op.namespace)
    if type(op) is GetOp:
        return lambda: lone_get_plan(settings, name, op.namespace, op.key, op.refresh_ttl, now)
    put = cast(PutOp, op)
    value = cast(Mapping[str, Any], put.value)
    return lambda: lone_put_plan(settings, name, put.key, value, put.ttl)
