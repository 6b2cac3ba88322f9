"""Command line: ``lg-sqla <command> --url <database url>`` (or ``python -m lg_sqla``).

The URL may also come from ``$LG_SQLA_DATABASE_URL``. Read commands print
tables (``--json`` for scripts); destructive commands take ``--dry-run`` and
ask before acting on a terminal unless ``--yes``. Every failure is one
``error:`` line naming the fix, with a non-zero exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import lg_sqla
from lg_sqla import migrate
from lg_sqla.cli import copying, importing, inspection, maintenance, schema, state, store, ttl
from lg_sqla.cli.common import (
    CommandError,
    Commands,
    commands,
    explain,
    refuse_missing_database_file,
)
from lg_sqla.engines import saver_url

__all__ = ["CommandError", "main"]

# Each family adds its commands, in the order --help lists them.
FAMILIES = (
    schema.register,
    inspection.register,
    maintenance.register,
    store.register,
    ttl.register,
    state.register,
    importing.register,
    copying.register,
    maintenance.register_vacuum,
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return (
        f"lg-sqla {lg_sqla.__version__} (SQLAlchemy {of('sqlalchemy')}, Alembic {of('alembic')}, "
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
        # The module docstring, in plain text: a terminal shows no reStructuredText.
        description=(__doc__ or "").replace("``", "`"),
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
    subcommands: Commands = commands(parser)
    for register in FAMILIES:
        register(subcommands)
    return parser


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
    """Checks every command shares, then the command's handler (set by its family)."""
    if args.command == "history" and args.thread_id is None:
        # What a DBA means by `history`: lg_sqla's migrations.
        args.command, args.handler = "revisions", schema.revisions
    if args.command == "revisions" and not args.url:
        return schema.list_revisions(args, None)
    if not args.url:
        raise CommandError("no database URL: pass --url or set LG_SQLA_DATABASE_URL", 2)
    # As the savers read it: postgres:// (Heroku-style), and lg_sqla's driver where none is named.
    args.url = saver_url(args.url, is_async=False)
    if getattr(args, "sql", False):
        return schema.offline_sql(args)
    refuse_missing_database_file(args.url, creating=args.command == "upgrade")
    return int(args.handler(args))
