"""The CLI's commands come from its family modules: each command `lg-sqla --help`
lists is registered by exactly one of them, which also holds its handler."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from lg_sqla import cli
from lg_sqla.cli.common import Commands, commands


def _registered(register: Callable[[Commands], None]) -> dict[str, argparse.ArgumentParser]:
    subcommands = commands(argparse.ArgumentParser())
    register(subcommands)
    return dict(subcommands.subparsers.choices)


def _listed() -> list[str]:
    parser = cli._parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [choice.dest for choice in action._choices_actions]  # --help's order


def test_every_command_is_registered_by_exactly_one_family() -> None:
    names = [name for register in cli.FAMILIES for name in _registered(register)]
    assert len(names) == len(set(names)), "a command registered twice"
    assert names == _listed()


def test_each_family_holds_its_handlers() -> None:
    for register in cli.FAMILIES:
        for name, parser in _registered(register).items():
            handler = parser.get_default("handler")
            assert callable(handler), name
            assert handler.__module__ == register.__module__, (name, handler.__module__)
