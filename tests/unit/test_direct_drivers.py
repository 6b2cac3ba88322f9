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


def test_pymysql_splits_an_insert_for_executemany_as_pymysql_does() -> None:
    """The split PyMySQL's executemany makes of an INSERT per call, made once
    (``internals.pymysql_insert_parts``): the same prefix, row and postfix, ``%%``
    unescaped as PyMySQL unescapes it; None for what it would not split."""
    from pymysql.cursors import RE_INSERT_VALUES

    from lg_sqla import internals

    upsert = (
        "INSERT INTO t (a, `b`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE "
        "a = CASE WHEN (t.a LIKE 'x%%') THEN VALUES(a) ELSE t.a END"
    )
    match = RE_INSERT_VALUES.match(upsert)
    assert match is not None
    assert internals.pymysql_insert_parts(upsert) == (
        "INSERT INTO t (a, `b`) VALUES ",
        "(%s, %s)",
        " ON DUPLICATE KEY UPDATE a = CASE WHEN (t.a LIKE 'x%') THEN VALUES(a) ELSE t.a END",
    )
    assert internals.pymysql_insert_parts("UPDATE t SET a = %s WHERE b = %s") is None
