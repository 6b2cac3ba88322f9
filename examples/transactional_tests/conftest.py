"""Transactional tests for an application that uses lg_sqla (docs/application.md).

Every test runs inside one database transaction that is rolled back at its end. The
app's ORM ``Session``, the checkpointer and the store are all bound to it, so nothing
a test writes (the app's rows, checkpoints, store items) is seen by the next test,
even when the app's own code calls ``session.commit()``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from lg_sqla import SQLAlchemySaver
from lg_sqla.store import SQLAlchemyStore

DATABASE_URL = os.environ["DATABASE_URL"]


@pytest.fixture(scope="session")
def engine() -> Iterator[sa.Engine]:
    migrating = sa.create_engine(DATABASE_URL)
    SQLAlchemySaver(migrating).setup()  # lg_sqla's tables, by lg_sqla's own migrations
    # ... and your application's: `alembic upgrade head`, or metadata.create_all(...)
    migrating.dispose()
    engine = sa.create_engine(DATABASE_URL)
    if engine.dialect.name == "sqlite":
        # SQLite: SQLAlchemy, not the driver, begins transactions, so that the session's
        # SAVEPOINTs nest inside the test's transaction (SQLAlchemy's SQLite docs,
        # "Serializable isolation / Savepoints / Transactional DDL").
        @sa.event.listens_for(engine, "connect")
        def _no_driver_transactions(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None

        @sa.event.listens_for(engine, "begin")
        def _begin(connection: sa.Connection) -> None:
            connection.exec_driver_sql("BEGIN")

    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def saver(engine: sa.Engine) -> SQLAlchemySaver:
    return SQLAlchemySaver(engine)


@pytest.fixture(scope="session")
def store(engine: sa.Engine) -> SQLAlchemyStore:
    return SQLAlchemyStore(engine)


@pytest.fixture
def connection(engine: sa.Engine) -> Iterator[sa.Connection]:
    """One connection, one transaction per test, rolled back at its end."""
    with engine.connect() as connection:
        transaction = connection.begin()
        try:
            yield connection
        finally:
            transaction.rollback()


@pytest.fixture
def session(connection: sa.Connection) -> Iterator[Session]:
    """The app's session in the test's transaction: its commit() releases a SAVEPOINT,
    the test's transaction still rolls everything back."""
    with Session(bind=connection, join_transaction_mode="create_savepoint") as session:
        yield session


@pytest.fixture
def bound_saver(saver: SQLAlchemySaver, session: Session) -> SQLAlchemySaver:
    """Compile the graph under test with this: checkpoints go into the test's transaction."""
    return saver.bound(session)


@pytest.fixture
def bound_store(store: SQLAlchemyStore, session: Session) -> SQLAlchemyStore:
    return store.bound(session)
