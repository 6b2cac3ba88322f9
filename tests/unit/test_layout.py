"""The package's floor plan holds: concerns import each other in one direction only.

Each module belongs to a concern: its sub-package (``checkpoint``, ``store``,
``dialects``, ``runtime``, ``serde``, ``cli``...) or, for a top-level module, the
module itself (``plans``, ``shared``, ``models``...). Every import between concerns is
one the README's table allows (``ALLOWED``, kept equal to that table); the imports
form no circle; no concern imports another's private module (``store._plan``); the
features never import each other, and neither the runtime nor the dialects import a
feature. Imports for type checking only (``if TYPE_CHECKING:``) do not count: they
create no run-time dependency. No module is longer than ``MAX_MODULE_LINES``, no
function (or method) than ``MAX_FUNCTION_LINES``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "lg_sqla"
README = PACKAGE.parent / "README.md"

# The README's "What may import what" table, as data: concern -> the concerns it may
# import. A new concern, or a new kind of import, is a decision: make it in both places.
FOUNDATION = frozenset({"plans", "shared", "errors", "limits", "internals"})
SCHEMA = frozenset({"types", "models", "migrate", "engines"})
FEATURES = frozenset({"checkpoint", "store", "cache"})
_EXECUTION = frozenset({"dialects", "runtime"})
ALLOWED: dict[str, frozenset[str]] = {
    "plans": frozenset(),
    "shared": frozenset(),
    "errors": frozenset(),
    "limits": frozenset(),
    "internals": frozenset(),
    "sweeper": frozenset(),
    "serde": frozenset({"errors"}),
    "dialects": frozenset({"plans", "errors", "limits", "internals"}),
    "types": frozenset({"dialects", "shared"}),
    "migrate": frozenset({"dialects", "errors"}),
    "engines": frozenset({"dialects", "errors", "internals"}),
    "models": frozenset({"limits", "types", "migrate"}),
    "runtime": FOUNDATION | {"dialects", "migrate"},
    "cache": FOUNDATION | SCHEMA | _EXECUTION,
    "store": FOUNDATION | SCHEMA | _EXECUTION | {"sweeper"},
    "checkpoint": FOUNDATION | SCHEMA | _EXECUTION | {"sweeper", "serde"},
    # The tools over checkpoints read the checkpointer's codec and plans.
    "inspection": FOUNDATION | SCHEMA | _EXECUTION | {"serde", "checkpoint"},
    "importer": FOUNDATION | SCHEMA | _EXECUTION | {"serde", "checkpoint"},
    "partitioning": FOUNDATION | SCHEMA | {"dialects"},
    "distributing": FOUNDATION | SCHEMA | {"dialects"},
    # OpenTelemetry: wraps the features' public calls and the runtime's entry points.
    "telemetry": FOUNDATION | _EXECUTION | FEATURES,
    "inspect": frozenset({"inspection"}),  # the former name of inspection: a re-export
    "lg_sqla": FOUNDATION,  # the package's __init__
    "cli": frozenset(),  # every concern but __main__: filled in below
    "__main__": frozenset({"cli"}),
}
ALLOWED["cli"] = frozenset(ALLOWED) - {"cli", "__main__"}

# No module longer than this. Modules allowed to be longer for now, each with why and
# until when: none.
MAX_MODULE_LINES = 800
LONG_MODULES: dict[str, str] = {}
# A function's lines from its ``def`` to its last line (docstring and comments
# included; decorators not), so that each one reads on a screen.
MAX_FUNCTION_LINES = 60
# "module:function" -> why it is longer for now. Each is a debt: the test fails once
# it is split (remove it here), as it does for any other function over the limit.
LONG_FUNCTIONS: dict[str, str] = {
    "lg_sqla/store/_search.py:_search_select": "the store's search speed work owns it",
    "lg_sqla/store/_search.py:_approximate_pages": "the store's search speed work owns it",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _concern(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "lg_sqla"


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(path: Path) -> list[str]:
    """Every lg_sqla module ``path`` imports at run time (function-level ones too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = (
        _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    )
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name.startswith("lg_sqla"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.startswith("lg_sqla"):
                # `from lg_sqla import x` names a module x where one exists.
                for alias in node.names:
                    candidate = f"{base}.{alias.name}"
                    is_module = (PACKAGE.parent / Path(*candidate.split("."))).with_suffix(
                        ".py"
                    ).exists() or (PACKAGE.parent / Path(*candidate.split("."))).is_dir()
                    found.append(candidate if is_module else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        here = _concern(_module_name(path))
        for imported in _imports(path):
            there = _concern(imported)
            if there != here and there != "lg_sqla":
                graph.setdefault(here, set()).add(there)
    return graph


def test_concerns_import_each_other_without_a_circle() -> None:
    graph = _graph()
    cycles: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in path:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif len(path) < 20:
                walk(nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    assert not cycles, sorted({" -> ".join(c) for c in cycles})


def test_no_concern_imports_another_ones_private_module() -> None:
    offences = []
    for path in PACKAGE.rglob("*.py"):
        here = _concern(_module_name(path))
        for imported in _imports(path):
            private = any(part.startswith("_") for part in imported.split(".")[1:])
            if private and _concern(imported) != here:
                offences.append(f"{_module_name(path)} imports {imported}")
    assert not offences, offences


def test_the_bottom_layers_import_nothing_above_them() -> None:
    """The plan protocol and the shared helpers are what every layer may use: they
    import no other part of lg_sqla; the dialects know plans, not executors."""
    graph = _graph()
    assert graph.get("plans", set()) == set()
    assert graph.get("shared", set()) == set()
    assert graph.get("internals", set()) == set()
    assert graph.get("dialects", set()) <= {"plans", "errors", "limits", "internals"}


def test_every_import_between_concerns_is_in_the_table() -> None:
    graph = _graph()
    unknown = sorted(set(graph) - set(ALLOWED))
    assert not unknown, f"concerns missing from ALLOWED (and the README's table): {unknown}"
    offences = sorted(
        f"{here} imports {there}"
        for here, theirs in graph.items()
        for there in theirs - ALLOWED[here]
    )
    assert not offences, offences


def test_the_features_never_import_each_other() -> None:
    graph = _graph()
    for feature in sorted(FEATURES):
        assert not (graph.get(feature, set()) & FEATURES), (feature, graph.get(feature))
        assert not (ALLOWED[feature] & FEATURES), feature


def test_the_runtime_and_the_dialects_import_no_feature() -> None:
    """Execution and databases know plans, not what the plans are for: no feature, no
    tool over the features (inspection, importer), no command line."""
    above = FEATURES | {"inspection", "inspect", "importer", "partitioning", "cli"}
    graph = _graph()
    for concern in ("runtime", "dialects"):
        assert not (graph.get(concern, set()) & above), (concern, graph.get(concern))
        assert not (ALLOWED[concern] & above), concern
    assert "runtime" not in ALLOWED["dialects"] and "runtime" not in graph.get("dialects", ())


def _readme_table() -> dict[str, frozenset[str]]:
    """The README's "What may import what" table, its words expanded to concerns."""
    text = README.read_text(encoding="utf-8")
    rows = text[text.index("| concern | may import |") :].split("\n\n", 1)[0].splitlines()[2:]
    table: dict[str, frozenset[str]] = {}
    words = {"foundation": FOUNDATION, "schema": SCHEMA}
    for row in rows:
        concerns, allowed = (cell.strip() for cell in row.strip("|").split("|"))
        names = set(re.findall(r"`([^`]+)`", re.sub(r"\(.*?\)", "", allowed)))
        names |= {n for word, group in words.items() if word in allowed for n in group}
        if allowed.startswith("every concern but"):
            names = {"*"} | {f"-{n}" for n in names}
        for concern in re.findall(r"`([^`]+)`", concerns):
            table[concern] = frozenset(names)
    everyone = frozenset(table)
    return {
        concern: (everyone - {n[1:] for n in may if n.startswith("-")} - {concern})
        if "*" in may
        else may
        for concern, may in table.items()
    }


def test_the_readme_shows_the_same_table() -> None:
    assert _readme_table() == ALLOWED


def test_no_module_is_longer_than_the_limit() -> None:
    lengths = {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }
    too_long = {
        name: n for name, n in lengths.items() if n > MAX_MODULE_LINES and name not in LONG_MODULES
    }
    assert not too_long, f"split these modules (at most {MAX_MODULE_LINES} lines): {too_long}"
    stale = sorted(name for name in LONG_MODULES if lengths.get(name, 0) <= MAX_MODULE_LINES)
    assert not stale, f"no longer long: remove from LONG_MODULES: {stale}"


def _function_lengths(package: Path = PACKAGE) -> dict[str, int]:
    lengths: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        module = str(path.relative_to(package.parent))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                name = f"{module}:{node.name}"
                lengths[name] = max(lengths.get(name, 0), node.end_lineno - node.lineno + 1)
    return lengths


def test_no_function_is_longer_than_the_limit() -> None:
    lengths = _function_lengths()
    too_long = {
        name: n
        for name, n in lengths.items()
        if n > MAX_FUNCTION_LINES and name not in LONG_FUNCTIONS
    }
    assert not too_long, f"split these functions (at most {MAX_FUNCTION_LINES} lines): {too_long}"
    stale = sorted(n for n in LONG_FUNCTIONS if lengths.get(n, 0) <= MAX_FUNCTION_LINES)
    assert not stale, f"no longer long: remove from LONG_FUNCTIONS: {stale}"


def test_the_function_length_check_sees_a_long_function(tmp_path: Path) -> None:
    """The measure itself: from ``def`` to the last line, decorators aside."""
    package = tmp_path / "pkg"
    package.mkdir()
    lines = ["class A:", "    @staticmethod", "    def long() -> None:", '        """Doc."""']
    lines += [f"        x{i} = {i}" for i in range(59)]
    (package / "mod.py").write_text("\n".join(lines) + "\n")
    assert _function_lengths(package) == {"pkg/mod.py:long": MAX_FUNCTION_LINES + 1}


def test_modules_import_each_other_without_a_circle() -> None:
    """Module by module too (a circle's modules cannot be read, changed or tested one
    without the others): e.g. the checkpoint plans take their ``Context`` from
    ``checkpoint/context.py``, not from ``base.py``, which imports the plans."""
    graph = {
        _module_name(path): {m for m in _imports(path) if m != _module_name(path)}
        for path in PACKAGE.rglob("*.py")
    }
    assert not _circles(graph), _circles(graph)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_check_sees_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []
