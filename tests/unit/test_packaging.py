"""The wheel carries the one copy of the migrations, so pip users can migrate without the repo."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from lg_sqla import migrate

REPO = Path(__file__).resolve().parents[2]


def test_wheel_ships_migrations_and_types(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("lg_sqla-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    revisions = sorted(p.name for p in (REPO / "alembic" / "versions").glob("*.py"))
    assert revisions, "no revisions in alembic/versions"
    for revision in revisions:
        assert f"lg_sqla/_migrations/versions/{revision}" in names
    assert "lg_sqla/_migrations/env.py" in names
    assert "lg_sqla/_migrations/script.py.mako" in names
    assert "lg_sqla/py.typed" in names
    # The checkout itself has one copy: no lg_sqla/_migrations directory in the repo.
    assert not (REPO / "lg_sqla" / "_migrations").exists()


def test_checkout_uses_the_top_level_alembic_directory() -> None:
    assert migrate.script_location() == REPO / "alembic"


def test_importing_the_models_does_not_import_alembic() -> None:
    """A host app that includes lg_sqla.models in its own Alembic env, or only imports
    lg_sqla, pays for Alembic only when it migrates (alembic.config alone imports
    alembic.command and most of Alembic)."""
    probe = (
        "import sys, lg_sqla.models, lg_sqla; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == "[]", out
