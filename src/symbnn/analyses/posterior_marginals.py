"""Layer-wise weight marginals of a stored posterior, before and after symmetry removal: the
check of paper appendix D.3 (`symbnn.analyses.marginals`) on any store, e.g. the authors'
released OptuNets, instead of MLPs trained for it.

For each unit group of the architecture (`symbnn.symmetry.unit_groups`), a unit's sample is
its incoming weights (the group's key axis) over the networks; two-sample Kolmogorov-Smirnov
tests compare every pair of units of the group, coordinate by coordinate. While permutations
are not removed the units are exchangeable (about ``alpha`` of the tests reject at level
``alpha``); in the canonical form they are sorted and nearly every test rejects. Units of a
grouped convolution permute only block-wise; their pairs are tested all the same (blocks
are exchangeable as wholes, so within-block pairs are the ones to read)."""

from __future__ import annotations

import os

import numpy as np
import polars as pl

from symbnn.analyses.marginals import pairwise_unit_tests
from symbnn.store import Store, open_store
from symbnn.symmetry import unit_groups


def unit_weights(store: Store, tensor: str, axis: int) -> np.ndarray:
    """(units, coordinates, networks): the incoming weights of each unit along ``axis``."""
    values = store.read(tensor).astype(np.float64)  # (K, *shape)
    values = np.moveaxis(values, axis + 1, 1)
    return values.reshape(values.shape[0], values.shape[1], -1).transpose(1, 2, 0)


def posterior_marginal_tests(stages: dict[str, str | os.PathLike | Store]) -> pl.DataFrame:
    """One row per (stage, group, unit pair, coordinate): KS statistic and p-value; ``stages``
    maps a label (e.g. "stored", "canonical") to a store of the same architecture."""
    columns = {
        k: [] for k in ("stage", "group", "unit_a", "unit_b", "coordinate", "statistic", "pvalue")
    }
    for stage, store in stages.items():
        store = store if isinstance(store, Store) else open_store(store)
        for group in unit_groups(store.architecture).groups:
            tests = pairwise_unit_tests(unit_weights(store, group.key.tensor, group.key.axis))
            count = len(tests["pvalue"])
            columns["stage"] += [stage] * count
            columns["group"] += [group.name] * count
            for key, values in tests.items():
                columns[key] += values
    return pl.DataFrame(columns)


def marginal_summary(tests: pl.DataFrame, alpha: float | None = None) -> pl.DataFrame:
    """Per stage and group: tests, median p-value and the share rejected at ``alpha``
    (default: the marginals analysis' level, `symbnn.settings.Marginals`)."""
    if alpha is None:
        from symbnn.settings import Marginals

        alpha = Marginals.default("alpha")
    return tests.group_by("stage", "group", maintain_order=True).agg(
        pl.len().alias("tests"),
        pl.col("pvalue").median().alias("median_p"),
        (pl.col("pvalue") < alpha).mean().alias(f"rejected_at_{alpha}"),
    )
