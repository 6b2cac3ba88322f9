"""The batch's searches: a page per search, filtered, ordered and cut in SQL, ranked by
similarity in SQL (native vectors) or in Python over the filtered candidates."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from langgraph.store.base import SearchItem, SearchOp

from lg_sqla.dialects import AnnIndex
from lg_sqla.errors import InvalidInputError
from lg_sqla.models import store_items, store_vectors
from lg_sqla.plans import Plan, Step
from lg_sqla.shared import key_hash
from lg_sqla.store._common import (
    Batch,
    Embedded,
    GotRow,
    Settings,
    alive_at_now,
    as_item,
    head_in,
    in_keys,
    join_namespace,
    key_chunks,
    op_tag,
    parse_json,
    row_times,
    split_namespace,
    subtree_bounds,
    union_of,
    utc,
)
from lg_sqla.store._match import matches_filter, similarity_to
from lg_sqla.store._sql import filter_condition, filter_params, flatten_filter


def search_plan(batch: Batch, searches: Sequence[tuple[int, SearchOp]]) -> Plan[None]:
    """The pages of every SearchOp of the batch: ranking searches ranked in SQL where the
    database has native vectors, the others' rows in one statement (ranked in Python)."""
    if not searches:
        return
    settings = batch.settings
    if settings.sql.in_sql and not settings.indexed:
        # Nothing to rank (no index): each search's page is the database's, as it is.
        raw = yield from _fetch_search_rows(settings, searches, batch.now, batch.step, lean=True)
        _plain_pages(batch, searches, raw)
        return
    op_of = dict(searches)
    native = yield from _native_ranking_plan(batch, searches)
    ranked_rows: list[_RankedRow] = []
    approximate: dict[int, list[_RankedRow]] = {}
    if native:
        searches = [(i, sop) for i, sop in searches if not (sop.query and settings.indexed)]
        ann = None if settings.ann is None else settings.sql.ann_in_force(settings.ann)
        if ann is not None:
            approximate = yield from _approximate_pages(batch, native, ann)
            native = [(i, sop) for i, sop in native if i not in approximate]
    if native:
        ranked_rows = yield from _ranked_rows(
            settings, native, batch.embedded, batch.now, batch.step
        )
    rows: list[_Found] = []
    if searches:
        raw = yield from _fetch_search_rows(settings, searches, batch.now, batch.step)
        rows = _found(raw)
    vectors = yield from _stored_vectors_plan(settings, searches, [r.row for r in rows], batch.now)
    for i, sop in searches:
        page = _search_page(settings, batch.embedded, i, sop, rows, vectors)
        batch.results[i] = [as_item(r, SearchItem, score) for score, r in page]
        if sop.refresh_ttl:
            batch.refresh_ttl_of(r for _, r in page)
    pages = {i: [r for r in ranked_rows if r.op == i] for i, _ in native}
    pages.update(approximate)
    for i, ranked_page in pages.items():
        batch.results[i] = [as_item(r.row, SearchItem, r.score) for r in ranked_page]
        if op_of[i].refresh_ttl:
            batch.refresh_ttl_of(r.row for r in ranked_page)


def _native_ranking_plan(
    batch: Batch, searches: Sequence[tuple[int, SearchOp]]
) -> Plan[list[tuple[int, SearchOp]]]:
    """The searches that rank by similarity in SQL, each a page of its own: those with a
    query, if the store has an index and the database native vectors (asked once per
    store; False where they have no function for the store's distance type)."""
    settings = batch.settings
    if not (settings.indexed and any(sop.query for _, sop in searches)):
        return []
    mode = settings.native_vectors
    if mode.known is None:
        probe = yield batch.step(settings.sql.vector_probe(), fetch=True)
        mode.known = settings.sql.vectors_found(probe.rows[0] if probe.rows else None)
    if not mode.known:
        if settings.ann is not None:
            settings.sql.ann_in_force(settings.ann)  # says once: exact search
        return []
    return [(i, sop) for i, sop in searches if sop.query]


def _found(rows: Sequence[Any]) -> list[_Found]:
    """The rows of :func:`_fetch_search_rows`, each tagged with its op's index."""
    # Core's rows or the direct path's (a lone search takes it: runtime.routing), by
    # position: the op's index, then GotRow's columns (``_search_select``).
    return [_Found(row[0], GotRow.at(row, 1)) for row in rows]


def _fetch_search_rows(
    settings: Settings,
    searches: Sequence[tuple[int, SearchOp]],
    now: dt.datetime,
    step: Callable[..., Step],
    lean: bool = False,
) -> Plan[Sequence[Any]]:
    """The rows of every search of the batch, each tagged with its op's index, as
    fetched (read by position): a page per search, filtered, ordered and cut in SQL
    (all filtered candidates of a search that ranks by similarity, which happens in
    Python). ``lean``: the rows ``_plain_pages`` reads (``_search_select``)."""
    selects = []
    params: dict[str, Any] = {"now": now}
    tagged = not lean or len(searches) > 1
    for j, (i, sop) in enumerate(searches):
        statement, own = _search_select(settings, j, i, sop, lean, tagged)
        selects.append(statement)
        params.update(own)
    outcome = yield step(union_of(selects), params, fetch=True, positional=True)
    return outcome.rows


def _plain_pages(
    batch: Batch, searches: Sequence[tuple[int, SearchOp]], rows: Sequence[Any]
) -> None:
    """Each search's page from its lean rows (``_fetch_search_rows``: the op's index
    where the batch has several searches, then GotRow's first six columns), straight to
    SearchItems: what ``GotRow.at`` and ``as_item`` make of them, without a GotRow per
    row; one namespace tuple per prefix; the TTLs of searches that refresh them noted
    (the key hashes computed here, for those rows only)."""
    pages: dict[int, list[SearchItem]] = {i: [] for i, _ in searches}
    refreshing = {i for i, sop in searches if sop.refresh_ttl}
    namespaces: dict[str, tuple[str, ...]] = {}
    lone = searches[0][0] if len(searches) == 1 else None
    for row in rows:
        if lone is None:
            i, prefix, key, value, created_at, updated_at, ttl = row
        else:
            i = lone
            prefix, key, value, created_at, updated_at, ttl = row
        namespace = namespaces.get(prefix)
        if namespace is None:
            namespace = namespaces[prefix] = split_namespace(prefix)
        if isinstance(value, (str, bytes)):  # SQLite's and MySQL's JSON is text
            value = parse_json(value)
        created_at, updated_at = row_times(created_at, updated_at)
        pages[i].append(SearchItem(namespace, key, value, created_at, updated_at))
        if ttl is not None and i in refreshing:
            batch.refresh[(key_hash(prefix), key_hash(key))] = ttl
    for i, page in pages.items():
        batch.results[i] = page


def _search_select(
    settings: Settings, j: int, i: int, sop: SearchOp, lean: bool = False, tagged: bool = True
) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The query of the batch's ``j``-th search (op ``i``) and its parameters (named
    ``s<j>_...``). Built once per filter shape: building a filter's expression costs
    more than running it (~0.5 ms for one equality), values are parameters.

    Its columns: the op's index (unless not ``tagged``), then GotRow's, or with
    ``lean`` only its first six, no key hashes (a page read as it is: each column costs the driver
    per row, PyMySQL parsing every value and each column's descriptor in Python)."""
    sql = settings.sql
    ranked = bool(sop.query and settings.indexed)
    shape, values = flatten_filter(sop.filter) if sql.in_sql else ((), [])
    paged = sql.in_sql and not ranked

    name = functools.partial(_param_name, j)
    text = join_namespace(sop.namespace_prefix)
    low, high = subtree_bounds(text)

    def build() -> sa.Select[Any]:
        t = store_items.c
        where = [alive_at_now(settings)]
        if sop.namespace_prefix:
            # The index range of the subtree (prefix_head), then the exact condition.
            # substr, not LIKE: SQLite's LIKE ignores ASCII case, labels may hold % or _.
            where.append(
                head_in(
                    sa.bindparam(name("low")), None if high is None else sa.bindparam(name("high"))
                )
            )
            where.append(
                sa.or_(
                    t.prefix_hash == sa.bindparam(name("hash")),
                    sa.func.substr(t.prefix, 1, sa.bindparam(name("width"), type_=sa.Integer))
                    == sa.bindparam(name("start"), type_=sa.String),
                )
            )
        if shape:
            where.append(filter_condition(sql, t.value, shape, name))
        stamp = sql.read_timestamp
        columns = [t.prefix, t.key, t.value, stamp(t.created_at), stamp(t.updated_at)]
        columns.append(t.ttl_minutes)
        if not lean:
            columns += [t.prefix_hash, t.key_hash]
        if tagged:
            columns.insert(0, op_tag(i))
        statement = (
            sa.select(*columns)
            .where(*where)
            # The official stores' order without a query: most recently updated first
            # (then the key, so that pages partition the results).
            .order_by(t.updated_at.desc(), t.prefix_hash, t.key_hash)
        )
        if paged:
            statement = statement.limit(sa.bindparam(name("limit"), type_=sa.Integer)).offset(
                sa.bindparam(name("offset"), type_=sa.Integer)
            )
        return statement

    key = (
        "search",
        j,
        i,
        bool(sop.namespace_prefix),
        high is None,
        shape,
        paged,
        settings.omit_expired,
        lean,
        tagged,
    )
    params = filter_params(sql, values, name)
    if sop.namespace_prefix:
        params.update(
            {
                name("hash"): key_hash(text),
                name("width"): len(text) + 1,
                name("start"): text + ".",
                name("low"): low,
            }
        )
        if high is not None:
            params[name("high")] = high
    if paged:
        params.update({name("limit"): sop.limit, name("offset"): sop.offset})
    return settings.statements.get(key, build), params


@functools.lru_cache(maxsize=1024)
def _param_name(j: int, n: int | str) -> str:
    """The name of the ``j``-th search's parameter ``n`` (``s<j>_<n>``), made once: a
    search binds six or more per call."""
    return f"s{j}_{n}"


class _Found(NamedTuple):
    """A search's row: its op's index in the batch, the item."""

    op: int
    row: GotRow


class _RankedRow(NamedTuple):
    op: int
    row: GotRow
    score: float | None


def _ranked_rows(
    settings: Settings,
    searches: Sequence[tuple[int, SearchOp]],
    embedded: Embedded,
    now: dt.datetime,
    step: Callable[..., Step],
) -> Plan[list[_RankedRow]]:
    """The page of every ranking search of the batch, ranked in SQL (native vectors):
    one statement, each search its own ranked page. The order is the portable path's:
    by best cosine similarity over the item's vectors, highest first, items without a
    vector after them (as InMemoryStore fills a short page), ties by the order of a
    search without query (updated_at, then the key hashes)."""
    selects = []
    params: dict[str, Any] = {"now": now}
    for j, (i, sop) in enumerate(searches):
        candidates, own = _search_select(settings, j, i, sop)

        def build(j: int = j, candidates: sa.Select[Any] = candidates) -> sa.Select[Any]:
            t, v = store_items.c, store_vectors.c
            sql = settings.sql
            its_own = sa.and_(v.prefix_hash == t.prefix_hash, v.key_hash == t.key_hash)
            fits = sql.vector_has_dims(v.embedding, settings.dims)
            query = sql.vector_param(f"s{j}_query")
            best = sa.func.max(sql.vector_similarity(v.embedding, query, settings.distance))
            score = sa.select(best).where(its_own, fits).scalar_subquery().label("score")
            # Counted, not skipped: a vector of another length means dims changed, which
            # the portable path refuses too (_refuse_dims).
            misfits = sa.select(sa.func.count()).where(its_own, ~fits)
            return (
                candidates.add_columns(score, misfits.scalar_subquery().label("misfits"))
                .order_by(None)
                .order_by(
                    sa.desc(score).nulls_last(), t.updated_at.desc(), t.prefix_hash, t.key_hash
                )
                .limit(sa.bindparam(f"s{j}_limit", type_=sa.Integer))
                .offset(sa.bindparam(f"s{j}_offset", type_=sa.Integer))
            )

        # The candidates' statement is cached per shape: so is its ranked form.
        selects.append(settings.statements.get(("ranked", j, candidates), build))
        assert sop.query is not None
        params.update(own)
        params.update(
            {
                f"s{j}_query": settings.sql.vector_value(embedded.queries[sop.query]),
                f"s{j}_limit": sop.limit,
                f"s{j}_offset": sop.offset,
            }
        )
    outcome = yield step(union_of(selects), params, fetch=True)
    ranked = []
    for row in outcome.rows:
        if row.misfits:
            _refuse_dims(settings, None)
        ranked.append(_RankedRow(row.op, GotRow.of(row), row.score))
    return ranked


def _approximate_pages(
    batch: Batch, searches: Sequence[tuple[int, SearchOp]], ann: AnnIndex
) -> Plan[dict[int, list[_RankedRow]]]:
    """The pages the store's approximate index (pgvector HNSW/IVFFlat) serves, by op:
    per search the nearest vectors of the filtered items, in the index's order (the
    filters in the same statement: the planner may scan the index and filter, or
    filter first and sort exactly), over-fetched (``k`` rows for ``fields`` vectors
    an item may have), one statement for the batch. A search for which they hold
    fewer items than its offset + limit (selective filters, a short index scan) is
    left out: it ranks exactly (``_ranked_rows``), items without vectors filling its
    page as there."""
    settings, sql = batch.settings, batch.settings.sql
    selects = []
    params: dict[str, Any] = {"now": batch.now}
    fetched = 0
    for j, (i, sop) in enumerate(searches):
        candidates, own = _search_select(settings, j, i, sop)

        def build(j: int = j, candidates: sa.Select[Any] = candidates) -> sa.Select[Any]:
            t, v = store_items.c, store_vectors.c
            query = sql.vector_param(f"s{j}_query")
            distance = sql.ann_distance(v.embedding, query, ann, settings.distance, settings.dims)
            its_own = sa.and_(v.prefix_hash == t.prefix_hash, v.key_hash == t.key_hash)
            return (
                candidates.join(store_vectors, its_own)
                .add_columns(distance.label("distance"))
                .where(sql.ann_fits(v.embedding, settings.dims))
                .order_by(None)
                .order_by(distance)
                # A parameter: the transaction forces custom plans (ann_session).
                .limit(sa.bindparam(f"s{j}_k", type_=sa.Integer))
            )

        selects.append(settings.statements.get(("approximate", j, candidates), build))
        assert sop.query is not None
        params.update(own)
        params[f"s{j}_query"] = sql.vector_value(batch.embedded.queries[sop.query])
        params[f"s{j}_k"] = k = (sop.offset + sop.limit) * settings.fields * 2 + 1
        fetched = max(fetched, k)
    session = sql.ann_session(ann, fetched)
    if session is not None:
        batch.autocommit = False  # the settings hold for the transaction
        yield Step(*session, fetch=True)
    outcome = yield batch.step(union_of(selects), params, fetch=True)
    nearest: dict[int, dict[tuple[str, str], tuple[float, GotRow]]] = {}
    for row in outcome.rows:
        score = sql.ann_score(row.distance, settings.distance)
        found = nearest.setdefault(row.op, {})
        best = found.get((row.prefix_hash, row.key_hash))
        if best is None or score > best[0]:
            found[(row.prefix_hash, row.key_hash)] = (score, GotRow.of(row))
    pages = {}
    for i, sop in searches:
        scored = list(nearest.get(i, {}).values())
        if len(scored) < sop.offset + sop.limit:
            continue
        # As the exact order: best score first, ties as a search without query.
        scored.sort(key=lambda pair: (pair[1].prefix_hash, pair[1].key_hash))
        scored.sort(key=lambda pair: pair[1].updated_at, reverse=True)
        scored.sort(key=lambda pair: -pair[0])
        page = scored[sop.offset : sop.offset + sop.limit]
        pages[i] = [_RankedRow(i, row, score) for score, row in page]
    return pages


def _refuse_dims(settings: Settings, found: int | None) -> None:
    length = "another number of" if found is None else str(found)
    raise InvalidInputError(
        f"a stored vector has {length} dimensions, but index dims is {settings.dims}: "
        "re-put the items of this namespace after changing dims"
    )


def _stored_vectors_plan(
    settings: Settings,
    searches: Sequence[tuple[int, SearchOp]],
    rows: Sequence[Any],
    now: dt.datetime,
) -> Plan[dict[tuple[str, str], list[list[float]]]]:
    """The stored vectors of ``rows``, by key, where a search ranks in Python; a vector
    of another length than the index's dims is refused."""
    vectors: dict[tuple[str, str], list[list[float]]] = {}
    ranked = [(j, i, sop) for j, (i, sop) in enumerate(searches) if sop.query and settings.indexed]
    if not (ranked and rows):
        return vectors
    found: list[Any] = []
    if settings.sql.in_sql:
        # The vectors of each ranking search's candidates, found by the search's own
        # conditions (joined to the items): the candidates' keys as a bound list cost
        # more to render than to run (SQLAlchemy names each of 2 x 1,000 parameters
        # per call: 2/3 of a portable search's client time over 1,000 items).
        selects: list[sa.Select[Any]] = []
        params: dict[str, Any] = {"now": now}
        for j, i, sop in ranked:
            candidates, own = _search_select(settings, j, i, sop)
            selects.append(
                settings.statements.get(
                    ("vectors", j, candidates), functools.partial(_vectors_of, candidates)
                )
            )
            params.update(own)
        statement = selects[0] if len(selects) == 1 else sa.union(*selects)
        found += (yield Step(statement, params, fetch=True)).rows
    else:
        wanted = sorted({(r.prefix_hash, r.key_hash) for r in rows})
        v = store_vectors.c
        select_vectors = settings.dialect_ops.cached(
            "store.select_vectors",
            lambda: sa.select(v.prefix_hash, v.key_hash, v.field, v.embedding).where(
                in_keys(settings, store_vectors)
            ),
        )
        for chunk in key_chunks(settings, wanted):
            found += (yield Step(select_vectors, chunk, fetch=True)).rows
    vector_of = settings.sql.vector_of
    for vr in found:
        vector = vector_of(vr.embedding)
        if len(vector) != settings.dims:
            _refuse_dims(settings, len(vector))
        vectors.setdefault((vr.prefix_hash, vr.key_hash), []).append(vector)
    return vectors


def _vectors_of(candidates: sa.Select[Any]) -> sa.Select[Any]:
    """The vectors of the items ``candidates`` (a search's statement) selects."""
    t, v = store_items.c, store_vectors.c
    its_own = sa.and_(v.prefix_hash == t.prefix_hash, v.key_hash == t.key_hash)
    statement = sa.select(v.prefix_hash, v.key_hash, v.field, v.embedding).select_from(
        store_vectors.join(store_items, its_own)
    )
    return statement if candidates.whereclause is None else statement.where(candidates.whereclause)


def _search_page(
    settings: Settings,
    embedded: Embedded,
    i: int,
    sop: SearchOp,
    rows: Sequence[_Found],
    vectors: Mapping[tuple[str, str], list[list[float]]],
) -> list[tuple[float | None, Any]]:
    """The page (score, row) of search ``i`` among the batch's search rows: ranked by
    similarity here, the database's page, or filtered and cut here (no JSON functions)."""
    candidates = [r.row for r in rows if r.op == i]
    if not settings.sql.in_sql:
        candidates = [
            r
            for r in candidates
            if split_namespace(r.prefix)[: len(sop.namespace_prefix)] == sop.namespace_prefix
            and matches_filter(r.value, sop.filter)
        ]
    if sop.query and settings.indexed:
        return _ranked_page(settings, candidates, embedded.queries[sop.query], vectors, sop)
    if settings.sql.in_sql:
        return [(None, r) for r in candidates]  # the database's page
    return [(None, r) for r in candidates[sop.offset : sop.offset + sop.limit]]


def _ranked_page(
    settings: Settings,
    candidates: list[Any],
    query: Sequence[float],
    vectors: Mapping[tuple[str, str], list[list[float]]],
    sop: SearchOp,
) -> list[tuple[float | None, Any]]:
    """A search's page ranked by similarity in Python: by the best score (the store's
    distance type) over each item's vectors; items without vectors fill a short page
    (sorts ``candidates``)."""
    similarity = similarity_to(settings.distance, query)
    # Ties (and items without vectors) keep the order of a search without query.
    # Sorted here: MySQL/MariaDB drop the ORDER BY of an unlimited query inside a
    # UNION, which a batch of several searches sends.
    candidates.sort(key=lambda r: (r.prefix_hash, r.key_hash))
    candidates.sort(key=lambda r: utc(r.updated_at), reverse=True)
    scored, scoreless = [], []
    for r in candidates:
        own = vectors.get((r.prefix_hash, r.key_hash))
        if own:
            scored.append((max(map(similarity, own)), r))
        else:
            scoreless.append(r)
    scored.sort(key=lambda pair: -pair[0])  # stable: ties keep updated_at order
    page: list[tuple[float | None, Any]] = list(scored[sop.offset : sop.offset + sop.limit])
    # As InMemoryStore: items without an embedding fill a short page.
    if len(page) < sop.limit:
        skip = max(0, sop.offset - len(scored))
        page += [(None, r) for r in scoreless[skip : skip + sop.limit - len(page)]]
    return page
