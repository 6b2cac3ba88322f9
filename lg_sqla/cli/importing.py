"""``import``: copy threads written by LangGraph's own savers into lg_sqla's tables."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Engine, create_engine, exc, pool
from sqlalchemy.engine import make_url

from lg_sqla.cli.common import (
    CommandError,
    Commands,
    dialect_ops,
    explain,
    first_line,
    shown,
    sync_saver,
)
from lg_sqla.cli.interrupts import resumable
from lg_sqla.cli.output import Progress, say
from lg_sqla.dialects import ops_for
from lg_sqla.dialects.base import OfficialSchema
from lg_sqla.engines import engine_options, saver_url
from lg_sqla.errors import NoOfficialSaverError

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    from lg_sqla.importer import ImportReport, SchemaGaps, TaskPaths


def register(commands: Commands) -> None:
    adopt = commands.add(
        "import",
        "copy every thread from a database written by LangGraph's PostgresSaver or "
        "SqliteSaver, or the community MySQL saver (needs the [import] extra); "
        "resumable: run it again to finish an interrupted import",
        import_,
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


@contextmanager
def official_saver(engine: Engine) -> Iterator[Any]:
    """LangGraph's saver on the database ``engine`` reads; failing to open it is a CLI
    error naming the fix (errors of the import itself pass through)."""
    backend = engine.url.get_backend_name()
    with ExitStack() as stack:
        try:
            saver = stack.enter_context(ops_for(engine.dialect).official_saver(engine.url))
        except NoOfficialSaverError as error:
            raise _no_official_saver(backend) from error
        except ImportError as error:
            if not (error.name or "").startswith("langgraph"):
                raise
            raise CommandError(
                f"reading {backend} checkpoints needs the official saver: "
                'pip install "lg_sqla[import]"',
                2,
            ) from error
        yield saver


def _no_official_saver(backend: str) -> CommandError:
    return CommandError(
        f"no official LangGraph saver for {backend!r} databases; import from Python "
        "with lg_sqla.importer.import_threads(any_saver, target)",
        2,
    )


SOURCE, TARGET = "the source database", "the target database"


@contextmanager
def blamed_on(what: str, url: str) -> Iterator[None]:
    """Failures inside are reported as the source's or the target's, naming its URL."""
    try:
        yield
    except CommandError:
        raise
    except (exc.DBAPIError, OSError) as error:
        raise explain(error, url, what) from error
    except Exception as error:
        explained = explain(error, url)
        if what == SOURCE and str(explained).startswith("unexpected "):
            # Raised by the official saver or its own driver (psycopg, PyMySQL, sqlite3),
            # on a source that passed check_source: not lg_sqla's to report.
            explained = CommandError(f"{type(error).__name__}: {first_line(error)}")
        raise CommandError(f"{what} ({shown(url)}): {explained}", explained.code) from error


def refuse_missing_source_file(source: str) -> None:
    """A missing SQLite file is a wrong SOURCE_URL (connecting would create it empty)."""
    database = dialect_ops(source).database_file(make_url(source))
    if database is not None and not os.path.exists(database):
        raise CommandError(
            f"{SOURCE} does not exist: no SQLite file at {database!r}; check the path "
            "in SOURCE_URL (the database LangGraph's SqliteSaver wrote to)",
            2,
        )


def check_source(engine: Engine, source: str) -> None:
    """Refuse a source that is not an official saver's database, before anything reads
    its rows or writes to the target: an error naming what is missing there."""
    from lg_sqla.importer import official_schema_gaps

    expected = ops_for(engine.dialect).official_schema
    if expected is None:
        raise _no_official_saver(engine.url.get_backend_name())
    with engine.connect() as connection:
        gaps = official_schema_gaps(connection, expected)
    if gaps:
        raise not_an_official_source(source, expected, gaps)


def not_an_official_source(source: str, expected: OfficialSchema, gaps: SchemaGaps) -> CommandError:
    where = f"{SOURCE} ({shown(source)})"
    if gaps.is_lg_sqla:
        return CommandError(
            f"{where} holds lg_sqla's own tables, not those of {expected.saver}: "
            "`lg-sqla import` copies threads out of an official saver's database; point "
            "SOURCE_URL at the one that saver wrote to (from another lg_sqla database, "
            "use lg_sqla.importer.import_threads(SQLAlchemySaver(...), target) in Python)",
            2,
        )
    if not gaps.tables:
        found = "it has no tables at all"
    else:
        missing = [f"table {t} is missing" for t in gaps.missing_tables]
        lacking = [
            f"table {t} lacks column(s) {', '.join(c)}" for t, c in gaps.missing_columns.items()
        ]
        found = "; ".join([*missing, *lacking])
    if gaps.tables and not gaps.missing_tables:
        fix = (
            "if an older version of that saver wrote it, open it once with the saver "
            "(its setup() migrates the tables) and import again; otherwise point "
            "SOURCE_URL at the database that saver writes to"
        )
    else:
        fix = "is this the right database? point SOURCE_URL at the database that saver writes to"
    return CommandError(
        f"{where} is not a database of {expected.saver}: {found} (expected its tables "
        f"{', '.join(expected.tables)}); {fix}",
        2,
    )


class _SourceReads:
    """The official saver as ``import_threads`` reads it (``list`` only), its failures
    reported as the source's."""

    def __init__(self, saver: Any, url: str) -> None:
        self._saver, self._url = saver, url

    def list(self, config: Any, **kwargs: Any) -> Iterator[Any]:
        with blamed_on(SOURCE, self._url):
            yield from self._saver.list(config, **kwargs)


def import_(args: argparse.Namespace) -> int:
    with blamed_on(SOURCE, args.source):
        refuse_missing_source_file(args.source)
        # The source's tables are also read directly (thread ids, task paths), on the sync
        # driver lg_sqla's extras install where the URL names none (as the savers do).
        # (engine_options: on MySQL a utf8mb4 session whatever ?charset= the URL names,
        # else ids outside its charset would be read as '?'.)
        url = saver_url(args.source, is_async=False)
        source_engine = create_engine(url, **engine_options(url, {"poolclass": pool.NullPool}))
    try:
        with blamed_on(SOURCE, args.source):
            check_source(source_engine, args.source)
        report = _copy(args, source_engine)
    finally:
        source_engine.dispose()
    data = dataclasses.asdict(report)
    data.pop("threads")
    say(
        args,
        data,
        f"done: {report.threads_done} thread(s); imported {report.checkpoints_imported} "
        f"checkpoint(s) and {report.writes_imported} write(s); "
        f"{report.checkpoints_skipped} checkpoint(s) were already there",
    )
    return 0


def _copy(args: argparse.Namespace, source_engine: Engine) -> ImportReport:
    """Every thread (or ``--thread``) of the checked source into the target."""
    from lg_sqla.importer import import_threads, official_task_paths, official_thread_ids

    with ExitStack() as stack:
        with blamed_on(SOURCE, args.source):
            official = stack.enter_context(official_saver(source_engine))
            threads = args.threads
            if not threads:
                with source_engine.connect() as connection:
                    threads = official_thread_ids(connection)
        source_paths = official_task_paths(source_engine)

        def task_paths(thread_id: str) -> TaskPaths:
            with blamed_on(SOURCE, args.source):
                return source_paths(thread_id)

        with blamed_on(TARGET, args.url):
            target = stack.enter_context(sync_saver(args))
            last: list[ImportReport] = []

            def thread_done(report: ImportReport) -> None:
                last[:] = [report]
                progress.update(
                    report.threads_done,
                    f"{report.checkpoints_imported} checkpoint(s) imported, "
                    f"{report.checkpoints_skipped} already there",
                )

            with (
                resumable("import", lambda: _imported(last[0]) if last else "nothing"),
                Progress("import", len(threads), args) as progress,
            ):
                report = import_threads(
                    cast("BaseCheckpointSaver[Any]", _SourceReads(official, args.source)),
                    target,
                    thread_ids=threads,
                    task_paths=task_paths,
                    progress=thread_done,
                )
    return report


def _imported(report: ImportReport) -> str:
    return (
        f"{report.threads_done} thread(s): {report.checkpoints_imported} checkpoint(s) "
        f"imported, {report.checkpoints_skipped} already there"
    )
