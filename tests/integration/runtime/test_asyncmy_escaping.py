"""asyncmy connections of engines configured by lg_sqla escape str and bytes
parameters with ``lg_sqla.engines._asyncmy_literal`` (asyncmy's own escaping is a
Cython loop that dominated a put's client CPU). The values must reach MariaDB
exactly as asyncmy would send them, in either escaping mode of the server.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from backends import assert_no_leaked_connections
from servers import create_database, sqlalchemy_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from lg_sqla.engines import configure_engine

pytestmark = pytest.mark.mysql

ALL_BYTES = bytes(range(256)) * 3 + b"'\\\"\x00\x1a\n\r" + "ñ中".encode()
HOSTILE_TEXT = "it's \"quoted\" \\ back\\slash\n\r\x1a ñ 中 🎉 '' \\' end"


@pytest.fixture
async def asyncmy_engine(mysql_admin_url: str) -> AsyncIterator[AsyncEngine]:
    """An asyncmy engine on a database of its own with one table (not conftest.py's
    ``engine``: no Backend here); checked for leaked connections at the end."""
    name = f"lg_sqla_asyncmy_{uuid.uuid4().hex[:8]}"
    create_database(mysql_admin_url, name)
    engine = configure_engine(
        create_async_engine(sqlalchemy_url(mysql_admin_url, "asyncmy", name) + "?charset=utf8mb4")
    )
    async with engine.begin() as connection:
        await connection.exec_driver_sql(
            "CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB, s LONGTEXT) CHARACTER SET utf8mb4"
        )
    try:
        yield engine
        assert_no_leaked_connections(engine)
    finally:
        await engine.dispose()


async def _round_trip(engine: AsyncEngine, sql_mode: str | None) -> tuple[bytes, str]:
    async with engine.connect() as connection:
        if sql_mode is not None:
            await connection.exec_driver_sql(f"SET SESSION sql_mode = '{sql_mode}'")
        raw = (await connection.get_raw_connection()).driver_connection
        assert raw is not None
        # The fast escaping is installed on this connection...
        assert raw.literal.func.__name__ == "_asyncmy_literal"
        await connection.execute(sa.text("DELETE FROM t"))
        await connection.execute(
            sa.text("INSERT INTO t VALUES (1, :b, :s)"), {"b": ALL_BYTES, "s": HOSTILE_TEXT}
        )
        row = (await connection.execute(sa.text("SELECT b, s FROM t"))).one()
        await connection.commit()
        return bytes(row.b), row.s


async def test_str_and_bytes_reach_the_server_exactly(asyncmy_engine: AsyncEngine) -> None:
    assert await _round_trip(asyncmy_engine, None) == (ALL_BYTES, HOSTILE_TEXT)


async def test_no_backslash_escapes_mode_keeps_asyncmy_escaping_for_str(
    asyncmy_engine: AsyncEngine,
) -> None:
    # A backslash is an ordinary character in this mode: escaping it as \\ would
    # store two. The server reports the mode in every reply; str goes to asyncmy.
    assert await _round_trip(asyncmy_engine, "NO_BACKSLASH_ESCAPES") == (ALL_BYTES, HOSTILE_TEXT)


async def test_the_escaping_is_what_asyncmy_sends() -> None:
    """Same SQL text as asyncmy for str; bytes as hex, the same value to the server."""
    from asyncmy import converters

    from lg_sqla.engines import _asyncmy_literal

    class Connection:
        server_status = 0

    def literal(value: object) -> str:
        return str(converters.escape_item(value, "utf8mb4"))

    fast = Connection()
    for text in (HOSTILE_TEXT, "", "plain", "\x00", "'" * 5, "\\" * 5):
        assert _asyncmy_literal(fast, literal, text) == "'" + converters.escape_string(text) + "'"
    assert _asyncmy_literal(fast, literal, b"\x00'\xff") == "_binary X'0027ff'"
    assert _asyncmy_literal(fast, literal, 42) == "42"
    assert _asyncmy_literal(fast, literal, None) == "NULL"
