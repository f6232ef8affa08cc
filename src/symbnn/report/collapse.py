"""Functional collapse (paper section 5.1, Figure 3): how different two independently trained
target networks are, in and out of distribution.

For random pairs (i, j) of converged target networks, the mutual information of the
two-member ensemble, MI(x) = H((p_i + p_j)/2) - (H(p_i) + H(p_j))/2, averaged over the test
set (ID) and over the OOD set; then the Pearson correlation r between the ID and OOD values
across pairs. A pair with MI near zero is a collapsed pair: two networks computing nearly the
same function.

The pairs overlap (a network is in many of them), so they are not independent and the usual
p-value of r would be too small. The test relabels networks instead: under "a pair's OOD
diversity is unrelated to its ID diversity", the OOD MI of pair (a, b) can be replaced by that
of (pi(a), pi(b)) for a random permutation pi of the networks, which keeps the overlap
structure. The p-value is (1 + #{|r_pi| >= |r|}) / (1 + permutations). It needs the OOD MI of
every pair of the networks involved, so it runs on the pairs among at most `test_networks`
networks (the first ones of the draw).
"""

from __future__ import annotations

import os

import numpy as np
import polars as pl

from symbnn.metrics import mutual_information
from symbnn.settings import Collapse
from symbnn.store import StoreError
from symbnn.store.predictions import open_predictions

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


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:  # a correlation needs 3 pairs and spread
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def relabelling_pvalue(
    predictions_path: str | os.PathLike,
    pairs: pl.DataFrame,
    permutations: int = COLLAPSE.permutations,
    test_networks: int = COLLAPSE.test_networks,
    seed: int = COLLAPSE.seed,
) -> tuple[float, int]:
    """(p-value, pairs tested) of the ID-OOD correlation by relabelling networks (see the
    module docstring); NaN when there are fewer than 3 pairs to test or no permutations."""
    a, b = pairs["a"].to_numpy(), pairs["b"].to_numpy()
    networks = np.unique(np.concatenate([a, b]))
    if len(networks) > test_networks:  # the first networks of the draw, in draw order
        order = np.column_stack([a, b]).ravel()  # a0, b0, a1, b1, ...
        _, first = np.unique(order, return_index=True)
        networks = np.sort(order[np.sort(first)][:test_networks])
    keep = np.isin(a, networks) & np.isin(b, networks)
    if permutations == 0 or keep.sum() < 3:
        return float("nan"), int(keep.sum())
    id_mi = pairs["id_mi"].to_numpy()[keep]
    ia, ib = np.searchsorted(networks, a[keep]), np.searchsorted(networks, b[keep])
    # OOD MI of every pair of the tested networks
    pred = open_predictions(predictions_path)
    ood = pred.read("ood", networks)
    i, j = np.triu_indices(len(networks), 1)
    matrix = np.zeros((len(networks), len(networks)))
    matrix[i, j] = matrix[j, i] = _mean_pair_mi(ood, np.stack([i, j]))
    return relabelling_test(id_mi, ia, ib, matrix, permutations, seed), int(keep.sum())


def relabelling_test(
    id_mi: np.ndarray,
    ia: np.ndarray,
    ib: np.ndarray,
    ood_matrix: np.ndarray,
    permutations: int,
    seed: int,
) -> float:
    """p-value of the correlation between the pairs' ID MI and the OOD MI of the same pairs
    (`ood_matrix[ia, ib]`) against relabelled networks (`ood_matrix[pi(ia), pi(ib)]`)."""
    observed = abs(_pearson(id_mi, ood_matrix[ia, ib]))
    rng = np.random.default_rng(seed)
    extreme = 0
    for _ in range(permutations):
        pi = rng.permutation(len(ood_matrix))
        extreme += abs(_pearson(id_mi, ood_matrix[pi[ia], pi[ib]])) >= observed
    return (1 + extreme) / (1 + permutations)


def collapse_summary(pairs: pl.DataFrame, pvalue: float, tested: int) -> pl.DataFrame:
    """Mean and spread of the ID and OOD MI, their Pearson correlation, and the p-value of the
    network-relabelling test (`relabelling_pvalue`) with the number of pairs it used."""
    id_mi, ood_mi = pairs["id_mi"].to_numpy(), pairs["ood_mi"].to_numpy()
    return pl.DataFrame(
        [
            {
                "pairs": len(id_mi),
                "id_mi_mean": float(id_mi.mean()),
                "id_mi_std": float(id_mi.std()),
                "ood_mi_mean": float(ood_mi.mean()),
                "ood_mi_std": float(ood_mi.std()),
                "pearson_r": _pearson(id_mi, ood_mi),
                "relabelling_p": pvalue,
                "pairs_tested": tested,
            }
        ]
    )
