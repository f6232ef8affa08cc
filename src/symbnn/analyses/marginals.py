"""Layer-wise marginals before and after symmetry removal (paper appendix D.3, Figure 9).

A corollary of the paper's Proposition 1: while permutations are not removed, the units of a
layer are exchangeable, so within one layer every unit's weights have the same marginal
distribution. Sorting the units (the canonical form) breaks this: unit 1 now holds the
largest key, unit 2 the next, and so on.

The check here: many MLPs trained independently on a tabular regression set that
scikit-learn ships (diabetes, 442 patients, 10 features; no download), then, for every layer
and every pair of units (a, b) of the layer's permutable axis, two-sample Kolmogorov-Smirnov
tests (``scipy.stats.ks_2samp``) between the marginal of weight (a, j) and of weight (b, j)
over the networks, for every coordinate j on the other axis. Hidden layers' units are their
rows (incoming weights); the output layer's units are its columns (outgoing weights of the
last hidden layer). One weight per network enters each sample, so the samples are i.i.d.
across networks and the p-values are exact under the null. Stages: ``trained``, ``scaled``
(unit-norm neurons: scales alone leave units exchangeable) and ``canonical`` (scaled and
sorted by the largest incoming weight, docs/maths.md, section 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import torch

from symbnn.analyses.stacked_mlp import State, dataset_loss, mlp_spec, train_stacked
from symbnn.settings import Marginals
from symbnn.symmetry import apply_scales, canonicalize, unit_groups
from symbnn.treefile import load_tree, save_tree

STAGES = ("trained", "scaled", "canonical")
DATASETS = Marginals.choices("dataset")


def tabular_regression(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(features, target) standardised to zero mean and unit variance, float32."""
    if name != "diabetes":
        raise ValueError(f"unknown dataset {name!r} (known: {', '.join(DATASETS)})")
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    x = (x - x.mean(0)) / x.std(0)
    y = (y - y.mean()) / y.std()
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)


def symmetry_stages(state: State, widths) -> dict[str, State]:
    sym = unit_groups(mlp_spec(widths))
    trained = {k: v.to(torch.float64) for k, v in state.items()}
    canonical = canonicalize(
        trained, sym, scale="unitnorm", key="max", softmax_shift=False, on_dead="keep"
    )
    scaled = apply_scales(trained, sym, canonical.scales)
    return {"trained": trained, "scaled": scaled, "canonical": canonical.state}


def unit_samples(state: State) -> dict[str, np.ndarray]:
    """layer -> (units, coordinates, networks): each unit's weights over the networks, units
    along the permutable axis (rows of hidden layers, columns of the output layer)."""
    names = sorted((k for k in state if k.endswith(".weight")), key=lambda k: int(k.split(".")[1]))
    out = {}
    for i, name in enumerate(names):
        w = state[name].numpy()  # (K, rows, cols)
        units = w if i < len(names) - 1 else w.transpose(0, 2, 1)
        out[name] = np.ascontiguousarray(units.transpose(1, 2, 0))
    return out


def pairwise_unit_tests(samples: np.ndarray) -> dict[str, list]:
    """Two-sample KS tests between every pair of units of ``samples`` (units, coordinates,
    networks), coordinate by coordinate: columns unit_a, unit_b, coordinate, statistic,
    pvalue, a row per (pair, coordinate)."""
    from scipy.stats import ks_2samp

    units, coords, _ = samples.shape
    columns = {k: [] for k in ("unit_a", "unit_b", "coordinate", "statistic", "pvalue")}
    for a, b in combinations(range(units), 2):
        # ks_2samp is vectorised over the leading axis with axis=-1
        result = ks_2samp(samples[a], samples[b], axis=-1)
        columns["unit_a"] += [a] * coords
        columns["unit_b"] += [b] * coords
        columns["coordinate"] += range(coords)
        columns["statistic"] += np.atleast_1d(result.statistic).astype(float).tolist()
        columns["pvalue"] += np.atleast_1d(result.pvalue).astype(float).tolist()
    return columns


def ks_tests(stages: dict[str, State]):
    """One row per (stage, layer, unit pair, coordinate): KS statistic and p-value."""
    import polars as pl

    rows = {
        k: []
        for k in ("stage", "layer", "unit_a", "unit_b", "coordinate", "statistic", "pvalue", "n")
    }
    for stage, state in stages.items():
        for layer, samples in unit_samples(state).items():
            tests = pairwise_unit_tests(samples)
            count = len(tests["pvalue"])
            rows["stage"] += [stage] * count
            rows["layer"] += [layer] * count
            rows["n"] += [samples.shape[2]] * count
            for key, values in tests.items():
                rows[key] += values
    return pl.DataFrame(rows)


def ks_summary(tests, alpha: float):
    """Per stage and layer: number of tests, median p-value and the share rejected at
    ``alpha`` (about ``alpha`` when the marginals are identical)."""
    import polars as pl

    order = {stage: i for i, stage in enumerate(STAGES)}
    return (
        tests.group_by("stage", "layer")
        .agg(
            pl.len().alias("tests"),
            pl.col("pvalue").median().alias("median_p"),
            pl.col("pvalue").min().alias("min_p"),
            (pl.col("pvalue") < alpha).mean().alias(f"rejected_at_{alpha}"),
            pl.col("statistic").median().alias("median_statistic"),
        )
        .with_columns(pl.col("stage").replace_strict(order).alias("_order"))
        .sort("_order", "layer")
        .drop("_order")
    )


@dataclass
class MarginalResult:
    stages: dict[str, State]
    losses: np.ndarray
    tests: object = field(repr=False)
    summary: object = field(repr=False)


def run_marginals(settings: Marginals) -> MarginalResult:
    x, y = tabular_regression(settings.dataset)
    widths = (x.shape[1], *settings.hidden, 1)
    seeds = range(settings.first_seed, settings.first_seed + settings.n_networks)
    state = train_stacked(
        widths,
        x,
        y,
        seeds,
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        lr=settings.lr,
        loss="mse",
    )
    losses = dataset_loss(state, x, y, "mse").numpy()
    if not np.isfinite(losses).all():
        raise ValueError(
            f"analyses.marginals: {int((~np.isfinite(losses)).sum())} networks diverged "
            f"(lr {settings.lr} too large?)"
        )
    stages = symmetry_stages(state, widths)
    tests = ks_tests(stages)
    return MarginalResult(stages, losses, tests, ks_summary(tests, settings.alpha))


def save_stages(stages: dict[str, State], path) -> None:
    """The networks of each stage, for drawing the figure in a job of its own."""
    save_tree(stages, path)


def drawable_result(stages_path, tests) -> MarginalResult:
    """What `marginals_figure` draws, from the saved stages and the KS tests (the median
    p-value of a layer does not depend on the summary's level)."""
    stages = load_tree(stages_path)
    return MarginalResult(stages, np.empty(0), tests, ks_summary(tests, 0.05))


def marginals_figure(result: MarginalResult, path, units: int = 4, title: str = "") -> None:
    """`unit_marginals_figure` of the MLPs' three stages, layer by layer."""
    median_p = {
        (row["stage"], row["layer"]): row["median_p"]
        for row in result.summary.iter_rows(named=True)
    }
    samples = {stage: unit_samples(result.stages[stage]) for stage in STAGES}
    unit_marginals_figure(samples, median_p, path, units=units, title=title)


def unit_marginals_figure(
    samples_by_stage: dict[str, dict[str, np.ndarray]],
    median_p: dict[tuple[str, str], float],
    path,
    units: int = 4,
    title: str = "",
) -> None:
    """Rows: layers; columns: stages. Each panel overlays the marginals of coordinate 0 of
    ``units`` units spread over the layer (first to last: after sorting they differ most),
    with the layer's median KS p-value. ``samples_by_stage`` maps stage -> layer -> (units,
    coordinates, networks); ``median_p`` maps (stage, layer) to the median p-value."""
    # local: keeps matplotlib, polars out of importing symbnn.analyses.marginals
    from symbnn.report.figures import plt, save_figure

    stages = list(samples_by_stage)
    layers = list(samples_by_stage[stages[0]])
    fig, axes = plt.subplots(
        len(layers), len(stages), figsize=(4.2 * len(stages), 2.8 * len(layers)), squeeze=False
    )
    for c, stage in enumerate(stages):
        samples = samples_by_stage[stage]
        for r, layer in enumerate(layers):
            ax = axes[r][c]
            picked = np.unique(
                np.linspace(0, samples[layer].shape[0] - 1, units).round().astype(int)
            )
            values = samples[layer][picked, 0, :]
            bins = np.linspace(np.quantile(values, 0.01), np.quantile(values, 0.99), 25)
            for u, v in zip(picked, values):
                ax.hist(v, bins=bins, histtype="step", density=True, lw=1.3, label=f"unit {u}")
            p = median_p[(stage, layer)]
            ax.set_title(f"{layer}, {stage}\nmedian KS p = {p:.2g}", fontsize=9)
            if r == len(layers) - 1:
                ax.set_xlabel("weight value (coordinate 0)")
    axes[0][0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
