"""What pip users get: the sdist, the wheel built from it (as pip builds one), and the
package's import-time behaviour.

The wheel carries the one copy of the migrations, so pip users can migrate without the
repo; neither archive carries tests, benchmarks, docs or binaries.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

import pytest

import lg_sqla
from lg_sqla import migrate

REPO = Path(__file__).resolve().parents[2]
# Besides the package: what hatchling writes into every sdist.
SDIST_EXTRAS = {"pyproject.toml", "README.md", "LICENSE", "PKG-INFO", ".gitignore"}
BINARY_SUFFIXES = {".whl", ".gz", ".zip", ".so", ".pyd", ".dll", ".pyc", ".png", ".jpg"}


@dataclass(frozen=True)
class Built:
    sdist: list[str]  # paths inside the sdist, its top directory left out
    wheel: list[str]
    wheel_metadata: Message  # the .dist-info/METADATA what pip and the index read
    sdist_metadata: Message  # the sdist's PKG-INFO


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """`python -m build`: the sdist, then the wheel from the unpacked sdist (so the wheel
    proves the sdist holds what a build needs). Once per session: a few seconds, most of
    them installing the build backend (hatchling) into build's isolated environment."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (sdist,) = out.glob("lg_sqla-*.tar.gz")
    (wheel,) = out.glob("lg_sqla-*.whl")
    with tarfile.open(sdist) as archive:
        members = [m.name for m in archive.getmembers() if m.isfile()]
        (pkg_info,) = [
            name for name in members if name.count("/") == 1 and name.endswith("/PKG-INFO")
        ]
        sdist_metadata = (archive.extractfile(pkg_info) or _missing(pkg_info)).read().decode()
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        wheel_metadata = archive.read(metadata).decode()
    return Built(
        sdist=[str(PurePosixPath(*PurePosixPath(name).parts[1:])) for name in members],
        wheel=names,
        wheel_metadata=HeaderParser().parsestr(wheel_metadata),
        sdist_metadata=HeaderParser().parsestr(sdist_metadata),
    )


def _missing(name: str) -> tarfile.ExFileObject:
    raise AssertionError(f"{name} is not a file in the sdist")


def _tracked(under: str) -> set[str]:
    out = subprocess.run(
        ["git", "ls-files", under], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


@pytest.mark.packaging
def test_wheel_holds_the_package_its_migrations_and_types_only(built: Built) -> None:
    revisions = sorted(p.name for p in (REPO / "alembic" / "versions").glob("*.py"))
    assert revisions, "no revisions in alembic/versions"
    migrations = {
        "lg_sqla/_migrations/env.py",
        "lg_sqla/_migrations/script.py.mako",
        *(f"lg_sqla/_migrations/versions/{revision}" for revision in revisions),
    }
    package = {name for name in _tracked("lg_sqla") if not name.startswith("lg_sqla/_migrations")}
    # At the top: the package and one .dist-info directory, nothing else.
    (dist_info,) = {name.split("/")[0] for name in built.wheel} - {"lg_sqla"}
    assert dist_info.startswith("lg_sqla-") and dist_info.endswith(".dist-info")
    assert {name for name in built.wheel if name.startswith("lg_sqla/")} == package | migrations
    assert "lg_sqla/py.typed" in built.wheel
    # One copy of each revision: none under another path (alembic/versions, a test).
    for revision in revisions:
        assert [n for n in built.wheel if n.endswith(f"/{revision}")] == [
            f"lg_sqla/_migrations/versions/{revision}"
        ]
    # The checkout itself has one copy: no lg_sqla/_migrations directory in the repo.
    assert not (REPO / "lg_sqla" / "_migrations").exists()


@pytest.mark.packaging
def test_sdist_holds_what_the_build_needs_and_no_binaries(built: Built) -> None:
    needed = _tracked("lg_sqla") | _tracked("alembic") | {"alembic.ini"}
    assert set(built.sdist) == needed | SDIST_EXTRAS
    assert not [n for n in built.sdist if PurePosixPath(n).suffix in BINARY_SUFFIXES]
    assert not [n for n in built.sdist if n.split("/")[0] in {"tests", "benchmarks", "docs"}]


@pytest.mark.packaging
def test_metadata_is_publishable(built: Built) -> None:
    """What the index shows: the version lg_sqla.__version__ says (its one source), the
    licence as an SPDX expression with its file, the author, and classifiers."""
    for metadata in (built.wheel_metadata, built.sdist_metadata):
        assert metadata["Name"] == "lg_sqla"
        assert metadata["Version"] == lg_sqla.__version__
        assert metadata["License-Expression"] == "MIT"
        assert metadata.get_all("License-File") == ["LICENSE"]
        assert metadata["Author"] == "The lg_sqla authors"
        classifiers = set(metadata.get_all("Classifier") or [])
        assert {
            "Programming Language :: Python :: 3 :: Only",
            "Programming Language :: Python :: 3.10",
            "Typing :: Typed",
            "Topic :: Database",
            "Framework :: AsyncIO",
        } <= classifiers
        # PEP 639: an SPDX expression replaces the licence classifiers.
        assert not [c for c in classifiers if c.startswith("License ::")]
        assert metadata["Requires-Python"] == ">=3.10"
        # Project-URLs are written once the project has a public home (pyproject.toml):
        # none invented meanwhile, and any there must be absolute https addresses.
        for url in metadata.get_all("Project-URL") or []:
            assert url.split(", ", 1)[1].startswith("https://"), url
    assert f"lg_sqla-{lg_sqla.__version__}.dist-info/licenses/LICENSE" in built.wheel


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
