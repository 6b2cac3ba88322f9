"""What every command family shares: its error, the options and argument types
commands have in common, and opening the database a URL names."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import re
import sys
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, exc, pool
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from lg_sqla.cli.fitting import terminal_columns
from lg_sqla.dialects import DialectOps, ops_for
from lg_sqla.engines import saver_url
from lg_sqla.errors import LgSqlaError

if TYPE_CHECKING:
    from lg_sqla.checkpoint.saver import SQLAlchemySaver
    from lg_sqla.inspection import StorageReport

# The extra that installs each driver module lg_sqla is tested with.
DRIVER_EXTRAS = {
    "psycopg": "postgres",
    "psycopg2": "postgres",
    "pymysql": "mysql",
    "aiosqlite": "async",
    "asyncmy": "async",
}
ALL_DRIVERS = 'psycopg: "lg_sqla[postgres]", pymysql: "lg_sqla[mysql]"'
SQLITE_FIX = "check the file's path, that its directory exists, and its permissions"
CONNECT_FIX = (
    "check that the server is running and that the URL's host, port, user, password "
    "and database name are right"
)

# A command's handler: runs it from the parsed arguments, returns the exit code.
Handler = Callable[[argparse.Namespace], int]


class CommandError(Exception):
    """A failure the CLI reports as one ``error:`` line, with its exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# --- errors ------------------------------------------------------------------------


def first_line(error: BaseException) -> str:
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def explain(error: BaseException, url: str | None, what: str = "the database") -> CommandError:
    """Turn an exception into one line that says what went wrong and how to fix it;
    ``what`` names the database ``url`` is (``lg-sqla import``: the source or the target)."""
    if isinstance(error, CommandError):
        return error
    if isinstance(error, LgSqlaError):
        return CommandError(str(error))
    if isinstance(error, exc.NoSuchModuleError):
        return CommandError(
            f"unknown database dialect or driver in the URL ({error}); lg_sqla is tested with "
            "sqlite://, postgresql+psycopg://, mysql+pymysql:// (and +aiosqlite, +asyncmy)",
            2,
        )
    if isinstance(error, exc.ArgumentError):
        return CommandError(
            f"invalid database URL: {error}; write it like "
            "postgresql+psycopg://user:password@host:5432/dbname",
            2,
        )
    if isinstance(error, ImportError):
        return _missing_driver(error)
    if isinstance(error, exc.DBAPIError):
        return _database_failure(error, url, what)
    if isinstance(error, OSError):
        # A driver that lets the socket's error through (asyncpg: ConnectionRefusedError).
        return _unreachable(url, first_line(error), what)
    if isinstance(error, KeyboardInterrupt):
        return CommandError("interrupted", 130)
    return CommandError(
        f"unexpected {type(error).__name__}: {first_line(error)} "
        "(set LG_SQLA_DEBUG=1 for the traceback, and please report it)"
    )


def _missing_driver(error: ImportError) -> CommandError:
    module = (error.name or "").split(".")[0]
    extra = DRIVER_EXTRAS.get(module.lower())
    fix = (
        f'pip install "lg_sqla[{extra}]"'
        if extra
        else f"install it, or use a driver lg_sqla ships an extra for ({ALL_DRIVERS})"
    )
    return CommandError(f"the database driver {module!r} is not installed: {fix}", 2)


def shown(url: str) -> str:
    """A URL as error messages show it: the password hidden."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except exc.ArgumentError:
        return "an invalid URL"


def _where(url: str | None) -> tuple[str, str]:
    """`` (the URL, password hidden)`` and the fix to suggest for a connection failure."""
    if url is None:
        return "", CONNECT_FIX
    # The URL's scheme, not a dialect's answer: loading the dialect may be what failed.
    fix = SQLITE_FIX if make_url(url).get_backend_name() == "sqlite" else CONNECT_FIX
    return f" ({shown(url)})", fix


def _unreachable(url: str | None, reason: str, what: str) -> CommandError:
    where, fix = _where(url)
    return CommandError(f"cannot use {what}{where}: {reason}; {fix}")


def _database_failure(error: exc.DBAPIError, url: str | None, what: str) -> CommandError:
    if error.connection_invalidated or isinstance(
        error, (exc.OperationalError, exc.InterfaceError)
    ):
        return _unreachable(url, first_line(error), what)
    where, _fix = _where(url)
    return CommandError(f"{what} refused a statement{where}: {first_line(error)}")


# --- argument types ----------------------------------------------------------------------

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def when(text: str) -> dt.datetime:
    """An ISO 8601 time (UTC if it has no offset) or an age like 30m, 12h, 7d (= that long ago)."""
    match = _RELATIVE.match(text.strip())
    if match:
        delta = dt.timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
        return dt.datetime.now(dt.timezone.utc) - delta
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither an ISO time (2026-01-31T12:00) nor an age (30m, 12h, 7d)"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def key_value(text: str) -> tuple[str, Any]:
    """KEY=VALUE, VALUE read as JSON when it parses (step=3, ok=true), else as a string."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    try:
        value = json.loads(raw)
    except ValueError:
        return key, raw
    # Python's JSON reads 1e999 (or an id such as 8e8812033577) as inf, which no JSON
    # document holds: such a VALUE is text.
    if isinstance(value, float) and not math.isfinite(value):
        return key, raw
    return key, value


def note_values_read_as_json(option: str, pairs: list[tuple[str, Any]]) -> None:
    """After a listing that found nothing, on stderr: each VALUE that ``key_value`` read
    as a JSON number, boolean or null. ``suite=46176614`` looks for the number, so text
    stored under the same characters is no match, and nothing else would say why."""
    for key, value in pairs:
        if value is None or isinstance(value, bool | int | float):
            shown = json.dumps(value)
            print(
                f"note: {option} {key}={shown} compared {key} with the JSON {shown}, not "
                f"the text; to match the text, quote it as JSON: {option} '{key}=\"{shown}\"'",
                file=sys.stderr,
            )


def positive_number(text: str) -> float:
    """A finite number above 0 (``nan``, ``inf``, 0 and negatives are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}")
    return value


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


# --- the options commands share ----------------------------------------------------------


@dataclass(frozen=True)
class Commands:
    """The subcommands' parser, with the option sets commands combine: each family
    module adds its commands here (its ``register``)."""

    subparsers: Any  # argparse's _SubParsersAction
    common: argparse.ArgumentParser  # --url, --schema: every command
    reading: argparse.ArgumentParser  # common + --json
    namespace: argparse.ArgumentParser  # --ns
    width: argparse.ArgumentParser  # --width
    destructive: argparse.ArgumentParser  # common + --dry-run, --yes, --json, --vacuum

    def add(
        self, name: str, help: str, handler: Handler, *parents: argparse.ArgumentParser
    ) -> argparse.ArgumentParser:
        """A command run by ``handler``, with ``parents``' options (default: ``common``)."""
        parser: argparse.ArgumentParser = self.subparsers.add_parser(
            name, parents=list(parents) or [self.common], help=help, description=help
        )
        parser.set_defaults(handler=handler)
        return parser


def commands(parser: argparse.ArgumentParser) -> Commands:
    """Add the subcommands' parser to ``parser``, and build the shared option sets."""
    # `--url` is accepted after the command too (`lg-sqla upgrade --url ...`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", default=argparse.SUPPRESS, help="database URL (default: $LG_SQLA_DATABASE_URL)"
    )
    common.add_argument(
        "--schema", default=argparse.SUPPRESS, help="schema of lg_sqla's tables (see lg-sqla -h)"
    )
    reading = argparse.ArgumentParser(add_help=False, parents=[common])
    reading.add_argument("--json", action="store_true", help="print JSON instead of a table")
    namespace = argparse.ArgumentParser(add_help=False)
    namespace.add_argument(
        "--ns",
        default="",
        metavar="CHECKPOINT_NS",
        help='checkpoint namespace (default: "" = root graph)',
    )
    width = argparse.ArgumentParser(add_help=False)
    width.add_argument(
        "--width",
        type=positive,
        default=terminal_columns(),
        help="characters shown of each value, message and nested string "
        "(default: the terminal's width, else 80)",
    )
    width.add_argument(
        "--full", action="store_true", help="show every value whole (no cut at --width)"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    return Commands(subparsers, common, reading, namespace, width, _destructive(common))


def _destructive(common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    destructive = argparse.ArgumentParser(add_help=False, parents=[common])
    destructive.add_argument(
        "--dry-run",
        action="store_true",
        help="only report what would be removed (runs the deletes in a transaction "
        "that is rolled back)",
    )
    destructive.add_argument(
        "--yes", "-y", action="store_true", help="do not ask for confirmation on a terminal"
    )
    destructive.add_argument("--json", action="store_true", help="print the report as JSON")
    destructive.add_argument(
        "--vacuum",
        action="store_true",
        help="SQLite only: VACUUM afterwards, to give the freed pages back to the file system",
    )
    return destructive


# --- opening the database ------------------------------------------------------------------


def dialect_ops(url: str) -> DialectOps:
    """The dialect facts of the database a URL names, without connecting to it (the URL
    read as the savers read it: ``postgres://``, and lg_sqla's driver where none is named)."""
    return ops_for(make_url(saver_url(url, is_async=False)).get_dialect()())


def refuse_missing_database_file(url: str, *, creating: bool) -> None:
    """SQLite creates a missing file on connect: a mistyped path would silently make a
    new, empty database. Only ``upgrade`` (which creates the tables) may do that."""
    if creating:
        return
    database = dialect_ops(url).database_file(make_url(url))
    if database is not None and not os.path.exists(database):
        raise CommandError(
            f"no SQLite database at {database!r}: check the path, or create it with "
            "`lg-sqla upgrade`"
        )


def with_connection(args: argparse.Namespace, work: Callable[[Connection], Any]) -> Any:
    """Run ``work(connection)`` on a sync connection, whatever the URL's driver, with
    lg_sqla's tables in ``--schema`` if given."""
    parsed = make_url(args.url)
    schema = getattr(args, "schema", None)

    def in_schema(connection: Connection) -> Any:
        if schema is not None:
            if not ops_for(connection.dialect).supports_schemas:
                raise CommandError(
                    f"--schema needs PostgreSQL or MySQL/MariaDB, not {connection.dialect.name}", 2
                )
            connection.execution_options(schema_translate_map={None: schema})
        return work(connection)

    if parsed.get_dialect().is_async:

        async def run() -> Any:
            engine = create_async_engine(parsed, poolclass=pool.NullPool)
            try:
                async with engine.connect() as connection:
                    return await connection.run_sync(in_schema)
            finally:
                await engine.dispose()

        return asyncio.run(run())
    engine = create_engine(parsed, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            return in_schema(connection)
    finally:
        engine.dispose()


def sync_url(args: argparse.Namespace) -> str:
    """``--url``, refused when it names an async driver: maintenance, import and the
    store commands run on a sync engine."""
    url = make_url(args.url)
    if url.get_dialect().is_async:
        raise CommandError(
            f"use a sync driver URL for {args.command} (e.g. sqlite://, postgresql+psycopg://, "
            "mysql+pymysql://), not +" + str(url.get_driver_name()),
            2,
        )
    return str(args.url)


@contextmanager
def sync_saver(args: argparse.Namespace, **kwargs: Any) -> Iterator[SQLAlchemySaver]:
    """The sync saver on ``--url`` (maintenance and import run on one)."""
    from lg_sqla.checkpoint.saver import SQLAlchemySaver

    with SQLAlchemySaver.from_conn_string(sync_url(args), schema=args.schema, **kwargs) as saver:
        yield saver


def storage_of(connection: Connection, tables: Collection[str] | None = None) -> StorageReport:
    """``lg_sqla.inspect.storage`` of these tables (default: all) on an open connection."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from lg_sqla import inspection as insp
    from lg_sqla.checkpoint.context import Context
    from lg_sqla.runtime.executor import drive

    plan = insp.storage(Context(ops_for(connection.dialect), JsonPlusSerializer()), tables=tables)
    report = drive(connection, plan, next(plan))
    connection.rollback()
    return report
