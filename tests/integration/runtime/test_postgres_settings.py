# mypy: disable-error-code="arg-type"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""The connection settings lg_sqla gives the PostgreSQL (psycopg) engines it creates.

Statements are prepared on their first execution on a connection, so no call
parses a statement its connection has already seen
(``lg_sqla.engines.PSYCOPG_PREPARE_THRESHOLD``). The caller's ``connect_args`` win,
and the server's session settings are left alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import sqlalchemy as sa
from helpers import checkpoint, config, new_thread
from servers import create_database, sqlalchemy_url

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.store import SQLAlchemyStore

pytestmark = pytest.mark.postgres


@dataclass(frozen=True)
class Database:
    sync_url: str
    async_url: str


@pytest.fixture
def pg(postgres_admin_url: str) -> Iterator[Database]:
    """A fresh database, migrated."""
    name = f"lg_sqla_settings_{uuid.uuid4().hex[:8]}"
    create_database(postgres_admin_url, name)
    db = Database(
        sqlalchemy_url(postgres_admin_url, "psycopg", name),
        sqlalchemy_url(postgres_admin_url, "psycopg_async", name),
    )
    with SQLAlchemySaver.from_conn_string(db.sync_url) as saver:
        saver.setup()
    yield db


def _session(connection: sa.Connection) -> dict[str, Any]:
    driver = connection.connection.driver_connection
    return {
        "plan_cache_mode": connection.exec_driver_sql("SHOW plan_cache_mode").scalar(),
        "statement_timeout": connection.exec_driver_sql("SHOW statement_timeout").scalar(),
        "prepare_threshold": getattr(driver, "prepare_threshold", None),
    }


def _prepared_statements(connection: sa.Connection) -> list[str]:
    return list(
        connection.exec_driver_sql("SELECT statement FROM pg_prepared_statements").scalars()
    )


def test_saver_and_store_engines_prepare_statements_at_once(pg: Database) -> None:
    expected = {
        "plan_cache_mode": "auto",
        "statement_timeout": "0",
        "prepare_threshold": 0,
    }
    with SQLAlchemySaver.from_conn_string(pg.sync_url, pool_size=1) as saver:
        with saver.engine.connect() as connection:
            assert _session(connection) == expected
        cfg = config(new_thread())
        values, versions = {"messages": "héllo"}, {"messages": "1"}
        metadata = {"source": "input", "step": -1}
        stored = saver.put(cfg, checkpoint(values, versions), metadata, versions)
        assert saver.get_tuple(stored) is not None
        assert [t.config for t in saver.list(cfg, filter={"step": -1})] == [stored]
        # The pool's one connection prepared the statements at their first execution.
        with saver.engine.connect() as connection:
            prepared = _prepared_statements(connection)
        assert any(s.lstrip().startswith("WITH page AS") for s in prepared), prepared
        assert any("INSERT INTO checkpoints" in s for s in prepared), prepared
    with (
        SQLAlchemyStore.from_conn_string(pg.sync_url) as store,
        store.engine.connect() as connection,
    ):
        assert _session(connection) == expected


async def test_async_saver_engine_prepares_statements_at_once(pg: Database) -> None:
    async with AsyncSQLAlchemySaver.from_conn_string(pg.async_url) as saver:
        async with saver.engine.connect() as connection:
            settings = await connection.run_sync(_session)
        assert settings == {
            "plan_cache_mode": "auto",
            "statement_timeout": "0",
            "prepare_threshold": 0,
        }
        cfg = config(new_thread())
        stored = await saver.aput(cfg, checkpoint({"ñ": 1}, {"ñ": "1"}), {}, {"ñ": "1"})
        assert (await saver.aget_tuple(stored)) is not None


def test_the_callers_connect_args_and_url_options_are_kept(pg: Database) -> None:
    own = {"prepare_threshold": 5, "options": "-c plan_cache_mode=auto -c statement_timeout=7000"}
    with (
        SQLAlchemySaver.from_conn_string(pg.sync_url, connect_args=own) as saver,
        saver.engine.connect() as connection,
    ):
        assert _session(connection) == {
            "plan_cache_mode": "auto",
            "statement_timeout": "7s",
            "prepare_threshold": 5,
        }
    # Options in the URL reach the server unchanged.
    url = sa.make_url(pg.sync_url).update_query_dict({"options": "-c statement_timeout=9000"})
    with (
        SQLAlchemySaver.from_conn_string(url.render_as_string(hide_password=False)) as saver,
        saver.engine.connect() as connection,
    ):
        assert _session(connection) == {
            "plan_cache_mode": "auto",
            "statement_timeout": "9s",
            "prepare_threshold": 0,
        }
