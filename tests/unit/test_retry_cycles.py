"""A failed call leaves no reference cycle behind (a frame holding its own exception):
under load, cycles wait for the garbage collector with the failed call's whole stack,
connections' cursors and rows included. With the collector off, the raised error must
be freed as soon as the caller lets go of it."""

from __future__ import annotations

import asyncio
import gc
import weakref
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
    raised: list[weakref.ref[BaseException]] = []
    for first_failed_outside in (False, True):  # the executors make the first attempt
        try:
            if first_failed_outside:
                retry.with_retries(lambda: None, OPS, failed=_refused())
            else:
                retry.with_retries(_attempt, OPS)
        except DBAPIError as error:
            raised.append(weakref.ref(error))
    assert len(raised) == 2 and [ref() for ref in raised] == [None, None]


def test_a_failed_async_attempt_leaves_no_cycle(no_gc: None) -> None:
    async def call() -> weakref.ref[BaseException]:
        try:
            await retry.awith_retries(_aattempt, OPS)
        except DBAPIError as error:
            return weakref.ref(error)
        raise AssertionError("not raised")

    assert asyncio.run(call())() is None
