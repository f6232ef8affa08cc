"""Izmailov et al.'s predictive comparison with the HMC reference (docs/maths.md 4.7): the
posterior predictive of a set of samples is the mean of their softmax probabilities; two
predictives are compared by their top-1 agreement and their total variation distance on the
test digits."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import polars as pl

# samples read at once when averaging a predictions store (bounds memory whatever S is)
BLOCK = 64
# the per-unit table's columns, in order
COLUMNS = (
    "compared",
    "variant",
    "unit",
    "n_samples",
    "agreement",
    "tv",
    "agreement_target",
    "tv_target",
)


def _checked(p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.ndim != 2 or p.shape != q.shape or p.shape[0] == 0:
        raise ValueError(
            f"predictive distributions must both be (digits, classes) and non-empty; "
            f"got {p.shape} and {q.shape}"
        )
    return p, q


def agreement(p: np.ndarray, q: np.ndarray) -> float:
    """The fraction of digits whose most probable class is the same under `p` and `q`
    (each (digits, classes)); a tie goes to the lowest class on both sides."""
    p, q = _checked(p, q)
    return float(np.mean(p.argmax(axis=1) == q.argmax(axis=1)))


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """The mean over digits of half the L1 distance between the two class distributions."""
    p, q = _checked(p, q)
    return float(np.mean(0.5 * np.abs(p - q).sum(axis=1)))


def mean_predictive(predictions, rows: Sequence[int] | None = None) -> np.ndarray:
    """The posterior predictive (digits, classes) on the test set: the mean over `rows` (all
    samples without) of the stored softmax probabilities, accumulated in float64 block by
    block."""
    rows = list(range(predictions.n_samples)) if rows is None else [int(r) for r in rows]
    if not rows:
        raise ValueError(f"{predictions.path}: no samples to average")
    total = None
    for start in range(0, len(rows), BLOCK):
        block = rows[start : start + BLOCK]
        probs = predictions.read("test", block).astype(np.float64).sum(axis=0)
        total = probs if total is None else total + probs
    return total / len(rows)


def _units(units: np.ndarray) -> dict[int, list[int]]:
    """Each unit's store rows, units in order."""
    return {int(u): np.flatnonzero(units == u).tolist() for u in np.unique(units)}


def compare(
    reference: np.ndarray, target: np.ndarray, predictions, units: np.ndarray, name: tuple
) -> list[dict]:
    """One row per unit of a method's variant (`name`: (method, variant)): its predictive
    against the reference's and against the paper's target's."""
    rows = []
    for unit, members in _units(units).items():
        own = mean_predictive(predictions, members)
        rows.append(
            {
                "compared": name[0],
                "variant": name[1],
                "unit": unit,
                "n_samples": len(members),
                "agreement": agreement(own, reference),
                "tv": total_variation(own, reference),
                "agreement_target": agreement(own, target),
                "tv_target": total_variation(own, target),
            }
        )
    return rows


def target_row(reference: np.ndarray, target: np.ndarray, n_samples: int) -> dict:
    """The paper's target (one posterior, its kept networks) against the reference."""
    return {
        "compared": "target",
        "variant": "paper",
        "unit": 0,
        "n_samples": n_samples,
        "agreement": agreement(target, reference),
        "tv": total_variation(target, reference),
        "agreement_target": None,
        "tv_target": None,
    }


def chain_table(predictions, chains: np.ndarray, target: np.ndarray) -> pl.DataFrame:
    """Per HMC chain: the total variation from the paper's target to the chain's predictive
    (``tv_target``) beside that from the other chains' predictive to it (``tv_rest``, HMC's own
    spread between chains), and their agreements."""
    by_chain = _units(chains)
    if len(by_chain) < 2:
        raise ValueError(f"{predictions.path}: the reference has one chain; need two or more")
    total = mean_predictive(predictions) * predictions.n_samples
    rows = []
    for chain, members in by_chain.items():
        own = mean_predictive(predictions, members)
        rest = (total - own * len(members)) / (predictions.n_samples - len(members))
        rows.append(
            {
                "chain": chain,
                "n_samples": len(members),
                "tv_target": total_variation(target, own),
                "tv_rest": total_variation(rest, own),
                "agreement_target": agreement(target, own),
                "agreement_rest": agreement(rest, own),
            }
        )
    return pl.DataFrame(rows)


def summary_table(units: pl.DataFrame) -> pl.DataFrame:
    """One row per compared posterior: its units and the median over units of each figure."""
    return units.group_by("compared", "variant", maintain_order=True).agg(
        pl.len().alias("units"),
        pl.col("n_samples").median(),
        *(pl.col(c).median() for c in ("agreement", "tv", "agreement_target", "tv_target")),
    )


def predictive_tables(
    reference: str | os.PathLike,
    reference_store,
    target: str | os.PathLike,
    kept: Sequence[int],
    methods: Sequence[tuple[str, str, str | os.PathLike, np.ndarray]],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per-unit, per-chain) tables: the paper's target (its `kept` rows of the `target`
    predictions) and each method's variant ((method, variant, predictions path, each sample's
    unit)) against the `reference` predictions, whose chains `reference_store` names."""
    # local: keeps zarr out of importing symbnn.reference.predictive
    from symbnn.store.predictions import open_predictions

    hmc = open_predictions(reference)
    reference_mean = mean_predictive(hmc)
    target_mean = mean_predictive(open_predictions(target), kept)
    rows = [target_row(reference_mean, target_mean, len(kept))]
    for method, variant, path, units in methods:
        rows += compare(
            reference_mean, target_mean, open_predictions(path), units, (method, variant)
        )
    schema = {c: (pl.String if c in ("compared", "variant") else pl.Float64) for c in COLUMNS}
    schema["unit"] = schema["n_samples"] = pl.Int64
    per_unit = pl.DataFrame(rows, schema=schema)
    chains = chain_table(hmc, reference_store.info("chain"), target_mean)
    return per_unit, chains
