"""The target posterior: networks trained from seeds, written shard by shard and gathered;
then flagged converged or not by a separate, light step (`convergence_table`), so that the
threshold can change without retraining.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from symbnn.acceptance import acceptance_table, network_accuracies
from symbnn.data.experiment import load_in_distribution
from symbnn.device import resolve_device
from symbnn.settings import Config, Data, Recipe
from symbnn.store import Store, StoreError, StoreWriter, open_store
from symbnn.train import train_seeds

# Attributes that must agree between shards of one posterior.
SHARED_ATTRS = ("experiment", "architecture", "recipe", "data")


def train_shard(
    out_path: str | os.PathLike,
    experiment: str,
    data: Data,
    model: dict[str, Any],
    recipe: Recipe,
    seeds: Sequence[int],
    *,
    data_root: str | os.PathLike = "data",
    download: bool = Config.default("download"),
    device: str = "auto",
    progress: bool = False,
) -> Store:
    """Train the networks of ``seeds`` (architecture spec ``model``) at once and write them
    as one shard store, with each network's test accuracy and final training loss."""
    train, test = load_in_distribution(data, data_root, download, model)
    result = train_seeds(
        model,
        recipe,
        train,
        test,
        list(seeds),
        device=resolve_device(device),
        batched=True,
        progress=progress,
    )
    attrs = {
        "experiment": experiment,
        "architecture": model,
        "recipe": recipe.to_dict(),
        "data": data.to_dict(),
    }
    with StoreWriter(out_path, attrs, kind="posterior", expected_samples=len(seeds)) as writer:
        writer.append(
            state=result.state,
            info={
                "seed": np.asarray(seeds, dtype=np.int64),
                "test_accuracy": np.asarray(result.test_accuracy, dtype=np.float32),
                "train_loss": np.asarray(result.train_loss, dtype=np.float32),
            },
        )
    return open_store(out_path)


def convergence_table(
    store_path: str | os.PathLike, min_accuracy: float, max_below_median: float | None = None
) -> pl.DataFrame:
    """One row per network of the store: ``row``, ``seed``, ``test_accuracy``, ``converged``
    and why (``reason``: kept, below min_accuracy, or a straggler more than
    ``max_below_median`` under the median of all the store's networks), with the threshold the
    rule came to (``threshold``: the larger of the two). A store without accuracies (e.g.
    imported networks) counts every network as converged, unless it carries its own
    ``converged`` flags (`symbnn.acceptance`, which the workflow's planning shares)."""
    return acceptance_table(network_accuracies(store_path), min_accuracy, max_below_median)


def converged_rows(table_path: str | os.PathLike) -> list[int]:
    """Rows of the networks a convergence table flags converged, in store order."""
    table = pl.read_parquet(table_path)
    return table.filter(pl.col("converged"))["row"].to_list()


def gather_shards(
    shard_paths: Sequence[str | os.PathLike],
    out_path: str | os.PathLike,
    shared_attrs: Sequence[str] = SHARED_ATTRS,
) -> Store:
    """Assemble shard stores into one store, in the order given, streaming by chunks; the
    `shared_attrs` must agree between shards and are copied to the result."""
    if not shard_paths:
        raise StoreError(f"{out_path}: no shards to gather")
    shards = [open_store(path) for path in shard_paths]
    first = shards[0]
    for shard in shards[1:]:
        for key in shared_attrs:
            if shard.attrs.get(key) != first.attrs.get(key):
                raise StoreError(
                    f"{shard.path}: attribute {key!r} differs from {first.path} "
                    f"({shard.attrs.get(key)!r} vs {first.attrs.get(key)!r}); shards of one "
                    "posterior must share it (rerun the stale shards)"
                )
        if shard.state_names != first.state_names or shard.shapes != first.shapes:
            raise StoreError(f"{shard.path}: arrays or shapes differ from {first.path}")
    if "seed" in first.info_names:
        seeds = np.concatenate([shard.info("seed") for shard in shards])
        if len(np.unique(seeds)) != len(seeds):
            raise StoreError(f"{out_path}: the shards repeat seeds; each seed must appear once")
    attrs = {key: first.attrs[key] for key in shared_attrs if key in first.attrs}
    attrs["shards"] = [Path(path).name for path in shard_paths]
    total = sum(shard.n_samples for shard in shards)
    with StoreWriter(
        out_path, attrs, kind=first.attrs.get("kind", "posterior"), expected_samples=total
    ) as writer:
        for shard in shards:
            step = min(shard.state_array(name).chunks[0] for name in shard.state_names)
            for start in range(0, shard.n_samples, step):
                rows = slice(start, start + step)
                writer.append(
                    state={name: shard.read(name, rows) for name in shard.state_names},
                    info={name: shard.info(name, rows) for name in shard.info_names},
                )
    return open_store(out_path)
