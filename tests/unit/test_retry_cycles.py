"""A failed call leaves no reference cycle behind (a frame holding its own exception):
under load, cycles wait for the garbage collector with the failed call's whole stack,
connections' cursors and rows included."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from lg_sqla.dialects import ops_for
from lg_sqla.runtime import retry

OPS = ops_for(sa.create_engine("sqlite://").dialect)


def _refused() -> DBAPIError:
    return DBAPIError("INSERT ...", {}, Exception("refused"))  # not retryable: raised


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _attempt() -> None:
    raise _refused()


async def _aattempt() -> None:
    raise _refused()


def test_a_failed_attempt_leaves_no_cycle(no_gc: None) -> None:
    for _ in range(20):
        with pytest.raises(DBAPIError):
            retry.with_retries(_attempt, OPS)
        with pytest.raises(DBAPIError):  # the executors' own first attempt failed
            retry.with_retries(lambda: None, OPS, failed=_refused())
    assert gc.collect() == 0


def test_a_failed_async_attempt_leaves_no_cycle(no_gc: None) -> None:
    async def calls() -> int:
        for _ in range(20):
            with pytest.raises(DBAPIError):
                await retry.awith_retries(_aattempt, OPS)
        return gc.collect()

    asyncio.run(calls())  # (the loop's own objects: its first run)
    gc.collect()
    assert asyncio.run(calls()) == 0
