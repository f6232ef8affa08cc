"""Figures of the report (matplotlib, headless)."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # no display on cluster nodes
import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from symbnn.atomic import atomic_write


def save_figure(fig, path: str | os.PathLike) -> None:
    """Write `fig` to `path` atomically (a reader never sees half a PNG) and free it."""
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=130, bbox_inches="tight"))
    finally:
        plt.close(fig)


def with_network_convergence(table: pl.DataFrame, convergence: pl.DataFrame) -> pl.DataFrame:
    """The min-mass table (one row per store row, in order) with the network's own
    convergence flag (``network_converged``, from `symbnn.posterior.convergence_table`),
    distinct from ``solver_converged``, the min-mass solver's."""
    flags = convergence.sort("row")["converged"]
    if len(flags) != table.height:
        raise ValueError(
            f"the convergence table has {len(flags)} rows, the min-mass table {table.height}"
        )
    return table.with_columns(flags.alias("network_converged"))


def _solved_by_convergence(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(the rows min-mass solved, i.e. not degenerate; of these the converged networks'; the
    others')."""
    ok = table.filter(~pl.col("degenerate")) if "degenerate" in table.columns else table
    return ok, ok.filter(pl.col("network_converged")), ok.filter(~pl.col("network_converged"))


def minmass_figure(table: pl.DataFrame, path: str | os.PathLike, title: str = "") -> None:
    """Paper Figure 2 style: the distribution of network masses before and after min-mass
    scaling, converged and unconverged networks apart (an untrained network is a light one:
    left together they make a low-mass cluster), and each converged layer's largest absolute
    weight before and after."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    ok, live, dead = _solved_by_convergence(table)
    every = np.concatenate([ok["mass_before"].to_numpy(), ok["mass_after"].to_numpy()])
    bins = np.geomspace(max(1e-12, every.min()), every.max(), 30)
    outlined = {"histtype": "step", "linewidth": 2}  # not hidden behind the filled bars
    for frame, label, style in (
        (live, "converged", {"alpha": 0.6}),
        (dead, "not converged", outlined),
    ):
        if frame.height == 0:
            continue
        before, after = frame["mass_before"].to_numpy(), frame["mass_after"].to_numpy()
        left.hist(
            before, bins=bins, label=f"{label}, trained (median {np.median(before):.3g})", **style
        )
        left.hist(
            after, bins=bins, label=f"{label}, min-mass (median {np.median(after):.3g})", **style
        )
    left.set_xscale("log")
    _readable_log_ticks(left.xaxis, bins[0], bins[-1])
    left.set_xlabel("network mass  sum_l ||W_l||_F^2")
    left.set_ylabel("networks")
    left.legend(fontsize=8)
    left.set_title(f"mass distribution ({live.height} converged, {dead.height} not)")

    layers = [
        c.removeprefix("max_abs_before.") for c in ok.columns if c.startswith("max_abs_before.")
    ]
    x = np.arange(len(layers))
    shown = live if live.height else ok
    left_vals = [shown[f"max_abs_before.{name}"].median() for name in layers]
    right_vals = [shown[f"max_abs_after.{name}"].median() for name in layers]
    right.bar(x - 0.2, left_vals, width=0.4, label="trained")
    right.bar(x + 0.2, right_vals, width=0.4, label="min-mass")
    right.set_xticks(x, layers, rotation=45, ha="right", fontsize=8)
    right.set_ylabel("median of max |w| (converged networks)")
    right.set_title("largest weight per layer")
    right.legend()
    if title:
        fig.suptitle(title)
    save_figure(fig, path)


def _readable_log_ticks(axis, low: float, high: float) -> None:
    """Plain labels at 1, 2 and 5 per decade over a span of two decades or less, at powers of
    ten over a wider one, and none on minor ticks: matplotlib's default labels minor ticks
    "3 x 10^1" on a short span, and they overlap."""
    subs = (1.0, 2.0, 5.0) if np.log10(high / low) <= 2 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def minmass_summary(table: pl.DataFrame, experiment: str) -> pl.DataFrame:
    """One row per network group (converged, not converged): masses before/after (median),
    relative reduction, how many the solver solved to its tolerance."""
    ok, live, dead = _solved_by_convergence(table)
    rows = []
    for group, frame in (("converged", live), ("not converged", dead)):
        if frame.height == 0:
            continue
        reduction = (frame["mass_before"] - frame["mass_after"]) / frame["mass_before"]
        rows.append(
            {
                "experiment": experiment,
                "networks": group,
                "n_samples": frame.height,
                "solver_converged": int(frame["solver_converged"].sum()),
                "mass_before_median": float(frame["mass_before"].median()),
                "mass_after_median": float(frame["mass_after"].median()),
                "reduction_median": float(reduction.median()),
                "max_iterations": int(frame["iterations"].max()),
            }
        )
    rows.append(
        {
            "experiment": experiment,
            "networks": "degenerate (not solved)",
            "n_samples": table.height - ok.height,
        }
    )
    return pl.DataFrame(rows)


def collapse_figure(
    pairs: pl.DataFrame, summary: pl.DataFrame, path: str | os.PathLike, title: str = ""
) -> None:
    """Paper Figure 3 style: histograms of the pairwise ID and OOD mutual information, and
    the ID-vs-OOD scatter with its Pearson correlation."""
    fig, (left, centre, right) = plt.subplots(1, 3, figsize=(14, 4))
    id_mi, ood_mi = pairs["id_mi"].to_numpy(), pairs["ood_mi"].to_numpy()
    left.hist(id_mi, bins=30, color="tab:blue")
    left.set_xlabel("pairwise MI, in distribution (nats)")
    left.set_ylabel("pairs")
    centre.hist(ood_mi, bins=30, color="tab:orange")
    centre.set_xlabel("pairwise MI, out of distribution (nats)")
    row = summary.row(0, named=True)
    right.scatter(id_mi, ood_mi, s=6, alpha=0.5)
    right.set_xlabel("ID MI")
    right.set_ylabel("OOD MI")
    right.set_title(
        f"Pearson r = {row['pearson_r']:.3f} (relabelling test p = {row['relabelling_p']:.2g})"
    )
    if title:
        fig.suptitle(title)
    save_figure(fig, path)
