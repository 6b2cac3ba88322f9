"""How a plan meets its connection: the one decision, made once per call.

There are two paths, and they run the same plans, the same SQL and the same
transactions:

* **Core**: ``engine.connect()`` and ``Connection.execute`` (``plans.drive``). It
  works on every dialect and driver SQLAlchemy has, and everything that hooks into
  SQLAlchemy sees it: event listeners, ``echo``, ``schema_translate_map``.
* **Direct**: the pooled DBAPI connection, with SQLAlchemy's compiled SQL
  (``runtime.direct``). Faster for the small hot calls of a running graph, and an
  optimisation only: it is taken where nobody could tell the difference, and every
  reason it is not taken is a line of :func:`choose_path`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Engine
from sqlalchemy.sql import Executable

from lg_sqla import internals
from lg_sqla.plans import Step
from lg_sqla.runtime import direct
from lg_sqla.runtime.drivers import direct_driver

if TYPE_CHECKING:
    from lg_sqla.dialects import DialectOps

# Engine execution option: False keeps every plan of that engine on Core, e.g.
# ``create_engine(url).execution_options(lg_sqla_direct_path=False)``.
DIRECT_PATH_OPTION = "lg_sqla_direct_path"


class Path(enum.Enum):
    CORE = "core"
    DIRECT = "direct"


def changing_reasons(engine: Engine) -> tuple[Any, ...]:
    """What :func:`choose_path` reads that may change between two calls with the same
    first statement: the engine, its execution options (a new mapping whenever they
    change), its event listeners, and whether it logs at INFO. The rest it reads is
    fixed for a statement on an engine (the driver, the SQLAlchemy internals, the
    statement cached and compiling)."""
    return internals.engine_reasons(engine)


def choose_path(
    engine: Engine,
    first: Step,
    *,
    prebuilt: bool,
    allowed: bool,
    dialect_ops: DialectOps,
    compiler: direct.DirectCompiler,
    reasons: tuple[Any, ...] | None = None,
) -> Path:
    """The path of one call, whose plan starts with ``first``, on ``engine``.

    ``prebuilt``: every statement the plan may run comes from ``DialectOps.cached``
    (the checkpointer's hot calls, the store's lone get or put). ``allowed``: the
    owner's switch (``direct_path=`` of the savers, store and cache). ``reasons``:
    :func:`changing_reasons` of ``engine``, if the caller has them already.
    """
    if not (prebuilt and allowed):
        return Path.CORE
    if direct_driver(engine.dialect) is None:
        # A driver the direct path was not built and tested for: SQLAlchemy's
        # dialect knows it, we do not (paramstyle quirks, cursor types, autocommit).
        return Path.CORE
    _, options, has_events, logs = reasons if reasons is not None else changing_reasons(engine)
    if options.get(DIRECT_PATH_OPTION) is False:
        return Path.CORE  # turned off on the engine
    if options.get("schema_translate_map"):
        # Core renders the mapped schema at execution time; compiled text has none.
        return Path.CORE
    if internals.direct_path_blocked() is not None:
        return Path.CORE  # this SQLAlchemy lacks what the direct path reads
    if has_events:
        # A ConnectionEvents listener (statement counters, tracing, fault injection)
        # must see every statement, as SQLAlchemy's own flags tell it.
        return Path.CORE
    if logs:
        # echo=True, or `sqlalchemy.engine` logging at INFO: Core logs each statement.
        return Path.CORE
    if first.statement is None or not dialect_ops.is_cached(first.statement):
        # Built per call: compiled once per call, it would gain nothing (and Core's own
        # compiled cache serves it better).
        return Path.CORE
    if compiler.get(first.statement, engine.dialect) is None:
        # Parameters expanded at execution time (IN lists): only Core can run it.
        return Path.CORE
    return Path.DIRECT


class Router:
    """One owner's path decisions, remembered by first statement while
    :func:`changing_reasons` stay the same (read at every call, so a listener added or
    logging turned on later takes effect at the next call). Only statements built once
    (``DialectOps.is_cached``) have an entry, dropped with the statement
    (:meth:`forget`); at most ``direct.STATEMENTS_MAX``. Asking ``choose_path`` again
    took 3-5 µs of a 50 µs SQLite get."""

    def __init__(
        self, dialect_ops: DialectOps, compiler: direct.DirectCompiler, *, allowed: bool
    ) -> None:
        self.dialect_ops = dialect_ops
        self.compiler = compiler
        self.allowed = allowed
        self._paths: dict[Executable, tuple[tuple[Any, ...], Path]] = {}

    def path_of(self, engine: Engine, first: Step, prebuilt: bool) -> Path:
        statement = first.statement
        if not (prebuilt and self.allowed) or statement is None:
            return Path.CORE
        reasons = internals.engine_reasons(engine)  # (changing_reasons, one frame less)
        known = self._paths.get(statement)
        if known is not None and known[0] == reasons:
            return known[1]
        if not self.dialect_ops.is_cached(statement):
            # Built per call: Core's (``choose_path`` says so too), and not remembered,
            # or each call's statement would stay in memory for good.
            return Path.CORE
        path = choose_path(
            engine,
            first,
            prebuilt=prebuilt,
            allowed=self.allowed,
            dialect_ops=self.dialect_ops,
            compiler=self.compiler,
            reasons=reasons,
        )
        direct.remember(self._paths, statement, (reasons, path))
        return path

    def forget(self, statement: Executable) -> None:
        """Drop what was decided and compiled for ``statement`` (its builder's bounded
        cache dropped it: nothing here may outlive that cache's bound)."""
        self._paths.pop(statement, None)
        self.compiler.forget(statement)

    def remembered(self) -> int:
        """How many decisions are remembered (for the memory benchmarks)."""
        return len(self._paths)
