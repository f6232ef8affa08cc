"""The Deep Ensembles check: MMD between the target posterior and an ensemble made of other
target checkpoints (paper section 4: independently trained networks are the Deep Ensembles
"method", compared with checkpoints disjoint from their own)."""

from __future__ import annotations

import os
import numpy as np
import polars as pl

from symbnn.mmd.engine import MMDInputError
from symbnn.mmd.layerwise import layerwise_mmd, network_summary
from symbnn.store import open_store


def split_members(store_path: str | os.PathLike, n_members: int) -> tuple[list[int], list[int]]:
    """(target rows, member rows): the last ``n_members`` converged networks form the
    ensemble, every other converged network the target sample; non-converged ones are left out."""
    store = open_store(store_path)
    converged = store.info("converged") if "converged" in store.info_names else np.ones(store.n_samples, bool)
    rows = np.flatnonzero(converged).tolist()
    if len(rows) < n_members + 2:
        raise MMDInputError(
            f"{store_path}: {len(rows)} converged networks, too few for a Deep Ensembles check with "
            f"{n_members} members and at least 2 target networks (lower mmd.de_members)"
        )
    return rows[:-n_members], rows[-n_members:]


def deep_ensembles_check(target_path: str | os.PathLike, canonical_path: str | os.PathLike,
                         n_members: int, *, pvalue: bool = False, seed: int = 0,
                         device: str = "auto") -> tuple[pl.DataFrame, pl.DataFrame]:
    """Layer-wise MMD ("MMD" on stored weights, "NS MMD" on canonical ones) of a Deep Ensemble
    of ``n_members`` target checkpoints against the disjoint rest. Returns the per-layer table
    (column ``weights``: stored | canonical) and a one-row method summary."""
    target_rows, member_rows = split_members(target_path, n_members)
    layers, summary = [], {"method": "deep_ensembles", "n_target": len(target_rows), "n_members": n_members}
    for weights, path in (("stored", target_path), ("canonical", canonical_path)):
        per_layer, _ = layerwise_mmd(path, path, target_rows=target_rows, method_rows=member_rows,
                                     pvalue=pvalue, seed=seed, device=device)
        layers.append(per_layer.with_columns(pl.lit(weights).alias("weights")))
        network = network_summary(per_layer, canonical=weights == "canonical")
        prefix = "ns_mmd" if weights == "canonical" else "mmd"
        summary.update({f"{prefix}{key[3:]}": network[key] for key in ("mmd", "mmd_median", "mmd_mean", "mmd_max")})
    return pl.concat(layers, how="diagonal_relaxed"), pl.DataFrame([summary])
