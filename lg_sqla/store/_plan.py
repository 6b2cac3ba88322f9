"""The store's batch as one I/O-free plan (see ``lg_sqla.plans``), shared by the sync
and async stores.

A batch of any size runs in a constant number of statements, grouped by kind,
in one transaction: reads first (as LangGraph's ``InMemoryStore``: reads in a
batch see the state before its puts), then writes.

=====================  =====================================================
statement              when
=====================  =====================================================
SELECT items           the batch has ``GetOp`` s (all of them, one ``IN``)
SELECT items           the batch has ``SearchOp`` s (a page each, UNION ALL)
SELECT vectors         a ``SearchOp`` has a ``query`` and the store an index
SELECT namespaces      the batch has ``ListNamespacesOp`` s (a page each, UNION ALL)
UPDATE expires_at      a read returned items whose TTL is refreshed (executemany)
DELETE items, vectors  the batch deletes (``PutOp`` with ``value=None``) or re-puts
INSERT items (upsert)  the batch puts (executemany)
INSERT vectors         a put was embedded (executemany)
=====================  =====================================================

Search filters (``_sql.py``), ordering and pages, namespace match conditions,
``max_depth`` and pages of namespaces are SQL on SQLite, PostgreSQL and
MySQL/MariaDB, so a search reads only its page. The similarity ranking runs in
Python over the filtered candidates; dialects without JSON functions we know
(``StoreSQL.in_sql`` False) filter and page in Python.

The batch plan joins its parts with ``yield from``: ``_read`` (gets, namespace
lists, the TTL refresh), ``_search`` (searches and their ranking) and ``_write``
(puts, deletes); ``_common`` holds what they share, ``_validate`` the checks every
op passes first (``check_op``), ``_match`` the Python side of filters and ranking.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import NamedTuple

from langgraph.store.base import GetOp, ListNamespacesOp, Op, PutOp, Result, SearchOp

from lg_sqla.plans import Plan
from lg_sqla.store._common import Batch, Embedded, Settings
from lg_sqla.store._read import get_plan, list_namespaces_plan, refresh_ttl_plan
from lg_sqla.store._search import search_plan
from lg_sqla.store._write import write_plan


class _ByKind(NamedTuple):
    """A batch's ops by kind, each read with its index in the batch."""

    gets: list[tuple[int, GetOp]]
    searches: list[tuple[int, SearchOp]]
    lists: list[tuple[int, ListNamespacesOp]]
    puts: dict[tuple[tuple[str, ...], str], PutOp]  # the last put of a key wins

    @classmethod
    def of(cls, ops: Sequence[Op]) -> _ByKind:
        """One pass over the ops."""
        by_kind = cls([], [], [], {})
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                by_kind.gets.append((i, op))
            elif isinstance(op, SearchOp):
                by_kind.searches.append((i, op))
            elif isinstance(op, ListNamespacesOp):
                by_kind.lists.append((i, op))
            elif isinstance(op, PutOp):
                by_kind.puts[(op.namespace, op.key)] = op
        return by_kind

    def needs_no_transaction(self, settings: Settings) -> bool:
        """Whether the batch's statements need no common transaction, so that it may run
        without BEGIN/COMMIT where the dialect gains from it
        (DialectOps.autocommit_single_statements, PostgreSQL: 1 round trip instead of 3):
        a batch of reads (their TTL refresh, if any, is an UPDATE atomic by itself), or
        a batch that is one write statement."""
        reads = bool(self.gets or self.searches or self.lists)
        one_write = (
            not reads
            and not settings.indexed
            and settings.dialect_ops.native_upsert
            and len({op.value is None for op in self.puts.values()}) == 1
        )
        return not self.puts or one_write


def batch_plan(
    settings: Settings, ops: Sequence[Op], embedded: Embedded, now: dt.datetime
) -> Plan[list[Result]]:
    """Run ``ops`` (already validated with :func:`check_op`) and return their results:
    the reads (gets, searches, namespace lists), the TTLs they refresh, then the writes."""
    by_kind = _ByKind.of(ops)
    batch = Batch(
        settings, embedded, now, [None] * len(ops), by_kind.needs_no_transaction(settings)
    )
    yield from get_plan(batch, by_kind.gets)
    yield from search_plan(batch, by_kind.searches)
    yield from list_namespaces_plan(batch, by_kind.lists)
    yield from refresh_ttl_plan(batch)
    yield from write_plan(settings, by_kind.puts, embedded, now, batch.step)
    return batch.results
