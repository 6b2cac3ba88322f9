"""Store commands: ``lg-sqla store namespaces | search | get | stats | sweep-ttl``.

The long-term memory (``lg_sqla.store``) as an operator sees it. A namespace is
written with dots, ``users.ada`` for ``("users", "ada")``: LangGraph forbids dots
in namespace labels, so the spelling is unambiguous. Reads open the store
read-only, so looking at an item never refreshes its TTL.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from lg_sqla import migrate
from lg_sqla.cli.common import (
    CommandError,
    Commands,
    key_value,
    note_values_read_as_json,
    positive,
    storage_of,
    sync_url,
    with_connection,
)
from lg_sqla.cli.output import confirm, emit_json, human_bytes, say, table, utc_time

if TYPE_CHECKING:
    from langgraph.store.base import Item, SearchItem

    from lg_sqla.store import SQLAlchemyStore

DEFAULT_LIMIT = 100
# Adds a store subcommand: name, help, handler, parent parsers; returns its parser.
AddCommand = Callable[..., argparse.ArgumentParser]
_Listed = TypeVar("_Listed")


def register(commands: Commands) -> None:
    store = commands.add(
        "store",
        "the long-term memory store: namespaces, search, get, stats, sweep-ttl",
        missing_subcommand,
    )
    family = store.add_subparsers(dest="store_command", required=True, metavar="STORE_COMMAND")

    def add(
        name: str, help: str, handler: Any, *parents: argparse.ArgumentParser
    ) -> argparse.ArgumentParser:
        parser = family.add_parser(name, parents=list(parents), help=help, description=help)
        parser.set_defaults(handler=handler)
        return parser

    _add_reading(add, commands)
    _add_sweep(add, commands)


def _add_reading(add: AddCommand, commands: Commands) -> None:
    """The store commands that only read: namespaces, search, get, stats."""
    listing = add("namespaces", "list the store's namespaces", namespaces, commands.reading)
    listing.add_argument("--prefix", type=namespace, help="only namespaces starting with this")
    listing.add_argument("--suffix", type=namespace, help="only namespaces ending with this")
    listing.add_argument(
        "--max-depth", type=positive, help="cut namespaces to this many labels (distinct)"
    )
    _page(listing)

    finding = add(
        "search",
        "items in a namespace and those below it, newest first",
        search,
        commands.reading,
        commands.width,
    )
    finding.add_argument(
        "namespace",
        type=namespace,
        nargs="?",
        default=(),
        metavar="NAMESPACE",
        help="namespace prefix, e.g. users.ada (default: the whole store)",
    )
    finding.add_argument(
        "--filter",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only items whose value has KEY equal to VALUE (JSON if it parses); repeatable",
    )
    _page(finding, default=10)

    getting = add("get", "one item, whole", get, commands.reading)
    getting.add_argument("namespace", type=namespace, metavar="NAMESPACE", help="e.g. users.ada")
    getting.add_argument("key", metavar="KEY")

    add(
        "stats",
        "items, namespaces, TTLs, vectors and cache entries, with their bytes",
        stats,
        commands.reading,
    )


def _add_sweep(add: AddCommand, commands: Commands) -> None:
    """``store sweep-ttl``."""
    sweeping = add(
        "sweep-ttl",
        "delete the items whose TTL has passed (and their vectors) now",
        sweep_ttl,
        commands.common,
    )
    sweeping.add_argument(
        "--dry-run", action="store_true", help="only count the expired items, delete nothing"
    )
    sweeping.add_argument(
        "--yes", "-y", action="store_true", help="do not ask for confirmation on a terminal"
    )
    sweeping.add_argument("--json", action="store_true", help="print the report as JSON")


def _page(parser: argparse.ArgumentParser, default: int = DEFAULT_LIMIT) -> None:
    parser.add_argument(
        "--limit", type=positive, default=default, help=f"at most this many (default {default})"
    )
    parser.add_argument(
        "--offset", type=int, default=0, help="skip this many first (paging; default 0)"
    )


def missing_subcommand(args: argparse.Namespace) -> int:
    """Never reached (argparse requires a store command); the family's handler."""
    raise CommandError("name a store command: namespaces, search, get, stats, sweep-ttl", 2)


def namespace(text: str) -> tuple[str, ...]:
    """``users.ada`` -> ``("users", "ada")``; empty text: the root (every namespace)."""
    if text == "":
        return ()
    labels = tuple(text.split("."))
    if any(label == "" for label in labels):
        raise argparse.ArgumentTypeError(
            f"{text!r} has an empty label: write a namespace as labels joined by dots, "
            "e.g. users.ada"
        )
    return labels


def dotted(labels: tuple[str, ...] | list[str]) -> str:
    return ".".join(labels)


@contextmanager
def _store(args: argparse.Namespace, *, read_only: bool) -> Iterator[SQLAlchemyStore]:
    from lg_sqla.store import SQLAlchemyStore

    url = sync_url(args)
    with SQLAlchemyStore.from_conn_string(url, schema=args.schema, read_only=read_only) as store:
        yield store


# --- namespaces, search, get ------------------------------------------------------------------


def _listing(
    args: argparse.Namespace,
    name: str,
    read: Callable[[SQLAlchemyStore], list[_Listed]],
    as_json: Callable[[_Listed], Any],
    print_table: Callable[[list[_Listed]], None],
) -> int:
    """One page of a listing (``--limit``, ``--offset``), read on a read-only store:
    as JSON under ``name`` with the next page's offset, or as a table followed by the
    option that reads the next page."""
    if args.offset < 0:
        raise CommandError(f"--offset must be >= 0, got {args.offset}", 2)
    with _store(args, read_only=True) as store:
        found = read(store)
    next_offset = args.offset + len(found) if len(found) == args.limit else None
    if args.json:
        emit_json({name: [as_json(x) for x in found], "next_offset": next_offset})
        return 0
    print_table(found)
    if next_offset is not None:
        print(f"more: --offset {next_offset}")
    return 0


def namespaces(args: argparse.Namespace) -> int:
    return _listing(
        args,
        "namespaces",
        lambda store: store.list_namespaces(
            prefix=args.prefix,
            suffix=args.suffix,
            max_depth=args.max_depth,
            limit=args.limit,
            offset=args.offset,
        ),
        list,
        lambda found: table("store namespaces", ["NAMESPACE"], [[dotted(ns)] for ns in found]),
    )


def _item_json(item: Item) -> dict[str, Any]:
    data = item.dict()
    data["namespace"] = list(item.namespace)
    return data


def _preview(value: dict[str, Any], width: int) -> str:
    """An item's value as one line of at most ``width`` characters (JSON)."""
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def search(args: argparse.Namespace) -> int:
    return _listing(
        args,
        "items",
        lambda store: store.search(
            args.namespace, filter=dict(args.filter) or None, limit=args.limit, offset=args.offset
        ),
        _item_json,
        lambda items: _print_items(args, items),
    )


def _print_items(args: argparse.Namespace, items: list[SearchItem]) -> None:
    table(
        f"store items under {dotted(args.namespace) or '(root)'}",
        ["NAMESPACE", "KEY", "UPDATED (UTC)", "VALUE"],
        [
            [dotted(i.namespace), i.key, utc_time(i.updated_at), _preview(i.value, args.width)]
            for i in items
        ],
        text=["VALUE"],
    )
    if not items:
        note_values_read_as_json("--filter", args.filter)


def get(args: argparse.Namespace) -> int:
    import json

    with _store(args, read_only=True) as store:
        item = store.get(args.namespace, args.key)
    if item is None:
        raise CommandError(f"no item {args.key!r} in namespace {dotted(args.namespace)!r}")
    if args.json:
        emit_json(_item_json(item))
        return 0
    print(f"namespace: {dotted(item.namespace)}")
    print(f"key:       {item.key}")
    print(f"created:   {utc_time(item.created_at)} UTC")
    print(f"updated:   {utc_time(item.updated_at)} UTC")
    print(json.dumps(item.value, ensure_ascii=False, indent=2, default=str))
    return 0


# --- stats ------------------------------------------------------------------------------------


def _stats(connection: Connection) -> dict[str, Any]:
    """Counts over the store and cache tables: one statement each, no row read twice."""
    from lg_sqla.models import cache_entries, store_items
    from lg_sqla.shared import utc_now

    migrate.check_schema(connection)
    now = utc_now()
    items = store_items.c
    ttl = connection.execute(
        sa.select(
            sa.func.count(sa.distinct(items.prefix_hash)),
            sa.func.count(items.expires_at),
            sa.func.count(sa.case((items.expires_at <= now, 1))),
        )
    ).one()
    cache_expired = connection.execute(
        sa.select(sa.func.count()).where(cache_entries.c.expires_at <= now)
    ).scalar_one()
    usage = storage_of(connection, {"store_items", "store_vectors", "cache_entries"})
    return {
        "items": usage.tables["store_items"].rows,
        "namespaces": int(ttl[0]),
        "items_with_ttl": int(ttl[1]),
        "items_expired": int(ttl[2]),
        "vectors": usage.tables["store_vectors"].rows,
        "cache_entries": usage.tables["cache_entries"].rows,
        "cache_entries_expired": int(cache_expired),
        "bytes": {name: t.bytes for name, t in usage.tables.items()},
    }


def stats(args: argparse.Namespace) -> int:
    report = with_connection(args, _stats)
    if args.json:
        emit_json(report)
        return 0
    sizes = report["bytes"]
    table(
        "store",
        ["WHAT", "COUNT", "BYTES"],
        [
            ["items", report["items"], human_bytes(sizes["store_items"])],
            ["namespaces", report["namespaces"], ""],
            ["items with a TTL", report["items_with_ttl"], ""],
            ["items expired (sweep-ttl removes them)", report["items_expired"], ""],
            ["vectors", report["vectors"], human_bytes(sizes["store_vectors"])],
            ["node cache entries", report["cache_entries"], human_bytes(sizes["cache_entries"])],
            ["node cache entries expired", report["cache_entries_expired"], ""],
        ],
    )
    return 0


# --- sweep-ttl --------------------------------------------------------------------------------


def _expired(connection: Connection) -> tuple[int, dt.datetime]:
    from lg_sqla.models import store_items
    from lg_sqla.shared import utc_now

    migrate.check_schema(connection)
    now = utc_now()
    count = connection.execute(
        sa.select(sa.func.count()).where(store_items.c.expires_at <= now)
    ).scalar_one()
    return int(count), now


def sweep_ttl(args: argparse.Namespace) -> int:
    expired, now = with_connection(args, _expired)
    if args.dry_run:
        say(
            args,
            {"dry_run": True, "expired_items": expired},
            f"dry run: would delete {expired} expired item(s) (and their vectors)",
        )
        return 0
    if expired and not confirm(args, f"Delete {expired} store item(s) expired by {now:%H:%M} UTC?"):
        raise CommandError("cancelled: nothing was changed")
    with _store(args, read_only=False) as store:
        removed = store.sweep_ttl()
    say(
        args,
        {"dry_run": False, "removed_items": removed},
        f"done: deleted {removed} expired item(s) and their vectors",
    )
    return 0
