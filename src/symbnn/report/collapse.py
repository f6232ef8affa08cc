"""Functional collapse (paper section 5.1, Figure 3): how different two independently trained
target networks are, in and out of distribution.

For random pairs (i, j) of converged target networks, the mutual information of the
two-member ensemble, MI(x) = H((p_i + p_j)/2) - (H(p_i) + H(p_j))/2, averaged over the test
set (ID) and over the OOD set; then the Pearson correlation between the ID and OOD values
across pairs, with its two-sided p-value. A pair with MI near zero is a collapsed pair: two
networks computing nearly the same function.
"""

from __future__ import annotations

import os

import numpy as np
import polars as pl
from scipy import stats

from symbnn.metrics import mutual_information
from symbnn.predictions import open_predictions
from symbnn.settings import Collapse
from symbnn.store import StoreError

# library defaults are the settings layer's
COLLAPSE = Collapse()

# Inputs per MI call (pairs x test inputs): a few hundred MB of float64 work at 10 classes.
PAIR_CHUNK_INPUTS = 2_000_000


def random_pairs(rows: np.ndarray, n_pairs: int, seed: int) -> np.ndarray:
    """Up to `n_pairs` distinct unordered pairs of `rows`, drawn without replacement."""
    k = len(rows)
    if k < 2:
        raise StoreError(f"functional collapse needs at least 2 converged networks, got {k}")
    i, j = np.triu_indices(k, 1)
    pick = np.random.default_rng(seed).permutation(len(i))[:n_pairs]
    return np.stack([rows[i[pick]], rows[j[pick]]], axis=1)


def pairwise_mi(
    predictions_path: str | os.PathLike,
    rows: np.ndarray,
    n_pairs: int = COLLAPSE.pairs,
    seed: int = COLLAPSE.seed,
) -> pl.DataFrame:
    """One row per pair: the two networks' store rows and their mean ID and OOD MI (nats)."""
    pred = open_predictions(predictions_path)
    pairs = random_pairs(np.asarray(rows), n_pairs, seed)
    used = np.unique(pairs)
    # only the networks that appear in a pair are read, once each
    test, ood = pred.read("test", used), pred.read("ood", used)
    members = np.searchsorted(used, pairs.T)  # (2, pairs): positions in the rows read
    out = {
        "a": pairs[:, 0],
        "b": pairs[:, 1],
        "id_mi": _mean_pair_mi(test, members),
        "ood_mi": _mean_pair_mi(ood, members),
    }
    return pl.DataFrame(out)


def _mean_pair_mi(probs: np.ndarray, members: np.ndarray) -> np.ndarray:
    """(pairs,) mean over inputs of each pair's two-member MI; pairs side by side as inputs of
    one (2, pairs x N, C) ensemble per chunk instead of one call per pair."""
    n_inputs = probs.shape[1]
    per_chunk = max(1, PAIR_CHUNK_INPUTS // n_inputs)
    out = []
    for start in range(0, members.shape[1], per_chunk):
        chunk = members[:, start : start + per_chunk]
        ensemble = probs[chunk].reshape(2, -1, probs.shape[2])
        out.append(mutual_information(ensemble).reshape(chunk.shape[1], n_inputs).mean(axis=1))
    return np.concatenate(out)


def collapse_summary(pairs: pl.DataFrame) -> pl.DataFrame:
    """Mean and spread of the ID and OOD MI, and their Pearson correlation with its p-value."""
    id_mi, ood_mi = pairs["id_mi"].to_numpy(), pairs["ood_mi"].to_numpy()
    if len(id_mi) >= 3 and np.std(id_mi) > 0 and np.std(ood_mi) > 0:
        result = stats.pearsonr(id_mi, ood_mi)
        r, p = float(result.statistic), float(result.pvalue)
    else:  # a correlation needs 3 pairs and some spread
        r = p = float("nan")
    return pl.DataFrame(
        [
            {
                "pairs": len(id_mi),
                "id_mi_mean": float(id_mi.mean()),
                "id_mi_std": float(id_mi.std()),
                "ood_mi_mean": float(ood_mi.mean()),
                "ood_mi_std": float(ood_mi.std()),
                "pearson_r": r,
                "pearson_p": p,
            }
        ]
    )
