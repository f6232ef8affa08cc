"""`symbnn import-checkpoints SOURCE OUT --setting NAME`: the authors' released networks into
a weight store (docs/checkpoints.md)."""

from __future__ import annotations

from symbnn.commands import positive_int, setting_option
from symbnn.settings.checkpoints import Checkpoints


def _run(args) -> int:
    # local: keeps zarr out of the command line's start
    from symbnn.checkpoints import import_checkpoints

    # local: keeps zarr out of the command line's start
    from symbnn.checkpoints.download import download_bundles

    source = args.source
    if args.download:
        source = download_bundles(args.setting, args.source, args.first, args.count)
    store = import_checkpoints(
        source,
        args.output,
        args.setting,
        first=args.first,
        count=args.count,
        dtype=args.dtype,
        experiment=args.experiment,
        overwrite=args.overwrite,
    )
    seeds = store.info("seed")
    print(
        f"{store.n_samples} {args.setting} networks (release indices {seeds.min()}..{seeds.max()}) "
        f"as {args.dtype}: {store.path}"
    )
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "import-checkpoints",
        help="import the paper's released networks (torch-uncertainty/Checkpoints) into a store",
    )
    parser.add_argument(
        "source",
        metavar="SOURCE",
        help="a bundle (<setting>-<first>-<last>.tgz), a folder of bundles or an untarred "
        "bundle; with --download, the folder to download the bundles into",
    )
    parser.add_argument("output", metavar="OUT", help="weight store to write")
    parser.add_argument(
        "--setting",
        required=True,
        **setting_option(Checkpoints, "setting"),
        help="the released setting",
    )
    parser.add_argument(
        "--first",
        **setting_option(Checkpoints, "first"),
        help="release index of the first network",
    )
    parser.add_argument(
        "--count", type=positive_int, default=None, help="networks to import (default: all)"
    )
    parser.add_argument(
        "--dtype",
        **setting_option(Checkpoints, "dtype"),
        help="stored weights: float32 (the exact widening of the released float16, what "
        "every stage computes in) or float16 as released (default: %(default)s)",
    )
    parser.add_argument("--experiment", default=None, help="experiment name the store records")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing store")
    parser.add_argument(
        "--download",
        action="store_true",
        help="first download the needed bundles from the Hugging Face hub into SOURCE "
        "(needs internet and huggingface_hub)",
    )
    parser.set_defaults(handler=_run)
