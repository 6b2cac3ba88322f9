"""Command line: ``lg-sqla <command> --url <database url>`` (or ``python -m lg_sqla``).

The URL may also come from ``$LG_SQLA_DATABASE_URL``. Read commands print
tables (``--json`` for scripts); destructive commands take ``--dry-run`` and
ask before acting on a terminal unless ``--yes``. Every failure is one
``error:`` line naming the fix, with a non-zero exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, exc, pool
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from lg_sqla import migrate
from lg_sqla.dialects import ops_for
from lg_sqla.errors import LgSqlaError
from lg_sqla.shared import utc_now

if TYPE_CHECKING:
    from lg_sqla.checkpoint.maintenance import RowCounts
    from lg_sqla.checkpoint.saver import SQLAlchemySaver
    from lg_sqla.inspect import StorageReport, ValueView

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
READ_COMMANDS = ("threads", "history", "show", "diff", "writes", "stats", "latest", "storage")
DESTRUCTIVE = ("prune", "sweep", "delete-thread", "downgrade")


class CommandError(Exception):
    """A failure the CLI reports as one ``error:`` line, with its exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# --- errors ------------------------------------------------------------------------


def _first_line(error: BaseException) -> str:
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def explain(error: BaseException, url: str | None) -> CommandError:
    """Turn an exception into one line that says what went wrong and how to fix it."""
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
        module = (error.name or "").split(".")[0]
        extra = DRIVER_EXTRAS.get(module.lower())
        fix = (
            f'pip install "lg_sqla[{extra}]"'
            if extra
            else f"install it, or use a driver lg_sqla ships an extra for ({ALL_DRIVERS})"
        )
        return CommandError(f"the database driver {module!r} is not installed: {fix}", 2)
    if isinstance(error, exc.DBAPIError):
        where, fix = "", CONNECT_FIX
        if url is not None:
            parsed = make_url(url)
            where = f" ({parsed.render_as_string(hide_password=True)})"
            if parsed.get_backend_name() == "sqlite":
                fix = SQLITE_FIX
        if error.connection_invalidated or isinstance(
            error, (exc.OperationalError, exc.InterfaceError)
        ):
            return CommandError(f"cannot use the database{where}: {_first_line(error)}; {fix}")
        return CommandError(f"the database refused a statement{where}: {_first_line(error)}")
    if isinstance(error, KeyboardInterrupt):
        return CommandError("interrupted", 130)
    return CommandError(
        f"unexpected {type(error).__name__}: {_first_line(error)} "
        "(set LG_SQLA_DEBUG=1 for the traceback, and please report it)"
    )


# --- output --------------------------------------------------------------------------


def _tty() -> bool:
    return sys.stdout.isatty()


def _rich() -> Any:
    """rich's Console on a terminal when the ``[cli]`` extra is installed, else None."""
    if not _tty():
        return None
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console()


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover (the loop always returns)


def _when(value: dt.datetime | None) -> str:
    return "" if value is None else value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print rows as a table: rich's on a terminal, aligned plain text otherwise."""
    cells = [[str(c) for c in row] for row in rows]
    console = _rich()
    if console is not None:
        from rich.table import Table

        view = Table(title=title, title_justify="left")
        for column in columns:
            view.add_column(column, overflow="fold")
        for row in cells:
            view.add_row(*row)
        console.print(view)
        return
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    print(title)
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    for method in ("model_dump", "dict", "_asdict"):
        dump = getattr(value, method, None)
        if callable(dump):
            try:
                return dump()
            except TypeError:
                continue
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


def emit_json(value: Any) -> None:
    print(json.dumps(value, default=_jsonable, ensure_ascii=False, indent=2))


class Progress:
    """A progress bar with totals on a terminal (rich), plain lines otherwise; nothing
    with ``--json`` (stdout is then one JSON document)."""

    def __init__(self, label: str, total: int | None, args: argparse.Namespace) -> None:
        self.label, self.total = label, total
        self.quiet = bool(getattr(args, "json", False))
        self._bar: Any = None
        self._task: Any = None
        console = None if self.quiet else _rich()
        if console is not None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as RichProgress

            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
            )

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, done: int, note: str) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, description=f"{self.label} ({note})")
            return
        if self.quiet:
            return
        of = f"/{self.total}" if self.total is not None else ""
        print(f"{self.label}: {done}{of}, {note}", flush=True)


def confirm(args: argparse.Namespace, question: str) -> bool:
    """Ask on a terminal unless --yes; scripts (no terminal) go ahead."""
    if args.yes or not sys.stdin.isatty():
        return True
    answer = input(f"{question} [y/N] ").strip().lower()
    return answer in ("y", "yes")


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
        return key, json.loads(raw)
    except ValueError:
        return key, raw


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


# --- the parser --------------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return (
        f"lg-sqla {of('lg_sqla')} (SQLAlchemy {of('sqlalchemy')}, Alembic {of('alembic')}, "
        f"langgraph-checkpoint {of('langgraph-checkpoint')}; schema head {migrate.head_revision()})"
    )


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(_version())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lg-sqla",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("LG_SQLA_DATABASE_URL"),
        help="database URL, e.g. postgresql+psycopg://user:pw@host/db "
        "(default: $LG_SQLA_DATABASE_URL)",
    )
    parser.add_argument(
        "--schema",
        default=os.environ.get("LG_SQLA_SCHEMA"),
        help="PostgreSQL schema / MySQL database holding lg_sqla's tables "
        "(default: $LG_SQLA_SCHEMA, else the connection's default)",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the versions and exit")
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
    ns = argparse.ArgumentParser(add_help=False)
    ns.add_argument(
        "--ns",
        default="",
        metavar="CHECKPOINT_NS",
        help='checkpoint namespace (default: "" = root graph)',
    )
    width = argparse.ArgumentParser(add_help=False)
    width.add_argument(
        "--width", type=positive, default=120, help="characters shown of each value (default 120)"
    )
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
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help: str, *parents: argparse.ArgumentParser) -> argparse.ArgumentParser:
        return commands.add_parser(
            name, parents=list(parents) or [common], help=help, description=help
        )

    # schema
    up = add("upgrade", "create or upgrade lg_sqla's tables")
    up.add_argument("revision", nargs="?", default="head", help='target revision (default "head")')
    up.add_argument(
        "--sql", action="store_true", help="print the SQL instead of running it (offline)"
    )
    down = add(
        "downgrade",
        'downgrade lg_sqla\'s tables to a revision ("base" drops them and every checkpoint)',
        destructive,
    )
    down.add_argument("revision", help='target revision, e.g. "base" to drop the tables')
    down.add_argument(
        "--sql", action="store_true", help="print the SQL instead of running it (offline)"
    )
    add("current", "print the schema revision of the database", reading)
    add("check", "exit 1 unless the schema is at the latest revision", reading)
    stamp = add("stamp", "record a revision as applied without running it (after a restore)")
    stamp.add_argument("revision", help='the revision to record, e.g. "head"')
    add("revisions", "list lg_sqla's migrations (the Alembic history)", reading)

    # reading
    threads = add("threads", "list threads, newest write first", reading)
    threads.add_argument(
        "--filter",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="threads with a checkpoint whose metadata has KEY equal to VALUE "
        "(JSON or text); repeatable",
    )
    threads.add_argument(
        "--written-after",
        type=when,
        metavar="WHEN",
        help="last write after WHEN (ISO time, or an age: 7d, 12h)",
    )
    threads.add_argument(
        "--written-before",
        type=when,
        metavar="WHEN",
        help="last write before WHEN (ISO time, or an age: 30d)",
    )
    threads.add_argument(
        "--order",
        choices=["last_write", "first_write", "thread_id", "checkpoints"],
        default="last_write",
        help="sort order (default: last_write, newest first)",
    )
    threads.add_argument("--limit", type=positive, default=50, help="threads per page (default 50)")
    threads.add_argument("--offset", type=int, default=0, help="skip this many threads (paging)")
    hist = add(
        "history",
        "a thread's checkpoints, newest first; without THREAD_ID, lg_sqla's migrations "
        "(the Alembic history, as `revisions`)",
        reading,
        ns,
    )
    hist.add_argument("thread_id", metavar="THREAD_ID", nargs="?")
    hist.add_argument(
        "--before", metavar="CHECKPOINT_ID", help="only checkpoints older than this one (paging)"
    )
    hist.add_argument(
        "--limit", type=positive, default=50, help="checkpoints per page (default 50)"
    )
    show = add(
        "show", "one checkpoint: values (summarized), metadata, pending writes", reading, ns, width
    )
    show.add_argument("thread_id", metavar="THREAD_ID")
    show.add_argument(
        "checkpoint_id", nargs="?", metavar="CHECKPOINT_ID", help="default: the latest"
    )
    diff = add("diff", "channels whose version changed between two checkpoints", reading, ns, width)
    diff.add_argument("thread_id", metavar="THREAD_ID")
    diff.add_argument("old", metavar="OLD_CHECKPOINT_ID")
    diff.add_argument("new", metavar="NEW_CHECKPOINT_ID")
    writes = add("writes", "the writes of a checkpoint in execution order", reading, ns, width)
    writes.add_argument("thread_id", metavar="THREAD_ID")
    writes.add_argument("checkpoint_id", metavar="CHECKPOINT_ID")
    writes.add_argument(
        "--values", action="store_true", help="also deserialize and show the values"
    )
    stats = add("stats", "write count and volume per node, channel or thread", reading)
    stats.add_argument(
        "--by",
        choices=["node", "channel", "thread"],
        default="node",
        help="group by (default node)",
    )
    stats.add_argument(
        "--since",
        type=when,
        metavar="WHEN",
        help="writes at or after WHEN (ISO time, or an age: 7d)",
    )
    stats.add_argument("--until", type=when, metavar="WHEN", help="writes before WHEN")
    stats.add_argument("--thread", metavar="THREAD_ID", help="only this thread")
    stats.add_argument("--ns", metavar="CHECKPOINT_NS", help="only this namespace (default: all)")
    stats.add_argument("--limit", type=positive, default=100, help="groups shown (default 100)")
    latest = add(
        "latest", "the latest value of one channel for a list of threads", reading, ns, width
    )
    latest.add_argument("channel", metavar="CHANNEL")
    latest.add_argument("thread_ids", nargs="+", metavar="THREAD_ID")
    store = add("storage", "rows and bytes per table; writes versus values volume", reading)
    store.add_argument("--thread", metavar="THREAD_ID", help="only this thread")

    # maintenance
    prune = add(
        "prune", "prune threads: keep their newest checkpoints (or delete them)", destructive
    )
    prune.add_argument("thread_ids", nargs="+", metavar="THREAD_ID")
    prune.add_argument(
        "--strategy",
        choices=["keep_latest", "delete"],
        default="keep_latest",
        help="keep_latest (default) or delete the threads",
    )
    prune.add_argument(
        "--keep-last", type=positive, default=1, help="checkpoints kept per namespace (default 1)"
    )
    delete = add("delete-thread", "delete threads: every checkpoint, write and value", destructive)
    delete.add_argument("thread_ids", nargs="+", metavar="THREAD_ID")
    sweep = add("sweep", "retention: delete (or prune) threads not written for N days", destructive)
    sweep.add_argument("--older-than-days", type=float, required=True, help="the retention period")
    sweep.add_argument(
        "--strategy",
        choices=["delete", "keep_latest"],
        default="delete",
        help="delete stale threads (default) or prune their old checkpoints",
    )
    sweep.add_argument(
        "--keep-last", type=positive, default=1, help="keep_latest: checkpoints kept per namespace"
    )
    sweep.add_argument(
        "--batch-size", type=positive, default=100, help="threads per batch (default 100)"
    )
    rotate = add(
        "reencrypt",
        "rewrite stored values with the current key from $LG_SQLA_AES_KEYS / "
        "$LANGGRAPH_AES_KEY (key rotation, or encrypting old plaintext rows)",
    )
    rotate.add_argument(
        "--batch-size", type=positive, default=500, help="rows per batch (default 500)"
    )
    rotate.add_argument(
        "--compress", action="store_true", help="also compress large values (zstd/zlib)"
    )
    adopt = add(
        "import",
        "copy every thread from a database written by LangGraph's PostgresSaver or "
        "SqliteSaver, or the community MySQL saver (needs the [import] extra); "
        "resumable: run it again to finish an interrupted import",
    )
    adopt.add_argument(
        "source",
        metavar="SOURCE_URL",
        help="the official saver's database, e.g. sqlite:///old.sqlite, "
        "postgresql://user:pw@host/db, mysql://user:pw@host/db",
    )
    adopt.add_argument(
        "--thread",
        action="append",
        dest="threads",
        metavar="THREAD_ID",
        help="import only this thread (repeatable; default: every thread)",
    )
    adopt.add_argument("--json", action="store_true", help="print the report as JSON")
    vacuum = add(
        "vacuum", "SQLite only: VACUUM the file, giving freed pages back to the file system"
    )
    vacuum.set_defaults(yes=True)
    return parser


# --- entry point ----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lg-sqla`` / ``python -m lg_sqla``: errors end as one ``error:`` line."""
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except BrokenPipeError:
        # `lg-sqla threads | head`: the reader left; say nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (Exception, KeyboardInterrupt) as error:
        if os.environ.get("LG_SQLA_DEBUG"):
            raise
        failure = explain(error, getattr(args, "url", None))
        print(f"error: {failure}", file=sys.stderr)
        return failure.code


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "history" and args.thread_id is None:
        args.command = "revisions"  # what a DBA means by `history`
    if args.command == "revisions" and not args.url:
        return _revisions(args, None)
    if not args.url:
        raise CommandError("no database URL: pass --url or set LG_SQLA_DATABASE_URL", 2)
    if getattr(args, "sql", False):
        return _offline_sql(args)
    _refuse_missing_sqlite_file(args.url, creating=args.command == "upgrade")
    if args.command in READ_COMMANDS:
        return _read(args)
    if args.command == "import":
        return _import(args)
    if args.command in ("prune", "delete-thread", "sweep", "reencrypt", "vacuum"):
        return _maintain(args)
    return _schema(args)


def _with_connection(args: argparse.Namespace, work: Callable[[Connection], Any]) -> Any:
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


def _refuse_missing_sqlite_file(url: str, *, creating: bool) -> None:
    """SQLite creates a missing file on connect: a mistyped path would silently make a
    new, empty database. Only ``upgrade`` (which creates the tables) may do that."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or creating:
        return
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return
    if not os.path.exists(database):
        raise CommandError(
            f"no SQLite database at {database!r}: check the path, or create it with "
            "`lg-sqla upgrade`"
        )


# --- schema commands ---------------------------------------------------------------------


def _offline_sql(args: argparse.Namespace) -> int:
    """``upgrade --sql`` / ``downgrade --sql``: the migration SQL for a DBA, nothing run."""
    from alembic import command

    if args.command not in ("upgrade", "downgrade"):
        raise CommandError("--sql is only for upgrade and downgrade", 2)
    if args.schema:
        raise CommandError(
            "--sql prints the SQL for the default schema only; for --schema, run the SQL "
            "with that schema first on the search path (PostgreSQL) or as the current "
            "database (MySQL)",
            2,
        )
    config = migrate.alembic_config()
    # ConfigParser interpolates "%": escape it so passwords survive.
    config.set_main_option("sqlalchemy.url", args.url.replace("%", "%%"))
    revision = args.revision
    if args.command == "downgrade" and ":" not in revision:
        # Offline downgrades need the starting point: assume the head.
        revision = f"{migrate.head_revision()}:{revision}"
    os.environ.pop("LG_SQLA_DATABASE_URL", None)  # the env reads --url through the config
    if args.command == "upgrade":
        command.upgrade(config, revision, sql=True)
    else:
        command.downgrade(config, revision, sql=True)
    return 0


def _revisions(args: argparse.Namespace, current: str | None) -> int:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config())
    rows = [
        {
            "revision": rev.revision,
            "down_revision": rev.down_revision,
            "message": (rev.doc or "").strip(),
            "current": rev.revision == current,
            "head": rev.is_head,
        }
        for rev in script.walk_revisions()
    ]
    if args.json:
        emit_json(rows)
        return 0
    table(
        "lg_sqla migrations, newest first",
        ["REVISION", "DOWN", "MESSAGE", ""],
        [
            [
                r["revision"],
                r["down_revision"] or "base",
                r["message"],
                " ".join(x for x, on in (("head", r["head"]), ("current", r["current"])) if on),
            ]
            for r in rows
        ],
    )
    return 0


def _schema(args: argparse.Namespace) -> int:
    from alembic import command

    if args.command == "upgrade":
        try:
            _with_connection(args, lambda c: migrate.upgrade_connection(c, args.revision))
        except exc.DBAPIError as error:
            if "already exists" not in str(error.orig):
                raise
            raise CommandError(
                f"{_first_line(error)}: another saver's tables (e.g. LangGraph's PostgresSaver) "
                "use these names here; keep lg_sqla's in a schema of their own: "
                'lg-sqla --schema lg_sqla upgrade (savers: schema="lg_sqla")'
            ) from error
        print(f"lg_sqla schema upgraded to {args.revision} ({migrate.head_revision()})")
    elif args.command == "current":
        current = _with_connection(args, migrate.current_revision)
        if args.json:
            emit_json({"current": current, "head": migrate.head_revision()})
        else:
            print(current or "none (lg_sqla tables not set up)")
    elif args.command == "revisions":
        return _revisions(args, _with_connection(args, migrate.current_revision))
    elif args.command == "check":
        _with_connection(args, migrate.check_schema)
        if args.json:
            emit_json({"up_to_date": True, "head": migrate.head_revision()})
        else:
            print(f"lg_sqla schema is up to date ({migrate.head_revision()})")
    elif args.command == "stamp":

        def stamp(connection: Connection) -> None:
            command.stamp(migrate.alembic_config(connection), args.revision)
            if connection.in_transaction():
                connection.commit()

        _with_connection(args, stamp)
        print(f"lg_sqla schema stamped as {args.revision}")
    elif args.command == "downgrade":
        return _downgrade(args)
    return 0


def _downgrade(args: argparse.Namespace) -> int:
    from alembic.script import ScriptDirectory

    from lg_sqla import inspect as insp
    from lg_sqla.runtime.plans import Context, drive

    def survey(connection: Connection) -> tuple[str | None, list[str], StorageReport | None]:
        current = migrate.current_revision(connection)
        if current is None:
            return None, [], None
        script = ScriptDirectory.from_config(migrate.alembic_config())
        target = None if args.revision == "base" else args.revision
        undone = [
            r.revision for r in script.iterate_revisions(current, target) if r.revision != target
        ]
        report = None
        if args.revision == "base":
            from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

            plan = insp.storage(Context(ops_for(connection.dialect), JsonPlusSerializer()))
            report = drive(connection, plan, next(plan))
            connection.rollback()
        return current, undone, report

    current, undone, report = _with_connection(args, survey)
    summary: dict[str, Any] = {"current": current, "target": args.revision, "undo": undone}
    if report is not None:
        summary["drops"] = {name: dataclasses.asdict(t) for name, t in report.tables.items()}
    if current is None:
        raise CommandError("lg_sqla tables are not set up in this database: nothing to downgrade")
    what = f"undo {len(undone)} migration(s) ({', '.join(undone) or 'none'})"
    if report is not None:
        rows = report.tables["checkpoints"].rows
        what += (
            f" and DROP lg_sqla's tables with {rows} checkpoint(s), {human_bytes(_total(report))}"
        )
    if args.dry_run:
        _say(args, summary, f"dry run: downgrade to {args.revision} would {what}")
        return 0
    if not confirm(args, f"Downgrade to {args.revision}: {what}?"):
        raise CommandError("cancelled: nothing was changed")
    _with_connection(args, lambda c: migrate.downgrade_connection(c, args.revision))
    _say(args, summary, f"lg_sqla schema downgraded to {args.revision}")
    return 0


def _total(report: StorageReport) -> int:
    return sum(t.bytes for t in report.tables.values())


def _say(args: argparse.Namespace, data: Any, text: str) -> None:
    if getattr(args, "json", False):
        emit_json(data)
    else:
        print(text)


# --- reading ---------------------------------------------------------------------------------


def _read(args: argparse.Namespace) -> int:
    """Run one inspection, through the async saver if the URL's driver is async."""
    from lg_sqla import inspect as insp

    call = _inspection(args)
    url = make_url(args.url)
    if url.get_dialect().is_async:
        from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver

        async def run() -> Any:
            async with AsyncSQLAlchemySaver.from_conn_string(args.url, schema=args.schema) as saver:
                return await call(insp.AsyncInspector(saver))

        result = asyncio.run(run())
    else:
        from lg_sqla.checkpoint.saver import SQLAlchemySaver

        with SQLAlchemySaver.from_conn_string(args.url, schema=args.schema) as saver:
            result = call(insp.Inspector(saver))
    _print_read(args, result)
    return 0


def _inspection(args: argparse.Namespace) -> Callable[[Any], Any]:
    """The inspector call a command makes (works with Inspector and AsyncInspector)."""
    c = args.command
    if c == "threads":
        return lambda i: i.threads(
            filter=dict(args.filter) or None,
            written_after=args.written_after,
            written_before=args.written_before,
            order=args.order,
            limit=args.limit,
            offset=args.offset,
        )
    if c == "history":
        return lambda i: i.history(
            args.thread_id, checkpoint_ns=args.ns, before=args.before, limit=args.limit
        )
    if c == "show":
        return lambda i: i.show(
            args.thread_id, args.checkpoint_id, checkpoint_ns=args.ns, width=args.width
        )
    if c == "diff":
        return lambda i: i.diff(
            args.thread_id, args.old, args.new, checkpoint_ns=args.ns, width=args.width
        )
    if c == "writes":
        return lambda i: i.writes(
            args.thread_id,
            args.checkpoint_id,
            checkpoint_ns=args.ns,
            values=args.values,
            width=args.width,
        )
    if c == "stats":
        return lambda i: i.write_stats(
            by=args.by,
            since=args.since,
            until=args.until,
            thread_id=args.thread,
            checkpoint_ns=args.ns,
            limit=args.limit,
        )
    if c == "latest":
        return lambda i: i.latest(args.channel, args.thread_ids, checkpoint_ns=args.ns)
    return lambda i: i.storage(thread_id=args.thread)


def _view(value: ValueView | None) -> str:
    if value is None:
        return "-"
    size = f"[{value.size}]" if value.size is not None else ""
    return " ".join(part for part in (value.type, size, value.preview) if part)


def _print_read(args: argparse.Namespace, result: Any) -> None:
    from lg_sqla.inspect import summarize

    c = args.command
    if c == "show" and result is None:
        which = args.checkpoint_id or "any checkpoint"
        raise CommandError(f"thread {args.thread_id!r} (namespace {args.ns!r}) has no {which}")
    if args.json:
        if c == "latest":
            result = {k: dataclasses.asdict(v) for k, v in result.items()}
        elif c == "storage":
            result = {
                "tables": {k: dataclasses.asdict(v) for k, v in result.tables.items()},
                "writes_to_values": result.writes_to_values,
            }
        elif c == "threads":
            result = {
                "threads": [{**dataclasses.asdict(t), "bytes": t.bytes} for t in result.threads],
                "next_offset": result.next_offset,
            }
        elif c == "stats":
            result = [{**dataclasses.asdict(s), "avg_bytes": s.avg_bytes} for s in result]
        emit_json(result)
        return
    if c == "threads":
        table(
            f"{len(result.threads)} thread(s)",
            ["THREAD", "CHECKPOINTS", "NS", "FIRST WRITE", "LAST WRITE", "SIZE"],
            [
                [
                    t.thread_id,
                    t.checkpoints,
                    t.namespaces,
                    _when(t.first_write),
                    _when(t.last_write),
                    human_bytes(t.bytes),
                ]
                for t in result.threads
            ],
        )
        if result.next_offset is not None:
            print(f"more: --offset {result.next_offset}")
    elif c == "history":
        table(
            f"thread {args.thread_id}: {len(result)} checkpoint(s), newest first",
            ["CHECKPOINT", "PARENT", "STEP", "SOURCE", "CREATED", "NEXT", "WRITES"],
            [
                [
                    e.checkpoint_id,
                    e.parent_id or "-",
                    "" if e.step is None else e.step,
                    e.source or "",
                    _when(e.created_at),
                    ", ".join([*e.next, *([f"{e.sends} send(s)"] if e.sends else [])]) or "-",
                    e.pending_writes,
                ]
                for e in result
            ],
        )
        if len(result) == args.limit:
            print(f"more: --before {result[-1].checkpoint_id}")
    elif c == "show":
        print(f"thread      {result.thread_id}")
        print(f"namespace   {result.checkpoint_ns!r}")
        print(f"checkpoint  {result.checkpoint_id}")
        print(f"parent      {result.parent_id or '-'}")
        print(f"metadata    {json.dumps(result.metadata, default=_jsonable, ensure_ascii=False)}")
        table(
            "values",
            ["CHANNEL", "VERSION", "VALUE"],
            [
                [ch, result.channel_versions.get(ch, ""), _view(v)]
                for ch, v in result.values.items()
            ],
        )
        table(
            f"{len(result.pending_writes)} pending write(s)",
            ["TASK", "CHANNEL", "VALUE"],
            [[t, ch, _view(v)] for t, ch, v in result.pending_writes],
        )
    elif c == "diff":
        table(
            f"{len(result)} channel(s) changed",
            ["CHANNEL", "OLD VERSION", "NEW VERSION", "OLD", "NEW"],
            [
                [d.channel, d.old_version or "-", d.new_version or "-", _view(d.old), _view(d.new)]
                for d in result
            ],
        )
    elif c == "writes":
        columns = ["#", "TASK ID", "TASK PATH", "IDX", "CHANNEL", "BYTES", "WRITTEN"]
        rows = [
            [n, w.task_id, w.task_path, w.idx, w.channel, w.bytes, _when(w.created_at)]
            + ([_view(w.value)] if args.values else [])
            for n, w in enumerate(result, start=1)
        ]
        table(
            f"{len(result)} write(s) in execution order",
            columns + (["VALUE"] if args.values else []),
            rows,
        )
    elif c == "stats":
        table(
            f"writes by {args.by}",
            [args.by.upper(), "WRITES", "TOTAL", "AVG BYTES", "THREADS", "FIRST", "LAST"],
            [
                [
                    s.key,
                    s.writes,
                    human_bytes(s.bytes),
                    f"{s.avg_bytes:.0f}",
                    s.threads,
                    _when(s.first_write),
                    _when(s.last_write),
                ]
                for s in result
            ],
        )
    elif c == "latest":
        missing = [t for t in args.thread_ids if t not in result]
        table(
            f"latest {args.channel!r}",
            ["THREAD", "CHECKPOINT", "VALUE"],
            [
                [t, v.checkpoint_id, _view(summarize(v.value, args.width))]
                for t, v in result.items()
            ],
        )
        if missing:
            print(f"no value: {', '.join(missing)}")
    elif c == "storage":
        table(
            "storage" + (f" of thread {args.thread}" if args.thread else ""),
            ["TABLE", "ROWS", "BYTES"],
            [[name, t.rows, human_bytes(t.bytes)] for name, t in result.tables.items()],
        )
        ratio = result.writes_to_values
        print("writes/values volume: " + ("-" if ratio is None else f"{ratio:.2f}"))


# --- maintenance -------------------------------------------------------------------------------


@contextmanager
def _sync_saver(args: argparse.Namespace, **kwargs: Any) -> Iterator[SQLAlchemySaver]:
    from lg_sqla.checkpoint.saver import SQLAlchemySaver

    url = make_url(args.url)
    if url.get_dialect().is_async:
        raise CommandError(
            f"use a sync driver URL for {args.command} (e.g. sqlite://, postgresql+psycopg://, "
            "mysql+pymysql://), not +" + str(url.get_driver_name()),
            2,
        )
    with SQLAlchemySaver.from_conn_string(args.url, schema=args.schema, **kwargs) as saver:
        yield saver


def _counts(counts: RowCounts) -> str:
    return f"{counts.checkpoints} checkpoint(s), {counts.writes} write(s), {counts.blobs} value(s)"


def _dry_run(saver: SQLAlchemySaver, plan: Any, thread_ids: Sequence[str] | None) -> dict[str, Any]:
    """Run a deleting plan in one transaction, measure, and roll it all back."""
    from lg_sqla import inspect as insp
    from lg_sqla.runtime.plans import drive, in_one_transaction

    def measured() -> Any:
        before = yield from insp.storage(saver.context, thread_ids=thread_ids)
        result = yield from in_one_transaction(plan)
        after = yield from insp.storage(saver.context, thread_ids=thread_ids)
        return before, result, after

    with saver.engine.connect() as connection:
        migrate.check_schema(connection)
        whole = measured()
        before, result, after = drive(connection, whole, next(whole))
        connection.rollback()
    counts = getattr(result, "removed", result)
    freed = {name: before.tables[name].bytes - after.tables[name].bytes for name in before.tables}
    return {
        "threads": counts.threads,
        "checkpoints": counts.checkpoints,
        "writes": counts.writes,
        "values": counts.blobs,
        "bytes": sum(freed.values()),
        "bytes_per_table": freed,
    }


def _vacuum(args: argparse.Namespace, saver: SQLAlchemySaver) -> None:
    if saver.engine.dialect.name != "sqlite":
        raise CommandError(
            "vacuum is for SQLite files; PostgreSQL's autovacuum reuses freed space "
            "(VACUUM FULL returns it), MySQL/MariaDB: OPTIMIZE TABLE"
        )
    with saver.engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM")
    if not getattr(args, "json", False):
        print("vacuumed the SQLite file")


def _maintain(args: argparse.Namespace) -> int:
    from lg_sqla.checkpoint import maintenance

    if args.command == "reencrypt":
        return _reencrypt(args)
    with _sync_saver(args) as saver:
        if args.command == "vacuum":
            _vacuum(args, saver)
            return 0
        if args.command == "sweep":
            _sweep(args, saver)
        else:
            strategy = "delete" if args.command == "delete-thread" else args.strategy
            keep_last = getattr(args, "keep_last", 1)
            threads = list(dict.fromkeys(args.thread_ids))
            verb = "deleted" if strategy == "delete" else "pruned"
            if args.dry_run:
                report = _dry_run(
                    saver, maintenance.prune(saver.context, threads, strategy, keep_last), threads
                )
                _say(args, {"dry_run": True, **report}, _would(report, strategy))
                return 0
            question = (
                f"Delete {len(threads)} thread(s) with all their checkpoints?"
                if strategy == "delete"
                else f"Prune {len(threads)} thread(s) to their newest {keep_last} checkpoint(s)?"
            )
            if not confirm(args, question):
                raise CommandError("cancelled: nothing was changed")
            total = maintenance.RowCounts()
            with Progress(verb, len(threads), args) as progress:
                for n, thread_id in enumerate(threads, start=1):
                    total.add(
                        saver.run(
                            maintenance.prune(saver.context, [thread_id], strategy, keep_last)
                        )
                    )
                    progress.update(n, f"{total.checkpoints} checkpoint(s) removed")
            _say(
                args,
                {"dry_run": False, **dataclasses.asdict(total), "values": total.blobs},
                f"done: {verb} {total.threads} thread(s); removed {_counts(total)}",
            )
        if args.vacuum:
            _vacuum(args, saver)
    return 0


def _would(report: dict[str, Any], strategy: str) -> str:
    verb = "delete" if strategy == "delete" else "prune"
    return (
        f"dry run: would {verb} {report['threads']} thread(s); remove {report['checkpoints']} "
        f"checkpoint(s), {report['writes']} write(s), {report['values']} value(s), "
        f"{human_bytes(report['bytes'])}"
    )


def _sweep(args: argparse.Namespace, saver: SQLAlchemySaver) -> None:
    from lg_sqla.checkpoint import maintenance

    older_than = dt.timedelta(days=args.older_than_days)
    if args.dry_run:
        plan = maintenance.sweep(
            saver.context, older_than, args.strategy, args.keep_last, args.batch_size, None
        )
        report = _dry_run(saver, plan, None)
        _say(args, {"dry_run": True, **report}, _would(report, args.strategy))
        return
    cutoff = utc_now() - older_than
    stale = saver.run(maintenance.count_stale_threads(cutoff, args.strategy))
    question = (
        f"Delete {stale} thread(s) not written since {cutoff:%Y-%m-%d %H:%M} UTC?"
        if args.strategy == "delete"
        else f"Prune checkpoints older than {cutoff:%Y-%m-%d %H:%M} UTC in {stale} thread(s)?"
    )
    if stale and not confirm(args, question):
        raise CommandError("cancelled: nothing was changed")
    with Progress("sweep", stale, args) as progress:
        swept = saver.sweep(
            older_than,
            strategy=args.strategy,
            keep_last=args.keep_last,
            batch_size=args.batch_size,
            progress=lambda r: progress.update(
                r.threads_visited, f"{r.removed.checkpoints} checkpoint(s) removed"
            ),
        )
    removed = swept.removed
    data = {
        "dry_run": False,
        "strategy": swept.strategy,
        "cutoff": swept.cutoff,
        "threads_visited": swept.threads_visited,
        **dataclasses.asdict(removed),
        "values": removed.blobs,
    }
    if args.strategy == "delete":
        text = f"done: removed {removed.threads} thread(s), {_counts(removed)}"
    else:
        text = (
            f"done: pruned {removed.threads} thread(s) (none deleted: each keeps its newest "
            f"{args.keep_last} checkpoint(s) per namespace); removed {_counts(removed)}"
        )
    _say(args, data, f"{text}; cut-off {swept.cutoff:%Y-%m-%d %H:%M} UTC")


def _reencrypt(args: argparse.Namespace) -> int:
    from lg_sqla import inspect as insp
    from lg_sqla.serde import CompressedSerializer, EncryptedSerializer, SerdeError

    try:
        serde = EncryptedSerializer.from_env(CompressedSerializer() if args.compress else None)
    except SerdeError as error:
        raise CommandError(str(error), 2) from error
    with _sync_saver(args, serde=serde) as saver:
        usage = saver.run(insp.storage(saver.context))
        total = usage.tables["checkpoint_blobs"].rows + usage.tables["checkpoint_writes"].rows
        with Progress("reencrypt", total, args) as progress:
            report = saver.reencrypt(
                batch_size=args.batch_size,
                progress=lambda r: progress.update(
                    sum(t.scanned for t in r.tables.values()),
                    f"batch {r.batches}: "
                    + ", ".join(
                        f"{name} scanned {t.scanned} rewritten {t.rewritten}"
                        for name, t in r.tables.items()
                    ),
                ),
            )
    print(f"done: {report.rewritten} row(s) rewritten in {report.batches} batch(es)")
    return 0


@contextmanager
def official_saver(url: str) -> Iterator[Any]:
    """LangGraph's saver class for a database written by it (the ``[import]`` extra)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    try:
        if backend == "sqlite":
            import sqlite3

            from langgraph.checkpoint.sqlite import SqliteSaver

            connection = sqlite3.connect(parsed.database or "", check_same_thread=False)
            try:
                yield SqliteSaver(connection)
            finally:
                connection.close()
        elif backend == "postgresql":
            from langgraph.checkpoint.postgres import PostgresSaver

            conninfo = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
            with PostgresSaver.from_conn_string(conninfo) as saver:
                yield saver
        elif backend in ("mysql", "mariadb"):
            from langgraph.checkpoint.mysql.pymysql import PyMySQLSaver

            plain = parsed.set(drivername="mysql", query={})
            with PyMySQLSaver.from_conn_string(
                plain.render_as_string(hide_password=False)
            ) as saver:
                yield saver
        else:
            raise CommandError(
                f"no official LangGraph saver for {backend!r} databases; import from Python "
                "with lg_sqla.importer.import_threads(any_saver, target)",
                2,
            )
    except ImportError as error:
        if not (error.name or "").startswith("langgraph"):
            raise
        raise CommandError(
            f"reading {backend} checkpoints needs the official saver: "
            'pip install "lg_sqla[import]"',
            2,
        ) from error


def _source_engine_url(url: str) -> str:
    """A sync SQLAlchemy URL for the source database (the drivers lg_sqla's extras install)."""
    parsed = make_url(url)
    drivers = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql"}
    backend = "mysql" if parsed.get_backend_name() == "mariadb" else parsed.get_backend_name()
    if backend in drivers and "+" not in parsed.drivername:
        parsed = parsed.set(drivername=drivers[backend])
    return parsed.render_as_string(hide_password=False)


def _import(args: argparse.Namespace) -> int:
    from lg_sqla.importer import import_threads, official_task_paths, official_thread_ids

    _refuse_missing_sqlite_file(args.source, creating=False)
    source_engine = create_engine(_source_engine_url(args.source), poolclass=pool.NullPool)
    try:
        with official_saver(args.source) as source, _sync_saver(args) as target:
            threads = args.threads
            if not threads:
                with source_engine.connect() as connection:
                    threads = official_thread_ids(connection)
            with Progress("import", len(threads), args) as progress:
                report = import_threads(
                    source,
                    target,
                    thread_ids=threads,
                    task_paths=official_task_paths(source_engine),
                    progress=lambda r: progress.update(
                        r.threads_done,
                        f"{r.checkpoints_imported} checkpoint(s) imported, "
                        f"{r.checkpoints_skipped} already there",
                    ),
                )
    finally:
        source_engine.dispose()
    data = dataclasses.asdict(report)
    data.pop("threads")
    _say(
        args,
        data,
        f"done: {report.threads_done} thread(s); imported {report.checkpoints_imported} "
        f"checkpoint(s) and {report.writes_imported} write(s); "
        f"{report.checkpoints_skipped} checkpoint(s) were already there",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
