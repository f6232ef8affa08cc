"""Sampling: a method fitted at its modes, then its samples drawn from the fits.

The workflow runs one fit job per (experiment, method, block of modes): one mode per block
for the methods that train (so the modes fit in parallel on a cluster), one block for all
Deep Ensemble members (they only copy weights). Both variants draw from the same fits: the
multi-mode variant its share of the samples at each mode, the single-mode variant all
n_samples at every mode (one single-mode posterior per mode, reported over the modes). One
draw job per variant writes the variant's sample store, so a setting used only when drawing
reruns the draw, not the fits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from symbnn.data.experiment import load_in_distribution
from symbnn.device import resolve_device
from symbnn.methods.base import Fitted, Problem, concat_states
from symbnn.methods.pool import select_mode
from symbnn.methods.registry import fit_counts, mode_blocks, mode_shares, module, settings_of
from symbnn.progress import progress
from symbnn.settings import Data, Experiment, Recipe, Section
from symbnn.store import Store, StoreWriter, open_store
from symbnn.treefile import TreeFileError, load_tree, save_tree


def problem_for(
    data: Data,
    model: dict,
    recipe: Recipe,
    data_root: str | os.PathLike,
    download: bool,
    device: str,
    min_accuracy: float = 0.0,
    retries: int = 0,
) -> Problem:
    """What a method samples for: the experiment's model, recipe and training data, and the
    test data with the convergence threshold for the methods that train from scratch."""
    train, test = load_in_distribution(data, data_root, download)
    return Problem(model, recipe, train, resolve_device(device), test, min_accuracy, retries)


def job_problem(training: dict, env, min_accuracy: float = 0.0, retries: int = 0) -> Problem:
    """`problem_for` from a workflow job's training params (data, model, recipe as dicts)
    and its environment (data root, download, device)."""
    return problem_for(
        Data.parse(training["data"], "data"),
        training["model"],
        Recipe.parse(training["recipe"], "recipe"),
        env.data_root,
        env.download,
        env.device,
        min_accuracy,
        retries,
    )


@dataclass
class BlockFits:
    """The fits of one block of modes: mode indices, their pool seeds, what each fit holds."""

    modes: list[int]
    mode_seeds: list[int]
    fits: list[Fitted]


def fit_block(
    problem: Problem,
    method: str,
    settings: Section,
    modes: list[int],
    seed: int,
    counts: list[int] | None,
    pool_path: str | os.PathLike,
    converged: list[int],
) -> BlockFits:
    """Fit the method at each mode k of `modes` (the pool's k-th converged network,
    `converged` listing the converged rows), drawing from seed `seed + k`. `counts` (samples
    per mode, `fit_counts`) matters only to methods that draw their samples while fitting."""
    fit = module(method).fit
    seeds, fits = [], []
    for k in progress(modes, desc=f"fit {method}", unit="mode"):
        mode = select_mode(pool_path, converged, k)
        fits.append(fit(problem, mode, settings, seed + k, None if counts is None else counts[k]))
        seeds.append(mode.seed)
    return BlockFits(list(modes), seeds, fits)


def save_fits(fits: BlockFits, path: str | os.PathLike) -> None:
    """A block's fits as a tree file (`symbnn.treefile`: tensors and JSON, nothing pickled)."""
    save_tree({"modes": fits.modes, "mode_seeds": fits.mode_seeds, "fits": fits.fits}, path)


def load_fits(path: str | os.PathLike) -> BlockFits:
    payload = load_tree(path)
    try:
        return BlockFits(payload["modes"], payload["mode_seeds"], payload["fits"])
    except (KeyError, TypeError):
        raise TreeFileError(f"{path}: not a block of fits (no modes, mode_seeds, fits)") from None


def draw_samples(
    problem: Problem,
    method: str,
    settings: Section,
    blocks: list[BlockFits],
    shares: list[int],
    seed: int,
) -> tuple[dict[str, torch.Tensor], np.ndarray, np.ndarray]:
    """Each mode k's share of the samples, drawn from its fit with seed `seed + k`:
    (stacked state, mode index per row, pool seed per row)."""
    modes = [k for fits in blocks for k in fits.modes]
    if modes != list(range(len(shares))):
        raise ValueError(f"{method}: fits cover modes {modes}, expected 0..{len(shares) - 1}")
    draw = module(method).draw
    parts, mode_index, mode_seed = [], [], []
    for fits in blocks:
        for k, pool_seed, fitted in zip(fits.modes, fits.mode_seeds, fits.fits):
            parts.append(draw(problem, fitted, shares[k], settings, seed + k))
            mode_index += [k] * shares[k]
            mode_seed += [pool_seed] * shares[k]
    return (
        concat_states(parts),
        np.asarray(mode_index, dtype=np.int64),
        np.asarray(mode_seed, dtype=np.int64),
    )


def write_sample_store(
    out_path: str | os.PathLike,
    attrs: dict,
    state: dict[str, torch.Tensor],
    mode_index: np.ndarray,
    mode_seed: np.ndarray,
) -> Store:
    """A variant's samples as a sample store (`attrs`: experiment, architecture, recipe,
    data, method, variant, settings)."""
    with StoreWriter(out_path, attrs, kind="samples", expected_samples=len(mode_index)) as writer:
        writer.append(state=state, info={"mode_index": mode_index, "mode_seed": mode_seed})
    return open_store(out_path)


def sample_attrs(
    experiment: str, problem: Problem, data: Data, method: str, variant: str, settings: Section
) -> dict:
    return {
        "experiment": experiment,
        "architecture": problem.model_spec,
        "recipe": problem.recipe.to_dict(),
        "data": data.to_dict(),
        "method": method,
        "variant": variant,
        "settings": settings.to_dict(),
    }


def sample_store(
    out_path: str | os.PathLike,
    experiment_name: str,
    experiment: Experiment,
    method: str,
    variant: str,
    pool_path: str | os.PathLike,
    converged: list[int],
    problem: Problem,
) -> Store:
    """Fit every block and write the variant's sample store in one go (`symbnn sample`)."""
    methods = experiment.methods
    settings = settings_of(method, methods)
    counts = fit_counts(method, methods)
    blocks = [
        fit_block(problem, method, settings, modes, methods.seed, counts, pool_path, converged)
        for modes in mode_blocks(method, methods)
    ]
    shares = mode_shares(method, variant, methods)
    state, mode_index, mode_seed = draw_samples(
        problem, method, settings, blocks, shares, methods.seed
    )
    attrs = sample_attrs(experiment_name, problem, experiment.data, method, variant, settings)
    return write_sample_store(Path(out_path), attrs, state, mode_index, mode_seed)
