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
import logging
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

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


def choose_path(
    engine: Engine,
    first: Step,
    *,
    prebuilt: bool,
    allowed: bool,
    dialect_ops: DialectOps,
    compiler: direct.DirectCompiler,
) -> Path:
    """The path of one call, whose plan starts with ``first``, on ``engine``.

    ``prebuilt``: every statement the plan may run comes from ``DialectOps.cached``
    (the checkpointer's hot calls, the store's lone get or put). ``allowed``: the
    owner's switch (``direct_path=`` of the savers, store and cache).
    """
    if not (prebuilt and allowed):
        return Path.CORE
    if direct_driver(engine.dialect) is None:
        # A driver the direct path was not built and tested for: SQLAlchemy's
        # dialect knows it, we do not (paramstyle quirks, cursor types, autocommit).
        return Path.CORE
    options = engine.get_execution_options()
    if options.get(DIRECT_PATH_OPTION) is False:
        return Path.CORE  # turned off on the engine
    if options.get("schema_translate_map"):
        # Core renders the mapped schema at execution time; compiled text has none.
        return Path.CORE
    if internals.direct_path_blocked() is not None:
        return Path.CORE  # this SQLAlchemy lacks what the direct path reads
    if internals.has_events(engine):
        # A ConnectionEvents listener (statement counters, tracing, fault injection)
        # must see every statement, as SQLAlchemy's own flags tell it.
        return Path.CORE
    if engine.logger.isEnabledFor(logging.INFO):
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
