"""Ctrl-C in a long command: say what was done, that a rerun resumes, exit 130.

The long commands (``sweep``, ``prune``/``delete-thread``, ``ttl sweep``, ``vacuum``,
``import``, ``copy-thread``) commit their work in batches, or in one transaction. An
interrupt rolls back only the batch in flight; what the batches before it did stays
done. :func:`resumable` turns the ``KeyboardInterrupt`` into one ``error:`` line that
says so, with the exit code of a process ended by SIGINT (130, as shells report it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from lg_sqla.cli.common import CommandError

INTERRUPTED = 130


@contextmanager
def resumable(command: str, done: Callable[[], str], *, in_batches: bool = True) -> Iterator[None]:
    """Run the block; on Ctrl-C raise the ``CommandError`` (exit 130) that reports
    ``done()`` (what the committed batches did) and how to finish. ``in_batches``:
    False for a command that is one transaction (nothing of it stays done)."""
    try:
        yield
    except KeyboardInterrupt:
        if in_batches:
            report = (
                f"interrupted: {command} stopped; done so far: {done()} (each batch is "
                "committed; the one in flight was rolled back); run the same command again "
                "to resume"
            )
        else:
            report = (
                f"interrupted: {command} is one transaction, rolled back: {done()}; "
                "run the same command again"
            )
        raise CommandError(report, INTERRUPTED) from None
