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

REPO = Path(__file__).resolve().parents[2]
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
def test_offline_mariadb_sql_applies_on_mariadb(
    make_engine: EngineFactory, fresh_database: Backend
) -> None:
    """`upgrade --sql` with a `mariadb://` URL (lg-sqla and alembic print the same DDL)
    builds, run by a DBA's client, the schema the saver opens; a `mysql://` URL's DDL
    says it is for MySQL and names the way to MariaDB's."""
    url = sa.make_url(fresh_database.sync_url)
    mariadb_url = _without_driver(fresh_database, "mariadb")
    script = _alembic("-x", f"url={mariadb_url}", "upgrade", "head", "--sql")
    printed = subprocess.run(
        [sys.executable, "-m", "lg_sqla", "--url", mariadb_url, "upgrade", "--sql"],
        env=ENV,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed == script
    assert script.splitlines()[0].startswith("-- lg_sqla DDL for MariaDB")
    assert "utf8mb4_0900_bin" not in script

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
    _saver_round_trip(engine)

    mysql_script = _alembic(
        "-x", f"url={_without_driver(fresh_database, 'mysql')}", "upgrade", "head", "--sql"
    )
    first = mysql_script.splitlines()[0]
    assert first.startswith("-- lg_sqla DDL for MySQL 8.0.17+") and "mariadb://" in first
