"""The Deep Ensembles check: MMD between the target posterior and an ensemble made of other
target checkpoints (paper section 4: independently trained networks are the Deep Ensembles
"method", compared with checkpoints disjoint from their own)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import polars as pl

from symbnn.mmd.engine import MMDInputError
from symbnn.mmd.layerwise import layerwise_mmd, network_summary
from symbnn.settings import Mmd
from symbnn.store import open_store

# library defaults are the settings layer's
MMD = Mmd()


def split_members(
    store_path: str | os.PathLike,
    converged: list[int],
    n_members: int,
    n_target: int | None = None,
) -> tuple[list[int], list[int]]:
    """(target rows, member rows): the last ``n_members`` converged networks (`converged`:
    the converged rows) form the ensemble, every other converged network the target sample
    (only the ``n_target`` just before the members when given); non-converged ones are left
    out."""
    rows = list(converged)
    if len(rows) < n_members + 2:
        raise MMDInputError(
            f"{store_path}: {len(rows)} converged networks, too few for a Deep Ensembles check with "
            f"{n_members} members and at least 2 target networks (lower mmd.de_members)"
        )
    target = rows[:-n_members]
    if n_target is not None:
        target = target[-n_target:]
    return target, rows[-n_members:]


def compare_stores(
    target: tuple[str | os.PathLike, str | os.PathLike],
    method: tuple[str | os.PathLike, str | os.PathLike],
    summary: dict[str, Any],
    *,
    target_rows: Any = None,
    method_rows: Any = None,
    pvalue: bool = MMD.pvalue,
    seed: int = MMD.seed,
    device: str = "auto",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Layer-wise MMD ("MMD" on stored weights, "NS MMD" on canonical ones) between the target
    and a method, each given as (stored store, canonical store). Returns the per-layer table
    (column ``weights``: stored | canonical) and a one-row summary starting with ``summary``."""
    layers, summary = [], dict(summary)
    for weights, target_path, method_path in (
        ("stored", target[0], method[0]),
        ("canonical", target[1], method[1]),
    ):
        per_layer, _ = layerwise_mmd(
            target_path,
            method_path,
            target_rows=target_rows,
            method_rows=method_rows,
            pvalue=pvalue,
            seed=seed,
            device=device,
        )
        layers.append(per_layer.with_columns(pl.lit(weights).alias("weights")))
        network = network_summary(per_layer, canonical=weights == "canonical")
        prefix = "ns_mmd" if weights == "canonical" else "mmd"
        summary.update(
            {
                f"{prefix}{key[3:]}": network[key]
                for key in ("mmd", "mmd_median", "mmd_mean", "mmd_max")
            }
        )
        # MMDAgg's outcome: the share of layers where the test rejects (null without a test)
        rejected = network.get("n_layers_rejected")
        summary[f"{prefix}_reject_share"] = (
            None if rejected is None else rejected / network["n_layers"]
        )
    return pl.concat(layers, how="diagonal_relaxed"), pl.DataFrame([summary])


def deep_ensembles_check(
    target_path: str | os.PathLike,
    canonical_path: str | os.PathLike,
    converged: list[int],
    n_members: int,
    *,
    pvalue: bool = MMD.pvalue,
    seed: int = MMD.seed,
    device: str = "auto",
    n_target: int | None = MMD.de_target,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The MMD of a Deep Ensemble of ``n_members`` converged target checkpoints against the
    disjoint converged rest (at most ``n_target`` of them; see `compare_stores` for the
    tables)."""
    target_rows, member_rows = split_members(target_path, converged, n_members, n_target)
    return compare_stores(
        (target_path, canonical_path),
        (target_path, canonical_path),
        {"method": "deep_ensembles", "n_target": len(target_rows), "n_members": n_members},
        target_rows=target_rows,
        method_rows=member_rows,
        pvalue=pvalue,
        seed=seed,
        device=device,
    )


def method_mmd(
    target: tuple[str | os.PathLike, str | os.PathLike],
    samples: tuple[str | os.PathLike, str | os.PathLike],
    converged: list[int],
    *,
    pvalue: bool = MMD.pvalue,
    seed: int = MMD.seed,
    device: str = "auto",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The MMD of a method's samples against the converged target networks (`converged`: the
    target's converged rows), unit by unit: each unit's samples (info/unit: a mode of a
    one-mode variant, a replicate of a multi-mode one) are one posterior, compared separately.
    One summary row, and per-layer rows, per unit (column ``unit``); the summary names the
    method and variant from the sample store's attributes."""
    store = open_store(samples[0])
    rows = list(converged)
    if len(rows) < 2:
        raise MMDInputError(
            f"{target[0]}: {len(rows)} converged networks; the MMD needs at least 2"
        )
    units = store.info("unit")
    layers, summaries = [], []
    for unit in np.unique(units):
        method_rows = np.flatnonzero(units == unit).tolist()
        per_layer, summary = compare_stores(
            target,
            samples,
            {
                "method": store.attrs.get("method", "?"),
                "variant": store.attrs.get("variant", "?"),
                "unit": int(unit),
                "n_target": len(rows),
                "n_samples": len(method_rows),
            },
            target_rows=rows,
            method_rows=method_rows,
            pvalue=pvalue,
            seed=seed,
            device=device,
        )
        layers.append(per_layer.with_columns(pl.lit(int(unit), dtype=pl.Int64).alias("unit")))
        summaries.append(summary.with_columns(pl.col("unit").cast(pl.Int64)))
    return pl.concat(layers, how="diagonal_relaxed"), pl.concat(summaries, how="diagonal_relaxed")
