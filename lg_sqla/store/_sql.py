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


# A filter's *shape*: its structure, member names and operators, with each value
# replaced by a slot number (or, where the value decides the SQL, by what it decides).
# Filters of one shape share one SQL statement, built once; the values are its bound
# parameters (see flatten_filter).
Shape = tuple[Any, ...]


def flatten_filter(wanted: Mapping[str, Any] | None) -> tuple[Shape, list[Any]]:
    """The shape of a search filter (validated by ``check_op``) and its slot values."""
    if type(wanted) is dict:
        plain = _plain_filter(wanted)
        if plain is not None:
            return plain
    return _walked_filter(wanted)


def _plain_filter(wanted: dict[str, Any]) -> tuple[Shape, list[Any]] | None:
    """:func:`_walked_filter` of a filter whose members are all text, 64-bit ints or
    None (the usual: ``{"tag": 0}``), without its walk's closures (a search's
    bookkeeping); None for any other filter."""
    shape: list[tuple[str, Shape]] = []
    values: list[Any] = []
    for key, w in wanted.items():
        kind = type(w)
        if kind is str:
            shape.append((key, ("text", len(values))))
            values.append(w)
        elif kind is int and -_INT64 <= w <= _INT64:
            shape.append((key, ("number", len(values))))
            values.append(w)
        elif w is None:
            shape.append((key, ("null",)))
        else:
            return None
    return tuple(shape), values


def _walked_filter(wanted: Mapping[str, Any] | None) -> tuple[Shape, list[Any]]:
    """:func:`flatten_filter` of any filter."""
    values: list[Any] = []

    def slot(value: Any) -> int:
        values.append(value)
        return len(values) - 1

    def matches(w: Any) -> Shape:  # InMemoryStore's _compare_values(value, w)
        if isinstance(w, Mapping):
            if any(str(k).startswith("$") for k in w):
                return ("operators", tuple((name, operator_(name, v)) for name, v in w.items()))
            return ("subset", tuple((k, matches(v)) for k, v in w.items()))
        if isinstance(w, (list, tuple)):
            return ("elements", tuple(matches(v) for v in w))
        return equals(w)

    def equals(w: Any) -> Shape:  # Python's value == w
        if w is None:
            return ("null",)
        if isinstance(w, str):
            return ("text", slot(w))
        if isinstance(w, float) and not math.isfinite(w):
            # No stored number is infinite or NaN (JSON has neither), and NaN equals
            # nothing: Python's == is False for every item.
            return ("false",)
        if isinstance(w, (bool, int, float)):
            return ("number", slot(ordering_operand(w)))
        if isinstance(w, Mapping):
            return ("object", tuple((k, equals(v)) for k, v in w.items()))
        return ("array", tuple(equals(v) for v in w))

    def operator_(name: str, operand: Any) -> Shape:
        if name == "$eq":
            return equals(operand)
        if name == "$ne":
            return ("not", equals(operand))
        number = ordering_operand(operand)
        assert number is not None, "check_op refuses non-numeric ordering operands"
        if isinstance(number, float) and not math.isfinite(number):
            if math.isnan(number):
                return ("false",)  # NaN is neither greater nor smaller than anything
            # No stored number is infinite (JSON has none; numeric strings have at most
            # a 4-digit exponent): compare with the largest finite double instead.
            above = number > 0
            if (name in ("$gt", "$gte")) == above:
                return ("false",)
            limit = math.copysign(sys.float_info.max, number)
            return ("order", "$lte" if above else "$gte", slot(limit))
        return ("order", name, slot(number))

    shape = tuple((key, matches(v)) for key, v in (wanted or {}).items())
    return shape, values


def filter_condition(
    sql: StoreSQL, doc: ColumnElement[Any], shape: Shape, name: Callable[[int], str]
) -> ColumnElement[bool]:
    """The items whose value matches a filter of this shape; slot ``i``'s value is the
    bound parameter ``name(i)``."""

    def number(i: int) -> ColumnElement[Any]:
        return sql.number_param(name(i))

    def build(path: JsonPath, node: Shape) -> Any:
        kind = node[0]
        if kind == "operators":
            return sa.and_(*(build(path, op) for _, op in node[1]))
        if kind == "subset":
            return sa.and_(
                sql.kind_in(doc, path, frozenset({"object"})),
                *(build((*path, k), v) for k, v in node[1]),
            )
        if kind in ("elements", "array"):
            return sa.and_(
                sql.kind_in(doc, path, frozenset({"array"})),
                sql.length_equals(doc, path, len(node[1])),
                *(build((*path, i), v) for i, v in enumerate(node[1])),
            )
        if kind == "object":  # dict == dict: the same members, each equal
            return sa.and_(
                sql.kind_in(doc, path, frozenset({"object"})),
                sql.length_equals(doc, path, len(node[1])),
                *(sa.and_(~sql.missing(doc, (*path, k)), build((*path, k), v)) for k, v in node[1]),
            )
        if kind == "null":  # a missing member is None too
            return sa.or_(sql.missing(doc, path), sql.kind_in(doc, path, frozenset({"null"})))
        if kind == "text":
            return sql.string_equals(doc, path, sa.bindparam(name(node[1]), type_=sa.String))
        if kind == "number":
            return sql.number_compare(doc, path, operator.eq, number(node[1]), strings=False)
        if kind == "not":
            return ~build(path, node[1])
        if kind == "order":
            return sql.number_compare(doc, path, ORDERING[node[1]], number(node[2]), strings=True)
        assert kind == "false", kind
        return sa.false()

    return sa.and_(sa.true(), *(build((key,), node) for key, node in shape))


def filter_params(sql: StoreSQL, values: list[Any], name: Callable[[int], str]) -> dict[str, Any]:
    """The bound parameters of ``flatten_filter``'s values."""
    return {
        name(i): value if isinstance(value, str) else sql.number_value(value)
        for i, value in enumerate(values)
    }


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
