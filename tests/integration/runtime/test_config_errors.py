"""Configuration mistakes end in errors that name the fix: a driver that is not
installed, a URL without a driver (what hosting platforms hand out), a saver whose
serializer cannot read the compressed or encrypted rows in the database."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from backends import Backend, EngineFactory
from helpers import checkpoint, config, new_thread
from langgraph.checkpoint.serde.base import SerializerProtocol
from modes import MODES, saver_from_url, saver_on
from sqlalchemy.engine import make_url

from lg_sqla import MissingDriverError
from lg_sqla.serde import CompressedSerializer, EncryptedSerializer, WrongSerializerError

# --- a driver that is not installed (its import blocked, as on a bare `pip install lg_sqla`)


@pytest.mark.parametrize(
    ("mode", "url", "module", "extra"),
    [
        ("sync", "mysql+pymysql://u@127.0.0.1:1/db", "pymysql", "mysql"),
        ("sync", "mysql://u@127.0.0.1:1/db", "pymysql", "mysql"),
        ("sync", "mariadb://u@127.0.0.1:1/db", "pymysql", "mysql"),
        ("sync", "postgresql://u@127.0.0.1:1/db", "psycopg", "postgres"),
        ("sync", "postgres://u@127.0.0.1:1/db", "psycopg", "postgres"),
        ("async", "mysql://u@127.0.0.1:1/db", "asyncmy", "async"),
        ("async", "sqlite:///nowhere.sqlite", "aiosqlite", "async"),
        ("async", "postgres://u@127.0.0.1:1/db", "psycopg", "postgres"),
    ],
    ids=lambda value: str(value).split("://")[0] if "://" in str(value) else str(value),
)
async def test_missing_driver_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, mode: str, url: str, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now fails
    with pytest.raises(MissingDriverError, match=rf'pip install "lg_sqla\[{extra}\]"'):
        async with saver_from_url(mode, url):
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


async def test_driverless_urls_open(backend: Backend, mode: str) -> None:
    for scheme in SCHEMES[backend.name]:
        url = _driverless(backend.async_url if mode == "async" else backend.sync_url, scheme)
        async with saver_from_url(mode, url) as saver:
            assert saver.target.engine.dialect.driver == EXPECTED[backend.name][MODES.index(mode)]
            stored = await saver.put(config(new_thread()), checkpoint({"a": 1}), {}, {"a": 1})
            got = await saver.get_tuple(stored)
            assert got is not None and got.checkpoint["channel_values"] == {"a": 1}


# --- a serializer that cannot read what is stored ------------------------------------

KEY = bytes(range(32))
WRITERS: dict[str, tuple[Callable[[], SerializerProtocol], str]] = {
    "compressed": (lambda: CompressedSerializer(threshold_bytes=1), r"CompressedSerializer\(\)"),
    "encrypted": (
        lambda: EncryptedSerializer.gcm({"k1": KEY}, CompressedSerializer(threshold_bytes=1)),
        r"'k1'.*EncryptedSerializer.from_env\(CompressedSerializer\(\)\)",
    ),
}


@pytest.mark.parametrize("kind", sorted(WRITERS))
async def test_wrong_serializer_is_named(
    make_engine: EngineFactory, backend: Backend, mode: str, kind: str
) -> None:
    make_serde, named = WRITERS[kind]
    engine = make_engine.for_mode(mode, backend)
    writer = saver_on(engine, serde=make_serde())
    stored = await writer.put(config(new_thread()), checkpoint({"a": "x" * 100}), {}, {"a": 1})
    with pytest.raises(WrongSerializerError, match=named):
        await saver_on(engine).get_tuple(stored)
    assert await writer.get_tuple(stored) is not None
