# mypy: disable-error-code="attr-defined"
# Relaxed for this test module only (pyproject.toml [tool.mypy]: tests are strict otherwise).
"""`saver.with_allowlist` reaches the JsonPlusSerializer inside lg_sqla's serializers.

LangGraph's own implementation only knows its classes and would leave the
allowlist unapplied (logging a warning) for an encrypting/compressing stack.
"""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from lg_sqla import AsyncSQLAlchemySaver, SQLAlchemySaver
from lg_sqla.serde import CompressedSerializer, EncryptedSerializer


@dataclasses.dataclass
class Point:
    x: int


def test_with_allowlist_reaches_through_lg_sqla_serializers() -> None:
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    serde = EncryptedSerializer.gcm({"k1": bytes(32)}, CompressedSerializer(strict))
    engine = sa.create_engine("sqlite://")
    saver = SQLAlchemySaver(engine, serde=serde)
    clone = saver.with_allowlist([(__name__, "Point")])
    assert clone is not saver and clone.engine is saver.engine
    assert saver.serde is serde  # the original is untouched
    type_, data = clone.serde.dumps_typed(Point(3))
    assert clone.serde.loads_typed((type_, data)) == Point(3)
    # The original, strict and without the entry, does not revive it.
    assert saver.serde.loads_typed((type_, data)) != Point(3)
    inner = clone.serde.innermost
    assert (__name__, "Point") in inner._allowed_msgpack_modules


def test_async_saver_with_allowlist_returns_an_async_saver() -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine("sqlite+aiosqlite://")
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    saver = AsyncSQLAlchemySaver(engine, serde=EncryptedSerializer.gcm({"k1": bytes(32)}, strict))
    clone = saver.with_allowlist([(__name__, "Point")])
    assert isinstance(clone, AsyncSQLAlchemySaver) and clone is not saver
