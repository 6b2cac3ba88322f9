"""Servers and fresh databases for the benchmark.

PostgreSQL and MariaDB come from tests/servers.py: private throwaway servers on
free loopback ports, or the servers named by ``LG_SQLA_TEST_POSTGRES_URL`` /
``LG_SQLA_TEST_MYSQL_URL``. SQLite is a file in a temporary directory. Every
contender gets a database of its own for every repeat (created just before, dropped
just after), so no saver ever reads or skips over another's rows.
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

from servers import (  # noqa: E402
    create_database,
    drop_database,
    mysql_server,
    postgres_server,
    sqlalchemy_url,
)

DIALECTS = ("sqlite", "postgres", "mysql")
# "sqlite-normal": SQLite again, both savers at synchronous=NORMAL (see contenders.py),
# so their write figures compare code rather than fsync.
SETUPS = ("sqlite", "sqlite-normal", "postgres", "mysql")
PG_TABLE_BYTES = (
    "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
)
MYSQL_TABLE_BYTES = (
    "SELECT COALESCE(SUM(data_length + index_length), 0) FROM information_schema.tables "
    "WHERE table_schema = DATABASE()"
)
LABELS = {
    "sqlite": "SQLite",
    "sqlite-normal": "SQLite, both synchronous=NORMAL",
    "postgres": "PostgreSQL",
    "mysql": "MariaDB",
}


def base(setup: str) -> str:
    """The database of a setup: "sqlite-normal" is SQLite."""
    return "sqlite" if setup.startswith("sqlite") else setup


@dataclass(frozen=True)
class Database:
    """One fresh, empty database, spelled the way each kind of client wants it."""

    dialect: str
    sync_url: str  # lg_sqla's recommended sync URL (README)
    async_url: str  # lg_sqla's recommended async URL (README)
    native: str  # what the official saver's from_conn_string takes


class Servers:
    """The running servers of one benchmark run; ``fresh()`` makes databases on them."""

    def __init__(self, admin: dict[str, str], tmp: Path) -> None:
        self.admin = admin
        self.tmp = tmp
        self._names = itertools.count()
        self._run = uuid.uuid4().hex[:6]

    @contextlib.contextmanager
    def fresh(self, dialect: str) -> Iterator[Database]:
        name = f"bench_{self._run}_{next(self._names)}"
        dialect = base(dialect)
        if dialect == "sqlite":
            path = self.tmp / f"{name}.sqlite"
            try:
                yield Database(
                    dialect,
                    f"sqlite:///{path}",
                    f"sqlite+aiosqlite:///{path}",
                    str(path),
                )
            finally:
                for leftover in self.tmp.glob(f"{name}.sqlite*"):
                    leftover.unlink()
            return
        admin = self.admin[dialect]
        create_database(admin, name)
        try:
            if dialect == "postgres":
                sync = sqlalchemy_url(admin, "psycopg", name)
                native = sa.make_url(sync).set(drivername="postgresql")
                yield Database(dialect, sync, sync, native.render_as_string(False))
            else:
                sync = sqlalchemy_url(admin, "pymysql", name)
                native = sa.make_url(sync).set(drivername="mysql")
                yield Database(
                    dialect,
                    sync + "?charset=utf8mb4",
                    sqlalchemy_url(admin, "asyncmy", name) + "?charset=utf8mb4",
                    native.render_as_string(False),
                )
        finally:
            drop_database(admin, name)

    def storage_bytes(self, db: Database) -> int:
        """Bytes the database spends on all its tables (data, indexes, TOAST / LOBs)."""
        if db.dialect == "sqlite":
            import sqlite3

            with contextlib.closing(sqlite3.connect(db.native)) as conn:
                pages = conn.execute("PRAGMA page_count").fetchone()[0]
                free = conn.execute("PRAGMA freelist_count").fetchone()[0]
                size = conn.execute("PRAGMA page_size").fetchone()[0]
                return int((pages - free) * size)
        engine = sa.create_engine(db.sync_url)
        try:
            with engine.connect() as conn:
                if db.dialect == "postgres":
                    return int(conn.exec_driver_sql(PG_TABLE_BYTES).scalar_one())
                tables = conn.exec_driver_sql(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = DATABASE()"
                ).scalars()
                for table in list(tables):
                    conn.exec_driver_sql(f"ANALYZE TABLE `{table}`").all()  # fresh statistics
                return int(conn.exec_driver_sql(MYSQL_TABLE_BYTES).scalar_one())
        finally:
            engine.dispose()

    def server_version(self, dialect: str) -> str:
        if dialect == "sqlite":
            import sqlite3

            return f"SQLite {sqlite3.sqlite_version}"
        with self.fresh(dialect) as db:
            engine = sa.create_engine(db.sync_url)
            try:
                with engine.connect() as conn:
                    return str(conn.exec_driver_sql("SELECT version()").scalar_one())
            finally:
                engine.dispose()


@contextlib.contextmanager
def servers(dialects: list[str]) -> Iterator[Servers]:
    with contextlib.ExitStack() as stack:
        admin: dict[str, str] = {}
        if "postgres" in dialects:
            admin["postgres"] = stack.enter_context(postgres_server())
        if "mysql" in dialects:
            admin["mysql"] = stack.enter_context(mysql_server())
        tmp = Path(tempfile.mkdtemp(prefix="lg_sqla_bench_"))
        stack.callback(shutil.rmtree, tmp, True)
        yield Servers(admin, tmp)
