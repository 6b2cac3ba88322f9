"""Foreign internals live in one module (``lg_sqla/internals.py``), each with a safe
default.

The rule the scan enforces, everywhere in lg_sqla but that module: a *private name*
is an identifier with one leading underscore (``_x``, not a dunder). Touching one is
``obj._x``, ``getattr``/``setattr``/``hasattr``/``delattr(obj, "_x")``, or
``from package import _x``. It is foreign unless

* ``obj`` is ``self`` or ``cls`` (an object's own state), or
* lg_sqla defines that name itself: assigned as ``self._x``/``cls._x``, declared in
  a class body (method, attribute, ``__slots__``, dataclass field), or at the top of
  one of its modules (``_compression._zstd``), or
* it is one of the underscore names Python and SQLAlchemy document as public
  (``PUBLIC_UNDERSCORE``: named tuples' ``_replace``/``_fields``, a Row's ``_mapping``),
  or
* the import is from lg_sqla itself.

So that the second exception cannot hide a foreign name, no name the cupboard lists
(``internals.INTERNALS``) may be defined by lg_sqla.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from lg_sqla import internals

PACKAGE = Path(__file__).resolve().parents[2] / "lg_sqla"
CUPBOARD = PACKAGE / "internals.py"

# Underscore names that are documented public API (namedtuple, SQLAlchemy's Row).
PUBLIC_UNDERSCORE = frozenset({"_mapping", "_fields", "_replace", "_asdict", "_make", "_t"})
_ATTR_FUNCTIONS = frozenset({"getattr", "setattr", "hasattr", "delattr"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _trees() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def _own_names() -> set[str]:
    """Every private name lg_sqla defines (see the module)."""
    own: set[str] = set()
    for _path, tree in _trees():
        for statement in tree.body:  # module level
            own |= _defined_by(statement)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    own |= _defined_by(statement)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                own.add(node.attr)
    return {name for name in own if _private(name)}


def _defined_by(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
        if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets):
            return {
                e.value
                for e in ast.walk(node.value)
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
    elif isinstance(node, ast.AnnAssign):
        targets = [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _touches(tree: ast.Module) -> Iterator[tuple[int, str, ast.expr | None]]:
    """(line, private name, the object it is read on) of every touch in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            yield node.lineno, node.attr, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _ATTR_FUNCTIONS
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            yield node.lineno, node.args[1].value, node.args[0]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            foreign = not (node.module or "").startswith("lg_sqla")
            for alias in node.names:
                if foreign and _private(alias.name):
                    yield node.lineno, alias.name, None


def test_only_the_cupboard_touches_foreign_private_names() -> None:
    own = _own_names() - {i.name for i in internals.INTERNALS}
    offences = []
    for path, tree in _trees():
        if path == CUPBOARD:
            continue
        for line, name, owner in _touches(tree):
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            if owner is not None and (name in own or name in PUBLIC_UNDERSCORE):
                continue
            offences.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {name}")
    assert not offences, "move these into lg_sqla/internals.py: " + ", ".join(offences)


def test_no_listed_internal_shares_a_name_with_lg_sqla_own() -> None:
    """Else the scan's exception for lg_sqla's own names would let it pass elsewhere."""
    clashes = _own_names() & {i.name for i in internals.INTERNALS}
    assert not clashes, clashes


def test_the_probe_lists_every_foreign_name_the_cupboard_touches() -> None:
    listed = {i.name for i in internals.INTERNALS}
    own = _own_names()
    touched = {
        name
        for _line, name, owner in _touches(ast.parse(CUPBOARD.read_text(encoding="utf-8")))
        if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")) and name not in own
    }
    assert touched <= listed, touched - listed
    assert internals.missing_internals() == ()
    assert internals.direct_path_blocked() is None


# --- each accessor's safe default, on real SQLAlchemy objects ------------------------


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[sa.Engine]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    yield engine
    engine.dispose()


def test_has_events_without_the_flag_says_yes(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert internals.has_events(engine) is False
    monkeypatch.delattr(sa.Engine, "_has_events")
    assert internals.has_events(engine) is True  # (a listener may be there: Core)


@pytest.mark.parametrize(
    "name", ["_handle_dbapi_exception_noconnection", "_handle_dbapi_exception"]
)
def test_errors_are_wrapped_without_sqlalchemy_handlers(
    engine: sa.Engine, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    import sqlite3

    error = sqlite3.OperationalError("no such table: nowhere")
    monkeypatch.setattr(sa.engine.Connection, name, None)
    with pytest.raises(DBAPIError) as raised:
        if name.endswith("noconnection"):
            internals.raise_checkout_error(error, engine)
        else:
            with engine.connect() as connection:
                internals.raise_as_connection(connection, error, "SELECT 1", {}, None)
    assert raised.value.orig is error
    assert not raised.value.connection_invalidated


def test_bind_processors_and_from_objects_defaults() -> None:
    table = sa.table("t", sa.column("a"))
    compiled = sa.select(table).compile()
    assert internals.bind_processors(compiled) is not None
    assert internals.bind_processors(object()) is None  # (the statement goes to Core)
    assert internals.from_objects(table) == [table]
    clause = object()
    assert internals.from_objects(clause) == [clause]


def test_pool_defaults(engine: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    pooled = engine.raw_connection()
    try:
        assert internals.opened_before_invalidation(pooled, engine.pool) is False
        assert internals.pool_checks_connections(object()) is True  # type: ignore[arg-type]
        assert internals.opened_before_invalidation(object(), object()) is False  # type: ignore[arg-type]
        monkeypatch.delattr(type(pooled), "_close_special")
        internals.check_in_after_commit(pooled)  # a plain close
    finally:
        pooled.close()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_driver_defaults() -> None:
    plain = object()
    assert internals.driver_connection(plain) is plain
    assert internals.adapted_cursor(plain) is None
    assert internals.psycopg_drop_results(plain) is False  # closed, not kept
    assert internals.psycopg_autocommit_flag(plain, None) is None  # the setter is used
    # Behind a pooler: pid not known (not switched at connect), asyncpg refused there.
    assert internals.pg8000_backend_pid(plain) is None
    assert internals.asyncpg_caches_statements(plain) is True
    assert internals.asyncpg_unnamed_statements(plain) is False
