"""Layer-wise weight marginals of a stored posterior, before and after symmetry removal: the
check of paper appendix D.3 (`symbnn.analyses.marginals`) on any store, e.g. the authors'
released OptuNets, instead of MLPs trained for it.

For each unit group of the architecture (`symbnn.symmetry.unit_groups`), a unit's sample is
its incoming weights (the group's key axis) over the networks; two-sample Kolmogorov-Smirnov
tests compare every pair of units of the group, coordinate by coordinate. While permutations
are not removed the units are exchangeable (about ``alpha`` of the tests reject at level
``alpha``); in the canonical form they are sorted and the tests of the sorting key's
coordinate reject. A grouped convolution's channels are exchangeable across blocks too (a
whole block swaps with the channels it reads, block-local coordinates kept), so every pair is
tested. `posterior_marginals_figure` draws the OptuNet panel of Figure 9."""

from __future__ import annotations

import os

import numpy as np
import polars as pl

from symbnn.analyses.marginals import pairwise_unit_tests, unit_marginals_figure
from symbnn.settings import Marginals
from symbnn.store import Store, open_store
from symbnn.symmetry import unit_groups


def unit_weights(store: Store, tensor: str, axis: int) -> np.ndarray:
    """(units, coordinates, networks): the incoming weights of each unit along ``axis``."""
    values = store.read(tensor).astype(np.float64)  # (K, *shape)
    values = np.moveaxis(values, axis + 1, 1)
    return values.reshape(values.shape[0], values.shape[1], -1).transpose(1, 2, 0)


def stage_samples(
    stages: dict[str, str | os.PathLike | Store],
) -> dict[str, dict[str, np.ndarray]]:
    """stage -> unit group -> (units, coordinates, networks): each unit's incoming weights
    over the networks of the stage's store (``stages`` maps a label, e.g. "stored" or
    "canonical", to a store of the same architecture)."""
    out = {}
    for stage, store in stages.items():
        store = store if isinstance(store, Store) else open_store(store)
        out[stage] = {
            group.name: unit_weights(store, group.key.tensor, group.key.axis)
            for group in unit_groups(store.architecture).groups
        }
    return out


def posterior_marginal_tests(stages: dict[str, str | os.PathLike | Store]) -> pl.DataFrame:
    """One row per (stage, group, unit pair, coordinate): KS statistic and p-value; ``stages``
    maps a label (e.g. "stored", "canonical") to a store of the same architecture."""
    return sample_tests(stage_samples(stages))


def sample_tests(samples: dict[str, dict[str, np.ndarray]]) -> pl.DataFrame:
    """`posterior_marginal_tests` on `stage_samples`' result."""
    columns = {
        k: [] for k in ("stage", "group", "unit_a", "unit_b", "coordinate", "statistic", "pvalue")
    }
    for stage, groups in samples.items():
        for group, units in groups.items():
            tests = pairwise_unit_tests(units)
            count = len(tests["pvalue"])
            columns["stage"] += [stage] * count
            columns["group"] += [group] * count
            for key, values in tests.items():
                columns[key] += values
    return pl.DataFrame(columns)


def marginal_summary(tests: pl.DataFrame, alpha: float | None = None) -> pl.DataFrame:
    """Per stage and group: tests, median p-value and the share rejected at ``alpha``
    (default: the marginals analysis' level, `symbnn.settings.Marginals`)."""
    if alpha is None:
        alpha = Marginals.default("alpha")
    return tests.group_by("stage", "group", maintain_order=True).agg(
        pl.len().alias("tests"),
        pl.col("pvalue").median().alias("median_p"),
        (pl.col("pvalue") < alpha).mean().alias(f"rejected_at_{alpha}"),
    )


def posterior_marginals_figure(
    samples: dict[str, dict[str, np.ndarray]],
    summary: pl.DataFrame,
    path: str | os.PathLike,
    units: int = 4,
    title: str = "",
) -> None:
    """Figure 9 for a stored posterior: rows unit groups, columns stages, the marginals of
    ``units`` units of each group with its median KS p-value (`marginal_summary`)."""
    median_p = {(r["stage"], r["group"]): r["median_p"] for r in summary.iter_rows(named=True)}
    unit_marginals_figure(samples, median_p, path, units=units, title=title)
