"""Schema commands: upgrade, downgrade, current, check, stamp, revisions (Alembic's)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import TYPE_CHECKING, Any

from sqlalchemy import exc
from sqlalchemy.engine import Connection

from lg_sqla import migrate
from lg_sqla.cli.common import (
    CommandError,
    Commands,
    dialect_ops,
    first_line,
    positive,
    storage_of,
    sync_saver,
    with_connection,
)
from lg_sqla.cli.output import confirm, emit_json, human_bytes, say, table

if TYPE_CHECKING:
    from lg_sqla.inspection import StorageReport


def register(commands: Commands) -> None:
    up = commands.add("upgrade", "create or upgrade lg_sqla's tables", upgrade)
    up.add_argument("revision", nargs="?", default="head", help='target revision (default "head")')
    _sql_option(up)
    up.add_argument(
        "--dry-run",
        action="store_true",
        help="only say which migrations would run and which tables they would create",
    )
    up.add_argument("--json", action="store_true", help="print the --dry-run report as JSON")
    down = commands.add(
        "downgrade",
        'downgrade lg_sqla\'s tables to a revision ("base" drops them and every checkpoint)',
        downgrade,
        commands.destructive,
    )
    down.add_argument("revision", help='target revision, e.g. "base" to drop the tables')
    _sql_option(down)
    commands.add("current", "print the schema revision of the database", current, commands.reading)
    commands.add(
        "check", "exit 1 unless the schema is at the latest revision", check, commands.reading
    )
    stamp_ = commands.add(
        "stamp", "record a revision as applied without running it (after a restore)", stamp
    )
    stamp_.add_argument("revision", help='the revision to record, e.g. "head"')
    commands.add(
        "revisions", "list lg_sqla's migrations (the Alembic history)", revisions, commands.reading
    )
    part = commands.add(
        "partition",
        "PostgreSQL: set up an empty database with the checkpoint tables hash-partitioned "
        "by thread_id (docs/scaling.md)",
        partition,
    )
    part.add_argument(
        "--partitions", type=positive, required=True, help="partitions per table, e.g. 16"
    )
    commands.add(
        "distribute",
        "Citus: set up lg_sqla's tables on the coordinator and distribute them, co-located "
        "(checkpoints by thread_id, the store by namespace; docs/scaling.md)",
        distribute,
    )


def _sql_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sql", action="store_true", help="print the SQL instead of running it (offline)"
    )


def offline_sql(args: argparse.Namespace) -> int:
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
    if args.command == "upgrade" and ":" not in revision:
        revision = _from_current(args, revision)
        if revision is None:
            return 0
    os.environ.pop("LG_SQLA_DATABASE_URL", None)  # the env reads --url through the config
    if args.command == "upgrade":
        command.upgrade(config, revision, sql=True)
    else:
        command.downgrade(config, revision, sql=True)
    return 0


def _from_current(args: argparse.Namespace, target: str) -> str | None:
    """``upgrade --sql``'s range: from the database's revision when it can be read (the
    SQL then brings this database to ``target``), else from base, said on stderr; None
    when it is there already (nothing to print)."""
    current_ = _readable_revision(args)
    if isinstance(current_, BaseException):
        print(
            f"-- could not read the database's revision ({first_line(current_)}): "
            "the SQL below starts from an empty database (base)",
            file=sys.stderr,
        )
        return target
    if current_ is None:
        return target
    if current_ == target or (target == "head" and current_ == migrate.head_revision()):
        print(f"-- the database is at {current_} already: no SQL to run", file=sys.stderr)
        return None
    return f"{current_}:{target}"


def _readable_revision(args: argparse.Namespace) -> str | BaseException | None:
    """The database's lg_sqla revision (None: no tables), or why it cannot be read. A
    missing SQLite file is not created."""
    from sqlalchemy.engine import make_url

    database = dialect_ops(args.url).database_file(make_url(args.url))
    if database is not None and not os.path.exists(database):
        return FileNotFoundError(f"no SQLite database at {database!r}")
    try:
        revision: str | None = with_connection(args, migrate.current_revision)
    except Exception as error:  # (unreachable, refused: the SQL is for base then)
        return error
    return revision


def list_revisions(args: argparse.Namespace, current: str | None) -> int:
    """lg_sqla's migrations, newest first, ``current`` marked (None: not known)."""
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
        optional=["DOWN"],
        text=["MESSAGE"],
    )
    return 0


def revisions(args: argparse.Namespace) -> int:
    return list_revisions(args, with_connection(args, migrate.current_revision))


def upgrade(args: argparse.Namespace) -> int:
    if args.dry_run:
        return _upgrade_dry_run(args)
    try:
        with_connection(args, lambda c: migrate.upgrade_connection(c, args.revision))
    except exc.DBAPIError as error:
        if "already exists" not in str(error.orig):
            raise
        raise CommandError(
            f"{first_line(error)}: another saver's tables (e.g. LangGraph's PostgresSaver) "
            "use these names here; keep lg_sqla's in a schema of their own: "
            'lg-sqla --schema lg_sqla upgrade (savers: schema="lg_sqla")'
        ) from error
    print(f"lg_sqla schema upgraded to {args.revision} ({migrate.head_revision()})")
    return 0


def _upgrade_dry_run(args: argparse.Namespace) -> int:
    """What ``upgrade`` would do, from the database's revision; nothing written (a
    missing SQLite file is not created)."""
    from alembic.script import ScriptDirectory

    current_ = _readable_revision(args)
    if isinstance(current_, FileNotFoundError):
        current_ = None  # `upgrade` would create the file: from base
    elif isinstance(current_, BaseException):
        raise current_
    script = ScriptDirectory.from_config(migrate.alembic_config())
    target = script.get_revision(args.revision)
    if target is None:  # pragma: no cover (alembic resolves "head" and known ids)
        raise CommandError(f"unknown revision {args.revision!r}", 2)
    applied = [r.revision for r in script.iterate_revisions(target.revision, current_)]
    applied.reverse()  # oldest first, as they would run
    created = sorted(migrate.tables_at(target.revision) - migrate.tables_at(current_))
    data = {
        "dry_run": True,
        "current": current_,
        "target": target.revision,
        "apply": applied,
        "creates": created,
    }
    if not applied:
        text = f"dry run: the schema is at {current_} already; upgrade would do nothing"
    else:
        text = (
            f"dry run: upgrade from {current_ or 'an empty database'} to {target.revision} "
            f"would apply {len(applied)} migration(s) ({', '.join(applied)})"
            + (f" and create {len(created)} table(s): {', '.join(created)}" if created else "")
        )
    say(args, data, text)
    return 0


def current(args: argparse.Namespace) -> int:
    revision = with_connection(args, migrate.current_revision)
    if args.json:
        emit_json({"current": revision, "head": migrate.head_revision()})
    else:
        print(revision or "none (lg_sqla tables not set up)")
    return 0


def check(args: argparse.Namespace) -> int:
    with_connection(args, migrate.check_schema)
    if args.json:
        emit_json({"up_to_date": True, "head": migrate.head_revision()})
    else:
        print(f"lg_sqla schema is up to date ({migrate.head_revision()})")
    return 0


def stamp(args: argparse.Namespace) -> int:
    from alembic import command

    def record(connection: Connection) -> None:
        command.stamp(migrate.alembic_config(connection), args.revision)
        if connection.in_transaction():
            connection.commit()

    with_connection(args, record)
    print(f"lg_sqla schema stamped as {args.revision}")
    return 0


def downgrade(args: argparse.Namespace) -> int:
    if not args.dry_run and not args.yes and not sys.stdin.isatty():
        # No one to ask: a script that meant --dry-run must not drop the tables.
        raise CommandError(
            "downgrade undoes migrations and may drop tables with their data: pass --yes "
            "to run it without a terminal (--dry-run shows what it would drop)",
            2,
        )
    survey = with_connection(args, lambda c: _survey(c, args.revision))
    if survey.current is None:
        raise CommandError("lg_sqla tables are not set up in this database: nothing to downgrade")
    what = f"undo {len(survey.undone)} migration(s) ({', '.join(survey.undone) or 'none'})"
    if survey.drops.tables:
        what += " and DROP " + _drops_text(survey.drops)
    summary: dict[str, Any] = {
        "current": survey.current,
        "target": args.revision,
        "undo": survey.undone,
        "drops": {name: dataclasses.asdict(t) for name, t in survey.drops.tables.items()},
        "drops_bytes": survey.drops.bytes,
    }
    if args.dry_run:
        say(
            args,
            {"dry_run": True, **summary},
            f"dry run: downgrade to {args.revision} would {what}",
        )
        return 0
    if not confirm(args, f"Downgrade to {args.revision}: {what}?"):
        raise CommandError("cancelled: nothing was changed")
    with_connection(args, lambda c: migrate.downgrade_connection(c, args.revision))
    say(args, {"dry_run": False, **summary}, f"lg_sqla schema downgraded to {args.revision}")
    return 0


def _drops_text(drops: StorageReport) -> str:
    """The dropped tables as the report says them: ``3 table(s): store_items (25 rows),
    store_vectors (0 rows), cache_entries (0 rows); 12.0 KB``."""
    tables = ", ".join(f"{name} ({t.rows} rows)" for name, t in drops.tables.items())
    return f"{len(drops.tables)} table(s): {tables}; {human_bytes(drops.bytes)}"


@dataclasses.dataclass(frozen=True)
class _Survey:
    """What a downgrade would do: from which revision (None: no lg_sqla tables), the
    migrations it undoes, newest first, and the rows of the tables it drops."""

    current: str | None
    undone: list[str]
    drops: StorageReport


def _survey(connection: Connection, revision: str) -> _Survey:
    from alembic.script import ScriptDirectory

    from lg_sqla.inspection import StorageReport

    current_ = migrate.current_revision(connection)
    if current_ is None:
        return _Survey(None, [], StorageReport())
    script = ScriptDirectory.from_config(migrate.alembic_config())
    target = None if revision == "base" else revision
    undone = [r for r in script.iterate_revisions(current_, target) if r.revision != target]
    if not undone:
        return _Survey(current_, [], StorageReport())
    # The tables the migrations leave at the target, whatever the migrations are.
    landing = undone[-1].down_revision
    assert landing is None or isinstance(landing, str), "lg_sqla's history has no merges"
    dropped = migrate.tables_at(current_) - migrate.tables_at(landing)
    drops = storage_of(connection, dropped) if dropped else StorageReport()
    return _Survey(current_, [r.revision for r in undone], drops)


def partition(args: argparse.Namespace) -> int:
    from lg_sqla.partitioning import partition_by_thread

    with sync_saver(args) as saver:
        partition_by_thread(saver.engine, args.partitions)
    print(
        f"lg_sqla schema at head; checkpoints, checkpoint_writes and checkpoint_blobs "
        f"hash-partitioned by thread_id into {args.partitions} partitions each"
    )
    return 0


def distribute(args: argparse.Namespace) -> int:
    from lg_sqla.distributing import distribute_on_citus

    with sync_saver(args) as saver:
        changed = distribute_on_citus(saver.engine)
    done = ", ".join(changed) if changed else "nothing to do: every table was distributed"
    print(f"lg_sqla schema at head; distributed on Citus: {done}")
    return 0
