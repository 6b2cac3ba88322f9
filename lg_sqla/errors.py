"""Exceptions raised by lg_sqla; each message names what is wrong and how to fix it."""

from __future__ import annotations


class LgSqlaError(Exception):
    """Base class of lg_sqla's own errors."""


class InvalidInputError(LgSqlaError, ValueError):
    """A config, checkpoint, write or option that lg_sqla cannot store as given."""


class SchemaError(LgSqlaError, RuntimeError):
    """The database schema is missing, behind, or ahead of this lg_sqla version."""


class MissingDriverError(LgSqlaError, ImportError):
    """The URL needs a database driver that is not installed; the message names the
    extra to install, e.g. ``pip install "lg_sqla[mysql]"``."""


class UnsupportedDriverError(InvalidInputError):
    """The engine's database driver cannot run lg_sqla; the message says why and names
    the driver to use instead (e.g. ``mysql+asyncmy`` for ``mysql+aiomysql``)."""


class ReadOnlyError(LgSqlaError, RuntimeError):
    """A write asked of a saver or store opened ``read_only=True`` (or of a server that
    only reads, such as a PostgreSQL hot standby); the message names the call."""


class NoOfficialSaverError(LgSqlaError, LookupError):
    """LangGraph ships no saver of its own for this database, so there is nothing to
    open its checkpoints with (``DialectOps.official_saver``)."""


class NotFoundError(InvalidInputError, LookupError):
    """An inspection names a thread or checkpoint that does not exist (the CLI
    exits 1 on it, as on every error that is not a usage error)."""


class ExactSearchWarning(UserWarning):
    """A store index option the database cannot honour (an approximate index where
    there is no pgvector, half-precision vectors on pgvector < 0.7): the store does what
    the message says instead (exact search, full-precision vectors), with the same or
    better results. An index option is a speed hint, so one configuration runs on every
    database; ``warnings.simplefilter("error", ExactSearchWarning)`` makes it an error."""


class CallTimeoutError(LgSqlaError, TimeoutError):
    """A call waited on the database longer than its ``call_timeout``: its connection
    was cut and the call's outcome is unknown (the message says why a COMMIT may
    wait; ``lg_sqla.runtime.timeouts``). Never retried by lg_sqla."""
