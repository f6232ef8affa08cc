"""`symbnn minmass IN OUT_TABLE`: solve the min-mass problem for every network of a store."""

from __future__ import annotations

from symbnn.commands import available_device, positive_float, setting_option
from symbnn.settings import Config, SymmetryRemoval


def _run(args) -> int:
    # local: keeps polars out of the command line's start
    from symbnn.report.tables import write_table

    # local: keeps numba, torch out of the command line's start
    from symbnn.symmetry.minmass import minmass_table

    device = available_device(args.device)
    tolerance = {} if args.tol is None else {"tol": args.tol}
    table = minmass_table(
        args.input,
        solver=args.solver,
        device=device,
        on_degenerate=args.on_degenerate,
        **tolerance,
    )
    write_table(table, args.output)
    ratio = (table["mass_after"] / table["mass_before"]).median()
    print(
        f"{table.height} samples, {int(table['solver_converged'].sum())} solver-converged, "
        f"median mass ratio after/before {ratio:.4f}: {args.output}"
    )
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "minmass",
        help="minimum scaled network mass of every network of a store (docs/maths.md, section 3)",
    )
    parser.add_argument("input", metavar="IN", help="weight store to read")
    parser.add_argument(
        "output", metavar="OUT_TABLE", help="table to write: parquet, or CSV if it ends with .csv"
    )
    parser.add_argument(
        "--solver",
        **setting_option(SymmetryRemoval, "solver"),
        help="block coordinate descent (fast) or the cvxpy reference (default: %(default)s)",
    )
    parser.add_argument(
        "--tol",
        type=positive_float,
        default=None,
        help="balance residual max |log(incoming/outgoing mass)| below which a network counts "
        "as solved (the fast solver also stops there), a finite number > 0 (default: each "
        "solver's own)",
    )
    parser.add_argument(
        "--device",
        # cpu by default, not the setting's auto: the solver works on one network at a time,
        # too small a problem to repay a GPU's launch costs
        **setting_option(Config, "device", default="cpu"),
        help="where the fast solver computes: auto, cpu, cuda or cuda:N (default: %(default)s)",
    )
    parser.add_argument(
        "--on-degenerate",
        choices=("raise", "flag"),
        default="raise",
        help="samples with a dead unit: fail (default) or report them with NaN",
    )
    parser.set_defaults(handler=_run)
