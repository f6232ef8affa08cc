"""One sampling job: a method's samples from one mode of one variant, written as a store.

The workflow runs one job per (experiment, method, variant, block of modes): one mode per
block for the methods that train (so the modes of a multi-mode variant run in parallel on a
cluster), one block for all Deep Ensemble members (they only copy weights); `gather_shards`
then assembles the blocks into the variant's sample store.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from symbnn.device import resolve_device
from symbnn.methods.base import Problem, concat_states
from symbnn.methods.pool import select_mode
from symbnn.methods.registry import mode_shares, sampler, settings_of
from symbnn.posterior import load_in_distribution
from symbnn.progress import progress
from symbnn.store import Store, StoreWriter, open_store
from symbnn.train.recipe import Recipe

# Attributes every mode store of one variant shares (checked when they are gathered).
SAMPLE_ATTRS = ("experiment", "architecture", "recipe", "data", "method", "variant", "settings")


def mode_blocks(method: str, variant: str, methods_cfg: dict[str, Any]) -> list[list[int]]:
    """The mode indices each sampling job handles."""
    n_modes = len(mode_shares(method, variant, methods_cfg))
    return [list(range(n_modes))] if method == "de" else [[k] for k in range(n_modes)]


def sample_mode_store(
    out_path: str | os.PathLike,
    experiment: str,
    experiment_cfg: dict[str, Any],
    method: str,
    variant: str,
    block: int | None,
    pool_path: str | os.PathLike,
    *,
    data_root: str | os.PathLike = "data",
    download: bool = False,
    device: str = "auto",
) -> Store:
    """Draw the samples of block `block`'s modes (their shares of the variant's samples), or
    of every mode when `block` is None, and write them to `out_path`."""
    methods_cfg = experiment_cfg["methods"]
    shares = mode_shares(method, variant, methods_cfg)
    blocks = mode_blocks(method, variant, methods_cfg)
    if block is None:
        blocks, block = [[k for b in blocks for k in b]], 0
    if not 0 <= block < len(blocks):
        raise ValueError(
            f"{method}/{variant} has {len(blocks)} sampling blocks; block {block} does not exist"
        )
    train, _ = load_in_distribution(experiment_cfg["data"], data_root, download)
    problem = Problem(
        experiment_cfg["model"],
        Recipe.from_dict(experiment_cfg["recipe"]),
        train,
        resolve_device(device),
    )
    settings = settings_of(method, methods_cfg)
    draw = sampler(method)
    parts, mode_index, mode_seed = [], [], []
    for k in progress(blocks[block], desc=f"sample {method}/{variant}", unit="mode"):
        mode = select_mode(pool_path, k)
        # mode k of every variant draws from seed + k: the single-mode variant's samples come
        # from the same stream as the first mode of the multi-mode one
        parts.append(draw(problem, mode, shares[k], settings, methods_cfg.get("seed", 0) + k))
        mode_index += [k] * shares[k]
        mode_seed += [mode.seed] * shares[k]
    state = concat_states(parts)
    count = len(mode_index)
    attrs = {
        "experiment": experiment,
        "architecture": experiment_cfg["model"],
        "recipe": experiment_cfg["recipe"],
        "data": experiment_cfg["data"],
        "method": method,
        "variant": variant,
        "settings": settings,
    }
    with StoreWriter(out_path, attrs, kind="samples", expected_samples=count) as writer:
        writer.append(
            state=state,
            info={
                "mode_index": np.asarray(mode_index, dtype=np.int64),
                "mode_seed": np.asarray(mode_seed, dtype=np.int64),
            },
        )
    return open_store(out_path)
