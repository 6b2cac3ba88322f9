"""lg_sqla: the LangGraph checkpointer for every SQLAlchemy database."""

from typing import TYPE_CHECKING

from lg_sqla.errors import (
    InvalidInputError,
    LgSqlaError,
    MissingDriverError,
    ReadOnlyError,
    SchemaError,
    UnsupportedDriverError,
)

if TYPE_CHECKING:
    from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
    from lg_sqla.checkpoint.policy import CheckpointTTL
    from lg_sqla.checkpoint.saver import SQLAlchemySaver
else:

    def __getattr__(name: str) -> object:
        """The savers are imported on first use (PEP 562), not with the package: they
        bring in LangGraph and langchain_core (~1.5 s of CPU), which the ``lg-sqla``
        command and ``import lg_sqla.errors`` do not need."""
        if name == "SQLAlchemySaver":
            from lg_sqla.checkpoint.saver import SQLAlchemySaver as value
        elif name == "AsyncSQLAlchemySaver":
            from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver as value
        elif name == "CheckpointTTL":
            from lg_sqla.checkpoint.policy import CheckpointTTL as value
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


__all__ = [
    "AsyncSQLAlchemySaver",
    "CheckpointTTL",
    "InvalidInputError",
    "LgSqlaError",
    "MissingDriverError",
    "ReadOnlyError",
    "SQLAlchemySaver",
    "SchemaError",
    "UnsupportedDriverError",
]
