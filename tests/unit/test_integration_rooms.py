"""The integration tests sit in one folder per concern (README, "Layout").

The folders are not packages: pytest imports each test module by its basename with its
folder on the path, and tests/integration/conftest.py puts every concern folder on the
path so test modules import each other and the shared helpers by name. Two modules of
the same basename would shadow each other, and a folder missing from mypy's path would
leave its modules' imports unresolved."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"
PYPROJECT = INTEGRATION.parents[1] / "pyproject.toml"


def _rooms() -> list[Path]:
    return sorted(p for p in INTEGRATION.iterdir() if p.is_dir() and any(p.glob("test_*.py")))


def test_integration_tests_sit_in_concern_folders() -> None:
    assert not list(INTEGRATION.glob("test_*.py")), "a test module at the top of tests/integration/"
    assert {room.name for room in _rooms()} >= {
        "checkpoint",
        "store",
        "runtime",
        "schema",
        "cli",
        "clusters",
    }
    assert not list(INTEGRATION.glob("*/*/test_*.py")), "one level of folders only"


def test_test_module_basenames_are_unique() -> None:
    names = Counter(path.name for path in INTEGRATION.parent.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []


def test_every_concern_folder_is_on_mypys_path() -> None:
    text = PYPROJECT.read_text()
    missing = [room.name for room in _rooms() if f'"tests/integration/{room.name}"' not in text]
    assert missing == []
