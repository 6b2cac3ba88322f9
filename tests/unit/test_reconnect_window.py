"""Which failures the reconnect window runs a call again after (``runtime.retry``), and
the options' checks. The failover itself is tested on real servers
(tests/integration/clusters/test_failover.py); this is its decision table, one row a
test, on SQLAlchemy's own error objects."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from lg_sqla import SQLAlchemySaver
from lg_sqla.cache import SQLAlchemyCache
from lg_sqla.dialects import ops_for
from lg_sqla.errors import InvalidInputError
from lg_sqla.runtime import retry
from lg_sqla.store import SQLAlchemyStore

OPS = ops_for(postgresql.dialect())  # type: ignore[no-untyped-call]
WINDOW = 30.0


def _error(*, invalidated: bool = False) -> sa.exc.DBAPIError:
    return sa.exc.OperationalError(
        "SELECT 1",
        {},
        Exception("server closed the connection"),
        connection_invalidated=invalidated,
    )


def _delay(error: sa.exc.DBAPIError, attempt: int, *, idempotent: bool) -> float | None:
    return retry.retry_delay(error, attempt, OPS, idempotent=idempotent, window_left=WINDOW)


@pytest.mark.parametrize("idempotent", [False, True])
def test_nothing_ran_every_call_waits_in_the_window(idempotent: bool) -> None:
    error = _error()
    retry.mark_not_started(error)
    for attempt in (1, 5, 40):
        delay = _delay(error, attempt, idempotent=idempotent)
        assert delay is not None and 0 < delay <= retry.RECONNECT_MAX_PAUSE_S
    assert retry.retry_delay(error, 3, OPS, window_left=0.0) is None  # the window is over


def test_a_dead_connection_once_at_once_then_only_idempotent_calls() -> None:
    error = _error(invalidated=True)
    assert _delay(error, 1, idempotent=False) == 0.0
    assert _delay(error, 2, idempotent=False) is None
    assert _delay(error, 2, idempotent=True) is not None


def test_an_unknown_commit_outcome_only_idempotent_calls() -> None:
    error = _error(invalidated=True)
    retry.mark_failed_at_commit(error)
    assert _delay(error, 1, idempotent=False) is None
    assert _delay(error, 1, idempotent=True) is not None


def test_an_error_at_commit_that_is_no_disconnect_is_raised() -> None:
    error = _error()
    retry.mark_failed_at_commit(error)
    assert _delay(error, 1, idempotent=True) is None


def test_a_partly_committed_call_is_never_run_again() -> None:
    error = _error(invalidated=True)
    retry.mark_not_started(error)
    retry.mark_partly_committed(error)
    assert _delay(error, 1, idempotent=True) is None


def test_a_pooler_refusal_runs_again_at_once_a_bounded_number_of_times() -> None:
    error = _error()
    retry.mark_run_again(error)
    assert _delay(error, 1, idempotent=False) == 0.0
    assert _delay(error, retry.MAX_ATTEMPTS, idempotent=False) is None


# Every owner of a runtime takes the two options: the savers, the store, the node cache.
OWNERS = [SQLAlchemySaver, SQLAlchemyStore, SQLAlchemyCache]


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("window", [-1, "30", float("nan"), True])
def test_a_bad_window_is_refused(owner: Any, window: object) -> None:
    with pytest.raises(InvalidInputError, match="reconnect_window"):
        owner(sa.create_engine("sqlite://"), reconnect_window=window)


@pytest.mark.parametrize("owner", OWNERS)
@pytest.mark.parametrize("timeout", [0, -2, "5", True])
def test_a_bad_call_timeout_is_refused(owner: Any, timeout: object) -> None:
    with pytest.raises(InvalidInputError, match="call_timeout"):
        owner(sa.create_engine("sqlite://"), call_timeout=timeout)


@pytest.mark.parametrize("owner", OWNERS)
def test_a_call_timeout_needs_a_driver_whose_connection_can_be_cut(owner: Any) -> None:
    with pytest.raises(InvalidInputError, match="sqlite\\+pysqlite"):
        owner(sa.create_engine("sqlite://"), call_timeout=5)
