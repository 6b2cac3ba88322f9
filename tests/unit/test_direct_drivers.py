"""Which direct-path driver settings a psycopg dialect gets (``runtime.drivers``).

SQLAlchemy names the driver of its async psycopg dialect "psycopg" too; only the
sync dialect's connections and cursors are psycopg's own, so only it may skip the
asyncio adapter (its autocommit flag set client-side through the adapter's
connection, not the adapter's setter, which awaits the event loop)."""

from __future__ import annotations

from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg, PGDialectAsync_psycopg

from lg_sqla.runtime import drivers


def test_sync_psycopg_skips_the_adapter_and_async_psycopg_looks_behind_it() -> None:
    sync_driver = drivers.direct_driver(PGDialect_psycopg())  # type: ignore[no-untyped-call]
    async_driver = drivers.direct_driver(PGDialectAsync_psycopg())  # type: ignore[no-untyped-call]
    assert sync_driver is not None and async_driver is not None
    assert (PGDialect_psycopg.driver, PGDialectAsync_psycopg.driver) == ("psycopg", "psycopg")
    assert async_driver.autocommit is drivers._psycopg_autocommit
    assert sync_driver.autocommit is drivers._psycopg_own_autocommit
    assert sync_driver.keeps_cursors and async_driver.keeps_cursors
