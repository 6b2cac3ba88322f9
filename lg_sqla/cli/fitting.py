"""Tables that fit the terminal: no id, status or date ever wrapped inside its cell.

A table wider than the terminal is narrowed in this order, the same for rich's tables
(their borders counted: ``RICH``) and plain text (two spaces between columns: ``PLAIN``):

1. times lose their seconds (``2026-01-31 12:00``);
2. the columns the command marks optional are left out, least useful first, and a
   note under the table names them (``--json`` has every field);
3. free-text columns (values, messages) are cut, with an ellipsis.

Ids, statuses, times and counts are never cut or wrapped: a table whose ids alone are
wider than the terminal is printed wider (the terminal then folds whole lines).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Frame:
    """What a table adds to its cells' widths: between two columns, and at its edges."""

    gap: int
    edges: int


PLAIN = Frame(gap=2, edges=0)
RICH = Frame(gap=3, edges=4)  # "┃ " ... " ┃ " ... " ┃"
ELLIPSIS = "…"
# A free-text cell keeps at least this many characters (with its ellipsis).
MIN_TEXT = 12
_SECONDS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")


def terminal_columns() -> int:
    """The terminal's width: ``$COLUMNS``, else the terminal's own, else 80."""
    return shutil.get_terminal_size((80, 24)).columns


def plain_width() -> int | None:
    """The width plain tables fit: the terminal's when stdout is one or ``$COLUMNS`` is
    set; None on a pipe (scripts get whole rows; ``--json`` is for them anyway)."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return terminal_columns()
    return None


@dataclass
class Layout:
    """What a table shows once fitted: its columns and cells, and what it left out."""

    columns: list[str]
    rows: list[list[str]]
    hidden: list[str] = field(default_factory=list)

    def note(self) -> str | None:
        if not self.hidden:
            return None
        return f"(not shown at this width: {', '.join(self.hidden)}; --json has them)"


def _widths(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]


def _total(widths: Sequence[int], frame: Frame) -> int:
    return sum(widths) + frame.gap * max(len(widths) - 1, 0) + frame.edges


def _without(layout: Layout, index: int) -> Layout:
    return Layout(
        [c for i, c in enumerate(layout.columns) if i != index],
        [[c for i, c in enumerate(row) if i != index] for row in layout.rows],
        [*layout.hidden, layout.columns[index]],
    )


def _to_the_minute(layout: Layout) -> None:
    for i in range(len(layout.columns)):
        cells = [row[i] for row in layout.rows if row[i]]
        if cells and all(_SECONDS.match(cell) for cell in cells):
            for row in layout.rows:
                row[i] = row[i][:16]


def _cut_text(layout: Layout, text: Sequence[str], width: int, frame: Frame) -> None:
    """Cut the free-text columns, widest first, until the table fits (or cannot)."""
    while (over := _total(_widths(layout.columns, layout.rows), frame) - width) > 0:
        widths = _widths(layout.columns, layout.rows)
        candidates = [i for i, c in enumerate(layout.columns) if c in text and widths[i] > MIN_TEXT]
        if not candidates:
            return
        i = max(candidates, key=lambda n: widths[n])
        keep = max(MIN_TEXT, len(layout.columns[i]), widths[i] - over)
        for row in layout.rows:
            if len(row[i]) > keep:
                row[i] = row[i][: keep - 1] + ELLIPSIS
        if _widths(layout.columns, layout.rows)[i] == widths[i]:
            return  # (the header holds it at this width)


def fit(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    optional: Sequence[str] = (),
    text: Sequence[str] = (),
    frame: Frame = PLAIN,
) -> Layout:
    """The table's columns and cells narrowed to ``width`` (module docstring); None:
    as they are."""
    layout = Layout(list(columns), [list(row) for row in rows])
    if width is None or _total(_widths(layout.columns, layout.rows), frame) <= width:
        return layout
    _to_the_minute(layout)
    for name in optional:
        if _total(_widths(layout.columns, layout.rows), frame) <= width:
            break
        if name in layout.columns:
            layout = _without(layout, layout.columns.index(name))
    _cut_text(layout, text, width, frame)
    return layout
