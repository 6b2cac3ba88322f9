"""Read commands: threads, history, show, diff, writes, stats, latest, storage.

Each runs one call of :class:`lg_sqla.inspection.Inspector` (``AsyncInspector`` when the
URL's driver is async) and prints its result as a table, or as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from lg_sqla.cli import disk
from lg_sqla.cli.common import (
    Commands,
    key_value,
    non_negative,
    note_values_read_as_json,
    positive,
    when,
)
from lg_sqla.cli.output import emit_json, human_bytes, table, utc_time
from lg_sqla.cli.values import (
    cut,
    jsonable_value,
    short_ids,
    short_version,
    value_lines,
)
from lg_sqla.errors import NotFoundError
from lg_sqla.limits import THREAD_FIELDS, THREAD_ORDERS, THREAD_SORT_KEYS, THREAD_STATUSES

if TYPE_CHECKING:
    from lg_sqla.inspection import ValueView

# An inspection: awaits the calls of an Inspector or AsyncInspector (``_ask``).
Call = Callable[[Any], Coroutine[Any, Any, Any]]


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
    threads = commands.add(
        "threads", "list threads with their status, newest write first", read, commands.reading
    )
    threads.add_argument(
        "--status",
        choices=THREAD_STATUSES,
        help="only threads in this status: interrupted (waiting on a human: an interrupt() "
        "on the latest checkpoint), pending (tasks left to run), idle, error (a task failed)",
    )
    _thread_filters(threads)
    _thread_listing(threads)


def _thread_filters(threads: argparse.ArgumentParser) -> None:
    """``threads``' filters: metadata, write times, values."""
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
        "--value",
        action="append",
        type=key_value,
        default=[],
        metavar="PATH=VALUE",
        help="threads whose latest values have VALUE (JSON or text) at PATH, a channel "
        "and steps: order_id=3, messages[-1].type=ai; repeatable (decodes candidates)",
    )
    for edge in ("after", "before"):
        threads.add_argument(
            f"--created-{edge}",
            type=when,
            metavar="WHEN",
            help=f"first write {edge} WHEN (ISO time, or an age: 7d)",
        )


def _thread_listing(threads: argparse.ArgumentParser) -> None:
    """``threads``' order, columns and paging."""
    threads.add_argument(
        "--order",
        choices=THREAD_ORDERS,
        help="sort order, former names (default: last_write, newest first)",
    )
    threads.add_argument("--sort-by", choices=THREAD_SORT_KEYS, help="sort key (Platform's names)")
    threads.add_argument("--sort-order", choices=("asc", "desc"), help="with --sort-by")
    threads.add_argument(
        "--extract",
        action="append",
        default=[],
        metavar="[ALIAS=]PATH",
        help="add a column: the value at PATH (values.messages[-1].content, metadata.user)",
    )
    threads.add_argument(
        "--select",
        type=_fields,
        metavar="FIELD,...",
        help=f"with --json, only these fields: {', '.join(THREAD_FIELDS)}",
    )
    threads.add_argument("--limit", type=positive, default=50, help="threads per page (default 50)")
    threads.add_argument(
        "--offset", type=non_negative, default=0, help="skip this many threads (paging)"
    )
    threads.add_argument(
        "--count",
        action="store_true",
        help="also count every thread matching the filters (reads them all)",
    )


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
    """Run one inspection and print its result. Exit codes: 0 with a result (an
    empty list included), 1 when a thread or checkpoint named does not exist."""
    reading = _READINGS[args.command]
    result = _inspect(args, reading.call(args))
    if args.json:
        emit_json(reading.as_json(args, result))
    else:
        reading.print_table(args, result)
    return 0


async def _ask(answer: Any) -> Any:
    """An inspector's answer: awaited from an AsyncInspector, as is from an Inspector."""
    return await answer if inspect.isawaitable(answer) else answer


def _drive(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a call on a sync Inspector: its awaits never suspend, so one step ends it."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("an inspection on a sync saver suspended")  # pragma: no cover


def _inspect(args: argparse.Namespace, call: Call) -> Any:
    """``call`` on an inspector of ``--url``: through the async saver if its driver is.
    Read commands open their saver read-only: they never write, so they run on a
    replica as on the primary."""
    from lg_sqla import inspection as insp

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
        return _drive(call(insp.Inspector(saver)))


async def _checkpoint(inspector: Any, args: argparse.Namespace, given: str) -> str:
    """The full id of the checkpoint ``given`` (an id or a unique prefix of one)."""
    return str(
        await _ask(inspector.resolve_checkpoint(args.thread_id, given, checkpoint_ns=args.ns))
    )


def _width(args: argparse.Namespace) -> int | None:
    """Characters per value, message and nested string; None with --full (whole)."""
    return None if args.full else int(args.width)


def _view_lines(view: ValueView | None, width: int | None) -> list[str]:
    if view is None:
        return ["(no value)"]
    return value_lines(view.value, _view_text(view), width)


def _view_text(view: ValueView | None) -> str:
    if view is None:
        return "-"
    size = f"[{view.size}]" if view.size is not None else ""
    return " ".join(part for part in (view.type, size, view.preview) if part)


def _value_json(view: ValueView | None) -> Any:
    return None if view is None else jsonable_value(view.value)


def _print_block(title: str, lines: list[str], indent: str = "    ") -> None:
    print(title)
    for line in lines:
        print(indent + line)


# --- threads --------------------------------------------------------------------------------


def _threads_call(args: argparse.Namespace) -> Call:
    async def call(i: Any) -> Any:
        return await _ask(
            i.threads(
                filter=dict(args.filter) or None,
                values=dict(args.value) or None,
                status=args.status,
                written_after=args.written_after,
                written_before=args.written_before,
                created_after=args.created_after,
                created_before=args.created_before,
                order=args.order,
                sort_by=args.sort_by,
                sort_order=args.sort_order,
                extract=_extracts(args.extract),
                select=args.select,
                limit=args.limit,
                offset=args.offset,
                count=args.count,
            )
        )

    return call


def _extracts(given: list[str]) -> dict[str, str] | None:
    """``--extract`` as aliases to paths: ``ALIAS=PATH``, or the PATH's last step."""
    out = {}
    for text in given:
        alias, sep, path = text.partition("=")
        if not sep:
            alias, path = text.rsplit(".", 1)[-1], text
        out[alias] = path
    return out or None


def _fields(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in THREAD_FIELDS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown field(s) {', '.join(unknown) or repr(text)}; "
            f"fields: {', '.join(THREAD_FIELDS)}"
        )
    return names


def _threads_json(args: argparse.Namespace, result: Any) -> Any:
    return {
        "threads": [jsonable_value(row) for row in result.rows()],
        "next_offset": result.next_offset,
        "total": result.total,
    }


def _print_threads(args: argparse.Namespace, result: Any) -> None:
    shown = f"{len(result.threads)}" + ("" if result.total is None else f" of {result.total}")
    which = f" {args.status}" if args.status else ""
    if args.extract:
        # The extracted values take the place of the sizes: THREAD, STATUS, LAST WRITE.
        aliases = list(result.threads[0].extracted) if result.threads else []
        table(
            f"{shown}{which} thread(s)",
            ["THREAD", "STATUS", "LAST WRITE", *(a.upper() for a in aliases)],
            [
                [t.thread_id, t.status, utc_time(t.last_write)]
                + [_cell(t.extracted[a]) for a in aliases]
                for t in result.threads
            ],
            optional=["LAST WRITE"],
            text=[a.upper() for a in aliases],
        )
    else:
        table(
            f"{shown}{which} thread(s)",
            ["THREAD", "STATUS", "CHECKPOINTS", "NS", "FIRST WRITE", "LAST WRITE", "SIZE"],
            [
                [
                    t.thread_id,
                    t.status,
                    t.checkpoints,
                    t.namespaces,
                    utc_time(t.first_write),
                    utc_time(t.last_write),
                    human_bytes(t.bytes),
                ]
                for t in result.threads
            ],
            optional=["FIRST WRITE", "NS", "CHECKPOINTS", "SIZE"],
        )
    if not result.threads:
        note_values_read_as_json("--filter", args.filter)
        note_values_read_as_json("--value", args.value)
    if result.next_offset is not None:
        print(f"more: --offset {result.next_offset}")


def _cell(value: Any) -> str:
    """An extracted value in a cell: text as is, else JSON; cut to 30 characters."""
    text = value if isinstance(value, str) else json.dumps(jsonable_value(value), default=str)
    return cut(text, 30)


# --- history -------------------------------------------------------------------------------


def _history_call(args: argparse.Namespace) -> Call:
    async def call(i: Any) -> Any:
        before = None if args.before is None else await _checkpoint(i, args, args.before)
        entries = await _ask(
            i.history(args.thread_id, checkpoint_ns=args.ns, before=before, limit=args.limit)
        )
        if not entries and before is None:
            raise NotFoundError(
                f"thread {args.thread_id!r} (namespace {args.ns!r}) has no checkpoint"
            )
        return entries

    return call


def _next_before(args: argparse.Namespace, result: Any) -> str | None:
    return result[-1].checkpoint_id if len(result) == args.limit else None


def _history_json(args: argparse.Namespace, result: Any) -> Any:
    return {
        "thread_id": args.thread_id,
        "checkpoint_ns": args.ns,
        "checkpoints": [dataclasses.asdict(e) for e in result],
        "next_before": _next_before(args, result),
    }


def _print_history(args: argparse.Namespace, result: Any) -> None:
    ids = short_ids([e.checkpoint_id for e in result] + [e.parent_id for e in result])
    table(
        f"thread {args.thread_id}: {len(result)} checkpoint(s), newest first",
        ["CHECKPOINT", "PARENT", "STEP", "SOURCE", "CREATED", "NEXT", "WRITES"],
        [
            [
                ids[e.checkpoint_id],
                ids.get(e.parent_id or "", "-"),
                "" if e.step is None else e.step,
                e.source or "",
                utc_time(e.created_at),
                ", ".join([*e.next, *([f"{e.sends} send(s)"] if e.sends else [])]) or "-",
                e.pending_writes,
            ]
            for e in result
        ],
        optional=["SOURCE", "WRITES", "PARENT"],
        text=["NEXT"],
    )
    more = _next_before(args, result)
    if more is not None:
        print(f"more: --before {ids[more]}")


# --- show ---------------------------------------------------------------------------------


def _show_call(args: argparse.Namespace) -> Call:
    async def call(i: Any) -> Any:
        given = args.checkpoint_id
        checkpoint_id = None if given is None else await _checkpoint(i, args, given)
        found = await _ask(
            i.show(args.thread_id, checkpoint_id, checkpoint_ns=args.ns, width=args.width)
        )
        if found is None:
            raise NotFoundError(
                f"thread {args.thread_id!r} (namespace {args.ns!r}) has no checkpoint"
            )
        return found

    return call


def _show_json(args: argparse.Namespace, result: Any) -> Any:
    return {
        "thread_id": result.thread_id,
        "checkpoint_ns": result.checkpoint_ns,
        "checkpoint_id": result.checkpoint_id,
        "parent_id": result.parent_id,
        "metadata": jsonable_value(result.metadata),
        "channel_versions": result.channel_versions,
        "values": {ch: _value_json(v) for ch, v in result.values.items()},
        "pending_writes": [
            {"task_id": t, "channel": ch, "value": _value_json(v)}
            for t, ch, v in result.pending_writes
        ],
    }


def _print_show(args: argparse.Namespace, result: Any) -> None:
    width = _width(args)
    print(f"thread      {result.thread_id}")
    print(f"namespace   {result.checkpoint_ns!r}")
    print(f"checkpoint  {result.checkpoint_id}")
    print(f"parent      {result.parent_id or '-'}")
    metadata = json.dumps(jsonable_value(result.metadata), ensure_ascii=False)
    print(f"metadata    {cut(metadata, None if width is None else max(width, 60))}")
    print()
    print(f"{len(result.values)} value(s)")
    for channel, view in result.values.items():
        version = short_version(result.channel_versions.get(channel))
        _print_block(f"  {channel} (v{version})", _view_lines(view, width))
    print()
    print(f"{len(result.pending_writes)} pending write(s)")
    tasks = short_ids(t for t, _, _ in result.pending_writes)
    for task, channel, view in result.pending_writes:
        _print_block(f"  {channel} by task {tasks.get(task, task)}", _view_lines(view, width))


# --- diff ---------------------------------------------------------------------------------


def _diff_call(args: argparse.Namespace) -> Call:
    async def call(i: Any) -> Any:
        old = await _checkpoint(i, args, args.old)
        new = await _checkpoint(i, args, args.new)
        changes = await _ask(
            i.diff(args.thread_id, old, new, checkpoint_ns=args.ns, width=args.width)
        )
        return old, new, changes

    return call


def _diff_json(args: argparse.Namespace, result: Any) -> Any:
    old, new, changes = result
    out = []
    for d in changes:
        change: dict[str, Any] = {
            "channel": d.channel,
            "old_version": d.old_version,
            "new_version": d.new_version,
            "old": _value_json(d.old),
            "new": _value_json(d.new),
        }
        if d.items is not None:
            change["appended"] = jsonable_value(d.items.appended)
            change["removed"] = jsonable_value(d.items.removed)
            change["replaced"] = [
                {"old": jsonable_value(a), "new": jsonable_value(b)} for a, b in d.items.replaced
            ]
        out.append(change)
    return {
        "thread_id": args.thread_id,
        "checkpoint_ns": args.ns,
        "old": old,
        "new": new,
        "changes": out,
    }


def _item_lines(mark: str, items: list[Any], width: int | None) -> list[str]:
    lines: list[str] = []
    for item in items:
        shown = value_lines(item, cut(repr(item), width), width)
        lines.extend(f"{mark} {line}" for line in shown)
    return lines


def _print_diff(args: argparse.Namespace, result: Any) -> None:
    old, new, changes = result
    width = _width(args)
    print(f"thread {args.thread_id}: {len(changes)} channel(s) changed")
    print(f"  from {old}")
    print(f"  to   {new}")
    for d in changes:
        versions = f"v{short_version(d.old_version)} -> v{short_version(d.new_version)}"
        if d.items is not None and (d.old is not None or d.new is not None):
            items = d.items
            counts = ", ".join(
                f"{label} {n}"
                for label, n in (
                    ("+", len(items.appended)),
                    ("-", len(items.removed)),
                    ("~", len(items.replaced)),
                )
                if n
            )
            lines = _item_lines("+", items.appended, width) + _item_lines("-", items.removed, width)
            for before, after in items.replaced:
                lines += _item_lines("~-", [before], width) + _item_lines("~+", [after], width)
            _print_block(f"  {d.channel} ({versions}; {counts or 'same items'})", lines)
            continue
        if d.old is None and d.new is None:  # a trigger consumed, or set and consumed
            print(f"  {d.channel} ({versions}; no value either side)")
            continue
        lines = []
        if d.old_version is not None:
            lines += [f"- {line}" for line in _view_lines(d.old, width)]
        if d.new_version is not None:
            lines += [f"+ {line}" for line in _view_lines(d.new, width)]
        _print_block(f"  {d.channel} ({versions})", lines)


# --- writes -------------------------------------------------------------------------------


def _writes_call(args: argparse.Namespace) -> Call:
    async def call(i: Any) -> Any:
        checkpoint_id = await _checkpoint(i, args, args.checkpoint_id)
        listed = await _ask(
            i.writes(
                args.thread_id,
                checkpoint_id,
                checkpoint_ns=args.ns,
                values=args.values,
                width=args.width,
            )
        )
        return checkpoint_id, listed

    return call


def _writes_json(args: argparse.Namespace, result: Any) -> Any:
    checkpoint_id, listed = result
    writes = []
    for w in listed:
        item = {k: v for k, v in dataclasses.asdict(w).items() if k != "value"}
        if args.values:
            item["value"] = _value_json(w.value)
        writes.append(item)
    return {
        "thread_id": args.thread_id,
        "checkpoint_ns": args.ns,
        "checkpoint_id": checkpoint_id,
        "writes": writes,
    }


def _print_writes(args: argparse.Namespace, result: Any) -> None:
    checkpoint_id, listed = result
    width = _width(args)
    tasks = short_ids(w.task_id for w in listed)
    table(
        f"{len(listed)} write(s) of checkpoint {checkpoint_id} in execution order",
        ["#", "TASK", "TASK PATH", "IDX", "CHANNEL", "BYTES", "WRITTEN"],
        [
            [n, tasks[w.task_id], w.task_path, w.idx, w.channel, w.bytes, utc_time(w.created_at)]
            for n, w in enumerate(listed, start=1)
        ],
        optional=["IDX", "WRITTEN"],
        text=["TASK PATH", "CHANNEL"],
    )
    if args.values:
        for n, w in enumerate(listed, start=1):
            _print_block(f"  #{n} {w.channel}", _view_lines(w.value, width))


# --- stats ---------------------------------------------------------------------------------


def _stats_call(args: argparse.Namespace) -> Call:
    async def call(i: Any) -> Any:
        return await _ask(
            i.write_stats(
                by=args.by,
                since=args.since,
                until=args.until,
                thread_id=args.thread,
                checkpoint_ns=args.ns,
                limit=args.limit,
            )
        )

    return call


def _stats_json(args: argparse.Namespace, result: Any) -> Any:
    return {
        "by": args.by,
        "groups": [{**dataclasses.asdict(s), "avg_bytes": s.avg_bytes} for s in result],
    }


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
        optional=["FIRST", "AVG BYTES", "THREADS"],
    )


# --- latest --------------------------------------------------------------------------------


def _latest_call(args: argparse.Namespace) -> Call:
    async def call(i: Any) -> Any:
        return await _ask(i.latest(args.channel, args.thread_ids, checkpoint_ns=args.ns))

    return call


def _latest_json(args: argparse.Namespace, result: Any) -> Any:
    return {
        "channel": args.channel,
        "checkpoint_ns": args.ns,
        "values": {
            t: {
                "checkpoint_id": v.checkpoint_id,
                "version": v.version,
                "value": jsonable_value(v.value),
            }
            for t, v in result.items()
        },
        "missing": [t for t in dict.fromkeys(args.thread_ids) if t not in result],
    }


def _print_latest(args: argparse.Namespace, result: Any) -> None:
    from lg_sqla.inspection import summarize

    width = _width(args)
    missing = [t for t in dict.fromkeys(args.thread_ids) if t not in result]
    print(f"latest {args.channel!r} of {len(result)} thread(s)")
    for t, v in result.items():
        view = summarize(v.value, args.width)
        _print_block(f"  {t} (checkpoint {v.checkpoint_id})", _view_lines(view, width))
    if missing:
        print(f"no value: {', '.join(missing)}")


# --- storage -------------------------------------------------------------------------------


def _storage_call(args: argparse.Namespace) -> Call:
    async def call(i: Any) -> Any:
        report = await _ask(i.storage(thread_id=args.thread))
        # On disk: whole tables only (a thread's rows have no size of their own there).
        return report, None if args.thread else await _ask(i.disk_usage())

    return call


def _storage_json(args: argparse.Namespace, result: Any) -> Any:
    return disk.storage_json(result)


def _print_storage(args: argparse.Namespace, result: Any) -> None:
    disk.print_storage(args, result)


# --- the readings, by command ----------------------------------------------------------------


@dataclass(frozen=True)
class _Reading:
    """What a read command asks the inspector, and how it prints the answer: a table
    (or text), or with --json one JSON object (json.dumps does the rest)."""

    call: Callable[[argparse.Namespace], Call]
    print_table: Callable[[argparse.Namespace, Any], None]
    as_json: Callable[[argparse.Namespace, Any], Any]


_READINGS = {
    "threads": _Reading(_threads_call, _print_threads, _threads_json),
    "history": _Reading(_history_call, _print_history, _history_json),
    "show": _Reading(_show_call, _print_show, _show_json),
    "diff": _Reading(_diff_call, _print_diff, _diff_json),
    "writes": _Reading(_writes_call, _print_writes, _writes_json),
    "stats": _Reading(_stats_call, _print_stats, _stats_json),
    "latest": _Reading(_latest_call, _print_latest, _latest_json),
    "storage": _Reading(_storage_call, _print_storage, _storage_json),
}
