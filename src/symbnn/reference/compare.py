"""The paper's target and every method measured against the HMC reference: the layer-wise MMD
(stored weights) and NS MMD (canonical form) of `symbnn.mmd.ensembles`, with the reference's
samples on the target side (all of them)."""

from __future__ import annotations

import os

import polars as pl

from symbnn.mmd.ensembles import MMD, compare_stores, method_mmd
from symbnn.store import open_store

Pair = tuple[str | os.PathLike, str | os.PathLike]
# the columns of the comparison table, in order
COLUMNS = ("compared", "variant", "units", "n_reference", "n_samples", "mmd", "ns_mmd")


def against_reference(
    reference: Pair,
    samples: Pair,
    kept: list[int] | None,
    *,
    seed: int = MMD.seed,
    device: str = "auto",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per-layer, summary) of `samples` (stored, canonical) against the reference. With
    `kept` the samples are the paper's target and only its kept rows are compared, as one
    posterior; without, they are a method's variant, compared unit by unit (a mode of a
    one-mode variant, a replicate of a multi-mode one). No permutation test: distances only."""
    rows = list(range(open_store(reference[0]).n_samples))
    if kept is None:
        return method_mmd(reference, samples, rows, pvalue=False, seed=seed, device=device)
    summary = {
        "method": "target",
        "variant": "paper",
        "unit": 0,
        "n_target": len(rows),
        "n_samples": len(kept),
    }
    return compare_stores(
        reference,
        samples,
        summary,
        target_rows=rows,
        method_rows=list(kept),
        pvalue=False,
        seed=seed,
        device=device,
    )


def reference_mmd_table(summaries: list[str | os.PathLike]) -> pl.DataFrame:
    """One row per compared posterior (the paper's target, each method's variant): its
    units, sample counts and the median over units of its MMD and NS MMD to the reference."""
    frames = [pl.read_parquet(path) for path in summaries]
    frame = pl.concat(frames, how="diagonal_relaxed")
    return (
        frame.group_by("method", "variant", maintain_order=True)
        .agg(
            pl.len().alias("units"),
            pl.col("n_target").first().alias("n_reference"),
            pl.col("n_samples").median(),
            pl.col("mmd").median(),
            pl.col("ns_mmd").median(),
        )
        .rename({"method": "compared"})
        .select(COLUMNS)
    )
