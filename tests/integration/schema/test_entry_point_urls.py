"""Every entry point reads a URL the same way: the Alembic CLI of a checkout (the
README's path: the repo's alembic.ini) takes the URLs `lg-sqla` and
`from_conn_string` take, and offline DDL for MariaDB applies on MariaDB.

Runs at the lowest SQLAlchemy allowed too (Makefile: MIN_VERSIONS_TESTS), where a
`postgresql://` URL would otherwise open with psycopg2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pymysql
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread

from lg_sqla import SQLAlchemySaver, migrate
from lg_sqla.models import metadata

REPO = Path(__file__).resolve().parents[3]
# The `alembic` command (its console script calls alembic.config.main), in a process
# where SQLAlchemy's own defaults for driverless URLs, psycopg2 and mysqlclient, cannot
# be imported even where they are installed: a URL that reached them fails the test.
ALEMBIC = [
    sys.executable,
    "-c",
    "import sys; sys.modules['psycopg2'] = sys.modules['MySQLdb'] = None; "
    "from alembic.config import main; main(prog='alembic')",
    "-c",
    str(REPO / "alembic.ini"),
]
# The checkout first on the path, as for the tests (lg_sqla.migrate: its alembic/).
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def _alembic(*args: str) -> str:
    done = subprocess.run(
        [*ALEMBIC, *args], cwd=REPO, env=ENV, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _without_driver(backend: Backend, scheme: str) -> str:
    """The backend's URL as users paste it: ``scheme://`` and no driver."""
    url = sa.make_url(backend.sync_url)
    return scheme + "://" + url.render_as_string(hide_password=False).split("://", 1)[1]


def _revision(engine: sa.Engine) -> str | None:
    with engine.connect() as connection:
        return migrate.current_revision(connection)


def _schema_diff(engine: sa.Engine) -> list[object]:
    tables = set(metadata.tables) | {migrate.VERSION_TABLE}
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "version_table": migrate.VERSION_TABLE,
                "include_name": lambda name, kind, _: kind != "table" or name in tables,
            },
        )
        return list(compare_metadata(context, metadata))


def _columns(engine: sa.Engine) -> list[tuple[str, ...]]:
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, COALESCE(COLLATION_NAME, '')"
            " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
            " ORDER BY TABLE_NAME, ORDINAL_POSITION"
        )
        return [tuple(row) for row in rows]


def _saver_round_trip(engine: sa.Engine) -> None:
    saver = SQLAlchemySaver(engine)
    cfg = config(new_thread())
    stored = checkpoint({"x": 1})
    saved = saver.put(cfg, stored, {"source": "input", "step": 0}, stored["channel_versions"])
    fetched = saver.get_tuple(saved)
    assert fetched is not None and fetched.checkpoint["channel_values"] == {"x": 1}


def test_alembic_upgrades_from_urls_without_a_driver(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """`alembic -x url=mysql://…` / `postgres://…` / `sqlite:///…` upgrade head, on
    PyMySQL and psycopg 3 as `lg-sqla` would; `postgresql://` opens with psycopg 3."""
    scheme = {"sqlite": "sqlite", "postgres": "postgres", "mysql": "mysql"}[fresh_database.name]
    url = _without_driver(fresh_database, scheme)
    _alembic("-x", f"url={url}", "upgrade", "head")
    engine = make_engine(fresh_database)
    assert _revision(engine) == migrate.head_revision()
    assert _schema_diff(engine) == []
    if fresh_database.name == "postgres":
        current = _alembic("-x", f"url={_without_driver(fresh_database, 'postgresql')}", "current")
        assert migrate.head_revision() in current
    _saver_round_trip(engine)


def _statements(script: str) -> list[str]:
    """The statements of an offline script (Alembic ends each with ';' and a blank line)."""
    lines = [line for line in script.splitlines() if not line.startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]


@pytest.mark.parametrize("backend", ["mysql"], indirect=True)
@pytest.mark.parametrize("scheme", ["mysql", "mariadb"])
def test_offline_mysql_sql_applies_on_mariadb(
    make_engine: EngineFactory, backend: Backend, fresh_database: Backend, scheme: str
) -> None:
    """`upgrade --sql` (lg-sqla and alembic print the same DDL), run by a DBA's client,
    builds on MariaDB the schema the saver opens: from a `mariadb://` URL, and from a
    `mysql://` one, whose key collation is named for MySQL and MariaDB each in an
    executable comment only that server runs (MariaDB refuses MySQL's, ERROR 1273)."""
    url = sa.make_url(fresh_database.sync_url)
    offline_url = _without_driver(fresh_database, scheme)
    script = _alembic("-x", f"url={offline_url}", "upgrade", "head", "--sql")
    printed = subprocess.run(
        [sys.executable, "-m", "lg_sqla", "--url", offline_url, "upgrade", "--sql"],
        env=ENV,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed == script
    first, keys = script.splitlines()[0], script.count("COLLATE /*!80017 utf8mb4_0900_bin */")
    if scheme == "mysql":
        assert first.startswith("-- lg_sqla DDL for MySQL 8.0.17+ and MariaDB 10.6+")
        # Every key column names both collations; none names MySQL's alone.
        assert keys > 0 and script.count("utf8mb4_0900_bin") == keys
        assert script.count("/*M!100202 utf8mb4_nopad_bin */") == keys
    else:
        assert first.startswith("-- lg_sqla DDL for MariaDB 10.6+")
        assert keys == 0 and "utf8mb4_0900_bin" not in script

    connection = pymysql.connect(
        host=url.host,
        port=url.port or 3306,
        user=url.username,
        password=url.password or "",
        database=url.database,
        charset="utf8mb4",
    )
    try:
        with connection.cursor() as cursor:
            for statement in _statements(script):
                cursor.execute(statement)
        connection.commit()
    finally:
        connection.close()
    engine = make_engine(fresh_database)
    assert _revision(engine) == migrate.head_revision()
    assert _schema_diff(engine) == []
    # Column for column, the types and collations setup() gives on this server.
    assert _columns(engine) == _columns(make_engine(backend))
    _saver_round_trip(engine)
