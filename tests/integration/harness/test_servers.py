"""Smoke test for the test-server provisioning (tests/servers.py, tests/conftest.py).

Proves each fixture yields a live server of a supported version, that per-test
databases can be created and dropped, and that they store 4-byte UTF-8 (emoji).
"""

from __future__ import annotations

import re
import uuid

import pytest
import sqlalchemy as sa
from servers import create_database, drop_database, sqlalchemy_url

EMOJI = "thread-🧵-🚀-ünïcødé"


def _unique_db_name() -> str:
    return f"lg_sqla_smoke_{uuid.uuid4().hex[:12]}"


def _version_tuple(text: str) -> tuple[int, ...]:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    assert match, f"unparseable server version {text!r}"
    return tuple(int(part) for part in match.groups() if part is not None)


def _roundtrip_emoji(conn: sa.Connection) -> None:
    conn.execute(sa.text("CREATE TABLE smoke (id INTEGER PRIMARY KEY, label VARCHAR(64))"))
    conn.execute(sa.text("INSERT INTO smoke (id, label) VALUES (1, :label)"), {"label": EMOJI})
    assert conn.execute(sa.text("SELECT label FROM smoke WHERE id = 1")).scalar_one() == EMOJI
    # Lookup by the emoji value too: catches a lossy column charset that still
    # happens to echo the inserted string back.
    found = conn.execute(sa.text("SELECT id FROM smoke WHERE label = :label"), {"label": EMOJI})
    assert found.scalar_one() == 1


@pytest.mark.postgres
def test_postgres_server(postgres_admin_url: str) -> None:
    name = _unique_db_name()
    create_database(postgres_admin_url, name)
    engine = sa.create_engine(sqlalchemy_url(postgres_admin_url, "psycopg", name))
    try:
        with engine.begin() as conn:
            version_num = int(conn.execute(sa.text("SHOW server_version_num")).scalar_one())
            assert version_num >= 150000, f"PostgreSQL 15+ required, got {version_num}"
            assert conn.execute(sa.text("SHOW server_encoding")).scalar_one() == "UTF8"
            _roundtrip_emoji(conn)
    finally:
        engine.dispose()
        drop_database(postgres_admin_url, name)

    with sa.create_engine(sqlalchemy_url(postgres_admin_url, "psycopg", "postgres")).connect() as c:
        gone = c.execute(
            sa.text("SELECT count(*) FROM pg_database WHERE datname = :n"), {"n": name}
        )
        assert gone.scalar_one() == 0


@pytest.mark.mysql
def test_mysql_server(mysql_admin_url: str) -> None:
    name = _unique_db_name()
    create_database(mysql_admin_url, name)
    engine = sa.create_engine(sqlalchemy_url(mysql_admin_url, "pymysql", name) + "?charset=utf8mb4")
    try:
        with engine.begin() as conn:
            version = conn.execute(sa.text("SELECT VERSION()")).scalar_one()
            if "mariadb" in version.lower():
                # JSON_TABLE arrived in MariaDB 10.6.
                assert _version_tuple(version) >= (10, 6), version
            else:
                assert _version_tuple(version) >= (8, 0, 4), version
            charset, collation = conn.execute(
                sa.text(
                    "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME "
                    "FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = :n"
                ),
                {"n": name},
            ).one()
            assert (charset, collation) == ("utf8mb4", "utf8mb4_bin")
            json_rows = conn.execute(
                sa.text(
                    "SELECT x FROM JSON_TABLE('[1, 2, 3]', '$[*]' COLUMNS (x INT PATH '$')) AS t"
                )
            ).scalars()
            assert list(json_rows) == [1, 2, 3]
            _roundtrip_emoji(conn)
    finally:
        engine.dispose()
        drop_database(mysql_admin_url, name)

    with sa.create_engine(sqlalchemy_url(mysql_admin_url, "pymysql")).connect() as c:
        gone = c.execute(
            sa.text("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = :n"),
            {"n": name},
        )
        assert gone.scalar_one() == 0
