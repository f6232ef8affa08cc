"""`symbnn minmass IN OUT_TABLE`: solve the min-mass problem for every network of a store."""

from __future__ import annotations


def _run(args) -> int:
    from symbnn.minmass import minmass_table
    from symbnn.report.tables import write_table

    table = minmass_table(
        args.input,
        solver=args.solver,
        tol=args.tol,
        device=args.device,
        on_degenerate=args.on_degenerate,
    )
    write_table(table, args.output)
    ratio = (table["mass_after"] / table["mass_before"]).median()
    print(
        f"{table.height} samples, {int(table['converged'].sum())} converged, "
        f"median mass ratio after/before {ratio:.4f}: {args.output}"
    )
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "minmass", help="minimum scaled network mass of every network of a store (SPEC section 3)"
    )
    parser.add_argument("input", metavar="IN", help="weight store to read")
    parser.add_argument(
        "output", metavar="OUT_TABLE", help="table to write: parquet, or CSV if it ends with .csv"
    )
    parser.add_argument(
        "--solver",
        choices=("fast", "cvxpy"),
        default="fast",
        help="block coordinate descent (default) or the cvxpy reference",
    )
    parser.add_argument(
        "--tol",
        type=float,
        default=1e-9,
        help="fast solver: stop when max |log(incoming/outgoing mass)| is below this",
    )
    parser.add_argument(
        "--device", default=None, help="torch device for the fast solver (default: cpu)"
    )
    parser.add_argument(
        "--on-degenerate",
        choices=("raise", "flag"),
        default="raise",
        help="samples with a dead unit: fail (default) or report them with NaN",
    )
    parser.set_defaults(handler=_run)
