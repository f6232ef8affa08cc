"""Figures of the report (matplotlib, headless)."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # no display on cluster nodes
import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from symbnn.atomic import atomic_write


def save_figure(fig, path: str | os.PathLike) -> None:
    """Write `fig` to `path` atomically (a reader never sees half a PNG) and free it."""
    try:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=130, bbox_inches="tight"))
    finally:
        plt.close(fig)


def minmass_figure(table: pl.DataFrame, path: str | os.PathLike, title: str = "") -> None:
    """Paper Figure 2 style: the distribution of network masses before and after min-mass
    scaling, and each layer's largest absolute weight before and after."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    ok = table.filter(~pl.col("degenerate")) if "degenerate" in table.columns else table
    before, after = ok["mass_before"].to_numpy(), ok["mass_after"].to_numpy()
    bins = np.geomspace(
        max(1e-12, min(before.min(), after.min())), max(before.max(), after.max()), 30
    )
    left.hist(before, bins=bins, alpha=0.6, label=f"trained (median {np.median(before):.3g})")
    left.hist(after, bins=bins, alpha=0.6, label=f"min-mass (median {np.median(after):.3g})")
    left.set_xscale("log")
    left.set_xlabel("network mass  sum_l ||W_l||_F^2")
    left.set_ylabel("networks")
    left.legend()
    left.set_title("mass distribution")

    layers = [
        c.removeprefix("max_abs_before.") for c in ok.columns if c.startswith("max_abs_before.")
    ]
    x = np.arange(len(layers))
    left_vals = [ok[f"max_abs_before.{name}"].median() for name in layers]
    right_vals = [ok[f"max_abs_after.{name}"].median() for name in layers]
    right.bar(x - 0.2, left_vals, width=0.4, label="trained")
    right.bar(x + 0.2, right_vals, width=0.4, label="min-mass")
    right.set_xticks(x, layers, rotation=45, ha="right", fontsize=8)
    right.set_ylabel("median of max |w|")
    right.set_title("largest weight per layer")
    right.legend()
    if title:
        fig.suptitle(title)
    save_figure(fig, path)


def minmass_summary(table: pl.DataFrame, experiment: str) -> pl.DataFrame:
    """One row: mass before/after (median), relative reduction, solver convergence."""
    ok = table.filter(~pl.col("degenerate")) if "degenerate" in table.columns else table
    return pl.DataFrame(
        {
            "experiment": [experiment],
            "n_samples": [table.height],
            "degenerate": [table.height - ok.height],
            "converged": [int(ok["converged"].sum())],
            "mass_before_median": [float(ok["mass_before"].median())],
            "mass_after_median": [float(ok["mass_after"].median())],
            "reduction_median": [
                float(((ok["mass_before"] - ok["mass_after"]) / ok["mass_before"]).median())
            ],
            "max_iterations": [int(ok["iterations"].max())],
        }
    )


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
    right.set_title(f"Pearson r = {row['pearson_r']:.3f} (p = {row['pearson_p']:.2g})")
    if title:
        fig.suptitle(title)
    save_figure(fig, path)
