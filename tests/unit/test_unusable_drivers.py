"""Engines on a driver that cannot run lg_sqla are refused where they are accepted.

aiomysql (0.3.2) calls PyMySQL's ``escape_bytes_prefixed`` for every bytes
parameter, a placeholder string since PyMySQL 1.2.3 (aio-libs/aiomysql#1080):
without this check the first ``put`` failed with ``TypeError: 'str' object is not
callable``. Nothing here connects: the error comes at construction.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from lg_sqla import AsyncSQLAlchemySaver, InvalidInputError
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.dialects import check_driver
from lg_sqla.errors import UnsupportedDriverError
from lg_sqla.store import AsyncSQLAlchemyStore

URLS = ["mysql+aiomysql://app:pw@127.0.0.1:1/app", "mariadb+aiomysql://app:pw@127.0.0.1:1/app"]


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("build", [AsyncSQLAlchemySaver, AsyncSQLAlchemyStore, SQLAlchemyCache])
async def test_aiomysql_engines_are_refused_at_construction(url: str, build: type) -> None:
    engine = create_async_engine(url)
    try:
        with pytest.raises(UnsupportedDriverError) as raised:
            build(engine)
    finally:
        await engine.dispose()
    message = str(raised.value)
    scheme = url.split(":")[0].split("+")[0]
    assert f"{scheme}+asyncmy://" in message
    assert "aio-libs/aiomysql#1080" in message and "bytes" in message
    assert isinstance(raised.value, InvalidInputError)  # a ValueError too


async def test_from_conn_string_refuses_aiomysql_before_connecting() -> None:
    with pytest.raises(UnsupportedDriverError, match=r"mysql\+asyncmy://"):
        async with AsyncSQLAlchemySaver.from_conn_string(URLS[0]):
            pass  # pragma: no cover


@pytest.mark.parametrize(
    "url",
    [
        "mysql+asyncmy://app:pw@127.0.0.1:1/app",
        "mysql+pymysql://app:pw@127.0.0.1:1/app",
        "mariadb+mariadbconnector://app:pw@127.0.0.1:1/app",
        "postgresql+asyncpg://app:pw@127.0.0.1:1/app",
        "sqlite://",
    ],
)
def test_other_drivers_pass_the_check(url: str) -> None:
    check_driver(sa.make_url(url).get_dialect()())
