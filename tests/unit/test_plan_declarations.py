"""Which plans may take the direct path is declared once, by their plan function.

``plans.prebuilt`` marks a plan function whose statements all come from
``DialectOps.cached``; the runtime reads the mark from the plan itself, so no call
site can claim it for a plan that builds statements per call (``delete_thread``
builds its ``IN`` lists of thread ids per call: it must stay on Core).
"""

from __future__ import annotations

from typing import Any

from lg_sqla.checkpoint import maintenance, operations, retention
from lg_sqla.plans import Outcome, Plan, Step, declared_prebuilt, is_prebuilt

# A plan is a generator: made, not started, it runs none of its body.
UNUSED: Any = None


def test_the_checkpointers_hot_calls_are_declared_prebuilt() -> None:
    made = [
        operations.get_tuple(UNUSED, UNUSED),
        operations.load_page(UNUSED, UNUSED),
        operations.put(UNUSED, UNUSED, UNUSED, UNUSED, UNUSED),
        operations.put_writes(UNUSED, UNUSED, UNUSED, UNUSED, UNUSED),
        operations.delta_history(UNUSED, UNUSED, UNUSED),
    ]
    assert all(is_prebuilt(plan) for plan in made)


def test_plans_with_statements_built_per_call_are_not() -> None:
    made = [
        operations.delete_thread(UNUSED, "t"),
        maintenance.delete_whole_threads(UNUSED, ["t"]),
        retention.get_tuple(UNUSED, UNUSED, UNUSED, False),
    ]
    assert not any(is_prebuilt(plan) for plan in made)
    assert not is_prebuilt(lambda: None)  # (not a plan at all)


def _two_steps() -> Plan[int]:
    first = yield Step(None)
    second = yield Step(None, fetch=True)
    return first.rowcount + second.rowcount


def test_a_plan_declared_prebuilt_by_its_builder_runs_the_same_steps() -> None:
    """``declared_prebuilt`` (the store's batches, prebuilt or not by their ops) hands
    the steps and outcomes through unchanged, and its result too."""
    plan = declared_prebuilt(_two_steps())
    assert is_prebuilt(plan) and not is_prebuilt(_two_steps())
    assert next(plan) == Step(None)
    assert plan.send(Outcome((), 2)) == Step(None, fetch=True)
    try:
        plan.send(Outcome((), 3))
    except StopIteration as done:
        assert done.value == 5
    else:
        raise AssertionError("the plan did not end")
