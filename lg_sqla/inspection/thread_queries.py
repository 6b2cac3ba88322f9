"""``threads`` and ``count_threads``: finding threads as LangGraph Platform's
``threads.search`` and ``threads.count`` do, on the three checkpoint tables.

Cost model. Filters on metadata, status and times, and the order, are SQL
(``thread_pages``): one statement per page, as before. Channel values are
serialized (msgpack through the saver's serde, maybe encrypted or compressed), so
a ``values`` filter cannot be SQL: the candidates the SQL filters leave are read in
page order, in batches, and only the channels the filter names are decoded, from
each candidate's latest root checkpoint (``latest``'s statement: one per channel
and batch). A page stops at ``limit`` matches or after ``scan_limit`` candidates,
so its work is bounded whatever the table's size; its ``next_offset`` is then a
position among the candidates (a page may hold fewer than ``limit`` threads and
still have a next one). ``extract`` decodes the listed threads' channels it names
(a statement per channel). ``count`` with a ``values`` filter decodes every
candidate, ``MAX_PAGE`` at a time: its cost grows with the candidates.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from lg_sqla.checkpoint import json_values
from lg_sqla.checkpoint.checks import check_json
from lg_sqla.checkpoint.context import Context
from lg_sqla.errors import InvalidInputError
from lg_sqla.inspection.checkpoints import latest
from lg_sqla.inspection.checks import MAX_PAGE, _check_page, _int
from lg_sqla.inspection.results import ThreadInfo, ThreadPage
from lg_sqla.inspection.thread_pages import (
    Windows,
    _matching_threads,
    _ordered_threads,
    _page_select,
)
from lg_sqla.inspection.thread_search import (
    Path,
    _channels_of,
    _check_extract,
    _check_select,
    _extract_paths,
    _matches,
    _resolve_sort,
    _value_leaves,
)
from lg_sqla.limits import THREAD_STATUSES
from lg_sqla.models import checkpoints as C
from lg_sqla.plans import Plan, Step

SCAN_LIMIT = 1000  # candidates a page with a ``values`` filter examines at most
MAX_SCAN_LIMIT = 100_000
Values = dict[str, dict[str, Any]]  # thread id -> channel -> decoded latest value


@dataclass(frozen=True)
class _Search:
    """The filters of ``threads`` and ``count_threads``, checked."""

    filter: Mapping[str, Any] | None
    status: str | None
    windows: Windows
    values: list[tuple[Path, Any]]

    @property
    def unfiltered(self) -> bool:
        """Whether SQL filters nothing but the last write's window."""
        w = self.windows
        return (
            not self.filter
            and self.status is None
            and w.created_after is None
            and (w.created_before is None)
        )


def _search(
    filter: Mapping[str, Any] | None,
    values: Mapping[str, Any] | None,
    status: str | None,
    windows: Windows,
) -> _Search:
    if status is not None and status not in THREAD_STATUSES:
        raise InvalidInputError(
            f"status must be one of {', '.join(THREAD_STATUSES)}, got {status!r}"
        )
    if filter is not None and not isinstance(filter, Mapping):
        raise InvalidInputError(
            f"filter must be a mapping of metadata key to value, got {filter!r}"
        )
    wanted = _value_leaves(values) if values else []
    if wanted:
        check_json("values", [expected for _, expected in wanted])
    return _Search(filter, status, windows, wanted)


def _latest_values(ctx: Context, channels: Sequence[str], ids: Sequence[str]) -> Plan[Values]:
    """The channels' values in each thread's latest root checkpoint, decoded."""
    out: Values = {t: {} for t in ids}
    for channel in channels:
        found = yield from latest(ctx, channel, ids)
        for thread_id, value in found.items():
            out[thread_id][channel] = value.value
    return out


def _scan(
    ctx: Context,
    candidates: sa.Select[Any],
    wanted: list[tuple[Path, Any]],
    start: int,
    stop_after: int,
    budget: int,
) -> Plan[tuple[list[str], int | None, int]]:
    """Candidates from position ``start``, ``MAX_PAGE`` or fewer at a time, decoded and
    matched until ``stop_after`` matches or ``budget`` candidates: the matching ids, the
    position after the last candidate examined (None: none left) and how many were."""
    channels = _channels_of([path for path, _ in wanted])
    found: list[str] = []
    position, examined = start, 0
    while examined < budget:
        size = min(MAX_PAGE, budget - examined, max(2 * stop_after, 100))
        step = Step(candidates.limit(size).offset(position), fetch=True)
        ids = [str(r.thread_id) for r in (yield step).rows]
        values = yield from _latest_values(ctx, channels, ids)
        for thread_id in ids:
            position, examined = position + 1, examined + 1
            if _matches(values[thread_id], wanted):
                found.append(thread_id)
                if len(found) == stop_after:
                    return found, position, examined
        if len(ids) < size:
            return found, None, examined
    return found, position, examined


def threads(
    ctx: Context,
    *,
    filter: Mapping[str, Any] | None = None,
    values: Mapping[str, Any] | None = None,
    status: str | None = None,
    written_after: dt.datetime | None = None,
    written_before: dt.datetime | None = None,
    created_after: dt.datetime | None = None,
    created_before: dt.datetime | None = None,
    order: str | None = None,
    sort_by: str | None = None,
    sort_order: str | None = None,
    select: Sequence[str] | None = None,
    extract: Mapping[str, str] | None = None,
    limit: int = 50,
    offset: int = 0,
    count: bool = False,
    scan_limit: int = SCAN_LIMIT,
) -> Plan[ThreadPage]:
    """A page of threads, found as LangGraph Platform's ``threads.search`` does.

    ``filter`` keeps threads with a checkpoint whose metadata matches (nested mappings
    by containment); ``values`` threads whose latest values match, by path
    (``{"order_id": 3, "messages[-1].type": "ai"}``); ``status`` (one of
    ``THREAD_STATUSES``) threads in that status; ``written_*`` bound the last write,
    ``created_*`` the first. ``sort_by`` (``THREAD_SORT_KEYS``) and ``sort_order``
    (``asc``/``desc``), or ``order`` (``THREAD_ORDERS``, the former names). ``select``
    names the fields of ``ThreadPage.rows()``; ``extract`` maps aliases to paths
    (``values.messages[-1].content``, ``metadata.tenant``). ``count`` also counts all
    matching threads (``ThreadPage.total``). With ``values``, a page examines at most
    ``scan_limit`` candidates; without it and ``extract``, one statement (costs: above).
    On distributed tables (Citus): the page's ids, then their rows, then the count, a
    statement each.
    """
    _check_paging(limit, offset, scan_limit)
    sort = _resolve_sort(order, sort_by, sort_order)
    fields, paths = _check_select(select), _check_extract(extract)
    windows = Windows(written_after, written_before, created_after, created_before)
    query = _search(filter, values, status, windows)
    keys = _matching_threads(ctx, query.filter, query.status, query.windows)
    candidates = _ordered_threads(keys, sort, query.unfiltered, query.windows)
    # Citus runs no subquery correlated to a page computed across shards: ids first.
    two_steps = ctx.dialect_ops.distributed and not query.values
    page, next_offset, decoded = yield from _page_of(
        ctx, candidates, query, two_steps, (limit, offset, scan_limit)
    )
    in_sql = count and not query.values and not two_steps
    metadata = any(p[0] == "metadata" for p in paths.values())
    stmt = _page_select(ctx, page, keys, sort, in_sql, metadata)
    only = not query.values and not paths and not two_steps
    rows = (yield Step(stmt, fetch=True, whole_plan=only)).rows
    total = yield from _total(ctx, rows, keys, query.values, (count, in_sql, two_steps))
    found, next_offset = _found(rows, bool(query.values), (limit, offset), next_offset)
    items = [_info(r) for r in found]
    if paths:
        items, extra = yield from _with_extracts(ctx, items, found, paths)
        decoded += extra
    return ThreadPage(items, next_offset, total, fields, decoded)


def _found(
    rows: Sequence[Any], scanned: bool, bounds: tuple[int, int], next_offset: int | None
) -> tuple[list[Any], int | None]:
    """The page's thread rows and the next page's offset: without a ``values`` scan,
    the page read one more than ``limit``, which tells whether there is a next."""
    found = [r for r in rows if r.thread_id is not None]
    if scanned:
        return found, next_offset
    limit, offset = bounds
    return found[:limit], offset + limit if len(found) > limit else None


def _total(
    ctx: Context,
    rows: Sequence[Any],
    keys: sa.Select[Any],
    values: list[tuple[Path, Any]],
    how: tuple[bool, bool, bool],
) -> Plan[int | None]:
    """The number of matching threads, when ``count`` (``how``: count, counted in the
    page's statement, distributed): read off the page's rows, by a statement of its own
    (distributed), or by decoding every candidate's values (``values``)."""
    count, in_sql, two_steps = how
    if not count:
        return None
    if values:
        return (yield from _count_scanned(ctx, keys, values))
    if two_steps:
        return (yield from _count_of(keys))
    return _int(rows[0].total) if in_sql and rows else None


def _page_of(
    ctx: Context,
    candidates: sa.Select[Any],
    query: _Search,
    two_steps: bool,
    bounds: tuple[int, int, int],
) -> Plan[tuple[sa.Subquery, int | None, int]]:
    """The page's threads as a subquery (one more than ``limit``: whether a next page
    exists), the next offset where a ``values`` scan set it, and how many threads it
    decoded. With ``values`` or ``two_steps``, the ids are read first (statements)."""
    limit, offset, scan_limit = bounds
    if not (query.values or two_steps):
        return candidates.limit(limit + 1).offset(offset).subquery("page"), None, 0
    next_offset: int | None = None
    decoded = 0
    if query.values:
        ids, next_offset, decoded = yield from _scan(
            ctx, candidates, query.values, offset, limit, scan_limit
        )
    else:
        step = Step(candidates.limit(limit + 1).offset(offset), fetch=True)
        ids = [str(r.thread_id) for r in (yield step).rows]
    listed: sa.Select[Any] = sa.select(C.c.thread_id).where(C.c.thread_id.in_(ids))
    return listed.group_by(C.c.thread_id).subquery("page"), next_offset, decoded


def _check_paging(limit: int, offset: int, scan_limit: int) -> None:
    _check_page(limit, offset)
    if not isinstance(scan_limit, int) or not limit <= scan_limit <= MAX_SCAN_LIMIT:
        raise InvalidInputError(
            f"scan_limit must be an int from limit ({limit}) to {MAX_SCAN_LIMIT}, "
            f"got {scan_limit!r}"
        )


def _count_of(keys: sa.Select[Any]) -> Plan[int]:
    stmt = sa.select(sa.func.count()).select_from(keys.subquery("matching"))
    rows = (yield Step(stmt, fetch=True)).rows
    return _int(rows[0][0])


def _info(r: Any) -> ThreadInfo:
    return ThreadInfo(
        r.thread_id,
        r.status,
        r.checkpoints,
        r.namespaces,
        r.first_write,
        r.last_write,
        _int(r.value_bytes),
        _int(r.write_bytes),
        r.state_updated,
    )


def _with_extracts(
    ctx: Context, items: list[ThreadInfo], rows: Sequence[Any], paths: dict[str, Path]
) -> Plan[tuple[list[ThreadInfo], int]]:
    """``items`` with their ``extracted`` values, and how many threads were decoded."""
    channels = _channels_of([p[1:] for p in paths.values() if p[0] == "values"])
    ids = [t.thread_id for t in items]
    values = (yield from _latest_values(ctx, channels, ids)) if channels and ids else {}
    out = []
    for item, row in zip(items, rows, strict=True):
        metadata = getattr(row, "head_metadata", None)
        found = _extract_paths(
            values.get(item.thread_id, {}),
            json_values.json_object(metadata) if metadata is not None else {},
            paths,
        )
        out.append(_with_extracted(item, found))
    return out, len(ids) if channels else 0


def _with_extracted(item: ThreadInfo, found: dict[str, Any]) -> ThreadInfo:
    return dataclasses.replace(item, extracted=found)


def _count_scanned(ctx: Context, keys: sa.Select[Any], wanted: list[tuple[Path, Any]]) -> Plan[int]:
    """How many of the threads ``keys`` selects match ``wanted``: all decoded,
    ``MAX_PAGE`` at a time, in thread id order from where the last batch ended (a
    range of the primary key, not an OFFSET: linear in the candidates)."""
    channels = _channels_of([path for path, _ in wanted])
    matched, after = 0, None
    while True:
        batch = keys if after is None else keys.where(C.c.thread_id > after)
        step = Step(batch.order_by(C.c.thread_id).limit(MAX_PAGE), fetch=True)
        ids = [str(r.thread_id) for r in (yield step).rows]
        values = yield from _latest_values(ctx, channels, ids)
        matched += sum(_matches(values[t], wanted) for t in ids)
        if len(ids) < MAX_PAGE:
            return matched
        after = ids[-1]


def count_threads(
    ctx: Context,
    *,
    filter: Mapping[str, Any] | None = None,
    values: Mapping[str, Any] | None = None,
    status: str | None = None,
    written_after: dt.datetime | None = None,
    written_before: dt.datetime | None = None,
    created_after: dt.datetime | None = None,
    created_before: dt.datetime | None = None,
) -> Plan[int]:
    """How many threads ``threads`` finds with these filters (Platform's
    ``threads.count``). Without ``values``, one statement (a pass over the threads);
    with it, every candidate's latest values are decoded, ``MAX_PAGE`` threads per
    batch."""
    windows = Windows(written_after, written_before, created_after, created_before)
    query = _search(filter, values, status, windows)
    keys = _matching_threads(ctx, query.filter, query.status, query.windows)
    if not query.values:
        stmt = sa.select(sa.func.count()).select_from(keys.subquery("matching"))
        rows = (yield Step(stmt, fetch=True, whole_plan=True)).rows
        return _int(rows[0][0])
    total: int = yield from _count_scanned(ctx, keys, query.values)
    return total
