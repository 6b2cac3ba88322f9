"""`lg-sqla import` says which database failed: the source or the target, by URL."""

from __future__ import annotations

import sqlite3

import pytest

from lg_sqla.cli.common import CommandError
from lg_sqla.cli.importing import SOURCE, TARGET, blamed_on
from lg_sqla.errors import SchemaError

SOURCE_URL = "postgresql://reader:secret@old-db/app"
TARGET_URL = "postgresql://writer:secret@new-db/app"


def test_a_driver_error_while_reading_names_the_source_without_asking_for_a_report() -> None:
    """What the official saver's own driver raises carries no SQLAlchemy wrapper."""
    with pytest.raises(CommandError) as raised, blamed_on(SOURCE, SOURCE_URL):
        raise sqlite3.OperationalError("no such column: type")
    message = str(raised.value)
    assert message == (
        "the source database (postgresql://reader:***@old-db/app): "
        "OperationalError: no such column: type"
    )
    assert "new-db" not in message and "secret" not in message


def test_the_target_s_own_errors_name_the_target() -> None:
    with pytest.raises(CommandError) as raised, blamed_on(TARGET, TARGET_URL):
        raise SchemaError("lg_sqla's tables are missing: run `lg-sqla upgrade`")
    assert str(raised.value) == (
        "the target database (postgresql://writer:***@new-db/app): "
        "lg_sqla's tables are missing: run `lg-sqla upgrade`"
    )


def test_an_unexpected_error_of_the_target_is_still_reported_as_a_bug() -> None:
    with pytest.raises(CommandError) as raised, blamed_on(TARGET, TARGET_URL):
        raise TypeError("cannot serialize")
    assert str(raised.value).startswith("the target database (postgresql://writer:***@new-db/app)")
    assert "please report it" in str(raised.value)


def test_a_command_error_passes_unchanged() -> None:
    error = CommandError("already explained", 2)
    with pytest.raises(CommandError) as raised, blamed_on(SOURCE, SOURCE_URL):
        raise error
    assert raised.value is error
