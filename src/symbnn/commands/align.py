"""`symbnn align A B OUT`: align every network of store B to a network of store A modulo
permutations (weight matching, `symbnn.alignment`), writing an aligned store."""

from __future__ import annotations

from symbnn.commands import nonnegative_int, setting_option
from symbnn.settings import Alignment


def _run(args) -> int:
    # local: keeps numba, polars, scipy, torch, zarr out of the command line's start
    from symbnn.alignment.stores import align_store

    store = align_store(
        args.a,
        args.b,
        args.output,
        reference=args.reference,
        pairwise=args.pairwise,
        max_sweeps=args.max_sweeps,
        overwrite=args.overwrite,
    )
    import numpy as np

    before = np.median(store.info("align_objective_before"))
    after = np.median(store.info("align_objective_after"))
    target = "row i of A" if args.pairwise else f"row {args.reference} of A"
    print(
        f"{store.n_samples} samples aligned to {target}; median <A, B> over tensors "
        f"{before:.6g} -> {after:.6g}: {args.output}"
    )
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "align",
        help="align the networks of store B to store A modulo permutations (weight matching)",
    )
    parser.add_argument("a", metavar="A", help="reference store")
    parser.add_argument("b", metavar="B", help="store whose networks are permuted")
    parser.add_argument("output", metavar="OUT", help="aligned store to write (kind 'aligned')")
    parser.add_argument(
        "--reference",
        type=nonnegative_int,
        default=0,
        help="row of A every sample of B is aligned to (default: 0)",
    )
    parser.add_argument(
        "--pairwise", action="store_true", help="align row i of B to row i of A instead"
    )
    parser.add_argument(
        "--max-sweeps",
        **setting_option(Alignment, "max_sweeps"),
        help="coordinate-descent sweeps at most (default: %(default)s)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    parser.set_defaults(handler=_run)
