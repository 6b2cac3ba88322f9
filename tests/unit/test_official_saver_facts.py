"""What the dialects know of LangGraph's own savers and of file databases (what
``lg-sqla import`` and the CLI ask them); nothing here connects."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from lg_sqla.dialects import DialectOps, GenericOps, ops_for
from lg_sqla.errors import NoOfficialSaverError


def _ops(url: str) -> DialectOps:
    return ops_for(make_url(url).get_dialect()())


@pytest.mark.parametrize(
    ("url", "table"),
    [
        ("sqlite:///x.sqlite", "writes"),
        ("postgresql+psycopg://u@h/db", "checkpoint_writes"),
        ("mysql+pymysql://u@h/db", "checkpoint_writes"),
        ("mariadb+pymysql://u@h/db", "checkpoint_writes"),
    ],
)
def test_official_writes_tables(url: str, table: str) -> None:
    assert _ops(url).official_writes_table == table


def test_no_official_saver_elsewhere() -> None:
    ops = GenericOps()
    assert ops.official_writes_table is None
    with pytest.raises(NoOfficialSaverError), ops.official_saver(make_url("oracle://u@h/db")):
        pass  # pragma: no cover


@pytest.mark.parametrize(
    ("url", "file"),
    [
        ("sqlite:///dir/x.sqlite", "dir/x.sqlite"),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///file:x.sqlite?mode=ro&uri=true", None),
        ("postgresql+psycopg://u@h/db", None),
    ],
)
def test_database_file(url: str, file: str | None) -> None:
    assert _ops(url).database_file(make_url(url)) == file


def test_only_sqlite_vacuums_a_file() -> None:
    assert _ops("sqlite://").vacuum_statement == "VACUUM"
    assert _ops("postgresql+psycopg://u@h/db").vacuum_statement is None
    assert _ops("mysql+pymysql://u@h/db").vacuum_statement is None
