"""Portable column types: one definition, the right physical type on every dialect.

Everything a dialect needs to store our data well is decided here, by type
variants, so the models read as the logical schema.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import JSON, DateTime, Dialect, LargeBinary, String, Text
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.types import TypeDecorator, TypeEngine

from lg_sqla.dialects import (
    binds_timestamps_as_text,
    is_mysql_family,
    mysql_json_text,
    mysql_key_collation,
)
from lg_sqla.shared import json_text_or_null

# The table options of every lg_sqla table on MySQL and MariaDB. SQLAlchemy reads a
# table's options by its dialect's name, and the dialect of a mariadb:// URL is named
# "mariadb": with the mysql_ keys alone, such a table got the server's default charset.
MYSQL_TABLE_OPTIONS: dict[str, str] = {
    "mysql_charset": "utf8mb4",
    "mysql_collate": "utf8mb4_bin",
    "mariadb_charset": "utf8mb4",
    "mariadb_collate": "utf8mb4_bin",
}


class KeyString(TypeDecorator[str]):
    """A VARCHAR used in keys: exact, case-, accent- and trailing-space-sensitive.

    MySQL/MariaDB default collations are case-insensitive, and even utf8mb4_bin
    pads spaces, so threads "A", "a" and "a " would collide; we use the binary
    NO PAD collation of each server (see dialects.mysql_key_collation).
    """

    impl = String
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        length = cast(String, self.impl_instance).length
        if is_mysql_family(dialect):
            return dialect.type_descriptor(
                mysql.VARCHAR(length, charset="utf8mb4", collation=mysql_key_collation(dialect))
            )
        return dialect.type_descriptor(String(length))


def key_string(length: int) -> TypeEngine[str]:
    return KeyString(length)


class OrderedKeyString(KeyString):
    """A :class:`KeyString` whose ``<`` and ``>`` compare code points, so that a range
    of an index on it selects the strings that start with a given text.

    MySQL/MariaDB's binary collation already compares bytes (UTF-8: code point
    order); PostgreSQL's default collation follows linguistic rules, "C" compares bytes.
    """

    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            length = cast(String, self.impl_instance).length
            return dialect.type_descriptor(postgresql.VARCHAR(length, collation="C"))
        return super().load_dialect_impl(dialect)


def ordered_key_string(length: int) -> TypeEngine[str]:
    return OrderedKeyString(length)


def long_text() -> TypeEngine[str]:
    """Unbounded text (namespaces, task paths): TEXT is 64 KiB on MySQL, so MEDIUMTEXT."""
    return Text().with_variant(
        mysql.MEDIUMTEXT(charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def big_binary() -> TypeEngine[bytes]:
    """Binary payloads up to 4 GiB on MySQL (BLOB is 64 KiB), BYTEA on PostgreSQL."""
    return LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")


def vector_blob() -> TypeEngine[Any]:
    """A store embedding: float32 little-endian bytes, ``real[]`` on PostgreSQL (which
    pgvector casts to its ``vector``); see ``StoreSQL.vector_value``."""
    return big_binary().with_variant(postgresql.ARRAY(postgresql.REAL()), "postgresql")


class DocumentJSON(TypeDecorator[Any]):
    """JSON documents: JSONB on PostgreSQL (metadata filters run in SQL and index
    well), JSON on MySQL/MariaDB, JSON text on SQLite and any other dialect.

    Written by lg_sqla, whatever serializer the engine was given: by orjson
    (``json_text``: a checkpoint document is serialized on every ``put``, a
    store value on every store ``put``, about 10x faster than ``json.dumps``; the
    stored JSON value is the same), and on MySQL/MariaDB in the canonical form of
    ``dialects.mysql_json_text`` so keys of any name can be found. Read by the
    driver's own JSON type (SQLAlchemy's dialect implementation of JSONB/JSON).

    One decorator choosing its type per dialect, not ``with_variant`` decorators:
    SQLAlchemy hands a variant that is itself a ``TypeDecorator`` out as it is, its
    ``impl`` never adapted to the driver (``dialect.type_descriptor`` finds no
    entry for the decorator's class). psycopg2's JSONB then lost SQLAlchemy's
    ``_PGJSONB``, whose results psycopg2 parses itself, and rows failed in
    ``json.loads`` on the dicts psycopg2 returns.
    """

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.JSONB())
        return dialect.type_descriptor(JSON())

    def bind_processor(self, dialect: Dialect) -> Any:
        if not is_mysql_family(dialect):
            return json_text_or_null

        def process(value: Any) -> str | None:
            return None if value is None else mysql_json_text(value)

        return process


def json_document() -> TypeEngine[Any]:
    """JSON documents (see :class:`DocumentJSON`)."""
    return DocumentJSON()


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on every dialect.

    MySQL DATETIME and SQLite have no time zone: we store naive UTC there and
    re-attach UTC on read, so retention cut-offs compare the same everywhere.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if is_mysql_family(dialect):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime(timezone=True))

    def bind_processor(self, dialect: Dialect) -> Any:
        # process_bind_param's conversion in one closure, without TypeDecorator's
        # layers: with three timestamps per put, they took 20 of its 45 us of
        # parameter processing on SQLite (SQLAlchemy's DATETIME formatting included).
        if binds_timestamps_as_text(dialect):
            # On MySQL, the very literal those drivers send for a naive datetime; a
            # string they only quote.
            return naive_datetime_text()
        if self.load_dialect_impl(dialect).bind_processor(dialect) is not None:
            return super().bind_processor(dialect)  # a driver that needs its own conversion
        keeps_zone = dialect.name == "postgresql"

        def driver_value(value: dt.datetime | None) -> dt.datetime | None:
            if value is None:
                return None
            return _as_utc(value) if keeps_zone else _as_utc(value).replace(tzinfo=None)

        return driver_value

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        value = _as_utc(value)
        return value if dialect.name == "postgresql" else value.replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        assert isinstance(value, dt.datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc)


def naive_datetime_text() -> Callable[[Any], str | None]:
    """A bind processor writing aware datetimes as naive UTC text, "YYYY-MM-DD
    HH:MM:SS.ffffff": the DATETIME text SQLAlchemy writes on SQLite, and the literal
    MySQL's text-protocol drivers send for a naive datetime. A str is that text
    already (a write's stamp read from the clock as text, :func:`naive_utc_text_now`,
    where ``DialectOps.stamps_text``): bound as it is.

    A put binds its one timestamp two or three times (created_at, updated_at; a batch
    also each read's ``now``), and datetime's C formatting costs ~15k instructions a
    value (``isoformat``'s format string and UTC offset): the last value's text is
    kept (datetimes are immutable: the same object, the same text), and the text of
    its minute ("YYYY-MM-DD HH:MM:"), so a new value formats only its seconds."""
    last: tuple[dt.datetime | None, str] = (None, "")
    minute: tuple[int, str] = (-1, "")

    def naive_text(value: Any) -> str | None:  # (a datetime, its text, or None)
        nonlocal last, minute
        if type(value) is str or value is None:
            given: str | None = value  # (no typing.cast: a call per column bound)
            return given
        seen = last  # (one read: another thread may replace it meanwhile)
        if seen[0] is value:
            return seen[1]
        when = value if value.tzinfo is _UTC else _as_utc(value)
        minute_number = (when.toordinal() * 24 + when.hour) * 60 + when.minute
        known = minute
        if known[0] != minute_number:
            known = minute = (minute_number, when.isoformat(" ", "minutes")[:16] + ":")
        # (seconds and microseconds from tables: "%02d.%06d" formatting cost ~2.7k more
        # instructions per put, callgrind)
        micro = when.microsecond
        text = known[1] + _SECONDS[when.second] + _DIGITS3[micro // 1000] + _DIGITS3[micro % 1000]
        last = (value, text)
        return text

    return naive_text


_UTC = dt.timezone.utc
# "SS." of each second, and the three digits of 0-999 (``naive_datetime_text``).
_SECONDS = tuple(f"{second:02d}." for second in range(60))
_DIGITS3 = tuple(f"{number:03d}" for number in range(1000))
# (the minute of naive_utc_text's last call, and its text)
_clock_minute: tuple[int, str] = (-1, "")
# (the second of naive_utc_text_now's last call, and its text up to the fraction's
# digits: "YYYY-MM-DD HH:MM:SS.")
_clock_second: tuple[int, str] = (-1, "")
_time_ns = time.time_ns


def naive_utc_text_now() -> str:
    """Now, as the text :func:`naive_datetime_text` writes for ``shared.utc_now()``
    (the same clock, floored to the microsecond as ``datetime.now`` floors it), read
    without a datetime: a SQLite store's lone put stamps its row with this (about 4k
    instructions a put fewer than a datetime made, then formatted), and so do the
    checkpointer's put and put_writes where ``DialectOps.stamps_text`` (~4.5k
    instructions, not ~17k for a datetime and two columns' formatting). The text of
    the current second is kept: a busy writer stamps many rows a second."""
    global _clock_second
    micros = _time_ns() // 1000
    seconds = micros // 1_000_000
    known = _clock_second  # (one read: another thread may replace it meanwhile)
    if known[0] != seconds:
        known = _clock_second = (seconds, naive_utc_text(seconds * 1_000_000)[:20])
    micro = micros % 1_000_000
    return known[1] + _DIGITS3[micro // 1000] + _DIGITS3[micro % 1000]


def naive_utc_text(micros: int) -> str:
    """The instant ``micros`` microseconds after the Unix epoch as the text
    :func:`naive_datetime_text` writes for it; its minute's text is kept, as there."""
    global _clock_minute
    seconds, micro = divmod(micros, 1_000_000)
    minute_number, second = divmod(seconds, 60)
    known = _clock_minute  # (one read: another thread may replace it meanwhile)
    if known[0] != minute_number:
        at = dt.datetime.fromtimestamp(minute_number * 60, _UTC)
        known = _clock_minute = (minute_number, at.isoformat(" ", "minutes")[:16] + ":")
    return known[1] + _SECONDS[second] + _DIGITS3[micro // 1000] + _DIGITS3[micro % 1000]


def _as_utc(value: dt.datetime) -> dt.datetime:
    if value.tzinfo is None:
        raise ValueError("lg_sqla timestamps must be timezone-aware")
    return value.astimezone(dt.timezone.utc)


def timestamp() -> TypeEngine[dt.datetime]:
    """A timezone-aware UTC timestamp (DATETIME(6) on MySQL keeps microseconds)."""
    return UTCDateTime()
