"""OpenTelemetry's ``db.system.name`` for every URL form lg_sqla accepts."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from lg_sqla.telemetry import _system


@pytest.mark.parametrize(
    ("url", "system"),
    [
        ("sqlite://", "sqlite"),
        ("postgresql+psycopg://u@h/d", "postgresql"),
        ("mysql+pymysql://u@h/d", "mysql"),
        # SQLAlchemy names this dialect "mariadb" (not "mysql"): it was "other_sql".
        ("mariadb+pymysql://u@h/d", "mariadb"),
    ],
)
def test_db_system_name(url: str, system: str) -> None:
    assert _system(sa.create_engine(url).dialect) == system
