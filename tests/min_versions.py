"""Print pip pins of the lowest SQLAlchemy and Alembic versions pyproject.toml allows.

Used by ``tests/bootstrap.sh --min-versions`` to build ``.venv-min``: the pins come
from the declared lower bounds (``sqlalchemy[asyncio]>=2.0.30`` -> ``sqlalchemy==2.0.30``),
so raising a bound in pyproject.toml is all it takes for CI to test the new one.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli (a dependency of pytest there)
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

from packaging.requirements import Requirement

PINNED = ("sqlalchemy", "alembic")


def pins(pyproject: Path) -> list[str]:
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    found: dict[str, str] = {}
    for line in dependencies:
        requirement = Requirement(line)
        name = requirement.name.lower()
        if name not in PINNED:
            continue
        lower = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if len(lower) != 1:
            raise SystemExit(f"pyproject.toml: {line!r} needs exactly one '>=' lower bound")
        found[name] = f"{name}=={lower[0]}"
    missing = set(PINNED) - set(found)
    if missing:
        raise SystemExit(f"pyproject.toml declares no {sorted(missing)}")
    return [found[name] for name in PINNED]


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    print("\n".join(pins(root / "pyproject.toml")))
    sys.exit(0)
