"""Read commands: threads, history, show, diff, writes, stats, latest, storage.

Each runs one call of :class:`lg_sqla.inspect.Inspector` (``AsyncInspector`` when the
URL's driver is async) and prints its result as a table, or as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from lg_sqla.cli.common import CommandError, Commands, key_value, positive, when
from lg_sqla.cli.output import emit_json, human_bytes, jsonable, table, utc_time

if TYPE_CHECKING:
    from lg_sqla.inspect import ValueView

# An inspector call (the same on Inspector and AsyncInspector).
Call = Callable[[Any], Any]


def register(commands: Commands) -> None:
    _threads_command(commands)
    _history_command(commands)
    _checkpoint_commands(commands)
    _stats_command(commands)
    latest = commands.add(
        "latest",
        "the latest value of one channel for a list of threads",
        read,
        commands.reading,
        commands.namespace,
        commands.width,
    )
    latest.add_argument("channel", metavar="CHANNEL")
    latest.add_argument("thread_ids", nargs="+", metavar="THREAD_ID")
    store = commands.add(
        "storage", "rows and bytes per table; writes versus values volume", read, commands.reading
    )
    store.add_argument("--thread", metavar="THREAD_ID", help="only this thread")


def _threads_command(commands: Commands) -> None:
    threads = commands.add("threads", "list threads, newest write first", read, commands.reading)
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


def _history_command(commands: Commands) -> None:
    hist = commands.add(
        "history",
        "a thread's checkpoints, newest first; without THREAD_ID, lg_sqla's migrations "
        "(the Alembic history, as `revisions`)",
        read,
        commands.reading,
        commands.namespace,
    )
    hist.add_argument("thread_id", metavar="THREAD_ID", nargs="?")
    hist.add_argument(
        "--before", metavar="CHECKPOINT_ID", help="only checkpoints older than this one (paging)"
    )
    hist.add_argument(
        "--limit", type=positive, default=50, help="checkpoints per page (default 50)"
    )


def _checkpoint_commands(commands: Commands) -> None:
    """show, diff, writes: one or two checkpoints of a thread."""
    one_checkpoint = (commands.reading, commands.namespace, commands.width)
    show = commands.add(
        "show",
        "one checkpoint: values (summarized), metadata, pending writes",
        read,
        *one_checkpoint,
    )
    show.add_argument("thread_id", metavar="THREAD_ID")
    show.add_argument(
        "checkpoint_id", nargs="?", metavar="CHECKPOINT_ID", help="default: the latest"
    )
    diff = commands.add(
        "diff", "channels whose version changed between two checkpoints", read, *one_checkpoint
    )
    diff.add_argument("thread_id", metavar="THREAD_ID")
    diff.add_argument("old", metavar="OLD_CHECKPOINT_ID")
    diff.add_argument("new", metavar="NEW_CHECKPOINT_ID")
    writes = commands.add(
        "writes", "the writes of a checkpoint in execution order", read, *one_checkpoint
    )
    writes.add_argument("thread_id", metavar="THREAD_ID")
    writes.add_argument("checkpoint_id", metavar="CHECKPOINT_ID")
    writes.add_argument(
        "--values", action="store_true", help="also deserialize and show the values"
    )


def _stats_command(commands: Commands) -> None:
    stats = commands.add(
        "stats", "write count and volume per node, channel or thread", read, commands.reading
    )
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


# --- running a reading -------------------------------------------------------------------


def read(args: argparse.Namespace) -> int:
    """Run one inspection and print its result."""
    reading = _READINGS[args.command]
    result = _inspect(args, reading.call(args))
    if result is None and reading.absent is not None:
        raise reading.absent(args)
    if args.json:
        emit_json(reading.as_json(result))
    else:
        reading.print_table(args, result)
    return 0


def _inspect(args: argparse.Namespace, call: Call) -> Any:
    """``call`` on an inspector of ``--url``: through the async saver if its driver is.
    Read commands open their saver read-only: they never write, so they run on a
    replica as on the primary."""
    from lg_sqla import inspect as insp

    if make_url(args.url).get_dialect().is_async:
        from lg_sqla.checkpoint.aio import AsyncSQLAlchemySaver

        async def run() -> Any:
            async with AsyncSQLAlchemySaver.from_conn_string(
                args.url, schema=args.schema, read_only=True
            ) as saver:
                return await call(insp.AsyncInspector(saver))

        return asyncio.run(run())
    from lg_sqla.checkpoint.saver import SQLAlchemySaver

    with SQLAlchemySaver.from_conn_string(args.url, schema=args.schema, read_only=True) as saver:
        return call(insp.Inspector(saver))


def _view(value: ValueView | None) -> str:
    if value is None:
        return "-"
    size = f"[{value.size}]" if value.size is not None else ""
    return " ".join(part for part in (value.type, size, value.preview) if part)


# --- threads --------------------------------------------------------------------------------


def _threads_call(args: argparse.Namespace) -> Call:
    return lambda i: i.threads(
        filter=dict(args.filter) or None,
        written_after=args.written_after,
        written_before=args.written_before,
        order=args.order,
        limit=args.limit,
        offset=args.offset,
    )


def _threads_json(result: Any) -> Any:
    return {
        "threads": [{**dataclasses.asdict(t), "bytes": t.bytes} for t in result.threads],
        "next_offset": result.next_offset,
    }


def _print_threads(args: argparse.Namespace, result: Any) -> None:
    table(
        f"{len(result.threads)} thread(s)",
        ["THREAD", "CHECKPOINTS", "NS", "FIRST WRITE", "LAST WRITE", "SIZE"],
        [
            [
                t.thread_id,
                t.checkpoints,
                t.namespaces,
                utc_time(t.first_write),
                utc_time(t.last_write),
                human_bytes(t.bytes),
            ]
            for t in result.threads
        ],
    )
    if result.next_offset is not None:
        print(f"more: --offset {result.next_offset}")


# --- history -------------------------------------------------------------------------------


def _history_call(args: argparse.Namespace) -> Call:
    return lambda i: i.history(
        args.thread_id, checkpoint_ns=args.ns, before=args.before, limit=args.limit
    )


def _print_history(args: argparse.Namespace, result: Any) -> None:
    table(
        f"thread {args.thread_id}: {len(result)} checkpoint(s), newest first",
        ["CHECKPOINT", "PARENT", "STEP", "SOURCE", "CREATED", "NEXT", "WRITES"],
        [
            [
                e.checkpoint_id,
                e.parent_id or "-",
                "" if e.step is None else e.step,
                e.source or "",
                utc_time(e.created_at),
                ", ".join([*e.next, *([f"{e.sends} send(s)"] if e.sends else [])]) or "-",
                e.pending_writes,
            ]
            for e in result
        ],
    )
    if len(result) == args.limit:
        print(f"more: --before {result[-1].checkpoint_id}")


# --- show ---------------------------------------------------------------------------------


def _show_call(args: argparse.Namespace) -> Call:
    return lambda i: i.show(
        args.thread_id, args.checkpoint_id, checkpoint_ns=args.ns, width=args.width
    )


def _no_checkpoint(args: argparse.Namespace) -> CommandError:
    which = args.checkpoint_id or "any checkpoint"
    return CommandError(f"thread {args.thread_id!r} (namespace {args.ns!r}) has no {which}")


def _print_show(args: argparse.Namespace, result: Any) -> None:
    print(f"thread      {result.thread_id}")
    print(f"namespace   {result.checkpoint_ns!r}")
    print(f"checkpoint  {result.checkpoint_id}")
    print(f"parent      {result.parent_id or '-'}")
    print(f"metadata    {json.dumps(result.metadata, default=jsonable, ensure_ascii=False)}")
    table(
        "values",
        ["CHANNEL", "VERSION", "VALUE"],
        [[ch, result.channel_versions.get(ch, ""), _view(v)] for ch, v in result.values.items()],
    )
    table(
        f"{len(result.pending_writes)} pending write(s)",
        ["TASK", "CHANNEL", "VALUE"],
        [[t, ch, _view(v)] for t, ch, v in result.pending_writes],
    )


# --- diff ---------------------------------------------------------------------------------


def _diff_call(args: argparse.Namespace) -> Call:
    return lambda i: i.diff(
        args.thread_id, args.old, args.new, checkpoint_ns=args.ns, width=args.width
    )


def _print_diff(args: argparse.Namespace, result: Any) -> None:
    table(
        f"{len(result)} channel(s) changed",
        ["CHANNEL", "OLD VERSION", "NEW VERSION", "OLD", "NEW"],
        [
            [d.channel, d.old_version or "-", d.new_version or "-", _view(d.old), _view(d.new)]
            for d in result
        ],
    )


# --- writes -------------------------------------------------------------------------------


def _writes_call(args: argparse.Namespace) -> Call:
    return lambda i: i.writes(
        args.thread_id,
        args.checkpoint_id,
        checkpoint_ns=args.ns,
        values=args.values,
        width=args.width,
    )


def _print_writes(args: argparse.Namespace, result: Any) -> None:
    columns = ["#", "TASK ID", "TASK PATH", "IDX", "CHANNEL", "BYTES", "WRITTEN"]
    rows = [
        [n, w.task_id, w.task_path, w.idx, w.channel, w.bytes, utc_time(w.created_at)]
        + ([_view(w.value)] if args.values else [])
        for n, w in enumerate(result, start=1)
    ]
    table(
        f"{len(result)} write(s) in execution order",
        columns + (["VALUE"] if args.values else []),
        rows,
    )


# --- stats ---------------------------------------------------------------------------------


def _stats_call(args: argparse.Namespace) -> Call:
    return lambda i: i.write_stats(
        by=args.by,
        since=args.since,
        until=args.until,
        thread_id=args.thread,
        checkpoint_ns=args.ns,
        limit=args.limit,
    )


def _stats_json(result: Any) -> Any:
    return [{**dataclasses.asdict(s), "avg_bytes": s.avg_bytes} for s in result]


def _print_stats(args: argparse.Namespace, result: Any) -> None:
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
                utc_time(s.first_write),
                utc_time(s.last_write),
            ]
            for s in result
        ],
    )


# --- latest --------------------------------------------------------------------------------


def _latest_call(args: argparse.Namespace) -> Call:
    return lambda i: i.latest(args.channel, args.thread_ids, checkpoint_ns=args.ns)


def _latest_json(result: Any) -> Any:
    return {k: dataclasses.asdict(v) for k, v in result.items()}


def _print_latest(args: argparse.Namespace, result: Any) -> None:
    from lg_sqla.inspect import summarize

    missing = [t for t in args.thread_ids if t not in result]
    table(
        f"latest {args.channel!r}",
        ["THREAD", "CHECKPOINT", "VALUE"],
        [[t, v.checkpoint_id, _view(summarize(v.value, args.width))] for t, v in result.items()],
    )
    if missing:
        print(f"no value: {', '.join(missing)}")


# --- storage -------------------------------------------------------------------------------


def _storage_call(args: argparse.Namespace) -> Call:
    return lambda i: i.storage(thread_id=args.thread)


def _storage_json(result: Any) -> Any:
    return {
        "tables": {k: dataclasses.asdict(v) for k, v in result.tables.items()},
        "writes_to_values": result.writes_to_values,
    }


def _print_storage(args: argparse.Namespace, result: Any) -> None:
    table(
        "storage" + (f" of thread {args.thread}" if args.thread else ""),
        ["TABLE", "ROWS", "BYTES"],
        [[name, t.rows, human_bytes(t.bytes)] for name, t in result.tables.items()],
    )
    ratio = result.writes_to_values
    print("writes/values volume: " + ("-" if ratio is None else f"{ratio:.2f}"))


# --- the readings, by command ----------------------------------------------------------------


def _as_is(result: Any) -> Any:
    return result


@dataclass(frozen=True)
class _Reading:
    """What a read command asks the inspector, and how it prints the answer."""

    call: Callable[[argparse.Namespace], Call]
    print_table: Callable[[argparse.Namespace, Any], None]
    as_json: Callable[[Any], Any] = _as_is  # the --json document (json.dumps does the rest)
    absent: Callable[[argparse.Namespace], CommandError] | None = None  # when the call gave None


_READINGS = {
    "threads": _Reading(_threads_call, _print_threads, _threads_json),
    "history": _Reading(_history_call, _print_history),
    "show": _Reading(_show_call, _print_show, absent=_no_checkpoint),
    "diff": _Reading(_diff_call, _print_diff),
    "writes": _Reading(_writes_call, _print_writes),
    "stats": _Reading(_stats_call, _print_stats, _stats_json),
    "latest": _Reading(_latest_call, _print_latest, _latest_json),
    "storage": _Reading(_storage_call, _print_storage, _storage_json),
}
