"""The command line's argument parser: bad arguments are one line and exit status 2, like every other bad
input (argparse's own error prints the whole usage first). A leaf module: every command may use it."""

from __future__ import annotations

import argparse
import sys


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):
        print(f"ablate: {message}; see `{self.prog} --help`", file=sys.stderr)
        raise SystemExit(2)


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace | int:
    """`parser.parse_args(argv)`, or the exit status argparse asked for (--help: 0; bad input: 2), for the
    `main(argv) -> int` functions that must return their status rather than exit."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2


def plugins_arg(argv: list[str]) -> tuple[str, list[str]]:
    """The value of `plugins=NAMES` (or `--plugins=NAMES`; the last one given) among a command's arguments, and
    the other arguments: the commands that list what plug-ins add (keys, tasks) take it as `ablate train` does."""
    named = [a for a in argv if a.removeprefix("--").startswith("plugins=")]
    return (named[-1].partition("=")[2] if named else ""), [a for a in argv if a not in named]
