"""`symbnn barrier A B`: loss barrier along the linear path between a network of store A and
one of store B, without and with alignment modulo permutations.

Barrier: max_t L(t) - ((1 - t) L(0) + t L(1)), the largest rise of the loss over the
endpoints' t-weighted mean (column `barrier`); `barrier_midpoint` uses (L(0) + L(1)) / 2.
The data are those of A's `data` attribute (the experiment's dataset), from --data-root.
"""

from __future__ import annotations

import json

from symbnn.commands import nonnegative_int, setting_option
from symbnn.settings import Alignment, Config


def _run(args) -> int:
    # local: keeps numba, polars, scipy, torch, zarr out of the command line's start
    from symbnn.alignment.stores import store_barriers

    # local: keeps polars out of the command line's start
    from symbnn.report.tables import to_markdown, write_table

    curves, barriers = store_barriers(
        args.a,
        args.b,
        row_a=args.row_a,
        row_b=args.row_b,
        data_root=args.data_root,
        splits=tuple(args.split),
        points=args.points,
        bn_batches=args.bn_batches,
        max_sweeps=args.max_sweeps,
    )
    if args.curves:
        write_table(curves, args.curves)
    if args.json:
        print(json.dumps(barriers.to_dicts(), indent=2))
    else:
        print(
            to_markdown(
                barriers.select(
                    "alignment",
                    "split",
                    "barrier",
                    "barrier_midpoint",
                    "t_max",
                    "loss_0",
                    "loss_1",
                    "accuracy_min",
                )
            ),
            end="",
        )
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "barrier", help="loss barrier between two stored networks, without and with alignment"
    )
    parser.add_argument(
        "a", metavar="A", help="store holding network A (its `data` attribute names the data)"
    )
    parser.add_argument("b", metavar="B", help="store holding network B")
    parser.add_argument("--row-a", type=nonnegative_int, default=0, help="row of A (default: 0)")
    parser.add_argument("--row-b", type=nonnegative_int, default=0, help="row of B (default: 0)")
    parser.add_argument(
        "--split",
        **setting_option(Alignment, "splits"),
        help="data split(s) the loss is measured on (default: %(default)s)",
    )
    parser.add_argument(
        "--points",
        **setting_option(Alignment, "points"),
        help="points on the path, endpoints included (default: %(default)s)",
    )
    parser.add_argument(
        "--bn-batches",
        **setting_option(Alignment, "bn_batches"),
        help="training batches that re-estimate BatchNorm statistics along the path "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--max-sweeps",
        **setting_option(Alignment, "max_sweeps"),
        help="coordinate-descent sweeps at most (default: %(default)s)",
    )
    parser.add_argument(
        "--data-root",
        **setting_option(Config, "data_root"),
        help="folder of the real datasets (default: %(default)s)",
    )
    parser.add_argument(
        "--curves", help="also write the curves (parquet, or CSV/Markdown by suffix)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=_run)
