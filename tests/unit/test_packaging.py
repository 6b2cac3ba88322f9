"""The wheel carries the one copy of the migrations, so pip users can migrate without the repo."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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


def _printed_by(code: str) -> str:
    """What ``code`` prints, run in a fresh interpreter (nothing imported yet)."""
    return subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_importing_the_models_does_not_import_alembic() -> None:
    """A host app that includes lg_sqla.models in its own Alembic env, or only imports
    lg_sqla, pays for Alembic only when it migrates (alembic.config alone imports
    alembic.command and most of Alembic)."""
    probe = (
        "import sys, lg_sqla.models, lg_sqla; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))"
    )
    out = _printed_by(probe)
    assert out == "[]", out


def test_the_command_line_starts_without_langgraph_runtime() -> None:
    """`import lg_sqla` and the `lg-sqla` parser load neither the savers nor LangGraph's
    runtime and langchain_core (PEP 562 in lg_sqla/__init__.py): ~1 s of CPU less for
    `lg-sqla --help`, `check`, `upgrade`; the commands that read threads import them."""
    probe = (
        "import sys, lg_sqla, lg_sqla.cli; lg_sqla.cli._parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'langchain_core', 'pydantic'}),"
        " 'lg_sqla.checkpoint.saver' in sys.modules)"
    )
    out = _printed_by(probe)
    assert out == "[] False", out


def test_the_savers_import_from_the_package_on_first_use() -> None:
    import lg_sqla
    from lg_sqla import AsyncSQLAlchemySaver, CheckpointTTL, SQLAlchemySaver
    from lg_sqla.checkpoint import aio, policy, saver

    assert SQLAlchemySaver is saver.SQLAlchemySaver
    assert AsyncSQLAlchemySaver is aio.AsyncSQLAlchemySaver
    assert CheckpointTTL is policy.CheckpointTTL
    assert set(lg_sqla.__all__) <= set(dir(lg_sqla))
    for name in lg_sqla.__all__:
        assert getattr(lg_sqla, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'SQLAlchemySavr'"):
        getattr(lg_sqla, "SQLAlchemySavr")  # noqa: B009
