"""`symbnn store info|validate PATH`."""

from __future__ import annotations

import json

from symbnn.predictions import validate_any
from symbnn.runlog import EXIT_FAILURE
from symbnn.store import StoreError, open_store, summary


def _info(args) -> int:
    info = summary(open_store(args.path))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    arch = ", ".join(f"{k}={v}" for k, v in info["architecture"].items())
    print(f"store        {info['path']}")
    print(f"kind         {info['kind']}   experiment {info['experiment']}")
    print(f"architecture {arch}")
    print(f"samples      {info['n_samples']}   converged {info['converged']}")
    mib = info["bytes"] / 2**20
    print(
        f"parameters   {info['n_parameters']} per sample in {info['n_arrays']} arrays, {mib:.2f} MiB in all"
    )
    width = max(len(name) for name in info["shapes"])
    for name, shape in info["shapes"].items():
        print(f"  {name:<{width}}  {tuple(shape)}")
    return 0


def _validate(args) -> int:
    try:
        notes = validate_any(args.path)
    except StoreError as exc:
        print(f"INVALID: {exc}")
        return EXIT_FAILURE
    if notes:
        print(f"OK: {args.path} (not fully verified)")
        for note in notes:
            print(f"  note: {note}")
    else:
        print(f"OK: {args.path} (every chunk read, checksums verified)")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("store", help="inspect a weight store")
    actions = parser.add_subparsers(dest="action", required=True)
    info = actions.add_parser(
        "info", help="architecture, samples, layers, shapes, bytes, converged count"
    )
    info.add_argument("path")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler=_info)
    validate = actions.add_parser(
        "validate",
        help="read every chunk; fail on a missing or damaged chunk, inconsistent metadata or "
        "NaN weights",
    )
    validate.add_argument("path")
    validate.set_defaults(handler=_validate)
