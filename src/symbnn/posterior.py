"""The target posterior: networks trained from seeds, written shard by shard and gathered.

Each training job writes one shard store (a block of seeds trained at once); `gather_shards`
assembles them into the posterior store every later step reads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from symbnn.data import ImageData, load_dataset
from symbnn.device import resolve_device
from symbnn.store import Store, StoreError, StoreWriter, open_store

# Attributes that must agree between shards of one posterior.
SHARED_ATTRS = ("experiment", "architecture", "recipe", "data", "min_accuracy")


def load_in_distribution(
    data_cfg: dict[str, Any], data_root: str | os.PathLike, download: bool = False
) -> tuple[ImageData, ImageData]:
    """(train, test) of an experiment's `data` section, cut to train_limit / test_limit."""
    options = {"download": True} if download else {}
    train = load_dataset(data_cfg["train"], "train", data_root, **options)
    test = load_dataset(data_cfg["train"], "test", data_root, **options)
    if "train_limit" in data_cfg:
        train = train.subset(slice(0, data_cfg["train_limit"]))
    if "test_limit" in data_cfg:
        test = test.subset(slice(0, data_cfg["test_limit"]))
    return train, test


def load_out_of_distribution(
    data_cfg: dict[str, Any], data_root: str | os.PathLike, like: ImageData, download: bool = False
) -> ImageData:
    """The OOD set of an experiment's `data` section; its images must match ``like``'s shape."""
    options = {"download": True} if download else {}
    ood = load_dataset(
        data_cfg["ood"], "test", data_root, **options, **data_cfg.get("ood_options", {})
    )
    if ood.images.shape[1:] != like.images.shape[1:]:
        raise ValueError(
            f"data.ood: {data_cfg['ood']!r} images have shape {tuple(ood.images.shape[1:])}, "
            f"the in-distribution set {data_cfg['train']!r} has {tuple(like.images.shape[1:])}; "
            "set data.ood_options (size, channels) to match"
        )
    return ood


def train_shard(
    out_path: str | os.PathLike,
    experiment: str,
    experiment_cfg: dict[str, Any],
    seeds: Sequence[int],
    *,
    data_root: str | os.PathLike = "data",
    download: bool = False,
    device: str = "auto",
    progress: bool = False,
) -> Store:
    """Train the networks of ``seeds`` at once and write them as one shard store."""
    from symbnn.train import Recipe, train_seeds

    train, test = load_in_distribution(experiment_cfg["data"], data_root, download)
    recipe = Recipe.from_dict(experiment_cfg["recipe"])
    result = train_seeds(
        experiment_cfg["model"],
        recipe,
        train,
        test,
        list(seeds),
        device=resolve_device(device),
        batched=True,
        progress=progress,
    )
    min_accuracy = experiment_cfg["posterior"].get("min_accuracy", 0.5)
    accuracy = np.asarray(result.test_accuracy, dtype=np.float32)
    attrs = {
        "experiment": experiment,
        "architecture": experiment_cfg["model"],
        "recipe": experiment_cfg["recipe"],
        "data": experiment_cfg["data"],
        "min_accuracy": min_accuracy,
    }
    with StoreWriter(out_path, attrs, kind="posterior", expected_samples=len(seeds)) as writer:
        writer.append(
            state=result.state,
            info={
                "seed": np.asarray(seeds, dtype=np.int64),
                "converged": accuracy >= min_accuracy,
                "test_accuracy": accuracy,
                "train_loss": np.asarray(result.train_loss, dtype=np.float32),
            },
        )
    return open_store(out_path)


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
