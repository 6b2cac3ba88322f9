"""Command line: ``python -m lg_sqla <command> --url <database url>``.

The URL may also come from ``$LG_SQLA_DATABASE_URL``. Sync URLs are used as
given; async URLs (``+aiosqlite``, ``+asyncmy``) are accepted and migrated
through their async engine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from sqlalchemy import create_engine, exc, pool
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import create_async_engine

from lg_sqla import migrate
from lg_sqla.errors import LgSqlaError

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


def _with_connection(url: str, work: object) -> object:
    """Run ``work(connection)`` on a sync connection, whatever the URL's driver."""
    parsed = make_url(url)
    fn = work
    if parsed.get_dialect().is_async:

        async def run() -> object:
            engine = create_async_engine(parsed, poolclass=pool.NullPool)
            try:
                async with engine.connect() as connection:
                    return await connection.run_sync(fn)  # type: ignore[arg-type]
            finally:
                await engine.dispose()

        return asyncio.run(run())
    engine = create_engine(parsed, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            return fn(connection)  # type: ignore[operator]
    finally:
        engine.dispose()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lg_sqla", description=__doc__)
    parser.add_argument(
        "--url",
        default=os.environ.get("LG_SQLA_DATABASE_URL"),
        help="database URL (default: $LG_SQLA_DATABASE_URL)",
    )
    # `--url` is accepted after the command too (`python -m lg_sqla upgrade --url ...`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=argparse.SUPPRESS, help="database URL")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("upgrade", parents=[common], help="create or upgrade lg_sqla's tables")
    up.add_argument("revision", nargs="?", default="head")
    down = commands.add_parser(
        "downgrade", parents=[common], help="downgrade lg_sqla's tables to a revision"
    )
    down.add_argument("revision", help='target revision, e.g. "base" to drop the tables')
    commands.add_parser(
        "current", parents=[common], help="print the schema revision of the database"
    )
    commands.add_parser(
        "check", parents=[common], help="exit 1 unless the schema is at the latest revision"
    )
    rotate = commands.add_parser(
        "reencrypt",
        parents=[common],
        help="rewrite stored values with the current key from $LG_SQLA_AES_KEYS / "
        "$LANGGRAPH_AES_KEY (key rotation, or encrypting old plaintext rows)",
    )
    rotate.add_argument("--batch-size", type=int, default=500)
    rotate.add_argument(
        "--compress", action="store_true", help="also compress large values (zstd/zlib)"
    )
    prune = commands.add_parser(
        "prune", parents=[common], help="prune threads (keep their newest checkpoints)"
    )
    prune.add_argument("thread_ids", nargs="+", metavar="THREAD_ID")
    prune.add_argument("--strategy", choices=["keep_latest", "delete"], default="keep_latest")
    prune.add_argument("--keep-last", type=int, default=1)
    sweep = commands.add_parser(
        "sweep", parents=[common], help="retention: delete what is older than N days"
    )
    sweep.add_argument("--older-than-days", type=float, required=True)
    sweep.add_argument("--strategy", choices=["delete", "keep_latest"], default="delete")
    sweep.add_argument("--keep-last", type=int, default=1)
    sweep.add_argument("--batch-size", type=int, default=100)
    return parser


class CommandError(Exception):
    """A failure the CLI reports as one ``error:`` line, with its exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lg-sqla`` / ``python -m lg_sqla``: errors end as one ``error:`` line."""
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except (Exception, KeyboardInterrupt) as error:
        if os.environ.get("LG_SQLA_DEBUG"):
            raise
        failure = explain(error, getattr(args, "url", None))
        print(f"error: {failure}", file=sys.stderr)
        return failure.code


def _dispatch(args: argparse.Namespace) -> int:
    if not args.url:
        raise CommandError("no database URL: pass --url or set LG_SQLA_DATABASE_URL", 2)
    _refuse_missing_sqlite_file(args.url, creating=args.command == "upgrade")
    if args.command in ("reencrypt", "sweep", "prune"):
        return _maintain(args)
    if args.command == "upgrade":
        _with_connection(args.url, lambda c: migrate.upgrade_connection(c, args.revision))
        print(f"lg_sqla schema upgraded to {args.revision}")
    elif args.command == "downgrade":
        _with_connection(args.url, lambda c: migrate.downgrade_connection(c, args.revision))
        print(f"lg_sqla schema downgraded to {args.revision}")
    elif args.command == "current":
        current = _with_connection(args.url, migrate.current_revision)
        print(current or "none (lg_sqla tables not set up)")
    elif args.command == "check":

        def check(connection: Connection) -> None:
            migrate.check_schema(connection)

        _with_connection(args.url, check)
        print(f"lg_sqla schema is up to date ({migrate.head_revision()})")
    return 0


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
            "`python -m lg_sqla upgrade`"
        )


def _maintain(args: argparse.Namespace) -> int:
    """Long-running maintenance through a sync saver, printing progress per batch."""
    import datetime as dt

    from sqlalchemy.engine import make_url

    from lg_sqla.saver import SQLAlchemySaver
    from lg_sqla.serde import CompressedSerializer, EncryptedSerializer, SerdeError

    url = make_url(args.url)
    if url.get_dialect().is_async:
        raise CommandError(
            f"use a sync driver URL for {args.command} (e.g. sqlite://, postgresql+psycopg://, "
            "mysql+pymysql://), not +" + str(url.get_driver_name()),
            2,
        )
    if args.command == "reencrypt":
        try:
            serde = EncryptedSerializer.from_env(CompressedSerializer() if args.compress else None)
        except SerdeError as error:
            raise CommandError(str(error), 2) from error
        with SQLAlchemySaver.from_conn_string(args.url, serde=serde) as saver:
            report = saver.reencrypt(
                batch_size=args.batch_size,
                progress=lambda r: print(
                    f"batch {r.batches}: "
                    + ", ".join(
                        f"{name} scanned {t.scanned} rewritten {t.rewritten}"
                        for name, t in r.tables.items()
                    ),
                    flush=True,
                ),
            )
        print(f"done: {report.rewritten} row(s) rewritten in {report.batches} batch(es)")
        return 0
    if args.command == "prune":
        with SQLAlchemySaver.from_conn_string(args.url) as saver:
            saver.prune(args.thread_ids, strategy=args.strategy, keep_last=args.keep_last)
        print(f"pruned {len(args.thread_ids)} thread(s) ({args.strategy})")
        return 0
    with SQLAlchemySaver.from_conn_string(args.url) as saver:
        swept = saver.sweep(
            dt.timedelta(days=args.older_than_days),
            strategy=args.strategy,
            keep_last=args.keep_last,
            batch_size=args.batch_size,
            progress=lambda r: print(
                f"batch {r.batches}: {r.threads_visited} thread(s) visited, "
                f"{r.removed.checkpoints} checkpoint(s) removed",
                flush=True,
            ),
        )
    removed = swept.removed
    print(
        f"done: removed {removed.threads} thread(s), {removed.checkpoints} checkpoint(s), "
        f"{removed.writes} write(s), {removed.blobs} blob(s); cut-off {swept.cutoff:%Y-%m-%d %H:%M}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
