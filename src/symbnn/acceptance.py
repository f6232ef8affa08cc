"""Which trained networks the acceptance rule keeps, from their test accuracies alone, so that
the workflow can decide while planning which jobs an edit of the rule changes.

A store's accuracies (`network_accuracies`, written by the `*_accuracies` checkpoints) do
not depend on the rule; `acceptance_table` applies the rule to them (the convergence tables
are this table); `kept_rows` is what the workflow puts in the params of the jobs that read
the kept networks, so that a changed rule reruns only the jobs whose networks change.
A method that retries seeds until its own network passes the rule (MC Dropout, the BNN)
records every attempt's accuracy; `retry_threshold` tells from them whether a new threshold
would change which attempt is kept.

No torch here: the Snakefile reads this module while planning."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import polars as pl

REASON_BELOW = "below min_accuracy"


def network_accuracies(store_path: str | os.PathLike) -> pl.DataFrame:
    """One row per network of a store: ``row``, ``seed``, ``test_accuracy`` (NaN when the
    store has none, e.g. imported networks) and ``flagged`` (the store's own converged flags,
    else true)."""
    # local: keeps zarr out of importing symbnn.acceptance
    from symbnn.store import open_store

    store = open_store(store_path)
    n = store.n_samples
    names = store.info_names
    seeds = store.info("seed") if "seed" in names else np.arange(n)
    accuracy = store.info("test_accuracy").astype(np.float64) if "test_accuracy" in names else None
    flagged = store.info("converged") if "converged" in names else np.ones(n)
    return pl.DataFrame(
        {
            "row": np.arange(n, dtype=np.int64),
            "seed": np.asarray(seeds, dtype=np.int64),
            "test_accuracy": np.full(n, np.nan) if accuracy is None else accuracy,
            "flagged": np.asarray(flagged, dtype=bool),
            "measured": np.full(n, accuracy is not None),
        }
    )


def acceptance_threshold(
    accuracy: np.ndarray, min_accuracy: float, max_below_median: float | None
) -> float:
    """The test accuracy a network must reach to be kept: min_accuracy, raised to the median
    of `accuracy` minus max_below_median when that is set (the median is robust to the few
    networks that did not train, so it describes the recipe, not the stragglers)."""
    if max_below_median is None or not len(accuracy):
        return float(min_accuracy)
    return max(float(min_accuracy), float(np.median(accuracy)) - max_below_median)


def acceptance_table(
    networks: pl.DataFrame, min_accuracy: float, max_below_median: float | None = None
) -> pl.DataFrame:
    """`networks` (`network_accuracies`) with the rule applied: ``converged`` and why
    (``reason``: kept, below min_accuracy, or a straggler more than ``max_below_median`` under
    the median of all the store's networks), and the threshold the rule came to
    (``threshold``: the larger of the two). Networks without accuracies keep their store's
    flags."""
    n = networks.height
    measured = bool(networks["measured"][0]) if n else False
    if measured:
        accuracy = networks["test_accuracy"].to_numpy()
        threshold = acceptance_threshold(accuracy, min_accuracy, max_below_median)
        converged = accuracy >= threshold
        reason = np.where(
            converged,
            "kept",
            np.where(
                accuracy < min_accuracy,
                REASON_BELOW,
                f"more than {max_below_median} below the median",
            ),
        )
    else:
        threshold = float(min_accuracy)
        converged = networks["flagged"].to_numpy()
        reason = np.where(converged, "kept", "flagged in the store")
    return pl.DataFrame(
        {
            "row": networks["row"],
            "seed": networks["seed"],
            "test_accuracy": networks["test_accuracy"],
            "converged": np.asarray(converged, dtype=bool),
            "reason": np.asarray(reason).astype(str),
            "min_accuracy": np.full(n, float(min_accuracy)),
            "threshold": np.full(n, float(threshold)),
        }
    )


def kept_rows(table: pl.DataFrame) -> list[int]:
    """Store rows of the kept networks, in store order: kept network k is row kept_rows[k]."""
    return table.filter(pl.col("converged"))["row"].to_list()


def retry_threshold(
    threshold: float, recorded: float | None, attempts: Sequence[Sequence[float]] | None
) -> float:
    """The threshold to hold in the params of a fit that retried seeds until its network
    reached one: `recorded` (the one it ran with) when `threshold` keeps the same attempt of
    each of its `attempts` (per mode, each attempt's accuracy in order, the kept one last),
    so that the fit is not redone; else `threshold`. A fit not yet run, or one that recorded
    no attempts, gets `threshold`."""
    if recorded is None or attempts is None:
        return float(threshold)
    for tried in attempts:
        if not tried:  # no test data: the first attempt is kept, whatever the threshold
            continue
        *failed, kept = tried
        if kept < threshold or any(score >= threshold for score in failed):
            return float(threshold)
    return float(recorded)
