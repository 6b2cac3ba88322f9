"""lg_sqla: the LangGraph checkpointer for every SQLAlchemy database."""

from lg_sqla.aio import AsyncSQLAlchemySaver
from lg_sqla.errors import InvalidInputError, LgSqlaError, MissingDriverError, SchemaError
from lg_sqla.saver import SQLAlchemySaver

__all__ = [
    "AsyncSQLAlchemySaver",
    "InvalidInputError",
    "LgSqlaError",
    "MissingDriverError",
    "SQLAlchemySaver",
    "SchemaError",
]
