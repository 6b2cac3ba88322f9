"""Validation of a batch's ops before anything runs (a bad op fails the whole batch)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, SearchOp, validate_op_namespace

from lg_sqla.errors import InvalidInputError
from lg_sqla.store._sql import ordering_operand

FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})


def _check_text(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidInputError(f"{field} contains a NUL character (U+0000): {value!r}")
    return value


def check_key(key: Any) -> None:
    """An item's key: text without NUL."""
    _check_text("key", key)


def check_json_value(where: str, value: Any, *, stored: bool = True) -> None:
    """Refuse what would not round-trip as JSON on every dialect (PostgreSQL's JSONB
    holds no U+0000 and no NaN), naming the culprit. A filter's operand is not
    ``stored``: it may be inf, -inf or NaN, compared as ``InMemoryStore`` compares them
    (``_sql.flatten_filter``)."""
    if value is None or isinstance(value, (bool, int)):
        return
    if isinstance(value, str):
        _check_text(where, value)
    elif isinstance(value, float):
        if stored and not math.isfinite(value):
            raise InvalidInputError(f"{where} is {value!r}, which JSON cannot store")
    elif type(value) is dict or isinstance(value, Mapping):  # (a dict: no ABC check)
        for k, v in value.items():
            # A text key and a plain scalar (the usual) checked here: the culprit's
            # name, a repr, is formatted only for what the full check must judge.
            if type(k) is not str or "\x00" in k:
                _check_text(f"{where} key {k!r}", k)
            kind = type(v)
            if not (v is None or kind is int or kind is bool or (kind is str and "\x00" not in v)):
                check_json_value(f"{where}[{k!r}]", v, stored=stored)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_json_value(f"{where}[{i}]", v, stored=stored)
    else:
        raise InvalidInputError(
            f"{where} is a {type(value).__name__}; store values must be JSON "
            "(str, int, float, bool, None, list, dict)"
        )


def check_op(op: Op) -> None:
    """Validate one op before anything is written (a bad op fails the whole batch)."""
    try:
        validate_op_namespace(op)
    except ValueError as error:
        raise InvalidInputError(f"namespace: {error}") from error
    # (validate_op_namespace checked the labels: text, without "." or NUL, not empty)
    if isinstance(op, GetOp):
        check_key(op.key)
    elif isinstance(op, PutOp):
        if not op.namespace:
            raise InvalidInputError("namespace of a put must not be empty")
        check_put_fields(op)
    elif isinstance(op, SearchOp):
        _check_search(op)
    elif isinstance(op, ListNamespacesOp):
        _check_list_namespaces(op)
    else:
        raise InvalidInputError(f"unknown store operation {type(op).__name__}")


def check_put_fields(op: PutOp) -> None:
    """A put's key as text, a JSON dict value (or None: a delete), a positive TTL, index
    fields as text: all of :func:`check_op` but the namespace, for a put whose
    namespace ``BaseStore.put``'s own check passed (labels: text without ".", NUL)."""
    check_put_values(op.key, op.value, op.ttl, op.index)


def check_put_values(key: Any, value: Any, ttl: Any, index: Any) -> None:
    """:func:`check_put_fields` of a put's fields as they are (the lone put's: no
    ``PutOp`` made). The usual key (text without NUL) is judged inline: a frame less
    per put."""
    if type(key) is not str or "\x00" in key:
        check_key(key)
    if type(value) is dict:
        # check_json_value's loop, inline for the usual members (a text key, a plain
        # scalar); any other member is judged by it, as a one-member value: the same
        # checks, the same error (``value[...]``, ``value key ...``).
        for k, v in value.items():
            kind = type(v)
            if (
                type(k) is not str
                or "\x00" in k
                or not (
                    v is None or kind is int or kind is bool or (kind is str and "\x00" not in v)
                )
            ):
                check_json_value("value", {k: v})
    elif value is not None:
        if not isinstance(value, Mapping):
            raise InvalidInputError(f"value must be a dict, got {type(value).__name__}")
        check_json_value("value", value)
    if ttl is not None and (
        not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0
    ):
        raise InvalidInputError(f"ttl must be a positive number of minutes, got {ttl!r}")
    if index is not None and index is not False:
        for path in index or ():
            _check_text("index field", path)


def _check_page(kind: str, limit: Any, offset: Any) -> None:
    """A search's or list_namespaces' ``limit`` and ``offset``: ints >= 0."""
    for name, value in (("limit", limit), ("offset", offset)):
        if not isinstance(value, int) or value < 0:
            raise InvalidInputError(f"{kind} {name} must be an int >= 0, got {value!r}")


def _check_search(op: SearchOp) -> None:
    """A search: its page, its filter, its query as text."""
    _check_page("search", op.limit, op.offset)
    for key, wanted in (op.filter or {}).items():
        _check_text("filter key", key)
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            _check_filter_operators(key, wanted)
        else:
            check_json_value(f"filter[{key!r}]", wanted, stored=False)
    if op.query is not None:
        _check_text("query", op.query)


def _check_filter_operators(key: str, wanted: Mapping[str, Any]) -> None:
    """A filter member's operator conditions: known operators, JSON operands, numbers
    where the operator orders."""
    for operator, operand in wanted.items():
        if operator not in FILTER_OPERATORS:
            raise InvalidInputError(
                f"filter operator {operator!r} on {key!r} is not one of {sorted(FILTER_OPERATORS)}"
            )
        check_json_value(f"filter[{key!r}][{operator!r}]", operand, stored=False)
        if operator not in ("$eq", "$ne") and ordering_operand(operand) is None:
            raise InvalidInputError(
                f"filter[{key!r}][{operator!r}] compares numbers: {operand!r} is not one"
            )


def _check_list_namespaces(op: ListNamespacesOp) -> None:
    """A list_namespaces: its page, ``max_depth``, match types."""
    _check_page("list_namespaces", op.limit, op.offset)
    if op.max_depth is not None and (not isinstance(op.max_depth, int) or op.max_depth < 1):
        raise InvalidInputError(f"max_depth must be an int >= 1, got {op.max_depth!r}")
    for condition in op.match_conditions or ():
        if condition.match_type not in ("prefix", "suffix"):
            raise InvalidInputError(
                f"match_type must be 'prefix' or 'suffix', got {condition.match_type!r}"
            )
