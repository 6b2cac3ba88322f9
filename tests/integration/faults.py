"""Failures injected into real DBAPI connections, below SQLAlchemy.

:class:`Faults` wraps the connections an engine opens (SQLAlchemy's ``do_connect``
dialect event returns the wrapped connection; no ConnectionEvents listener), so what
it injects reaches both paths a call can take: SQLAlchemy Core's
``Connection.execute`` and the direct path (``lg_sqla.runtime.direct``), which runs
on the pooled DBAPI connection. It raises :class:`InjectedFault` instead of sending
the n-th statement, or a given (real driver) error instead of a COMMIT.
:class:`Cancels` cancels the calling asyncio task as it enters the n-th driver call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from backends import Backend


class InjectedFault(Exception):
    """The failure injected at the chosen statement."""


class Faults:
    """Counts the statements sent through the engine's DBAPI cursors and raises
    :class:`InjectedFault` instead of sending the ``n``-th, once armed.

    It wraps the DBAPI connections themselves (SQLAlchemy's ``do_connect`` dialect
    event returns the wrapped connection; no ConnectionEvents listener), so it sees
    the statements of both paths: Core's ``Connection.execute`` and the direct path
    (``lg_sqla.runtime.direct``), which runs on the pooled DBAPI connection.
    """

    def __init__(self) -> None:
        self.armed_at = 0  # 0: not armed
        self.seen: list[str] = []
        # Only statements holding this text are counted towards ``armed_at``.
        self.containing = ""
        self.counted = 0
        # Raised, first to last, by the next DBAPI commits instead of committing.
        self.commit_errors: list[BaseException] = []
        self.commits = 0

    def before(self, statement: str) -> None:
        if not self.armed_at:
            return
        self.seen.append(statement)
        if self.containing in statement:
            self.counted += 1
            if self.counted == self.armed_at:
                raise InjectedFault(f"statement {self.armed_at}: {statement[:80]}")

    @contextmanager
    def at(self, n: int, containing: str = "") -> Iterator[list[str]]:
        """Armed at the ``n``-th statement (of those holding ``containing``); yields
        every statement sent meanwhile, the failed one included."""
        self.armed_at, self.seen, self.containing, self.counted = n, [], containing, 0
        try:
            yield self.seen
        finally:
            self.armed_at = 0

    def install(self, engine: sa.Engine) -> None:
        def connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
            return _FaultyConnection(dialect.connect(*cargs, **cparams), self)

        sa.event.listen(engine, "do_connect", connect)
        assert not engine._has_events, "the fault injection must not need a ConnectionEvents hook"

    def install_on_core(self, engine: sa.Engine) -> None:
        """:meth:`install` for drivers whose connections cannot be wrapped (psycopg2's
        extras check the connection's type; MariaDB Connector/Python's C cursor reads
        its connection's own struct): a ConnectionEvents listener, which sees Core's
        statements and keeps every call on Core, where those drivers run anyway. The
        armed statement is sent with ``INJECTED_SQL_FAULT`` appended, so the server
        refuses it (a syntax error: the driver's own error, wrapped by SQLAlchemy);
        raising from the listener instead left MariaDB Connector/Python's cursor in a
        state that crashed the process on a later call."""

        def before(
            _conn: Any, _cursor: Any, statement: str, parameters: Any, *_args: Any
        ) -> tuple[str, Any]:
            try:
                self.before(statement)
            except InjectedFault:
                return f"{statement} {INJECTED_SQL_FAULT}", parameters
            return statement, parameters

        sa.event.listen(engine, "before_cursor_execute", before, retval=True)


# What ``Faults.install_on_core`` appends to the armed statement.
INJECTED_SQL_FAULT = "lg_sqla_injected_fault"


class Proxy:
    """Forwards every attribute of the wrapped object, reads and writes."""

    def __init__(self, wrapped: Any, faults: Any) -> None:
        object.__setattr__(self, "_wrapped", wrapped)
        object.__setattr__(self, "_faults", faults)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._wrapped, name, value)

    # Drivers check what they are given (psycopg's TypeInfo.fetch: "expected
    # Connection"): the proxy passes isinstance() as the object it wraps.
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._wrapped)

    def __enter__(self) -> Any:
        self._wrapped.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._wrapped.__exit__(*exc)


class _FaultyConnection(Proxy):
    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return _FaultyCursor(self._wrapped.cursor(*args, **kwargs), self._faults)

    def commit(self) -> Any:
        self._faults.commits += 1
        if self._faults.commit_errors:
            raise self._faults.commit_errors.pop(0)
        return self._wrapped.commit()


class _FaultyCursor(Proxy):
    def execute(self, statement: str, *args: Any, **kwargs: Any) -> Any:
        self._faults.before(statement)
        return self._wrapped.execute(statement, *args, **kwargs)

    def executemany(self, statement: str, *args: Any, **kwargs: Any) -> Any:
        self._faults.before(statement)
        return self._wrapped.executemany(statement, *args, **kwargs)

    def __iter__(self) -> Any:
        return iter(self._wrapped)


class Cancels:
    """Cancels the running asyncio task as it enters the ``n``-th driver call (a
    cursor's execute or executemany, a connection's commit or rollback) of an async
    engine's connections, once armed: the driver then meets the cancellation at its
    first await inside that call, mid-statement or mid-COMMIT, on either path."""

    def __init__(self) -> None:
        self.armed_at = 0  # 0: not armed
        self.calls = 0

    def arm(self, n: int) -> None:
        self.armed_at, self.calls = n, 0

    def before(self) -> None:
        if not self.armed_at:
            return
        self.calls += 1
        if self.calls == self.armed_at:
            task = asyncio.current_task()
            assert task is not None, "a driver call outside a task"
            task.cancel()

    def install(self, engine: sa.Engine) -> None:
        def connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
            return _CancellingConnection(dialect.connect(*cargs, **cparams), self)

        sa.event.listen(engine, "do_connect", connect)
        assert not engine._has_events, "cancelling must not need a ConnectionEvents hook"


class _CancellingConnection(Proxy):
    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        return _CancellingCursor(self._wrapped.cursor(*args, **kwargs), self._faults)

    def commit(self) -> Any:
        self._faults.before()
        return self._wrapped.commit()

    def rollback(self) -> Any:
        self._faults.before()
        return self._wrapped.rollback()


class _CancellingCursor(Proxy):
    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._faults.before()
        return self._wrapped.execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        self._faults.before()
        return self._wrapped.executemany(*args, **kwargs)

    def __iter__(self) -> Any:
        return iter(self._wrapped)


def kill_sessions(backend: Backend) -> int:
    """End every other session of the backend's database from an admin connection
    (PostgreSQL ``pg_terminate_backend``: AdminShutdown; MariaDB ``KILL``: 2013 Lost
    connection), what a server restart does to a pool; how many were ended."""
    engine = backend.engine(poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            if backend.name == "postgres":
                return len(
                    conn.execute(
                        sa.text(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        )
                    ).all()
                )
            ids = conn.execute(
                sa.text(
                    "SELECT id FROM information_schema.processlist"
                    " WHERE db = DATABASE() AND id <> CONNECTION_ID()"
                )
            ).scalars()
            killed = 0
            for session in ids:
                # (A session may end by itself meanwhile: MariaDB then answers 1094.)
                try:
                    conn.exec_driver_sql(f"KILL {int(session)}")
                except sa.exc.DBAPIError as error:
                    if "1094" not in str(error):
                        raise
                    continue
                killed += 1
            return killed
    finally:
        engine.dispose()
