"""What every part of lg_sqla uses alike: the key hash, the clock, JSON text.

The checkpointer, the store and the node cache key unbounded names (namespaces,
store keys) by :func:`key_hash`, stamp rows with :func:`utc_now`, and write JSON
columns with :func:`json_text`; one definition each, so they never drift apart.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import importlib
import json
from collections.abc import Callable, MutableMapping
from typing import Any

import orjson


# The key hash's MD5: CPython's own (module ``_md5``, what ``hashlib`` falls back to
# without OpenSSL), the same digest as ``hashlib.md5`` without OpenSSL's per-call
# setup (fetching the digest, a context): ~2.8k instructions for a short key, not
# ~5.4k; a put of a new key hashes it. Listed in ``internals.INTERNALS`` (its probe);
# where this Python lacks it, ``hashlib.md5``.
def _own_md5() -> Callable[..., Any]:
    try:
        md5: Callable[..., Any] = importlib.import_module("_md5").md5  # (no typeshed stub)
    except (ImportError, AttributeError):  # (a CPython built without its own hashes)
        return hashlib.md5
    return md5


_md5_of = _own_md5()


@functools.lru_cache(maxsize=4096)  # a graph's namespaces and a store's keys repeat
def key_hash(text: str) -> str:
    """Fixed-width key for a name of any length: MD5 hex, 32 characters (a key
    column's width, not a security use). Checkpoint namespaces, store namespaces
    and keys, node cache keys."""
    digest: str = _md5_of(text.encode("utf-8"), usedforsecurity=False).hexdigest()
    return digest


def utc_now() -> dt.datetime:
    """The time rows are stamped with: aware, UTC."""
    return dt.datetime.now(dt.timezone.utc)


_ORJSON_STRICT = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def json_text(value: Any) -> str:
    """``value`` as JSON text, for the JSON columns of SQLite and PostgreSQL.

    orjson writes a checkpoint document about 10x faster than ``json.dumps``
    (0.6 against 8.3 µs for the benchmark's), the same JSON value in compact UTF-8.
    What it refuses (non-str keys, integers beyond 64 bits, lone surrogates, other
    types) is written by ``json.dumps``, as before. Metadata and store values are
    validated first (``check_json``; the store's ``check_json_value``), so what orjson
    alone would accept (NaN, written as null; UUIDs and enums, as their str and value)
    never reaches it from them; LangGraph's checkpoint document holds none of those.
    """
    try:
        return orjson.dumps(value, option=_ORJSON_STRICT).decode()
    except TypeError:
        return json.dumps(value)


def json_text_or_null(
    value: Any, _dumps: Callable[..., bytes] = orjson.dumps, _strict: int = _ORJSON_STRICT
) -> str | None:
    """:func:`json_text`, None (SQL NULL) kept: the JSON columns' bind processor on
    every database but MySQL, in one frame (it runs for each document bound; orjson
    and its options as locals, the options by position: ~200 instructions a call)."""
    if value is None:
        return None
    try:
        return _dumps(value, None, _strict).decode()
    except TypeError:
        return json.dumps(value)


def lazy_exports(
    namespace: MutableMapping[str, Any], modules: dict[str, str], *, rest: str | None = None
) -> Callable[[str], Any]:
    """A package's ``__getattr__`` (PEP 562) that imports each name of ``modules``
    (name -> module) on first use and keeps it in ``namespace`` (the package's
    globals), so a package re-exports its heavy classes without importing them.
    ``rest``: the package (itself lazy) every other name of the package's ``__all__``
    comes from, so names it re-exports are not listed twice."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None and rest is not None and name in namespace.get("__all__", ()):
            module = rest
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(module), name)
        return value

    return __getattr__
