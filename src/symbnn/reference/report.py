"""The diagnostics of the reference chains (docs/maths.md 4.7), as tables:

- per chain: its starting mode, acceptance rate, mean acceptance probability, energy error
  (mean and largest |dH| of the kept proposals) and step size;
- per kind of quantity (raw weights, canonical weights, test log-likelihood, predictive
  probability of the true class of each of a fixed set of test digits) and scope: split-R-hat,
  bulk and tail ESS over all chains (chains started at different modes: on raw weights R-hat
  is far above 1; on canonical weights it says whether the modes differ up to symmetry), the
  same within each mode's chains (started together, different momenta: near 1 expected), and
  nested R-hat with each mode's chains as a superchain.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl
import torch

from symbnn.atomic import atomic_write
from symbnn.data.core import ImageData
from symbnn.predictions import predict_probabilities
from symbnn.reference import diagnostics
from symbnn.report.tables import to_markdown
from symbnn.store import Store, StoreError, open_store
from symbnn.train.seeding import build_seeded_model

QUANTITIES = ("raw weights", "canonical weights", "test log-likelihood", "predictive probability")


def chain_table(store: Store) -> pl.DataFrame:
    """One row per chain: its seeds, acceptance and energy error over the kept proposals."""
    frame = pl.DataFrame(
        {
            name: store.info(name)
            for name in ("chain", "seed", "mode_index", "mode_seed", "accepted")
            + ("accept_prob", "energy_error", "step_size")
        }
    )
    return (
        frame.group_by("chain", maintain_order=True)
        .agg(
            pl.col("seed").first().alias("momentum_seed"),
            pl.col("mode_index").first().alias("mode"),
            pl.col("mode_seed").first(),
            pl.len().alias("draws"),
            pl.col("accepted").cast(pl.Float64).mean().alias("acceptance_rate"),
            pl.col("accept_prob").mean().alias("mean_accept_prob"),
            pl.col("energy_error").abs().mean().alias("mean_abs_energy_error"),
            pl.col("energy_error").abs().max().alias("max_abs_energy_error"),
            pl.col("step_size").mean().alias("step_size"),
        )
        .sort("chain")
    )


def _chain_shape(store: Store) -> tuple[int, int]:
    """(chains, draws) of a store written chain after chain, equal draws per chain."""
    chains = store.info("chain")
    k = len(np.unique(chains))
    if k * (len(chains) // k) != len(chains) or not np.array_equal(
        chains, np.repeat(np.arange(k), len(chains) // k)
    ):
        raise StoreError(f"{store.path}: rows are not chain after chain with equal draws")
    return k, len(chains) // k


def weight_draws(store: Store, k: int, n: int) -> np.ndarray:
    """Every parameter of every sample as (chains, draws, parameters) float64."""
    flat = np.concatenate([store.matrix(name) for name in store.state_names], axis=1)
    return flat.astype(np.float64).reshape(k, n, -1)


@torch.no_grad()
def function_draws(
    store: Store, model_spec: dict, test: ImageData, digits: int, device: str = "cpu"
) -> tuple[np.ndarray, np.ndarray]:
    """Per sample: the mean test log-likelihood (S,), and the predictive probability of the
    true class of the first `digits` test inputs (S, digits)."""
    if digits > len(test):
        raise ValueError(f"reference.test_digits {digits} exceeds the {len(test)} test inputs")
    model = build_seeded_model(model_spec, 0).to(device)
    labels = test.targets.long()
    loglik, true_probs = [], []
    for row in range(store.n_samples):
        model.load_state_dict(store.state_dict(row))
        probs = predict_probabilities(model, test, device).double()
        picked = probs.gather(1, labels.view(-1, 1)).squeeze(1)
        loglik.append(float(torch.log(picked.clamp_min(1e-300)).mean()))
        true_probs.append(picked[:digits].numpy())
    return np.asarray(loglik), np.stack(true_probs)


def _summaries(draws: np.ndarray, modes: np.ndarray) -> list[dict]:
    """The diagnostics of (chains, draws, quantities) over all chains and within modes."""
    varying = draws.std(axis=(0, 1)) > 0  # a constant quantity carries no diagnostic
    draws = draws[..., varying]
    rows = []
    labels = np.unique(modes)
    groups = {"all chains": [draws]}
    groups["within modes"] = [draws[modes == label] for label in labels]
    for scope, parts in groups.items():
        rhat = np.concatenate([np.atleast_1d(diagnostics.rhat(p)) for p in parts])
        bulk = np.concatenate([np.atleast_1d(diagnostics.ess_bulk(p)) for p in parts])
        tail = np.concatenate([np.atleast_1d(diagnostics.ess_tail(p)) for p in parts])
        row = {
            "scope": scope,
            "quantities": int(draws.shape[2]),
            "rhat_median": float(np.nanmedian(rhat)),
            "rhat_max": float(np.nanmax(rhat)),
            "ess_bulk_median": float(np.nanmedian(bulk)),
            "ess_bulk_min": float(np.nanmin(bulk)),
            "ess_tail_median": float(np.nanmedian(tail)),
            "ess_tail_min": float(np.nanmin(tail)),
            "nested_rhat_median": None,
            "nested_rhat_max": None,
        }
        sizes = {int((modes == label).sum()) for label in labels}
        if scope == "all chains" and len(labels) >= 2 and len(sizes) == 1:
            nested = np.atleast_1d(diagnostics.nested_rhat(draws, modes))
            row["nested_rhat_median"] = float(np.nanmedian(nested))
            row["nested_rhat_max"] = float(np.nanmax(nested))
        rows.append(row)
    return rows


def diagnostics_table(
    store: Store, canonical: Store, model_spec: dict, test: ImageData, digits: int, device: str
) -> pl.DataFrame:
    """The convergence diagnostics per kind of quantity and scope (module docstring)."""
    k, n = _chain_shape(store)
    if canonical.n_samples != store.n_samples:
        raise StoreError(f"{canonical.path}: {canonical.n_samples} rows, not {store.path}'s")
    modes = store.info("mode_index")[::n]
    loglik, probs = function_draws(store, model_spec, test, digits, device)
    draws = {
        "raw weights": weight_draws(store, k, n),
        "canonical weights": weight_draws(canonical, k, n),
        "test log-likelihood": loglik.reshape(k, n, 1),
        "predictive probability": probs.reshape(k, n, -1),
    }
    rows = [
        {"quantity": quantity, **row}
        for quantity in QUANTITIES
        for row in _summaries(draws[quantity], modes)
    ]
    return pl.DataFrame(
        rows, schema_overrides={"nested_rhat_median": pl.Float64, "nested_rhat_max": pl.Float64}
    )


def side_by_side(summary: pl.DataFrame) -> pl.DataFrame:
    """Per scope: R-hat and ESS of the raw weights beside those of the canonical weights (the
    same chains before and after the symmetries are removed)."""
    figures = ("rhat_median", "rhat_max", "ess_bulk_median", "ess_tail_median")
    raw, canonical = (
        summary.filter(pl.col("quantity") == kind).select("scope", *figures)
        for kind in ("raw weights", "canonical weights")
    )
    joined = raw.join(canonical, on="scope", how="inner", suffix=" canonical")
    order = ["scope"] + [c for f in figures for c in (f, f"{f} canonical")]
    return joined.select(order).rename({f: f"{f} raw" for f in figures})


def write_markdown(chains: pl.DataFrame, summary: pl.DataFrame, path: str | os.PathLike) -> None:
    """Both tables on one page, each under its heading."""
    text = (
        "### HMC chains\n\n"
        + to_markdown(chains)
        + "\n\n### Convergence diagnostics (raw against canonical weights)\n\n"
        + to_markdown(summary)
        + "\n"
    )
    atomic_write(Path(path), lambda tmp: tmp.write_text(text))


def reference_diagnostics(
    store_path: str | os.PathLike,
    canonical_path: str | os.PathLike,
    test: ImageData,
    digits: int,
    device: str = "cpu",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per-chain table, diagnostics table) of the reference store and its canonical form."""
    store, canonical = open_store(store_path), open_store(canonical_path)
    store.check_architecture()
    chains = chain_table(store)
    summary = diagnostics_table(store, canonical, store.architecture, test, digits, device)
    return chains, summary
