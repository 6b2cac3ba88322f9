"""What the disk holds: ``storage``'s on-disk column and ``vacuum``'s before and after.

``storage`` reports two sizes per table: the payload (the JSON documents and serialized
values lg_sqla wrote) and, where the database can tell, what the table takes on disk
with its indexes (``lg_sqla.inspection.disk_usage``); on SQLite also the file's size
and its free pages, which ``vacuum`` gives back.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from lg_sqla.cli.output import human_bytes, table

if TYPE_CHECKING:
    from lg_sqla.checkpoint.saver import SQLAlchemySaver
    from lg_sqla.inspection import DiskUsage, StorageReport


def storage_json(result: tuple[StorageReport, DiskUsage | None]) -> dict[str, Any]:
    report, disk = result
    return {
        "tables": {k: dataclasses.asdict(v) for k, v in report.tables.items()},
        "writes_to_values": report.writes_to_values,
        "on_disk": None if disk is None else disk.tables,
        "file": None
        if disk is None or disk.file_bytes is None
        else {"bytes": disk.file_bytes, "free_bytes": disk.free_bytes},
    }


def print_storage(args: argparse.Namespace, result: tuple[StorageReport, DiskUsage | None]) -> None:
    report, disk = result
    on_disk = None if disk is None else disk.tables
    columns = ["TABLE", "ROWS", "PAYLOAD"] + (["ON DISK"] if on_disk is not None else [])
    table(
        "storage" + (f" of thread {args.thread}" if args.thread else ""),
        columns,
        [
            [name, t.rows, human_bytes(t.bytes)]
            + ([human_bytes(on_disk.get(name, 0))] if on_disk is not None else [])
            for name, t in report.tables.items()
        ],
    )
    ratio = report.writes_to_values
    print("writes/values volume: " + ("-" if ratio is None else f"{ratio:.2f}"))
    if disk is not None and disk.file_bytes is not None:
        free = disk.free_bytes or 0
        size = human_bytes(disk.file_bytes)
        print(f"database file: {size}, of which {human_bytes(free)} free pages")
        if free:  # a line of its own: beside the sizes it ran past 80 columns
            print("(`lg-sqla vacuum` gives the free pages back to the file system)")


def file_size(saver: SQLAlchemySaver) -> tuple[int, int] | None:
    """The database file's bytes and free bytes (SQLite); None for servers."""
    statement = saver.context.dialect_ops.file_usage()
    if statement is None:
        return None
    with saver.engine.connect() as connection:
        row = connection.execute(statement).one()
    return int(row.bytes), int(row.free_bytes)


def vacuumed(before: tuple[int, int] | None, after: tuple[int, int] | None) -> str:
    """``vacuum``'s sentence: the file's size before and after, where known."""
    if before is None or after is None:
        return "vacuumed the SQLite file"
    given_back = max(before[0] - after[0], 0)
    return (
        f"vacuumed the SQLite file: {human_bytes(before[0])} -> {human_bytes(after[0])} "
        f"({human_bytes(given_back)} given back to the file system)"
    )
