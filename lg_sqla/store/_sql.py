"""Search filters and namespace match conditions as SQL conditions, with LangGraph's
``InMemoryStore`` semantics, from the dialect's primitives (``dialects.StoreSQL``).

Every value of a filter is a bound parameter; member names and array indices are
bound too (in a path). The semantics, as ``InMemoryStore``'s Python comparisons:

* ``{"k": v}`` / ``{"k": {"$eq": v}}``: Python's ``==`` between the item's
  ``value.get("k")`` and ``v``. So a missing member equals ``None`` (as JSON null
  does), numbers and booleans compare as numbers (``True == 1 == 1.0``), strings
  exactly, objects by their members and arrays element by element.
* ``{"k": {"a": v}}`` (no ``$`` key): the item's ``k`` is an object whose ``a``
  matches ``v`` (other members may exist); ``{"k": [v, w]}``: an array of two
  elements matching ``v`` and ``w``. Both nest.
* ``$ne``: not ``$eq`` (a missing member is ``None``, so ``{"$ne": "x"}`` matches it).
* ``$gt $gte $lt $lte``: numeric; the operand is read as Python's ``float()`` does
  (booleans and numeric strings included), the item's value when it is a number,
  a boolean (1/0) or a string in JSON number syntax (``dialects.NUMERIC_STRING``).
  Anything else matches no ordering condition (``InMemoryStore`` raises there).
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa
from langgraph.store.base import MatchCondition
from sqlalchemy.sql.elements import ColumnElement

from lg_sqla.dialects import JsonPath, StoreSQL

ORDERING: dict[str, Callable[[Any, Any], Any]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
_INT64 = 2**63 - 1


def ordering_operand(operand: Any) -> float | int | None:
    """The number an ordering operator compares with (Python's ``float()``), or None."""
    if isinstance(operand, bool):
        return int(operand)
    if isinstance(operand, int):
        # SQLite binds 64-bit integers only; beyond, a float compares the same way.
        return operand if -_INT64 <= operand <= _INT64 else float(operand)
    if isinstance(operand, (float, str)):
        try:
            return float(operand)
        except ValueError:
            return None
    return None


def filter_condition(
    sql: StoreSQL, doc: ColumnElement[Any], wanted: Mapping[str, Any] | None
) -> ColumnElement[bool]:
    """The items whose value matches a search filter (validated by ``check_op``)."""
    return sa.and_(sa.true(), *(_matches(sql, doc, (key,), v) for key, v in (wanted or {}).items()))


def _matches(sql: StoreSQL, doc: ColumnElement[Any], path: JsonPath, wanted: Any) -> Any:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return sa.and_(
                *(_operator(sql, doc, path, name, operand) for name, operand in wanted.items())
            )
        return sa.and_(
            sql.kind_in(doc, path, frozenset({"object"})),
            *(_matches(sql, doc, (*path, k), v) for k, v in wanted.items()),
        )
    if isinstance(wanted, (list, tuple)):
        return sa.and_(
            sql.kind_in(doc, path, frozenset({"array"})),
            sql.length_equals(doc, path, len(wanted)),
            *(_matches(sql, doc, (*path, i), v) for i, v in enumerate(wanted)),
        )
    return _equals(sql, doc, path, wanted)


def _equals(sql: StoreSQL, doc: ColumnElement[Any], path: JsonPath, wanted: Any) -> Any:
    """Python's ``value_at(path) == wanted``, where a missing member is ``None``."""
    if wanted is None:
        return sa.or_(sql.missing(doc, path), sql.kind_in(doc, path, frozenset({"null"})))
    if isinstance(wanted, str):
        return sql.string_equals(doc, path, wanted)
    if isinstance(wanted, (bool, int, float)):
        number = ordering_operand(wanted)
        return sql.number_compare(doc, path, operator.eq, number, strings=False)
    if isinstance(wanted, Mapping):  # dict == dict: the same members, each equal
        return sa.and_(
            sql.kind_in(doc, path, frozenset({"object"})),
            sql.length_equals(doc, path, len(wanted)),
            *(
                sa.and_(~sql.missing(doc, (*path, k)), _equals(sql, doc, (*path, k), v))
                for k, v in wanted.items()
            ),
        )
    # A list (or tuple): the same length, each element equal.
    return sa.and_(
        sql.kind_in(doc, path, frozenset({"array"})),
        sql.length_equals(doc, path, len(wanted)),
        *(_equals(sql, doc, (*path, i), v) for i, v in enumerate(wanted)),
    )


def _operator(
    sql: StoreSQL, doc: ColumnElement[Any], path: JsonPath, name: str, operand: Any
) -> Any:
    if name == "$eq":
        return _equals(sql, doc, path, operand)
    if name == "$ne":
        return ~_equals(sql, doc, path, operand)
    number = ordering_operand(operand)
    assert number is not None, "check_op refuses non-numeric ordering operands"
    compare = ORDERING[name]
    if isinstance(number, float) and not math.isfinite(number):
        if math.isnan(number):
            return sa.false()  # NaN is neither greater nor smaller than anything
        # No stored number is infinite (JSON has none; numeric strings have at most a
        # 4-digit exponent): compare with the largest finite double instead.
        above = number > 0
        if (name in ("$gt", "$gte")) == above:
            return sa.false()
        number = math.copysign(sys.float_info.max, number)
        compare = operator.le if above else operator.ge
    return sql.number_compare(doc, path, compare, number, strings=True)


def namespace_condition(
    sql: StoreSQL,
    prefix: ColumnElement[str],
    condition: MatchCondition,
    exact_prefix: Callable[[tuple[str, ...]], ColumnElement[bool]],
) -> ColumnElement[bool]:
    """The namespaces (stored joined with ".") that a match condition selects;
    ``exact_prefix`` is the store's condition for a prefix without wildcards."""
    path = tuple(condition.path)
    if not path:
        return sa.true()
    if condition.match_type == "prefix" and "*" not in path:
        return exact_prefix(path)
    checks = [sql.namespace_depth(prefix) >= len(path)]
    for i, label in enumerate(path):
        if label != "*":
            index = i if condition.match_type == "prefix" else i - len(path)
            checks.append(sql.text_equals(sql.namespace_label(prefix, index), label))
    return sa.and_(*checks)
