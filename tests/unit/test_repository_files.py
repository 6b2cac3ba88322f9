"""The repository holds source and documentation, never built or third-party binaries.

A wheel, an archive or a compiled module committed by accident ships in the sdist
(hatchling's sdist takes every tracked file) and bloats every clone for good. What a
tool needs comes from PyPI through pyproject.toml's dependency groups instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Packages, archives and compiled code: never tracked, whatever their size.
FORBIDDEN = re.compile(
    r"\.(whl|egg|tar|tar\.gz|tgz|tar\.bz2|tar\.xz|zip|gz|xz|bz2|7z|so|dylib|dll|pyd|exe|"
    r"a|o|pyc|pyo|jar|deb|rpm)$",
    re.IGNORECASE,
)
# A binary file larger than this must be an image the documentation shows.
MAX_BINARY_BYTES = 100_000
IMAGE = re.compile(r"\.(png|svg|jpe?g|gif)$", re.IGNORECASE)


def _tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True
    ).stdout
    return [name for name in out.decode().split("\0") if name]


def _is_binary(path: Path) -> bool:
    """Git's own test: a NUL byte in the first 8,000 bytes."""
    with path.open("rb") as f:
        return b"\0" in f.read(8000)


def _shown_images() -> set[str]:
    """The images README.md and docs/*.md link to, as repository paths."""
    shown: set[str] = set()
    for page in [REPO / "README.md", *(REPO / "docs").glob("**/*.md")]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            resolved = (page.parent / target).resolve()
            if resolved.is_relative_to(REPO):
                shown.add(resolved.relative_to(REPO).as_posix())
    return shown


def test_the_listing_is_the_repository() -> None:
    tracked = _tracked()
    assert "pyproject.toml" in tracked and "lg_sqla/__init__.py" in tracked


def test_no_package_archive_or_compiled_file_is_tracked() -> None:
    found = [name for name in _tracked() if FORBIDDEN.search(name)]
    assert found == [], f"binaries tracked by git (install tools from PyPI instead): {found}"


def test_large_binary_files_are_only_images_the_docs_show() -> None:
    shown = _shown_images()
    offending = []
    for name in _tracked():
        path = REPO / name
        if not path.is_file() or path.stat().st_size <= MAX_BINARY_BYTES:
            continue
        if not _is_binary(path):
            continue
        if name.startswith("docs/") and IMAGE.search(name) and name in shown:
            continue
        offending.append(f"{name} ({path.stat().st_size:,} bytes)")
    assert offending == [], f"binary files over {MAX_BINARY_BYTES:,} bytes: {offending}"


def test_the_binary_check_recognises_a_wheel(tmp_path: Path) -> None:
    """The checks above would catch the py-spy wheel once committed at the root."""
    wheel = tmp_path / "py_spy-0.4.3-py2.py3-none-manylinux1_x86_64.whl"
    wheel.write_bytes(b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(200_000))
    assert FORBIDDEN.search(wheel.name)
    assert _is_binary(wheel)
    assert not _is_binary(REPO / "docs" / "img" / "bench-results.json")
