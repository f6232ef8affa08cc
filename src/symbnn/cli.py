"""symbnn's command line: one step of the workflow at a time, and tools for its stores.

Each module in `symbnn.commands` adds its own sub-commands by defining
``register(subparsers)``; this file only discovers and dispatches them.

One error path: a bad option value, a bad or damaged file, a full disk or a permission
problem ends the command with one line, ``symbnn COMMAND: error: ...`` naming the file, key
or value, and exit status 1 (`symbnn.runlog.expected_error` decides what is expected);
anything else is a bug and keeps its traceback. Code of your own that fails (a model, method
or dataset loader named by import path) is told the same way, naming the code and the step;
``symbnn --debug COMMAND ...`` prints the traceback of any error as well.

Two options of `symbnn` itself, before the command, concern what data may do (docs/stores.md):
``--trust-model package.module:Net`` (repeatable) allows a store to name that model of your
own (the current folder's config.yaml, when valid, is trusted too), and ``--allow-unverified``
opens stores of the old format (no digest) with a warning instead of refusing them."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import traceback
from pathlib import Path

import symbnn
import symbnn.commands
from symbnn import store, trust
from symbnn.config_code import load_checked_config
from symbnn.memory import options_as_flags
from symbnn.runlog import EXIT_FAILURE, expected_error, from_user_code

CONFIG = Path("config.yaml")


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error exits with status 1 like every other failure."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_FAILURE, f"{self.prog}: error: {message}\n")


def import_path(text: str) -> str:
    """``package.module:attribute`` (an argparse type)."""
    if not trust.IMPORT_PATH.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an import path package.module:attribute (e.g. mynets:SmallCNN)"
        )
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="symbnn",
        description=__doc__.splitlines()[0],
        epilog="`symbnn COMMAND --help` describes each command and its options.",
    )
    parser.add_argument("--version", action="version", version=f"symbnn {symbnn.__version__}")
    parser.add_argument(
        "--trust-model",
        action="append",
        type=import_path,
        default=[],
        metavar="MODULE:ATTRIBUTE",
        help="a model of your own that stores may name by import path (repeatable; the "
        "models config.yaml names are trusted too)",
    )
    parser.add_argument(
        "--allow-unverified",
        action="store_true",
        help="open stores of the old format (no digest) with a warning instead of refusing "
        "them (`symbnn store upgrade` converts them for good)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="print the traceback of an error too (the code of your own that failed, say), "
        "not only its one line",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module_info in sorted(pkgutil.iter_modules(symbnn.commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"symbnn.commands.{module_info.name}")
        module.register(subparsers)
    describe_subcommands(parser)
    return parser


def describe_subcommands(parser: argparse.ArgumentParser) -> None:
    """Give every sub-command without a description its one-line help as one, so that
    `symbnn COMMAND --help` says what the command does (argparse shows `help` only in the
    parent's list)."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            if not sub.description and helps.get(name):
                text = helps[name]
                sub.description = text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")
            describe_subcommands(sub)


def trust_named_models(paths: list[str]) -> None:
    """Trust the --trust-model paths, and those the current folder's config.yaml names (read
    only if a store names a model that is not trusted otherwise)."""
    for path in paths:
        trust.trust_model(path)
    if CONFIG.is_file():
        trust.add_source(_load_config_here)


def _load_config_here() -> None:
    load_checked_config(CONFIG)  # trusts the models it names once they pass its checks


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    trust_named_models(args.trust_model)
    store.allow_unverified(args.allow_unverified)
    try:
        with options_as_flags():  # a parameter too large for memory is named as its flag
            return int(args.handler(args) or 0)
    except Exception as exc:
        message = expected_error(exc)
        if message is None:
            raise
        if args.debug:
            traceback.print_exception(exc, file=sys.stderr)
        elif from_user_code(exc):
            message += " (`symbnn --debug ...` prints its traceback)"
        print(f"symbnn {args.command}: error: {message}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
