"""What the commands print: tables, JSON, progress, and the confirmation question."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from lg_sqla.cli import fitting


def _rich() -> Any:
    """rich's Console on a terminal when the ``[cli]`` extra is installed, else None."""
    if not sys.stdout.isatty():
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


def utc_time(value: dt.datetime | None) -> str:
    """A time as tables show it: UTC, to the second; empty when unknown."""
    return "" if value is None else value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    optional: Sequence[str] = (),
    text: Sequence[str] = (),
) -> None:
    """Print rows as a table: rich's on a terminal, aligned plain text otherwise, both
    fitted to the terminal's width (``cli.fitting``): ``optional`` columns, least useful
    first, are left out when it is narrow, ``text`` columns cut; no other cell wraps."""
    cells = [[str(c) for c in row] for row in rows]
    console = _rich()
    width = console.width if console is not None else fitting.plain_width()
    frame = fitting.RICH if console is not None else fitting.PLAIN
    layout = fitting.fit(columns, cells, width, optional=optional, text=text, frame=frame)
    widths = [
        max([len(c), *(len(r[i]) for r in layout.rows)]) for i, c in enumerate(layout.columns)
    ]
    if console is not None:
        _rich_table(console, title, layout, widths)
    else:
        # The title is no cell: folded between words at the width, as rich folds it.
        print(
            title
            if width is None
            else textwrap.fill(title, width, break_long_words=False, break_on_hyphens=False)
        )
        for row in [layout.columns, *layout.rows]:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if (note := layout.note()) is not None:
        print(
            note
            if width is None
            else textwrap.fill(note, width, break_long_words=False, break_on_hyphens=False)
        )


def _rich_table(console: Any, title: str, layout: fitting.Layout, widths: list[int]) -> None:
    from rich.table import Table

    # Each column at least as wide as its widest cell: rich would otherwise narrow
    # (and fold) ids to fit the terminal; cli.fitting made the table fit already.
    view = Table(title=title, title_justify="left")
    for column, width in zip(layout.columns, widths, strict=True):
        view.add_column(column, no_wrap=True, min_width=width)
    for row in layout.rows:
        view.add_row(*row)
    console.print(view, crop=False)


def jsonable(value: Any) -> Any:
    """``json.dumps``'s fallback for what inspection results hold."""
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
    print(json.dumps(value, default=jsonable, ensure_ascii=False, indent=2))


def say(args: argparse.Namespace, data: Any, text: str) -> None:
    """A command's report: ``data`` as JSON with ``--json``, else the sentence ``text``."""
    if getattr(args, "json", False):
        emit_json(data)
    else:
        print(text)


def confirm(args: argparse.Namespace, question: str) -> bool:
    """Ask on a terminal unless --yes; scripts (no terminal) go ahead."""
    if args.yes or not sys.stdin.isatty():
        return True
    answer = input(f"{question} [y/N] ").strip().lower()
    return answer in ("y", "yes")


class Progress:
    """A progress bar with totals on a terminal (rich), plain lines otherwise; nothing
    with ``--json`` (stdout is then one JSON document)."""

    def __init__(self, label: str, total: int | None, args: argparse.Namespace) -> None:
        self.label, self.total = label, total
        self.quiet = bool(getattr(args, "json", False))
        self._task: Any = None
        console = None if self.quiet else _rich()
        self._bar: Any = None if console is None else _rich_bar(console)

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


def _rich_bar(console: Any) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as RichProgress

    return RichProgress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
