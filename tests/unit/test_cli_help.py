"""`lg-sqla --help` and every subcommand's help are plain text: no reStructuredText
markup from the docstrings they are built from."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

from lg_sqla.cli import _parser


def _helps(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, str]]:
    yield path, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _helps(sub, f"{path} {name}")


def test_every_help_is_plain_text() -> None:
    helps = dict(_helps(_parser(), "lg-sqla"))
    # The top level, every command, and the families' subcommands (store, ttl).
    assert {"lg-sqla", "lg-sqla upgrade", "lg-sqla store search", "lg-sqla ttl set"} <= set(helps)
    marked = {path: text.count("``") for path, text in helps.items() if "``" in text}
    assert marked == {}


def test_the_command_prints_its_help_in_plain_text() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lg_sqla", "--help"], capture_output=True, text=True, check=True
    )
    assert "lg-sqla <command> --url <database url>" in done.stdout
    assert "``" not in done.stdout and "$LG_SQLA_DATABASE_URL" in done.stdout
