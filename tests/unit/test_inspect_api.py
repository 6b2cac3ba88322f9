"""lg_sqla.inspection without a database: sync/async parity and the pure helpers."""

from __future__ import annotations

import inspect as pyinspect

from lg_sqla.inspection import AsyncInspector, Inspector, next_nodes, node_of, summarize


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


def test_width_reaches_nested_strings() -> None:
    nested = {"messages": ["y" * 500], "note": "x" * 500}
    assert "x" * 300 in summarize(nested, width=2000).preview  # not cut at 120
    assert len(summarize(nested, width=80).preview) <= 80
    assert summarize(nested).value is nested  # the value itself travels with its preview


def test_list_changes_by_message_id_and_by_position() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from lg_sqla.inspection import list_change

    hi, reply = HumanMessage("hi", id="1"), AIMessage("hello", id="2")
    edited = HumanMessage("hi!", id="1")
    change = list_change([hi], [edited, reply])
    assert (change.appended, change.removed, change.replaced) == ([reply], [], [(hi, edited)])
    assert list_change([hi, reply], [reply]).removed == [hi]  # RemoveMessage(id="1")
    plain = list_change([1, 2, 3], [1, 9, 3, 4])
    assert (plain.appended, plain.removed, plain.replaced) == ([4], [], [(2, 9)])
    assert list_change([], ["a"]).appended == ["a"]


def test_conversations_render_as_chats_and_json_as_langchain_dicts() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_from_dict

    from lg_sqla.cli.values import jsonable_value, short_ids, value_lines

    long_question = "What is the weather like in Paris today? " * 10
    chat = [
        HumanMessage(long_question, id="h1"),
        AIMessage(
            "", id="a1", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}]
        ),
        ToolMessage("18°C", tool_call_id="c1", name="weather", id="t1"),
        AIMessage([{"type": "text", "text": "Sunny."}, {"type": "image_url"}], id="a2"),
    ]
    cut = value_lines(chat, "unused preview", 60)
    assert cut[0].startswith("human  What is the weather") and len(cut[0]) <= 7 + 60
    assert cut[1:] == [
        'ai     -> weather({"city": "Paris"}) [c1]',
        "tool   weather [c1]: 18°C",
        "ai     Sunny. [image_url]",
    ]
    whole = value_lines(chat, "unused preview", None)  # --full: every character
    assert whole[0] == "human  " + long_question
    assert messages_from_dict(jsonable_value(chat)) == chat  # LangChain's own format
    assert value_lines({"a": 1}, "dict [1] {'a': 1}", 120) == ["dict [1] {'a': 1}"]
    ids = ["1f1e9a42-1255-60f9", "1f1e9a42-1251-6d0c", "1f1e9b00-0000-6000"]
    assert short_ids(ids) == {i: i[:13] for i in ids}  # unique, not ending on "-"


def test_the_former_module_name_gives_the_same_objects() -> None:
    """``lg_sqla.inspect`` (the package's first name) re-exports ``lg_sqla.inspection``:
    code written against either name gets the very same classes and functions."""
    import lg_sqla.inspect as former
    import lg_sqla.inspection as inspection

    assert former.__all__ == inspection.__all__
    assert "Inspector" in former.__all__ and "summarize" in former.__all__
    for name in inspection.__all__:
        assert getattr(former, name) is getattr(inspection, name), name
    from lg_sqla.inspect import AsyncInspector as FormerAsync
    from lg_sqla.inspect import Inspector as FormerInspector

    assert FormerInspector is Inspector and FormerAsync is AsyncInspector


def test_the_package_exports_every_public_name_of_its_modules() -> None:
    """A public function or class added to a module of ``lg_sqla.inspection`` is
    importable from the package (and so from ``lg_sqla.inspect``) too."""
    import importlib
    import pkgutil

    import lg_sqla.inspection as inspection

    defined = set()
    for info in pkgutil.iter_modules(inspection.__path__):
        module = importlib.import_module(f"lg_sqla.inspection.{info.name}")
        defined |= {
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
        }
    assert defined, "no module found"
    assert defined <= set(inspection.__all__), sorted(defined - set(inspection.__all__))
