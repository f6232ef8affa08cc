"""Sampling: a method fitted at its modes, then its samples drawn from the fits.

The workflow runs one fit job per (experiment, method, block of modes): one block for all
the modes of a method that fits them in one batched run (on the models the batched trainer
has a hand-written pass for; `methods.fit_block` splits it), one mode per block for the
other methods that train (so the modes fit in parallel on a cluster), one block for all Deep
Ensemble members (they only copy weights). Both variants draw from the same fits: the
multi-mode variant its share of the samples at each mode, the single-mode variant all
n_samples at every mode (one single-mode posterior per mode, reported over the modes). One
sample job per variant writes the variant's sample store, so a setting used only when drawing
reruns the sample job, not the fits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from symbnn.data.experiment import load_in_distribution
from symbnn.device import resolve_device
from symbnn.methods import checked
from symbnn.methods.base import Fitted, Problem, concat_states
from symbnn.methods.interface import Descriptor, Draw
from symbnn.methods.pool import select_mode
from symbnn.methods.registry import batched_fits, descriptor, implementation, settings_of
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
    train, test = load_in_distribution(data, data_root, download, model)
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

    def rows(self):
        """(mode index, pool seed, fit) of each mode of the block."""
        return zip(self.modes, self.mode_seeds, self.fits)


def fit_block(
    problem: Problem,
    method: Descriptor,
    settings: Section,
    modes: list[int],
    seed: int,
    counts: list[int] | None,
    pool_path: str | os.PathLike,
    converged: list[int],
) -> BlockFits:
    """Fit the method at each mode k of `modes` (the pool's k-th converged network,
    `converged` listing the converged rows), drawing from seed `seed + k`. `counts` (samples
    per mode, `fit_counts`) matters only to methods that draw their samples while fitting. A
    method that fits in a batch gets the whole block at once (`Method.fit_modes`)."""
    fitter = implementation(method)
    asked = [None if counts is None else counts[k] for k in modes]
    if method.batched_fit:
        selected = [select_mode(pool_path, converged, k) for k in modes]
        seeds = [seed + k for k in modes]
        with checked.step(method, "fit", modes):
            fits = fitter.fit_modes(problem, selected, settings, seeds, asked)
        if len(fits) != len(modes):
            raise ValueError(
                f"{method.name}: fit_modes returned {len(fits)} fits for {len(modes)} modes"
            )
        return BlockFits(list(modes), [mode.seed for mode in selected], list(fits))
    pool_seeds, fits = [], []
    for k, count in progress(list(zip(modes, asked)), desc=f"fit {method.name}", unit="mode"):
        mode = select_mode(pool_path, converged, k)
        with checked.step(method, "fit", [k]):
            fits.append(fitter.fit(problem, mode, settings, seed + k, count))
        pool_seeds.append(mode.seed)
    return BlockFits(list(modes), pool_seeds, fits)


def save_fits(fits: BlockFits, path: str | os.PathLike) -> None:
    """A block's fits as a tree file (`symbnn.treefile`: tensors and JSON, nothing pickled)."""
    save_tree({"modes": fits.modes, "mode_seeds": fits.mode_seeds, "fits": fits.fits}, path)


def load_fits(path: str | os.PathLike) -> BlockFits:
    payload = load_tree(path)
    try:
        return BlockFits(payload["modes"], payload["mode_seeds"], payload["fits"])
    except (KeyError, TypeError):
        raise TreeFileError(f"{path}: not a block of fits (no modes, mode_seeds, fits)") from None


# seeds of a multi-mode replicate's draws are offset by this much per replicate, so that no
# two replicates (nor a replicate and the one-mode draws) share a draw
REPLICATE_SEED_STRIDE = 10_000


def sample_variant(
    problem: Problem,
    method: Descriptor,
    settings: Section,
    blocks: list[BlockFits],
    plan: list[Draw],
    seed: int,
    multi: bool,
) -> tuple[dict[str, torch.Tensor], dict[str, np.ndarray]]:
    """The variant's samples, drawn unit by unit as `plan` (`registry.sample_plan`) says:
    (stacked state, info per row: mode index, pool seed of the mode, unit). A method that
    samples while fitting hands each draw the fit's next unused samples; the others draw with
    seed `seed + mode` (one-mode) or `seed + mode + REPLICATE_SEED_STRIDE * (replicate + 1)`.
    Each draw is checked before it is kept (`symbnn.methods.checked.check_samples`), and a
    user's method that raises is named with the step and the mode."""
    fits = {k: (pool_seed, fitted) for b in blocks for k, pool_seed, fitted in b.rows()}
    missing = sorted({d.mode for d in plan} - set(fits))
    if missing:
        raise ValueError(f"{method.name}: no fit for mode(s) {missing} (fits cover {sorted(fits)})")
    sample, at_fit = implementation(method).sample, method.samples_at_fit
    layout = checked.model_layout(problem.model_spec)
    parts, info = [], {"mode_index": [], "mode_seed": [], "unit": []}
    for d in plan:
        pool_seed, fitted = fits[d.mode]
        if at_fit:  # prefix-stable: the first skip + count samples, of which the last count
            asked, draw_seed = d.skip + d.count, seed + d.mode
        else:
            asked = d.count
            draw_seed = seed + d.mode + (REPLICATE_SEED_STRIDE * (d.unit + 1) if multi else 0)
        with checked.step(method, "sample", [d.mode]):
            drawn = sample(problem, fitted, asked, settings, draw_seed)
        drawn = checked.check_samples(method, drawn, asked, layout, d.mode)
        if at_fit:
            drawn = {name: t[d.skip :] for name, t in drawn.items()}
        parts.append(drawn)
        for key, value in (("mode_index", d.mode), ("mode_seed", pool_seed), ("unit", d.unit)):
            info[key] += [value] * d.count
    return concat_states(parts), {k: np.asarray(v, dtype=np.int64) for k, v in info.items()}


def write_sample_store(
    out_path: str | os.PathLike,
    attrs: dict,
    state: dict[str, torch.Tensor],
    info: dict[str, np.ndarray],
) -> Store:
    """A variant's samples as a sample store (`attrs`: experiment, architecture, recipe,
    data, method, variant, settings; `info`: mode index, mode seed and unit per row)."""
    n = len(next(iter(info.values())))
    with StoreWriter(out_path, attrs, kind="samples", expected_samples=n) as writer:
        writer.append(state=state, info=info)
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
    described = descriptor(method, methods)
    settings = settings_of(method, methods)
    counts = described.fit_counts(methods, settings)
    blocks = [
        fit_block(problem, described, settings, modes, methods.seed, counts, pool_path, converged)
        for modes in described.mode_blocks(methods, settings, batched_fits(experiment))
    ]
    plan = described.sample_plan(variant, methods, settings)
    state, info = sample_variant(
        problem, described, settings, blocks, plan, methods.seed, multi=variant == "multi"
    )
    attrs = sample_attrs(experiment_name, problem, experiment.data, method, variant, settings)
    return write_sample_store(Path(out_path), attrs, state, info)
