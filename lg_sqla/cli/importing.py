"""``import``: copy threads written by LangGraph's own savers into lg_sqla's tables."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, pool

from lg_sqla.cli.common import CommandError, Commands, refuse_missing_database_file, sync_saver
from lg_sqla.cli.output import Progress, say
from lg_sqla.dialects import ops_for
from lg_sqla.engines import saver_url
from lg_sqla.errors import NoOfficialSaverError


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
            raise CommandError(
                f"no official LangGraph saver for {backend!r} databases; import from Python "
                "with lg_sqla.importer.import_threads(any_saver, target)",
                2,
            ) from error
        except ImportError as error:
            if not (error.name or "").startswith("langgraph"):
                raise
            raise CommandError(
                f"reading {backend} checkpoints needs the official saver: "
                'pip install "lg_sqla[import]"',
                2,
            ) from error
        yield saver


def import_(args: argparse.Namespace) -> int:
    from lg_sqla.importer import import_threads, official_task_paths, official_thread_ids

    refuse_missing_database_file(args.source, creating=False)
    # The source's tables are also read directly (thread ids, task paths), on the sync
    # driver lg_sqla's extras install where the URL names none (as the savers do).
    source_engine = create_engine(saver_url(args.source, is_async=False), poolclass=pool.NullPool)
    try:
        with official_saver(source_engine) as source, sync_saver(args) as target:
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
    say(
        args,
        data,
        f"done: {report.threads_done} thread(s); imported {report.checkpoints_imported} "
        f"checkpoint(s) and {report.writes_imported} write(s); "
        f"{report.checkpoints_skipped} checkpoint(s) were already there",
    )
    return 0
