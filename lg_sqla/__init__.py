"""lg_sqla: the LangGraph checkpointer for every SQLAlchemy database."""

from typing import TYPE_CHECKING

from lg_sqla.errors import (
    ExactSearchWarning,
    InvalidInputError,
    LgSqlaError,
    MissingDriverError,
    ReadOnlyError,
    SchemaError,
    UnsupportedDriverError,
)

# The one place the version is written: the wheel's metadata reads it from here
# (pyproject.toml: [tool.hatch.version]).
__version__ = "0.1.0"

if TYPE_CHECKING:
    from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
    from lg_sqla.checkpoint.policy import CheckpointTTL
    from lg_sqla.checkpoint.saver import SQLAlchemySaver
else:
    from lg_sqla.shared import lazy_exports

    # The savers are imported on first use, not with the package: they bring in
    # LangGraph and langchain_core (~1.5 s of CPU), which the ``lg-sqla`` command and
    # ``import lg_sqla.errors`` do not need. They are the checkpoint package's (lazy)
    # exports: named in ``__all__`` below, found there.
    __getattr__ = lazy_exports(
        globals(), {"CheckpointTTL": "lg_sqla.checkpoint.policy"}, rest="lg_sqla.checkpoint"
    )
    del lazy_exports  # (not part of the package's namespace)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


__all__ = [
    "AsyncSQLAlchemySaver",
    "CheckpointTTL",
    "ExactSearchWarning",
    "InvalidInputError",
    "LgSqlaError",
    "MissingDriverError",
    "ReadOnlyError",
    "SQLAlchemySaver",
    "SchemaError",
    "UnsupportedDriverError",
]
