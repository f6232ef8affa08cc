"""Tables describing a trained posterior store: training results and the store itself."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from symbnn.store import Store


def per_sample_table(store: Store, convergence: pl.DataFrame) -> pl.DataFrame:
    """One row per network: seed, converged flag, test accuracy, final training loss."""
    columns = {"seed": convergence["seed"], "converged": convergence["converged"]}
    for name in ("test_accuracy", "train_loss"):
        if name in store.info_names:
            columns[name] = store.info(name)
    return pl.DataFrame(columns)


def training_summary(store: Store, convergence: pl.DataFrame) -> pl.DataFrame:
    """One row: how many networks converged (flags and threshold from
    `symbnn.posterior.convergence_table`) and the distribution of their test accuracy."""
    accuracy = store.info("test_accuracy").astype(np.float64)
    converged = convergence["converged"].to_numpy().astype(bool)
    q05, q50, q95 = np.quantile(accuracy, [0.05, 0.5, 0.95])
    return pl.DataFrame(
        {
            "experiment": [store.attrs.get("experiment")],
            "n_samples": [store.n_samples],
            "converged": [int(converged.sum())],
            "not_converged": [int((~converged).sum())],
            "min_accuracy": [float(convergence["min_accuracy"][0])],
            "acc_mean": [float(accuracy.mean())],
            "acc_std": [float(accuracy.std(ddof=1)) if accuracy.size > 1 else 0.0],
            "acc_min": [float(accuracy.min())],
            "acc_q05": [float(q05)],
            "acc_median": [float(q50)],
            "acc_q95": [float(q95)],
            "acc_max": [float(accuracy.max())],
            "acc_mean_converged": [
                float(accuracy[converged].mean()) if converged.any() else float("nan")
            ],
        }
    )


def store_table(store: Store) -> pl.DataFrame:
    """One row per state entry: shape, parameters per sample, bytes, chunk shape."""
    rows = []
    for name in store.state_names:
        array = store.state_array(name)
        rows.append(
            {
                "array": name,
                "shape": str(tuple(array.shape[1:])),
                "n_params": math.prod(array.shape[1:]),
                "dtype": str(array.dtype),
                "chunks": str(tuple(array.chunks)),
                "mib": math.prod(array.shape) * array.dtype.itemsize / 2**20,
            }
        )
    return pl.DataFrame(rows)
