"""`symbnn store info|validate PATH` and `symbnn store upgrade PATH...` (docs/stores.md)."""

from __future__ import annotations

import json
from pathlib import Path

from symbnn.runlog import EXIT_FAILURE
from symbnn.store import StoreError, open_store, summary
from symbnn.store.predictions import validate_any
from symbnn.store.upgrade import find_stores, needs_upgrade, upgrade


def _info(args) -> int:
    info = summary(open_store(args.path))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    arch = ", ".join(f"{k}={v}" for k, v in info["architecture"].items())
    print(f"store        {info['path']}")
    print(f"kind         {info['kind']}   experiment {info['experiment']}")
    print(f"architecture {arch}")
    # the target's acceptance is in posterior/converged.parquet: its store records no flag
    known = "" if info["converged"] is None else f"   converged {info['converged']}"
    print(f"samples      {info['n_samples']}{known}")
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
        print(
            f"OK: {args.path} (metadata matches the digest; every chunk read, checksums verified)"
        )
    return 0


def _upgrade(args) -> int:
    paths: list[Path] = []
    current = 0  # stores of a folder already current: nothing to do
    for given in map(Path, args.paths):
        if given.is_dir() and not (given / "zarr.json").exists():  # a folder of results
            stores = sorted(find_stores(given))
            found = [store for store in stores if needs_upgrade(store)]
            current += len(stores) - len(found)
            print(f"{given}: {len(found)} store(s) to upgrade, {len(stores) - len(found)} current")
            paths += found
        else:
            paths.append(given)
    upgraded = failed = 0
    for path in paths:
        old = needs_upgrade(path)
        try:
            for line in upgrade(path):
                print(line)
        except StoreError as exc:
            failed += 1
            print(f"FAILED: {exc}")
            continue
        upgraded, current = upgraded + old, current + (not old)
    print(f"upgrade: {current} store(s) already current, {upgraded} upgraded, {failed} failed")
    return EXIT_FAILURE if failed else 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("store", help="inspect a weight store")
    actions = parser.add_subparsers(dest="action", required=True)
    info = actions.add_parser(
        "info", help="architecture, samples, layers, shapes, bytes, converged count"
    )
    info.add_argument("path", help="a weight store (a folder ending in .zarr)")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")
    info.set_defaults(handler=_info)
    validate = actions.add_parser(
        "validate",
        help="read every chunk; fail on a missing or damaged chunk, inconsistent metadata or "
        "NaN weights",
    )
    validate.add_argument("path", help="a weight store or a predictions store")
    validate.set_defaults(handler=_validate)
    upgrade = actions.add_parser(
        "upgrade",
        help="verify every chunk of a store of the older format (no digest) and record its "
        "manifest and digest; a folder: every such store under it",
    )
    upgrade.add_argument(
        "paths", nargs="+", metavar="PATH", help="stores, or folders searched for stores"
    )
    upgrade.set_defaults(handler=_upgrade)
