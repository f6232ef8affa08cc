"""`symbnn` command line. Each module in `symbnn.commands` adds its own sub-commands by
defining ``register(subparsers)``; this file only discovers and dispatches them.

One error path: a bad option value, a bad or damaged file, a full disk or a permission
problem ends the command with one line, ``symbnn COMMAND: error: ...`` naming the file, key
or value, and exit status 1 (`symbnn.runlog.expected_error` decides what is expected);
anything else is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import symbnn
import symbnn.commands
from symbnn.memory import options_as_flags
from symbnn.runlog import EXIT_FAILURE, expected_error


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error exits with status 1 like every other failure."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_FAILURE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="symbnn", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"symbnn {symbnn.__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module_info in sorted(pkgutil.iter_modules(symbnn.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"symbnn.commands.{module_info.name}")
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with options_as_flags():  # a parameter too large for memory is named as its flag
            return int(args.handler(args) or 0)
    except Exception as exc:
        message = expected_error(exc)
        if message is None:
            raise
        print(f"symbnn {args.command}: error: {message}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
