"""Inspector and AsyncInspector offer the same queries, with one signature, each
documented once (on Inspector) and both faces documented."""

from __future__ import annotations

import inspect

from lg_sqla.inspection import AsyncInspector, Inspector


def _public(cls: type) -> dict[str, object]:
    return {n: v for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}


def test_both_inspectors_offer_the_same_queries_with_one_signature() -> None:
    sync, async_ = _public(Inspector), _public(AsyncInspector)
    assert set(sync) == set(async_)
    for name, method in sync.items():
        twin = async_[name]
        assert inspect.iscoroutinefunction(twin), name
        assert str(inspect.signature(method)) == str(inspect.signature(twin)), name  # type: ignore[arg-type]


def test_every_query_of_both_inspectors_is_documented() -> None:
    for cls in (Inspector, AsyncInspector):
        assert [n for n in _public(cls) if not inspect.getdoc(getattr(cls, n))] == []
    assert inspect.getdoc(AsyncInspector.history) == (
        "``Inspector.history``, awaited on the async saver; see it."
    )
