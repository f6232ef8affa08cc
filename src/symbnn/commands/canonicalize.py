"""`symbnn canonicalize IN OUT`: write the canonical form of every network of a store."""

from __future__ import annotations


def _run(args) -> int:
    from symbnn.symmetry.canonical_store import canonicalize_store

    canonicalize_store(
        args.input,
        args.output,
        scale=args.scale,
        key=args.key,
        softmax_shift=not args.no_softmax_shift,
        on_dead=args.on_dead,
        overwrite=args.overwrite,
    )
    print(f"canonical store written: {args.output}")
    return 0


def register(subparsers) -> None:
    from symbnn.settings import SymmetryRemoval

    parser = subparsers.add_parser(
        "canonicalize",
        help="remove scaling, permutation and softmax symmetries from a store (docs/maths.md, section 2)",
    )
    parser.add_argument("input", metavar="IN", help="weight store to read")
    parser.add_argument("output", metavar="OUT", help="canonical store to write")
    parser.add_argument(
        "--scale",
        choices=SymmetryRemoval.choices("scale"),
        default=SymmetryRemoval.default("scale"),
        help="scale normalisation of each unit's incoming weights (default: %(default)s)",
    )
    parser.add_argument(
        "--key",
        choices=SymmetryRemoval.choices("key"),
        default=SymmetryRemoval.default("key"),
        help="sorting key: first incoming weight, or largest (default: %(default)s)",
    )
    parser.add_argument(
        "--no-softmax-shift",
        action="store_true",
        help="leave the output bias as it is (use for regression networks)",
    )
    parser.add_argument(
        "--on-dead",
        choices=("raise", "keep"),
        default="raise",
        help="units with all-zero incoming weights: fail (default) or leave unscaled",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    parser.set_defaults(handler=_run)
