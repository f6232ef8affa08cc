"""How often a network's hidden units change places during training (paper section 5.2, Figure 4).

A few networks are trained with an experiment's recipe (one `nn.Module` and `torch.optim.SGD`
per run, in the run's seed order, as `symbnn.train.loop` trains). Every ``every`` steps the
weights are snapshotted; afterwards the snapshots are put in canonical form all at once, and
for each hidden unit group the sorting permutation is read off (docs/maths.md, section 2, keys "max"
and "first"). Kendall's tau between the unit rankings of consecutive snapshots is 1 when no
unit moved and drops with every pair of units that swapped; the paper plots its mean over
runs (and unit groups) against the step.

A permutation ``p`` from the canonical form says "sorted position i holds unit p[i]"; the
ranking it gives unit u is the inverse, ``rank[p[i]] = i``. Tau compares rankings of the same
units, so it is taken between the inverse permutations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from symbnn.data.core import ImageData
from symbnn.settings import PermutationFrequency, Recipe
from symbnn.symmetry import canonicalize, unit_groups
from symbnn.train.batches import batch_bounds
from symbnn.train.evaluate import accuracy, unstack
from symbnn.train.loop import fit_module
from symbnn.train.seeding import build_seeded_model

KEYS = ("max", "first")


def kendall_tau(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Kendall's tau-a between rows of ``a`` and ``b`` ((..., n) tensors of distinct values,
    e.g. permutations): (concordant - discordant pairs) / (n (n - 1) / 2). O(n^2) memory per
    row, fine for hidden layers of a few hundred units. NaN for n < 2."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    if a.shape != b.shape:
        raise ValueError(f"kendall_tau: shapes differ, {tuple(a.shape)} vs {tuple(b.shape)}")
    n = a.shape[-1]
    if n < 2:
        return torch.full(a.shape[:-1], float("nan"), dtype=torch.float64)
    da = torch.sign(a[..., :, None] - a[..., None, :])
    db = torch.sign(b[..., :, None] - b[..., None, :])
    # each unordered pair appears twice in the full matrix
    return (da * db).sum(dim=(-1, -2)).to(torch.float64) / (n * (n - 1))


def ranks(perms: torch.Tensor) -> torch.Tensor:
    """Inverse permutations along the last axis: the sorted position of each unit."""
    return perms.argsort(dim=-1)


def consecutive_tau(perms: torch.Tensor) -> torch.Tensor:
    """(T - 1,) tau between the unit rankings of snapshots t and t + 1; ``perms`` is (T, width)."""
    r = ranks(perms)
    return kendall_tau(r[:-1], r[1:])


def analysis_recipe(settings: PermutationFrequency, recipe: Recipe) -> Recipe:
    """The experiment's recipe with the analysis's epochs and milestones; milestones past the
    last epoch are dropped when only the epochs are replaced."""
    changes = {}
    if settings.epochs is not None:
        changes["epochs"] = settings.epochs
        changes["milestones"] = [m for m in recipe.milestones if m < settings.epochs]
    if settings.milestones is not None:
        changes["milestones"] = list(settings.milestones)
    return recipe.replace(**changes)


def snapshots(
    model_spec: dict[str, Any],
    recipe: Recipe,
    train: ImageData,
    seed: int,
    every: int,
    device: torch.device | str = "cpu",
) -> tuple[dict[str, torch.Tensor], np.ndarray, np.ndarray]:
    """Train one seed; return the stacked weights at steps 0, every, 2 every, ... and the
    last step (name -> (T, *shape) on the CPU), those steps, and the lr in force at each."""
    model = build_seeded_model(model_spec, seed).to(device)
    per_epoch = len(batch_bounds(len(train), recipe.batch_size))
    last = per_epoch * recipe.epochs
    taken, steps = [], []

    def take(step: int, model: torch.nn.Module) -> None:
        if step % every == 0 or step == last:
            taken.append(
                {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
            )
            steps.append(step)

    take(0, model)
    fit_module(model, recipe, train, seed, device, on_step=take)
    # step s >= 1 is taken in epoch (s - 1) // per_epoch; step 0 is before epoch 0
    lrs = [recipe.lr_at(max(step - 1, 0) // per_epoch) for step in steps]
    state = {name: torch.stack([t[name] for t in taken]) for name in taken[0]}
    return state, np.array(steps), np.array(lrs)


def sorting_permutations(
    state: dict[str, torch.Tensor], model_spec: dict[str, Any], keys: Sequence[str] = KEYS
) -> dict[tuple[str, str], torch.Tensor]:
    """(key, unit group) -> (T, width) the canonical form's sorting permutation of each
    snapshot, for groups of at least two units."""
    sym = unit_groups(model_spec)
    state = {k: v.to(torch.float64) for k, v in state.items()}
    out = {}
    for key in keys:
        perms = canonicalize(state, sym, key=key, softmax_shift=False, on_dead="keep").perms
        for group in sym.groups:
            if group.width >= 2:
                out[(key, group.name)] = perms[group.name]
    return out


def milestone_steps(recipe: Recipe, n_train: int) -> list[int]:
    """The training steps at which the recipe's learning-rate milestones take effect."""
    per_epoch = len(batch_bounds(n_train, recipe.batch_size))
    return [m * per_epoch for m in recipe.milestones]


# seeds tried at most per run asked for, when runs do not converge
MAX_TRIES_PER_RUN = 4


def final_accuracy(
    model_spec: dict[str, Any], state: dict[str, torch.Tensor], test: ImageData
) -> float:
    """Test accuracy of the last snapshot of a run."""
    model = build_seeded_model(model_spec, 0)
    model.load_state_dict(unstack(state, -1))
    return accuracy(model, test)


def run_frequency(
    model_spec: dict[str, Any],
    recipe: Recipe,
    train: ImageData,
    settings: PermutationFrequency,
    device: torch.device | str = "cpu",
    test: ImageData | None = None,
    min_accuracy: float = 0.0,
):
    """Two long tables: ``taus``, one row per (run, key, unit group, step) with the tau
    between the snapshot at ``step`` and the one before and the lr in force; ``perms``, the
    sorting permutation itself at every snapshot (list column). With `test`, only runs whose
    final network reaches `min_accuracy` count (a dead run's units never move, tau = 1
    throughout): seeds are tried in order until `settings.runs` runs converged."""
    import polars as pl

    taus, perms = [], []
    kept = 0
    seeds = range(settings.first_seed, settings.first_seed + MAX_TRIES_PER_RUN * settings.runs)
    for seed in seeds:
        if kept == settings.runs:
            break
        state, steps, lrs = snapshots(
            model_spec, recipe, train, seed, settings.every_k_steps, device
        )
        if test is not None and final_accuracy(model_spec, state, test) < min_accuracy:
            continue
        kept += 1
        for (key, group), p in sorting_permutations(state, model_spec).items():
            tau = consecutive_tau(p).numpy()
            taus.append(
                pl.DataFrame(
                    {
                        "run": np.full(len(tau), seed),
                        "key": [key] * len(tau),
                        "group": [group] * len(tau),
                        "step": steps[1:],
                        "lr": lrs[1:],
                        "tau": tau,
                    }
                )
            )
            perms.append(
                pl.DataFrame(
                    {
                        "run": np.full(len(steps), seed),
                        "key": [key] * len(steps),
                        "group": [group] * len(steps),
                        "step": steps,
                        "perm": p.tolist(),
                    }
                )
            )
    if kept < settings.runs:
        raise ValueError(
            f"permutation frequency: {kept} of {len(seeds)} runs converged (test accuracy "
            f">= {min_accuracy}); {settings.runs} are asked for"
        )
    if not taus:
        raise ValueError(f"{model_spec}: no hidden unit group of two or more units to rank")
    return pl.concat(taus), pl.concat(perms)


def mean_tau(table):
    """Mean tau over runs and unit groups per (key, step), the curve of Figure 4."""
    import polars as pl

    return (
        table.group_by("key", "step")
        .agg(
            pl.col("tau").mean().alias("mean_tau"),
            pl.col("tau").min().alias("min_tau"),
            pl.col("lr").first(),
        )
        .sort("key", "step")
    )


def summary(table, milestones: Sequence[int]):
    """Per key and unit group: how many snapshot pairs saw a change (tau < 1), before the first
    milestone and after the last one."""
    import polars as pl

    first = milestones[0] if milestones else None
    last = milestones[-1] if milestones else None
    changed = pl.col("tau") < 1
    aggs = [
        pl.len().alias("pairs"),
        changed.sum().alias("changed"),
        pl.col("tau").mean().alias("mean_tau"),
    ]
    if first is not None:
        aggs += [
            (changed & (pl.col("step") <= first)).sum().alias("changed_before_first_milestone"),
            (changed & (pl.col("step") > last)).sum().alias("changed_after_last_milestone"),
        ]
    return table.group_by("key", "group").agg(aggs).sort("key", "group")


def frequency_figure(curve, milestones: Sequence[int], path, title: str = "") -> None:
    """Mean tau against the step, one panel per key, with the lr schedule as a step line and
    dashed verticals at the milestone steps."""
    from symbnn.report.figures import plt, save_figure

    keys = list(dict.fromkeys(curve["key"].to_list()))
    fig, axes = plt.subplots(1, len(keys), figsize=(7.5 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        part = curve.filter(curve["key"] == key)
        ax.plot(part["step"], part["mean_tau"], color="tab:blue", lw=1.2, label="mean tau")
        ax.set_ylim(min(-0.05, float(part["mean_tau"].min()) - 0.05), 1.05)
        ax.set_xlabel("training step")
        ax.set_ylabel("Kendall's tau, consecutive permutations")
        ax.set_title(f'sorting key "{key}"')
        for i, m in enumerate(milestones):
            ax.axvline(m, color="grey", ls="--", lw=1, label="lr milestone" if i == 0 else None)
        twin = ax.twinx()
        twin.step(part["step"], part["lr"], where="pre", color="tab:red", alpha=0.6, lw=1)
        twin.set_ylabel("learning rate", color="tab:red")
        twin.set_ylim(0, float(part["lr"].max()) * 1.1)
        ax.legend(loc="lower left")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
