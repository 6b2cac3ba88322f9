"""docs/schema.md's ER diagram is generated from the models (scripts/er_diagram.py):
the committed one must be what the models give now, so it cannot go stale."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from lg_sqla.migrate import VERSION_TABLE
from lg_sqla.models import metadata

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "er_diagram.py"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("er_diagram", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_diagram_matches_the_models() -> None:
    generator = _generator()
    committed = generator.DOC.read_text(encoding="utf-8")
    assert generator.replaced(committed) == committed, (
        "docs/schema.md's ER diagram is stale: run python scripts/er_diagram.py"
    )


def test_diagram_shows_every_table_and_column() -> None:
    diagram = _generator().diagram()
    for table in [*metadata.tables.values()]:
        assert f"    {table.name} {{" in diagram
        for column in table.columns:
            assert f" {column.name}" in diagram, (table.name, column.name)
    assert f"    {VERSION_TABLE} {{" in diagram
    # What a store item's vectors and a checkpoint's writes belong to.
    assert "store_items ||--o{ store_vectors" in diagram
    assert "checkpoints ||--o{ checkpoint_writes" in diagram


def test_check_mode_fails_on_a_stale_diagram_and_a_run_fixes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    generator = _generator()
    fresh = generator.DOC.read_text(encoding="utf-8")
    stale = fresh.replace(" PK\n", "\n", 1)
    monkeypatch.setattr(generator, "DOC", tmp_path / "schema.md")
    generator.DOC.write_text(stale, encoding="utf-8")
    assert generator.main(["--check"]) == 1
    assert generator.DOC.read_text(encoding="utf-8") == stale  # --check writes nothing
    assert generator.main([]) == 0
    assert generator.DOC.read_text(encoding="utf-8") == fresh
    assert generator.main(["--check"]) == 0
