# mypy: disable-error-code="misc,no-untyped-call"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""lg_sqla's timestamps: one UTC instant, stored the same whatever the caller's zone."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects import sqlite

from lg_sqla.types import UTCDateTime

ZONES = [
    dt.timezone.utc,
    dt.timezone(dt.timedelta(hours=5, minutes=30)),
    dt.timezone(-dt.timedelta(hours=11)),
]


@given(
    moment=st.datetimes(min_value=dt.datetime(1000, 1, 2), max_value=dt.datetime(9999, 12, 30)),
    zone=st.sampled_from(ZONES),
)
def test_sqlite_text_is_sqlalchemys_datetime_text_of_the_utc_instant(
    moment: dt.datetime, zone: dt.timezone
) -> None:
    """The SQLite bind processor writes what SQLAlchemy's DATETIME writes for the same
    instant in naive UTC, so rows of every lg_sqla version compare and sort alike."""
    dialect = sqlite.dialect()
    ours = UTCDateTime().bind_processor(dialect)
    aware = moment.replace(tzinfo=zone)
    naive_utc = aware.astimezone(dt.timezone.utc).replace(tzinfo=None)
    reference = sqlite.DATETIME().bind_processor(dialect)
    assert ours(aware) == reference(naive_utc)


def test_sqlite_text_keeps_zero_microseconds_and_refuses_naive_times() -> None:
    process = UTCDateTime().bind_processor(sqlite.dialect())
    assert process(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)) == (
        "2026-01-02 03:04:05.000000"
    )
    assert process(None) is None
    with pytest.raises(ValueError, match="timezone-aware"):
        process(dt.datetime(2026, 1, 2))


def test_sqlite_text_of_instants_in_and_out_of_the_last_second_formatted() -> None:
    """The SQLite processor reuses the text of the last second it formatted: instants
    in that second (in any zone), before and after it, each get their own text."""
    process = UTCDateTime().bind_processor(sqlite.dialect())
    reference = sqlite.DATETIME().bind_processor(sqlite.dialect())
    start = dt.datetime(2026, 12, 31, 23, 59, 58, tzinfo=dt.timezone.utc)
    offsets_us = [0, 999_999, 1, 1_000_000, 999_999, 1_000_001, 2_000_000, 7, 1_500_000]
    for offset in offsets_us:
        for zone in ZONES:
            aware = (start + dt.timedelta(microseconds=offset)).astimezone(zone)
            naive_utc = aware.astimezone(dt.timezone.utc).replace(tzinfo=None)
            assert process(aware) == reference(naive_utc)


@pytest.mark.parametrize("driver", ["psycopg", "pymysql", "asyncmy"])
def test_server_drivers_get_the_utc_instant(driver: str) -> None:
    """PostgreSQL keeps the zone (timestamptz); MySQL's DATETIME gets naive UTC."""
    from sqlalchemy.dialects.mysql import asyncmy, pymysql
    from sqlalchemy.dialects.postgresql import psycopg

    dialect = {"psycopg": psycopg, "pymysql": pymysql, "asyncmy": asyncmy}[driver].dialect()
    process = UTCDateTime().bind_processor(dialect)
    local = dt.datetime(2026, 3, 1, 0, 30, 0, 7, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    utc = dt.datetime(2026, 2, 28, 22, 30, 0, 7, tzinfo=dt.timezone.utc)
    expected = utc if driver == "psycopg" else utc.replace(tzinfo=None)
    assert process(local) == expected
    assert (process(local).tzinfo is None) == (driver != "psycopg")
    assert process(None) is None
    with pytest.raises(ValueError, match="timezone-aware"):
        process(dt.datetime(2026, 1, 2))
