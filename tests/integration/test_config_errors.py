"""Configuration mistakes end in errors that name the fix: a driver that is not
installed, a URL without a driver (what hosting platforms hand out), a saver whose
serializer cannot read the compressed or encrypted rows in the database."""

from __future__ import annotations

import sys

import pytest
from backends import Backend
from helpers import checkpoint, config, new_thread
from sqlalchemy.engine import make_url

from lg_sqla import AsyncSQLAlchemySaver, MissingDriverError, SQLAlchemySaver
from lg_sqla.serde import CompressedSerializer, EncryptedSerializer, WrongSerializerError

# --- a driver that is not installed (its import blocked, as on a bare `pip install lg_sqla`)


@pytest.mark.parametrize(
    ("url", "module", "extra"),
    [
        ("mysql+pymysql://u@127.0.0.1:1/db", "pymysql", "mysql"),
        ("mysql://u@127.0.0.1:1/db", "pymysql", "mysql"),
        ("mariadb://u@127.0.0.1:1/db", "pymysql", "mysql"),
        ("postgresql://u@127.0.0.1:1/db", "psycopg", "postgres"),
        ("postgres://u@127.0.0.1:1/db", "psycopg", "postgres"),
    ],
)
def test_missing_driver_names_the_extra_sync(
    monkeypatch: pytest.MonkeyPatch, url: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails
    with (
        pytest.raises(MissingDriverError, match=rf'pip install "lg_sqla\[{extra}\]"'),
        SQLAlchemySaver.from_conn_string(url),
    ):
        pass


@pytest.mark.parametrize(
    ("url", "module", "extra"),
    [
        ("mysql://u@127.0.0.1:1/db", "asyncmy", "async"),
        ("sqlite:///nowhere.sqlite", "aiosqlite", "async"),
        ("postgres://u@127.0.0.1:1/db", "psycopg", "postgres"),
    ],
)
async def test_missing_driver_names_the_extra_async(
    monkeypatch: pytest.MonkeyPatch, url: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(MissingDriverError, match=rf'pip install "lg_sqla\[{extra}\]"'):
        async with AsyncSQLAlchemySaver.from_conn_string(url):
            pass


# --- URLs without a driver open with lg_sqla's drivers ---------------------------------


def _driverless(url: str, scheme: str) -> str:
    parsed = make_url(url)
    plain = parsed.set(drivername=parsed.get_backend_name()).render_as_string(hide_password=False)
    return plain.replace(parsed.get_backend_name() + "://", scheme + "://", 1)


SCHEMES = {"postgres": ["postgres", "postgresql"], "mysql": ["mysql"], "sqlite": ["sqlite"]}
EXPECTED = {  # dialect -> (sync driver, async driver) lg_sqla picks
    "postgres": ("psycopg", "psycopg"),
    "mysql": ("pymysql", "asyncmy"),
    "sqlite": ("pysqlite", "aiosqlite"),
}


def test_driverless_urls_open_sync(backend: Backend) -> None:
    for scheme in SCHEMES[backend.name]:
        with SQLAlchemySaver.from_conn_string(_driverless(backend.sync_url, scheme)) as saver:
            assert saver.engine.dialect.driver == EXPECTED[backend.name][0]
            stored = saver.put(config(new_thread()), checkpoint({"a": 1}), {}, {"a": 1})
            got = saver.get_tuple(stored)
            assert got is not None and got.checkpoint["channel_values"] == {"a": 1}


async def test_driverless_urls_open_async(backend: Backend) -> None:
    for scheme in SCHEMES[backend.name]:
        url = _driverless(backend.async_url, scheme)
        async with AsyncSQLAlchemySaver.from_conn_string(url) as saver:
            assert saver.engine.dialect.driver == EXPECTED[backend.name][1]
            stored = await saver.aput(config(new_thread()), checkpoint({"a": 1}), {}, {"a": 1})
            got = await saver.aget_tuple(stored)
            assert got is not None and got.checkpoint["channel_values"] == {"a": 1}


# --- a serializer that cannot read what is stored ------------------------------------

KEY = bytes(range(32))
WRITERS = {
    "compressed": (lambda: CompressedSerializer(threshold_bytes=1), r"CompressedSerializer\(\)"),
    "encrypted": (
        lambda: EncryptedSerializer.gcm({"k1": KEY}, CompressedSerializer(threshold_bytes=1)),
        r"'k1'.*EncryptedSerializer.from_env\(CompressedSerializer\(\)\)",
    ),
}


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_wrong_serializer_is_named_sync(backend: Backend, kind: str) -> None:
    make_serde, named = WRITERS[kind]
    engine = backend.engine()
    try:
        writer = SQLAlchemySaver(engine, serde=make_serde())
        stored = writer.put(config(new_thread()), checkpoint({"a": "x" * 100}), {}, {"a": 1})
        with pytest.raises(WrongSerializerError, match=named):
            SQLAlchemySaver(engine).get_tuple(stored)
        assert writer.get_tuple(stored) is not None
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", sorted(WRITERS))
async def test_wrong_serializer_is_named_async(backend: Backend, kind: str) -> None:
    make_serde, named = WRITERS[kind]
    engine = backend.async_engine()
    try:
        writer = AsyncSQLAlchemySaver(engine, serde=make_serde())
        stored = await writer.aput(config(new_thread()), checkpoint({"a": "x" * 100}), {}, {"a": 1})
        with pytest.raises(WrongSerializerError, match=named):
            await AsyncSQLAlchemySaver(engine).aget_tuple(stored)
        assert await writer.aget_tuple(stored) is not None
    finally:
        await engine.dispose()
