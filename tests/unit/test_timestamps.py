# mypy: disable-error-code="misc,no-untyped-call"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""lg_sqla's timestamps: one UTC instant, stored the same whatever the caller's zone."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.dialects import sqlite

from lg_sqla.shared import utc_now
from lg_sqla.types import UTCDateTime, naive_utc_text, naive_utc_text_now

ZONES = [
    dt.timezone.utc,
    dt.timezone(dt.timedelta(hours=5, minutes=30)),
    dt.timezone(-dt.timedelta(hours=11)),
]


@given(micros=st.integers(min_value=0, max_value=253_402_300_799_999_999))
def test_the_clocks_text_is_the_sqlite_text_of_its_instant(micros: int) -> None:
    """A SQLite store's lone put stamps its row from the clock as text (no datetime):
    the text the SQLite bind processor writes for the same instant."""
    instant = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)
    assert naive_utc_text(micros) == UTCDateTime().bind_processor(sqlite.dialect())(instant)


def test_the_clocks_text_reads_the_clock_of_utc_now() -> None:
    processor = UTCDateTime().bind_processor(sqlite.dialect())
    for _ in range(1000):
        before, text, after = processor(utc_now()), naive_utc_text_now(), processor(utc_now())
        assert before <= text <= after, (before, text, after)


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


@given(
    moments=st.lists(
        st.datetimes(min_value=dt.datetime(1000, 1, 2), max_value=dt.datetime(9999, 12, 30)),
        min_size=1,
        max_size=12,
    ),
    zone=st.sampled_from(ZONES),
    seconds=st.integers(min_value=-130, max_value=130),
)
def test_one_sqlite_processor_writes_each_instant_of_a_sequence(
    moments: list[dt.datetime], zone: dt.timezone, seconds: int
) -> None:
    """One processor binds every timestamp of an engine: what it keeps between values
    (the last value's text, its minute's) never leaks into the next value's text, nor
    does a repeated value (the same object, as a put binds it twice) read differently."""
    dialect = sqlite.dialect()
    ours = UTCDateTime().bind_processor(dialect)
    reference = sqlite.DATETIME().bind_processor(dialect)
    # Each moment, a moment a few seconds off (often the same minute, or the next),
    # and each again as the same object.
    for moment in moments:
        near = moment + dt.timedelta(seconds=seconds) if moment.year < 9999 else moment
        for aware in (moment.replace(tzinfo=zone), near.replace(tzinfo=dt.timezone.utc)):
            naive_utc = aware.astimezone(dt.timezone.utc).replace(tzinfo=None)
            assert ours(aware) == reference(naive_utc)
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
    """PostgreSQL keeps the zone (timestamptz); MySQL's DATETIME gets naive UTC: the
    very SQL literal the driver writes for the naive UTC datetime (PyMySQL and asyncmy
    put parameters into the SQL text), from its text."""
    from asyncmy import converters as asyncmy_literals
    from pymysql import converters as pymysql_literals
    from sqlalchemy.dialects.mysql import asyncmy, pymysql
    from sqlalchemy.dialects.postgresql import psycopg

    dialect = {"psycopg": psycopg, "pymysql": pymysql, "asyncmy": asyncmy}[driver].dialect()
    process = UTCDateTime().bind_processor(dialect)
    utc = dt.datetime(2026, 2, 28, 22, 30, 0, 7, tzinfo=dt.timezone.utc)
    for microsecond in (7, 0):
        utc = utc.replace(microsecond=microsecond)
        local = utc.astimezone(dt.timezone(dt.timedelta(hours=2)))
        if driver == "psycopg":
            assert process(local) == utc
            assert process(local).tzinfo is dt.timezone.utc
            continue
        literal = {"pymysql": pymysql_literals, "asyncmy": asyncmy_literals}[driver]
        naive_utc = utc.replace(tzinfo=None)
        assert process(local) == naive_utc.isoformat(" ", "microseconds")
        # (the same instant: the fraction is written out even where it is 0)
        read_back = dt.datetime.fromisoformat(literal.escape_item(process(local), "utf8mb4")[1:-1])
        assert read_back == naive_utc
        if microsecond:
            assert literal.escape_item(process(local), "utf8mb4") == literal.escape_item(
                naive_utc, "utf8mb4"
            )
    assert process(None) is None
    with pytest.raises(ValueError, match="timezone-aware"):
        process(dt.datetime(2026, 1, 2))


@pytest.mark.parametrize(
    "module",
    [
        "sqlite.pysqlite",
        "sqlite.aiosqlite",
        "mysql.pymysql",
        "mysql.asyncmy",
        "mysql.mysqldb",
        "postgresql.psycopg",
        "postgresql.psycopg2",
        "postgresql.asyncpg",
    ],
)
def test_writes_stamp_text_exactly_where_timestamps_bind_as_text(module: str) -> None:
    """``DialectOps.stamps_text`` (a put and put_writes then stamp their rows with the
    clock read as text) holds exactly where the timestamp columns bind a datetime as
    that text, and there the text is bound as it is, the same as its datetime's."""
    import importlib

    from lg_sqla.dialects import ops_for

    dialect = importlib.import_module(f"sqlalchemy.dialects.{module}").dialect()
    process = UTCDateTime().bind_processor(dialect)
    instant = utc_now()
    bound = instant if process is None else process(instant)
    assert ops_for(dialect).stamps_text == isinstance(bound, str)
    if ops_for(dialect).stamps_text:
        assert process is not None
        text = naive_utc_text_now()
        assert process(text) is text
        assert process(None) is None
        assert bound == naive_utc_text(
            (instant - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc))
            // dt.timedelta(microseconds=1)
        )
