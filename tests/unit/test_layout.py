"""The package's floor plan holds: concerns import each other in one direction only.

Each module belongs to a concern: its sub-package (``checkpoint``, ``store``,
``dialects``, ``runtime``, ``serde``, ``cli``...) or, for a top-level module, the
module itself (``plans``, ``shared``, ``models``...). The imports between concerns
form no circle, and no concern imports another's private module (``store._plan``).
Imports for type checking only (``if TYPE_CHECKING:``) do not count: they create no
run-time dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "lg_sqla"


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
    assert graph.get("dialects", set()) <= {"plans", "errors", "limits"}, graph["dialects"]
