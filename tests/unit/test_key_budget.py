"""Every index fits InnoDB's 3072-byte key limit under utf8mb4 (4 bytes a character)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from lg_sqla.models import metadata

INNODB_MAX_KEY_BYTES = 3072
UTF8MB4_BYTES_PER_CHAR = 4


def _mysql_type(column: sa.Column) -> sa.types.TypeEngine:  # type: ignore[type-arg]
    dialect = mysql.dialect()
    type_ = column.type.dialect_impl(dialect)
    if isinstance(type_, sa.types.TypeDecorator):
        type_ = type_.load_dialect_impl(dialect)
    return type_


def _column_bytes(column: sa.Column) -> int:  # type: ignore[type-arg]
    impl = _mysql_type(column)
    if isinstance(impl, sa.String):
        assert impl.length is not None, f"{column} is unbounded and cannot be in a key"
        return impl.length * UTF8MB4_BYTES_PER_CHAR
    if isinstance(impl, sa.Integer):
        return 4
    if isinstance(impl, sa.DateTime):
        return 8
    if isinstance(impl, sa.Double):
        return 8
    raise AssertionError(f"{column} of type {impl!r} has no known key width")


def _indexes() -> list[tuple[str, list[sa.Column]]]:  # type: ignore[type-arg]
    found = []
    for table in metadata.tables.values():
        found.append((f"{table.name} primary key", list(table.primary_key.columns)))
        for index in table.indexes:
            found.append((f"{table.name} {index.name}", list(index.columns)))
    return found


def test_every_key_fits_innodb() -> None:
    widths = {name: sum(_column_bytes(c) for c in columns) for name, columns in _indexes()}
    assert widths, "no keys found"
    over = {name: width for name, width in widths.items() if width > INNODB_MAX_KEY_BYTES}
    assert not over, over
    # Figures documented in docs/schema.md; the blobs key is the widest.
    assert widths["checkpoint_writes primary key"] == (255 + 32 + 64 + 255) * 4 + 4
    assert widths["checkpoint_blobs primary key"] == (255 + 32 + 255 + 128) * 4
    # Store and cache tables key on MD5 digests of unbounded namespaces and keys.
    assert widths["store_items primary key"] == (32 + 32) * 4
    assert widths["store_vectors primary key"] == (32 + 32 + 255) * 4
    assert widths["cache_entries primary key"] == (32 + 32) * 4
    assert widths["checkpoint_retention primary key"] == 255 * 4
    assert max(widths.values()) == widths["checkpoint_blobs primary key"]


def test_long_text_columns_are_not_keys() -> None:
    for name, columns in _indexes():
        for column in columns:
            assert not isinstance(_mysql_type(column), sa.Text), (
                name,
                column,
            )
