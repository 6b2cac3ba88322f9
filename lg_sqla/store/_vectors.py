"""What an IndexConfig says about ranking beyond dims and fields: the distance type
(``distance_type``: cosine, l2, inner_product) and an approximate index
(``ann_index_config``, as LangGraph's PostgresStore reads them), checked once, when the
store is made."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from lg_sqla.dialects import AnnIndex, StoreSQL
from lg_sqla.errors import ExactSearchWarning, InvalidInputError
from lg_sqla.store._match import SIMILARITY

# The build options each kind of index takes (PostgresStore's names; nlist is
# PostgresStore's other name for ivfflat's lists), and the search options (pgvector's
# settings, set for each search's transaction; lg_sqla's own keys).
_BUILD_OPTIONS = {"hnsw": ("m", "ef_construction"), "ivfflat": ("lists", "nlist")}
_SEARCH_OPTIONS = {"hnsw": ("ef_search",), "ivfflat": ("probes",)}


def distance_of(index: Mapping[str, Any]) -> str:
    distance = index.get("distance_type", "cosine")
    if distance not in SIMILARITY:
        raise InvalidInputError(
            f"index distance_type must be one of {', '.join(map(repr, SIMILARITY))}, "
            f"got {distance!r}"
        )
    return str(distance)


def ann_index_of(index: Mapping[str, Any], sql: StoreSQL, dialect: str) -> AnnIndex | None:
    """The approximate index ``index`` asks for; None for exact search (no
    ``ann_index_config``, or kind 'flat'; or a dialect without approximate indexes,
    which says so with an ``ExactSearchWarning``). Malformed options are refused."""
    config = index.get("ann_index_config")
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise InvalidInputError(f"index ann_index_config must be a dict, got {config!r}")
    kind = config.get("kind", "hnsw")
    if kind == "flat":
        return None
    if kind not in _BUILD_OPTIONS:
        raise InvalidInputError(
            f"ann_index_config kind must be 'hnsw', 'ivfflat' or 'flat', got {kind!r}"
        )
    vector_type = config.get("vector_type", "vector")
    if vector_type not in ("vector", "halfvec"):
        raise InvalidInputError(
            f"ann_index_config vector_type must be 'vector' or 'halfvec', got {vector_type!r}"
        )
    allowed = _BUILD_OPTIONS[kind] + _SEARCH_OPTIONS[kind]
    options: dict[str, int] = {}
    search: dict[str, int] = {}
    for name, value in config.items():
        if name in ("kind", "vector_type"):
            continue
        if name not in allowed:
            raise InvalidInputError(
                f"ann_index_config for {kind} takes {', '.join(allowed)}; got {name!r}"
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInputError(f"ann_index_config {name} must be an int >= 1, got {value!r}")
        if name in _SEARCH_OPTIONS[kind]:
            search[name] = value
        else:
            options["lists" if name == "nlist" else name] = value
    if not sql.ann_indexes:
        # A speed hint, not a requirement: the configuration a PostgreSQL deployment
        # uses must run on the SQLite of its tests too, with exact (better) recall.
        warnings.warn(
            f"ann_index_config {kind!r} ({vector_type}): {dialect} has no approximate "
            "indexes (pgvector's); the store searches exactly, full-precision vectors",
            ExactSearchWarning,
            stacklevel=4,
        )
        return None
    return AnnIndex(
        kind, vector_type, tuple(sorted(options.items())), tuple(sorted(search.items()))
    )
