"""MariaDB Galera Cluster (and Percona XtraDB Cluster): what lg_sqla does differently
on a node of a multi-writer cluster (causal reads, the migration lease), beside what
``mysql.py`` does on every MySQL-family server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql as mysql_dialect
from sqlalchemy.engine import Connection
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.util import await_only

from lg_sqla.dialects.base import MIGRATION_LOCK_NAME, MIGRATION_LOCK_TIMEOUT_S

logger = logging.getLogger(__name__)


# Read here (the lease's busy errors) and by ``mysql.py`` (lock conflicts): it lives in
# the module below both.
def mysql_error_number(error: BaseException) -> int | None:
    """The server's error number: ``args[0]`` on PyMySQL, mysqlclient and asyncmy,
    ``errno`` on MariaDB Connector/Python."""
    number = getattr(error, "errno", None)
    if number is None and error.args and isinstance(error.args[0], int):
        number = error.args[0]
    return number if isinstance(number, int) else None


# --------------------------------------------------------------------------- Galera
#
# MariaDB Galera Cluster (and Percona XtraDB Cluster): every node takes writes, and a
# transaction is certified against the others' at COMMIT (a conflict is error 1213
# there, which the runtime retries). Two things differ from one server:
#
# * Reads are not causal by default: a node applies the others' write sets a little
#   later, so a read on node 3 just after a commit on node 1 may miss it (measured:
#   78 of 300 get_tuple calls). ``wsrep_sync_wait`` bit 1 makes a session's reads wait
#   until the node has applied everything committed before them in the cluster.
# * GET_LOCK locks one node's server only: the migration lock needs a row instead.

# Engine execution option: the session value of wsrep_sync_wait lg_sqla sets on the
# Galera sessions it uses, e.g. ``engine.execution_options(lg_sqla_wsrep_sync_wait=3)``;
# None leaves every session as it is.
WSREP_SYNC_WAIT_OPTION = "lg_sqla_wsrep_sync_wait"
WSREP_SYNC_WAIT_READS = 1  # the bit for SELECT (and SHOW); 2 UPDATE/DELETE, 4 INSERT/REPLACE
_DEFAULT = object()  # option not set: add the read bit unless the session was changed
_UNSET = object()
_PREPARED_KEY = "lg_sqla_wsrep_sync_wait"


def _driver_rows(dbapi_connection: Any, sql: str) -> list[tuple[Any, ...]]:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(sql)
        return list(cursor.fetchall()) if cursor.description else []
    finally:
        cursor.close()


# The session's character sets (checked by ``mysql.check_session_charset``): asked in
# the same question as wsrep_on, one round trip per DBAPI connection for both.
SESSION_CHARSET_VARIABLES = (
    "character_set_client",
    "character_set_connection",
    "character_set_results",
)
_SESSION_VARIABLES_KEY = "lg_sqla_session_variables"
_SESSION_VARIABLES_SQL = "SHOW VARIABLES WHERE Variable_name IN ({})".format(
    ", ".join(f"'{name}'" for name in ("wsrep_on", *SESSION_CHARSET_VARIABLES))
)


def session_variables(pooled: PoolProxiedConnection) -> dict[str, str]:
    """wsrep_on and the session's character sets, asked once per DBAPI connection.
    SHOW, not ``@@wsrep_on``: MySQL without Galera has no such variable (an error),
    and SHOW answers no row for it. (A NULL character_set_results is "".)"""
    known: dict[str, str] | None = pooled.info.get(_SESSION_VARIABLES_KEY)
    if known is None:
        rows = _driver_rows(pooled.dbapi_connection, _SESSION_VARIABLES_SQL)
        known = pooled.info[_SESSION_VARIABLES_KEY] = {
            _text(name): _text(value) for name, value in rows
        }
    return known


def _text(value: Any) -> str:
    """A SHOW row's cell as text (mysqlclient may answer bytes; NULL as "")."""
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)


def _wsrep_on(pooled: PoolProxiedConnection) -> bool:
    """Whether the session is on a Galera node replicating it (``wsrep_on``)."""
    return session_variables(pooled).get("wsrep_on", "").upper() == "ON"


def is_galera_node(connection: Connection) -> bool:
    """Whether ``connection`` is a session on a Galera node with replication on."""
    return _wsrep_on(connection.connection)


def prepare_galera_session(pooled: PoolProxiedConnection, wanted: Any) -> None:
    """Make a Galera session's reads causal (``wsrep_sync_wait``); nothing elsewhere.

    ``wanted`` is the engine's ``lg_sqla_wsrep_sync_wait`` option: an int is set as
    it is, None leaves the session alone. Unset (the default), the read bit is added
    to the session's value, unless that value differs from the server's global one:
    then someone chose it for this session (an ``init_command``, a connect listener)
    and it is kept. The value stays on the DBAPI connection when it goes back to the
    pool: an application sharing the engine gets causal reads on it too.
    """
    if wanted is None or not _wsrep_on(pooled):
        return
    dbapi_connection = pooled.dbapi_connection
    if wanted is _DEFAULT:
        ((session, global_),) = _driver_rows(
            dbapi_connection, "SELECT @@session.wsrep_sync_wait, @@global.wsrep_sync_wait"
        )
        session, global_ = int(session), int(global_)
        if session & WSREP_SYNC_WAIT_READS or session != global_:
            return
        value = session | WSREP_SYNC_WAIT_READS
    else:
        value = int(wanted)
    _driver_rows(dbapi_connection, f"SET SESSION wsrep_sync_wait = {value}")


# The lease: a row in this table, in the schema of lg_sqla's tables.
MIGRATION_LOCK_TABLE = "lg_sqla_migration_lock"
# A crashed holder's row stops blocking after this long (its migration may have been
# killed half way; the next one finds the version table's revision and goes on from
# there). Longer than any waiter waits for the lock, so a live holder keeps it as long
# as GET_LOCK's waiters would have waited.
MIGRATION_LEASE_S = MIGRATION_LOCK_TIMEOUT_S
# Between two attempts at the row: doubling to this, jittered.
_LEASE_MAX_PAUSE_S = 0.5
# Duplicate key (the row is taken), deadlock/certification failure (another node took
# it at the same time), lock wait timeout; and while tables are created by other
# nodes (TOI): table exists, "skipped since its definition is being modified by
# concurrent DDL", metadata lock wait.
_LEASE_BUSY = frozenset({1062, 1213, 1205})
_CREATE_BUSY = frozenset({1050, 1213, 1205, 1684})

_lease_metadata = sa.MetaData()
migration_lock_table = sa.Table(
    MIGRATION_LOCK_TABLE,
    _lease_metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("holder", sa.String(255), nullable=False),
    sa.Column("expires_at", mysql_dialect.DATETIME(fsp=6), nullable=False),
    mysql_engine="InnoDB",  # Galera replicates InnoDB tables only
)


def _error_number(error: sa.exc.DBAPIError) -> int | None:
    return mysql_error_number(error.orig) if error.orig is not None else None


def _pause(connection: Connection, seconds: float) -> None:
    """Wait between two attempts. On an async engine (``run_sync``: this runs in
    SQLAlchemy's greenlet on the event loop's thread) without stopping the loop."""
    if connection.dialect.is_async:
        await_only(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


def _rollback(connection: Connection) -> None:
    """Roll back after a failed lock statement. A transaction the cluster aborted (a
    certification failure, or a brute-force abort by another node's write or DDL)
    answers the ROLLBACK itself with 1213 once: it is rolled back all the same."""
    try:
        connection.rollback()
    except sa.exc.DBAPIError as error:
        if _error_number(error) not in _LEASE_BUSY:
            raise


def _schema_translate(connection: Connection) -> dict[Any, Any]:
    return dict(connection.get_execution_options().get("schema_translate_map") or {})


def _ensure_lock_table(connection: Connection, deadline: float) -> None:
    """``CREATE DATABASE/TABLE IF NOT EXISTS``, tried again while other nodes create them.

    Galera runs DDL in total order on every node (TOI): two nodes creating the same
    table both succeed, the second finding it there, except that a session may meet
    the other's DDL half way (1684, 1050, or its own transaction aborted by it: 1213).
    """
    schema = _schema_translate(connection).get(None)
    pause = 0.01
    while True:
        try:
            # Only when missing (a read, with causal reads on): DDL is replicated even
            # when IF NOT EXISTS finds the object, and a database-wide DDL from another
            # node aborts the open transaction of the migration running under the lock.
            if not _lock_table_exists(connection):
                if schema is not None:
                    quoted = connection.dialect.identifier_preparer.quote_schema(schema)
                    connection.exec_driver_sql(f"CREATE DATABASE IF NOT EXISTS {quoted}")
                connection.execute(sa.schema.CreateTable(migration_lock_table, if_not_exists=True))
            connection.commit()
            return
        except sa.exc.DBAPIError as error:
            _rollback(connection)
            if _error_number(error) not in _CREATE_BUSY or time.monotonic() > deadline:
                raise
        _pause(connection, random.uniform(pause / 2, pause))
        pause = min(pause * 2, _LEASE_MAX_PAUSE_S)


_NO_SUCH_TABLE = frozenset({1146, 1049})  # table, database


def _lock_table_exists(connection: Connection) -> bool:
    try:
        connection.execute(sa.select(migration_lock_table.c.name).limit(0)).all()
        return True
    except sa.exc.DBAPIError as error:
        if _error_number(error) not in _NO_SUCH_TABLE:
            raise
        _rollback(connection)
        return False


def _holder(connection: Connection) -> str:
    (row,) = connection.exec_driver_sql(
        "SELECT CONCAT(@@hostname, ':', @@port, ' connection ', CONNECTION_ID())"
    ).all()
    return f"{row[0]} pid {os.getpid()} {uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def galera_migration_lock(connection: Connection) -> Iterator[None]:
    """The migration lock of a Galera cluster: a lease row every node sees.

    Taken by INSERTing the row ``lg_sqla_migrate`` into ``lg_sqla_migration_lock``, each
    attempt committed on its own: the cluster certifies the INSERTs of several nodes in
    one order, so exactly one commits; the others get a duplicate key (the row is
    there) or a certification failure (1213), and try again with a growing pause. A row
    whose ``expires_at`` has passed belongs to a holder that died: it is deleted and
    the lock taken anew. The migration runs with causal reads (``wsrep_sync_wait``), so
    it reads the version the previous holder committed, and the row is deleted only
    once the migration committed.
    """
    deadline = time.monotonic() + MIGRATION_LOCK_TIMEOUT_S
    if connection.in_transaction():
        connection.commit()  # (DDL would commit it anyway)
    # Causal reads for the lock's reads and the migration's (the version table).
    ((previous_wait,),) = connection.exec_driver_sql("SELECT @@session.wsrep_sync_wait").all()
    connection.exec_driver_sql(
        f"SET SESSION wsrep_sync_wait = {int(previous_wait) | WSREP_SYNC_WAIT_READS}"
    )
    try:
        _ensure_lock_table(connection, deadline)
        holder = _holder(connection)
        _take_lease(connection, holder, deadline)
        # The migration's statements autobegin the next transaction; the caller
        # (alembic/env.py) wants one open before Alembic is configured.
        connection.exec_driver_sql("SELECT 1").all()
        try:
            yield
            # Committed before the row goes: the next holder reads the new revision.
            if connection.in_transaction():
                connection.commit()
        finally:
            if connection.in_transaction():
                _rollback(connection)
            _release_lease(connection, holder)
    finally:
        if not connection.invalidated:
            with contextlib.suppress(sa.exc.DBAPIError):
                connection.exec_driver_sql(f"SET SESSION wsrep_sync_wait = {int(previous_wait)}")


def _take_lease(connection: Connection, holder: str, deadline: float) -> None:
    """INSERT the lease row as ``holder``, each attempt committed on its own, with a
    growing pause between attempts; delete the row first when its lease expired.
    TimeoutError naming the holder at ``deadline``."""
    table = migration_lock_table
    now = sa.func.utc_timestamp(6)
    take = sa.insert(table).values(
        name=MIGRATION_LOCK_NAME,
        holder=holder,
        expires_at=sa.func.date_add(now, sa.text(f"INTERVAL {MIGRATION_LEASE_S} SECOND")),
    )
    expired = sa.delete(table).where(table.c.name == MIGRATION_LOCK_NAME, table.c.expires_at < now)
    pause = 0.01
    while True:
        if _commit_alone(connection, take) is not None:
            return
        if _commit_alone(connection, expired):
            logger.warning(
                "lg_sqla: the migration lock's lease had expired (a migration "
                "died holding it); taking it over"
            )
        if time.monotonic() > deadline:
            rows = connection.execute(sa.select(table.c.holder, table.c.expires_at)).all()
            _rollback(connection)
            raise TimeoutError(
                f"could not take the migration lock (row {MIGRATION_LOCK_NAME!r} of "
                f"{MIGRATION_LOCK_TABLE}) within {MIGRATION_LOCK_TIMEOUT_S}s; held by "
                f"{rows}. If no migration is running, delete that row."
            )
        _pause(connection, random.uniform(pause / 2, pause))
        pause = min(pause * 2, _LEASE_MAX_PAUSE_S)


def _commit_alone(connection: Connection, statement: sa.Executable) -> int | None:
    """Run ``statement`` on the lease table in a transaction of its own: the rows it
    changed, or None when the row was busy (taken, or another node's at the same time)."""
    try:
        changed = connection.execute(statement).rowcount
        connection.commit()
        return changed
    except sa.exc.DBAPIError as error:
        _rollback(connection)
        if _error_number(error) not in _LEASE_BUSY:
            raise
        return None


def _release_lease(connection: Connection, holder: str) -> None:
    """Delete our row (only ours: after an expiry it may be another's), tried again
    while a certification conflict refuses the commit."""
    table = migration_lock_table
    mine = sa.delete(table).where(table.c.name == MIGRATION_LOCK_NAME, table.c.holder == holder)
    for attempt in range(20):
        try:
            connection.execute(mine)
            connection.commit()
            return
        except sa.exc.DBAPIError as error:
            _rollback(connection)
            if _error_number(error) not in _LEASE_BUSY or attempt == 19:
                raise
        _pause(connection, 0.05 * (attempt + 1))
