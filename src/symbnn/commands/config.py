"""`symbnn config check [PATH]` and `symbnn config schema`: the settings layer on the command
line (check a configuration and print it with every default filled in; print the JSON schema
of config.yaml for editors)."""

from __future__ import annotations

import json

from symbnn.config_code import load_checked_config
from symbnn.settings.schema import config_schema


def _check(args) -> int:
    import yaml

    config = load_checked_config(args.path)
    if args.resolved:
        print(yaml.safe_dump(config.to_dict(), sort_keys=False), end="")
    else:
        print(
            f"{args.path}: OK ({len(config.experiments)} experiments, run: {', '.join(config.run)})"
        )
    return 0


def _schema(args) -> int:
    print(json.dumps(config_schema(), indent=2))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("config", help="check config.yaml, or print its JSON schema")
    actions = parser.add_subparsers(dest="action", required=True)
    check = actions.add_parser("check", help="check a configuration file")
    check.add_argument("path", nargs="?", default="config.yaml", help="default: %(default)s")
    check.add_argument(
        "--resolved", action="store_true", help="print it with every default filled in"
    )
    check.set_defaults(handler=_check)
    schema = actions.add_parser("schema", help="print the JSON schema of config.yaml")
    schema.set_defaults(handler=_schema)
