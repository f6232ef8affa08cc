"""`symbnn` command line. Each module in `symbnn.commands` adds its own sub-commands by
defining ``register(subparsers)``; this file only discovers and dispatches them."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import symbnn
import symbnn.commands
from symbnn.store import StoreError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="symbnn", description=__doc__.splitlines()[0])
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
        return int(args.handler(args) or 0)
    except (StoreError, ValueError, OSError) as exc:
        print(f"symbnn {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
