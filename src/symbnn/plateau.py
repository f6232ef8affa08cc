"""Evidence that the target's recipe trains its networks to their plateau: the first target
seeds trained again for twice the recipe's epochs (same schedule, stretched), and their test
accuracy at 1x and 2x compared. The recipe has reached its plateau when doubling the epochs
raises the median test accuracy by less than `PLATEAU_GAIN`.

A target trained short of its plateau makes every later comparison measure how much further
training a method does (SWAG and SGHMC train on from their modes) rather than the posterior it
samples; this check makes that visible in the report instead of assuming it away."""

from __future__ import annotations

import os

import numpy as np
import polars as pl

from symbnn.store import StoreError, open_store

# a gain of the median test accuracy below one point from doubling the epochs: at the plateau
PLATEAU_GAIN = 0.01
FACTOR = 2


def plateau_table(target_path: str | os.PathLike, longer_path: str | os.PathLike) -> pl.DataFrame:
    """Rows "1x" and "2x": the longer store's seeds' test accuracy as trained in the target
    (1x) and for twice the epochs (2x): n, median, mean, min and max; then the gain of the
    median and whether it is below PLATEAU_GAIN."""
    target, longer = open_store(target_path), open_store(longer_path)
    seeds = longer.info("seed")
    by_seed = {int(s): i for i, s in enumerate(target.info("seed"))}
    missing = [int(s) for s in seeds if int(s) not in by_seed]
    if missing:
        raise StoreError(
            f"{longer_path}: seeds {missing[:5]} are not in the target {target_path}; the check "
            "retrains target seeds"
        )
    once = target.info("test_accuracy")[[by_seed[int(s)] for s in seeds]].astype(np.float64)
    twice = longer.info("test_accuracy").astype(np.float64)
    epochs = int(target.attrs.get("recipe", {}).get("epochs", 0))
    rows = [_row("1x", epochs, once), _row(f"{FACTOR}x", epochs * FACTOR, twice)]
    gain = float(np.median(twice) - np.median(once))
    return pl.DataFrame(rows).with_columns(
        pl.lit(gain).alias("median_gain"),
        pl.lit(gain < PLATEAU_GAIN).alias("at_plateau"),
    )


def _row(run: str, epochs: int, accuracy: np.ndarray) -> dict:
    return {
        "run": run,
        "epochs": epochs,
        "networks": len(accuracy),
        "median": float(np.median(accuracy)),
        "mean": float(np.mean(accuracy)),
        "min": float(np.min(accuracy)),
        "max": float(np.max(accuracy)),
    }


def plateau_seeds(first_seed: int, n: int) -> list[int]:
    """The target seeds the check trains again: the first n."""
    return list(range(first_seed, first_seed + n))
