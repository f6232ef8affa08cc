"""Barriers over many pairs: networks of a store and mean-field VI posteriors, each pair's
path measured as stored ("none") and after aligning B to A ("weight_matching").

One row per (kind, pair, alignment, split) holds the loss barrier (the path's largest rise
over the line between its endpoints' losses, `loss_barrier`), the accuracy barrier (the
largest drop below the line between the endpoints' accuracies) and the endpoints' loss and
accuracy; `summary` gives mean, standard deviation, minimum and maximum over the pairs, with
the worst endpoint accuracy so that a table over networks that did not train shows it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl
import torch

from symbnn.alignment.interpolation import gaussian_curve, grid, loss_barrier
from symbnn.alignment.matching import align_gaussian
from symbnn.methods.base import Problem
from symbnn.methods.bnn.fit import gaussian_state, train_converged_bnn
from symbnn.models import build_model
from symbnn.settings import Alignment, Bnn
from symbnn.symmetry.architectures import unit_groups
from symbnn.train.batchnorm import batchnorm_layers
from symbnn.treefile import load_tree, save_tree

State = dict[str, torch.Tensor]


def accuracy_barrier(ts: Sequence[float], accuracies: Sequence[float]) -> float:
    """Largest drop of the accuracy below the line between its endpoints (>= 0)."""
    t, acc = np.asarray(ts, dtype=float), np.asarray(accuracies, dtype=float)
    return float(np.max((1 - t) * acc[0] + t * acc[-1] - acc))


def curve_rows(curves: pl.DataFrame, **labels: Any) -> list[dict]:
    """One row per split of one path's curve table (columns t, split, loss, accuracy)."""
    rows = []
    for (split,), part in curves.sort("t").group_by(["split"], maintain_order=True):
        ts, losses = part["t"].to_list(), part["loss"].to_list()
        barrier = loss_barrier(ts, losses)
        accuracies = part["accuracy"].to_list()
        rows.append(
            {
                **labels,
                "split": split,
                "loss_barrier": barrier["barrier"],
                "accuracy_barrier": accuracy_barrier(ts, accuracies),
                "loss_a": barrier["loss_0"],
                "loss_b": barrier["loss_1"],
                "accuracy_a": float(accuracies[0]),
                "accuracy_b": float(accuracies[-1]),
            }
        )
    return rows


def pair_rows(curves: pl.DataFrame, kind: str) -> pl.DataFrame:
    """Per-pair barrier rows of a curve table with columns pair, alignment, split, t, loss,
    accuracy."""
    rows = []
    for (pair, alignment), part in curves.group_by(["pair", "alignment"], maintain_order=True):
        rows += curve_rows(part, kind=kind, pair=pair, alignment=alignment)
    return pl.DataFrame(rows)


def summary(table: pl.DataFrame) -> pl.DataFrame:
    """Mean, standard deviation, minimum and maximum over the pairs per (kind, alignment,
    split); ``worst_endpoint_accuracy`` is the lowest accuracy of any pair's endpoint."""
    stats = []
    for column in ("loss_barrier", "accuracy_barrier"):
        stats += [
            pl.col(column).mean().alias(f"{column}_mean"),
            pl.col(column).std().alias(f"{column}_std"),
            pl.col(column).min().alias(f"{column}_min"),
            pl.col(column).max().alias(f"{column}_max"),
        ]
    return (
        table.group_by("kind", "alignment", "split", maintain_order=True)
        .agg(
            pl.len().alias("pairs"),
            *stats,
            pl.min_horizontal(pl.col("accuracy_a").min(), pl.col("accuracy_b").min()).alias(
                "worst_endpoint_accuracy"
            ),
        )
        .sort("kind", "split", "alignment")
    )


def converged_pairs(converged: Sequence[int], pairs: int, what: str) -> list[tuple[int, int]]:
    """Rows (2i-th, (2i+1)-th converged network) for i < pairs; an error naming ``what``
    when fewer than 2 * pairs networks converged (a barrier between networks that did not
    train says nothing about the posterior)."""
    if len(converged) < 2 * pairs:
        raise ValueError(
            f"{what}: alignment.pairs {pairs} needs {2 * pairs} converged networks, "
            f"{len(converged)} converged; lower alignment.pairs or train more networks"
        )
    return [(int(converged[2 * i]), int(converged[2 * i + 1])) for i in range(pairs)]


def fit_variational(problem: Problem, seed: int, settings: Bnn) -> dict[str, Any]:
    """A mean-field posterior by Bayes by backprop from seed's initialisation (fresh derived
    seeds while its means miss the target's convergence threshold, like the BNN method):
    means and standard deviations as CPU state dicts, the seed used and its test accuracy."""
    q, used, score = train_converged_bnn(problem, seed, settings, "variational alignment")
    mean, std = gaussian_state(q)
    return {"mean": mean, "std": std, "seed": seed, "train_seed": used, "test_accuracy": score}


def variational_curves(
    spec: dict[str, Any],
    fits: Sequence[Mapping[str, Any]],
    sets: Mapping[str, Any],
    settings: Alignment,
    samples: int,
    device: torch.device | str = "cpu",
) -> pl.DataFrame:
    """Curves between fits 2i and 2i + 1 for every pair i, as fitted and after aligning B's
    means and standard deviations to A's (2-Wasserstein cost); columns pair, alignment,
    split, t, loss, accuracy, nll."""
    if len(fits) < 2 or len(fits) % 2:
        raise ValueError(f"variational pairs need an even number of fits, got {len(fits)}")
    if batchnorm_layers(build_model(spec)):
        # interpolated running statistics do not describe the interpolated posterior's
        # activations, and the fits carry one set of them, not a distribution
        raise ValueError(
            f"alignment.variational: model {spec.get('name')!r} has BatchNorm layers, which "
            "the variational paths do not support (use a model without them, e.g. "
            "resnet20_frn_silu)"
        )
    sym, ts = unit_groups(spec), grid(settings.points)
    parts = []
    for pair in range(len(fits) // 2):
        a, b = fits[2 * pair], fits[2 * pair + 1]
        mean_al, std_al, _ = align_gaussian(
            a["mean"], a["std"], b["mean"], b["std"], sym, max_sweeps=settings.max_sweeps
        )
        for label, mean, std in (
            ("none", b["mean"], b["std"]),
            ("weight_matching", mean_al, std_al),
        ):
            curve = gaussian_curve(
                spec, a["mean"], a["std"], mean, std, ts, sets, samples, seed=pair, device=device
            )
            parts.append(curve.with_columns(pair=pl.lit(pair), alignment=pl.lit(label)))
    return pl.concat(parts).select("pair", "alignment", "split", "t", "loss", "accuracy", "nll")


def save_fit(fitted: Mapping[str, Any], path: str | os.PathLike) -> None:
    """A variational fit as a tree file (`symbnn.treefile`: tensors and JSON, no pickle)."""
    save_tree(dict(fitted), path)


def load_fits(paths: Sequence[str | os.PathLike]) -> list[dict[str, Any]]:
    return [load_tree(path) for path in paths]


def report_table(rows: pl.DataFrame) -> pl.DataFrame:
    """The per-pair rows for one pair, their summary over pairs for more."""
    return rows if rows["pair"].n_unique() == 1 else summary(rows)
