"""lg_sqla: the LangGraph checkpointer for every SQLAlchemy database."""

from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver
from lg_sqla.checkpoint.policy import CheckpointTTL
from lg_sqla.checkpoint.saver import SQLAlchemySaver
from lg_sqla.errors import (
    InvalidInputError,
    LgSqlaError,
    MissingDriverError,
    ReadOnlyError,
    SchemaError,
    UnsupportedDriverError,
)

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
