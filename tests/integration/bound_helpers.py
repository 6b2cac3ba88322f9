"""What the tests of bound savers, stores and caches share (docs/application.md): a
database of their own, a caller's transaction in either mode, and lg_sqla's row count.

Each module that uses ``clean_backend`` gets a freshly created, migrated database of
the session's dialect, so "rolling back leaves zero rows of lg_sqla's" is a statement
about the whole database, not about one thread id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from backends import Backend, new_database
from sqlalchemy.ext.asyncio import AsyncConnection

from lg_sqla import SQLAlchemySaver
from lg_sqla.models import metadata


def migrated_database(
    request: pytest.FixtureRequest, backend: Backend, tmp: Path
) -> Iterator[Backend]:
    """A new database of ``backend``'s dialect, migrated (for a module-scoped fixture)."""
    for db in new_database(request, backend.variant or backend.name, tmp):
        engine = db.engine()
        try:
            SQLAlchemySaver(engine).setup()
        finally:
            engine.dispose()
        yield db


def count_rows(connection: sa.Connection) -> dict[str, int]:
    """Rows of each of lg_sqla's tables, as ``connection`` sees them."""
    return {
        name: int(connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
        for name, table in sorted(metadata.tables.items())
    }


def lg_sqla_rows(backend: Backend) -> dict[str, int]:
    """Rows of each of lg_sqla's tables that are committed, seen from an engine of its own;
    only the tables that have any."""
    engine = backend.engine()
    try:
        with engine.connect() as connection:
            return {name: n for name, n in count_rows(connection).items() if n}
    finally:
        engine.dispose()


@asynccontextmanager
async def caller_transaction(backend: Backend, mode: str) -> AsyncIterator[Any]:
    """An application's connection in a transaction it began (sync ``Connection`` or
    ``AsyncConnection``), rolled back at the end, its engine disposed."""
    if mode == "sync":
        engine = backend.engine()
        try:
            with engine.connect() as connection:
                transaction = connection.begin()
                try:
                    yield connection
                finally:
                    transaction.rollback()
        finally:
            engine.dispose()
        return
    async_engine = backend.async_engine()
    try:
        async with async_engine.connect() as async_connection:
            async_transaction = await async_connection.begin()
            try:
                yield async_connection
            finally:
                await async_transaction.rollback()
    finally:
        await async_engine.dispose()


async def rows_inside(connection: sa.Connection | AsyncConnection) -> dict[str, int]:
    """lg_sqla's rows as the caller's own transaction sees them (tables with any)."""
    if isinstance(connection, AsyncConnection):
        counts = await connection.run_sync(count_rows)
    else:
        counts = count_rows(connection)
    return {name: n for name, n in counts.items() if n}
