"""Causal reads on Galera sessions (dialects.galera.prepare_galera_session), against a
fake DBAPI connection that answers like a server: what is sent, and when nothing is."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.dialects import mysql

from lg_sqla.dialects import MySQLOps
from lg_sqla.dialects.galera import SESSION_CHARSET_VARIABLES
from lg_sqla.errors import InvalidInputError

# What a session is asked once: wsrep_on and its character sets (mysql.check_session_charset).
SESSION_QUESTION = (
    "SHOW VARIABLES WHERE Variable_name IN ('wsrep_on', 'character_set_client',"
    " 'character_set_connection', 'character_set_results')"
)


class FakeServer:
    def __init__(
        self, wsrep_on: str | None, session: int = 0, global_: int = 0, charset: str = "utf8mb4"
    ) -> None:
        self.wsrep_on, self.session, self.global_ = wsrep_on, session, global_
        self.charset = charset
        self.sent: list[str] = []

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)


class FakeCursor:
    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.rows: list[Any] = []
        self.description: tuple[str, ...] | None = None

    def execute(self, sql: str) -> None:
        self.server.sent.append(sql)
        self.description = ("x",)
        if sql == SESSION_QUESTION:
            on = self.server.wsrep_on
            self.rows = [] if on is None else [("wsrep_on", on)]
            self.rows += [(name, self.server.charset) for name in SESSION_CHARSET_VARIABLES]
        elif sql.startswith("SELECT @@session.wsrep_sync_wait"):
            self.rows = [(self.server.session, self.server.global_)]
        elif sql.startswith("SET SESSION wsrep_sync_wait = "):
            self.server.session = int(sql.rsplit(" ", 1)[1])
            self.rows, self.description = [], None
        else:
            raise AssertionError(sql)

    def fetchall(self) -> list[Any]:
        return self.rows

    def close(self) -> None:
        pass


class FakePooled:
    def __init__(self, server: FakeServer) -> None:
        self.dbapi_connection = server
        self.info: dict[str, Any] = {}


def prepare(server: FakeServer, pooled: FakePooled | None = None, **options: Any) -> FakePooled:
    pooled = pooled or FakePooled(server)
    MySQLOps(mysql.dialect()).prepare_session(pooled, options)  # type: ignore[arg-type]
    return pooled


@pytest.mark.parametrize("wsrep_on", [None, "OFF"])  # MySQL without Galera; MariaDB's wsrep off
def test_not_galera_one_question_per_connection(wsrep_on: str | None) -> None:
    server = FakeServer(wsrep_on)
    pooled = prepare(server)
    prepare(server, pooled)
    assert server.sent == [SESSION_QUESTION]
    assert server.session == 0


@pytest.mark.parametrize("charset", ["latin1", "utf8mb3", None])
def test_a_session_not_in_utf8mb4_is_refused_without_another_question(
    charset: str | None,
) -> None:
    server = FakeServer("OFF", charset=charset)  # type: ignore[arg-type]
    pooled = FakePooled(server)
    for _ in range(2):  # each call refused; the server asked once
        with pytest.raises(InvalidInputError, match=r"\?charset=utf8mb4") as refused:
            prepare(server, pooled)
        assert f"character_set_results={charset or 'NULL'}" in str(refused.value)
    assert server.sent == [SESSION_QUESTION]


def test_galera_default_adds_the_read_bit_once() -> None:
    server = FakeServer("ON", session=2, global_=2)
    pooled = prepare(server)
    assert server.session == 3
    sent = len(server.sent)
    prepare(server, pooled)  # the next call on that connection: nothing sent
    assert len(server.sent) == sent


@pytest.mark.parametrize(
    ("session", "global_"),
    [(4, 0), (0, 1), (1, 1)],  # the user's own value; a 0 chosen for the session; already on
)
def test_galera_default_keeps_a_chosen_or_sufficient_value(session: int, global_: int) -> None:
    server = FakeServer("ON", session=session, global_=global_)
    prepare(server)
    assert server.session == session
    assert not any(sql.startswith("SET") for sql in server.sent)


def test_galera_option() -> None:
    server = FakeServer("ON", session=4, global_=0)
    prepare(server, lg_sqla_wsrep_sync_wait=3)
    assert server.session == 3
    server = FakeServer("ON")
    prepare(server, lg_sqla_wsrep_sync_wait=None)
    # Nothing set (only the charset question, which reads wsrep_on too).
    assert server.sent == [SESSION_QUESTION]
