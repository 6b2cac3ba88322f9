"""lg_sqla.inspect without a database: sync/async parity and the pure helpers."""

from __future__ import annotations

import inspect as pyinspect

from lg_sqla.inspect import AsyncInspector, Inspector, next_nodes, node_of, summarize


def test_sync_and_async_inspectors_have_the_same_methods_and_signatures() -> None:
    def public(cls: type) -> dict[str, pyinspect.Signature]:
        return {
            name: pyinspect.signature(member)
            for name, member in vars(cls).items()
            if callable(member) and not name.startswith("_")
        }

    sync, async_ = public(Inspector), public(AsyncInspector)
    assert sync.keys() == async_.keys()
    assert {"threads", "history", "show", "diff", "writes", "write_stats", "latest"} <= set(sync)
    for name in sync:
        assert pyinspect.iscoroutinefunction(getattr(AsyncInspector, name)), name
        assert sync[name].parameters.keys() == async_[name].parameters.keys(), name
        for param, spec in sync[name].parameters.items():
            assert spec.default == async_[name].parameters[param].default, (name, param)


def test_node_of_task_paths() -> None:
    assert node_of("~__pregel_pull, agent") == "agent"
    assert node_of("~__pregel_push, 0000000001, 0000000000") == "<send>"
    assert node_of("") == "?"


def test_next_nodes_from_versions_only() -> None:
    doc = {
        "channel_versions": {"branch:to:a": "2", "branch:to:b": "3", "messages": "3"},
        "versions_seen": {"a": {"branch:to:a": "1"}, "b": {"branch:to:b": "3"}},
        "updated_channels": ["branch:to:a", "branch:to:b", "messages"],
    }
    assert next_nodes(doc) == ("a",)  # b has seen version 3 already
    doc["updated_channels"] = ["messages"]  # triggers consumed by the step that made it
    assert next_nodes(doc) == ()
    del doc["updated_channels"]  # format < 4: versions decide
    assert next_nodes(doc) == ("a",)
    # Integer-like versions compare as numbers, not strings ("10" > "9").
    assert next_nodes(
        {"channel_versions": {"branch:to:x": "10"}, "versions_seen": {"x": {"branch:to:x": "9"}}}
    ) == ("x",)


def test_summaries_are_bounded() -> None:
    view = summarize("x" * 10_000, width=50)
    assert view.type == "str" and view.size == 10_000 and len(view.preview) <= 50
    view = summarize(list(range(1000)))
    assert view.size == 1000 and len(view.preview) <= 120
