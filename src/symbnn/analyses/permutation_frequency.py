"""How often a network's hidden units change places during training (paper section 5.2, Figure 4).

A few networks are trained with an experiment's recipe (one `nn.Module` and `torch.optim.SGD`
per run, in the run's seed order, as `symbnn.train.loop` trains), on the experiment's device.
Every ``every`` steps the weights are snapshotted and, a chunk of snapshots at a time, put in
canonical form; for each hidden unit group the sorting permutation is read off (docs/maths.md,
section 2, keys "max" and "first") and the weights are let go. Kendall's tau between the unit
rankings of consecutive snapshots is 1 when no unit moved and drops with every pair of units
that swapped; the paper plots its mean over runs (and unit groups) against the step.

Memory does not grow with the number of snapshots times the model size: a run holds at most
`CHUNK_BYTES` (128 MiB) of snapshots at once, plus the canonical form's float64 working
copies of that chunk, and for every snapshot only its sorting permutations (2 bytes a unit
and key: 11 KB a ResNet-18 snapshot against its 45 MB of weights). A ResNet-18 (11M
parameters) is canonicalised three snapshots at a time, which peaks at about 1.2 GB above
the memory before training on the CPU, for 13 snapshots as for 37; an OptuNet's whole run is
one chunk.

A ResNet-18's unit groups (`symbnn.symmetry.unit_groups`) are, per stage ``layerN``, its
residual stream ``layerN`` (the channels of the stem or projection convolution, tied to every
block's second convolution by the residual sums) and the inner channels ``layerN.0`` and
``layerN.1`` of its two blocks: 12 groups of 64 to 512 units. `mean_tau` adds the mean over
each stage's groups beside the mean over all of them.

A permutation ``p`` from the canonical form says "sorted position i holds unit p[i]"; the
ranking it gives unit u is the inverse, ``rank[p[i]] = i``. Tau compares rankings of the same
units, so it is taken between the inverse permutations.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from symbnn.data.core import ImageData
from symbnn.settings import PermutationFrequency, Recipe
from symbnn.symmetry import Symmetry, canonicalize, unit_groups
from symbnn.train.batches import batch_bounds
from symbnn.train.evaluate import accuracy
from symbnn.train.loop import fit_module
from symbnn.train.seeding import build_seeded_model

KEYS = ("max", "first")
# the panels name each key as the authors' code does: its "max" sorts by the first incoming
# weight (symbnn's `first`)
KEY_TITLES = {
    "first": 'key "first": the first incoming weight (the authors\' "max")',
    "max": 'key "max": the largest incoming weight (symbnn\'s)',
}

# snapshots put in canonical form at once, in bytes of weights as trained (module docstring)
CHUNK_BYTES = 128 * 2**20

# entries of the sign matrices tau builds at once: 16 snapshot pairs of a 512-unit group
TAU_BLOCK = 2**22


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
    """(T - 1,) tau between the unit rankings of snapshots t and t + 1; ``perms`` is (T, width).
    Taken a block of snapshot pairs at a time: a wide group's (width, width) sign matrices
    for thousands of snapshots would not fit in memory."""
    r = ranks(perms)
    before, after = r[:-1], r[1:]
    rows = max(1, TAU_BLOCK // max(r.shape[-1], 1) ** 2)
    blocks = range(0, max(len(before), 1), rows)
    return torch.cat([kendall_tau(before[i : i + rows], after[i : i + rows]) for i in blocks])


def analysis_recipe(settings: PermutationFrequency, recipe: Recipe) -> Recipe:
    """The experiment's recipe with the analysis's epochs and milestones (the settings
    layer's rule, which the config check applies too)."""
    return settings.recipe_for(recipe)


def sorting_permutations(
    state: dict[str, torch.Tensor], sym: Symmetry, keys: Sequence[str] = KEYS
) -> dict[tuple[str, str], torch.Tensor]:
    """(key, unit group) -> (T, width) the canonical form's sorting permutation of each
    snapshot of a stacked state, for groups of at least two units."""
    state = {k: v.to(torch.float64) for k, v in state.items()}
    out = {}
    for key in keys:
        perms = canonicalize(state, sym, key=key, softmax_shift=False, on_dead="keep").perms
        for group in sym.groups:
            if group.width >= 2:
                out[(key, group.name)] = perms[group.name]
    return out


def permutation_dtype(sym: Symmetry) -> torch.dtype:
    """The smallest integer type holding every unit index of the model's groups."""
    return torch.int16 if max(g.width for g in sym.groups) <= 2**15 else torch.int32


def run_permutations(
    model_spec: dict[str, Any],
    recipe: Recipe,
    train: ImageData,
    seed: int,
    every: int,
    sym: Symmetry,
    device: torch.device | str = "cpu",
) -> tuple[dict[tuple[str, str], torch.Tensor], np.ndarray, np.ndarray, torch.nn.Module]:
    """Train one seed on `device`; return the sorting permutations of the snapshots at steps
    0, every, 2 every, ... and the last step ((key, group) -> (T, width) on the CPU), those
    steps, the lr in force at each, and the trained network. Snapshots are canonicalised on
    `device` as soon as `CHUNK_BYTES` of them are pending, and then dropped."""
    model = build_seeded_model(model_spec, seed).to(device)
    per_epoch = len(batch_bounds(len(train), recipe.batch_size))
    last = per_epoch * recipe.epochs
    snapshot_bytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    chunk = max(1, CHUNK_BYTES // snapshot_bytes)
    dtype = permutation_dtype(sym)
    pending: list[dict[str, torch.Tensor]] = []
    parts: list[dict[tuple[str, str], torch.Tensor]] = []
    steps: list[int] = []

    def canonicalize_pending() -> None:
        # stacked in float64 tensor by tensor, so that no float32 stack outlives the loop
        state = {
            name: torch.stack([s[name] for s in pending]).to(torch.float64) for name in pending[0]
        }
        pending.clear()
        perms = sorting_permutations(state, sym)
        parts.append({k: p.to("cpu", dtype) for k, p in perms.items()})

    def take(step: int, model: torch.nn.Module) -> None:
        if step % every == 0 or step == last:
            pending.append({k: v.detach().clone() for k, v in model.state_dict().items()})
            steps.append(step)
            if len(pending) == chunk:
                canonicalize_pending()

    take(0, model)
    fit_module(model, recipe, train, seed, device, on_step=take)
    if pending:
        canonicalize_pending()
    perms = {k: torch.cat([part[k] for part in parts]) for k in parts[0]}
    # step s >= 1 is taken in epoch (s - 1) // per_epoch; step 0 is before epoch 0
    lrs = [recipe.lr_at(max(step - 1, 0) // per_epoch) for step in steps]
    return perms, np.array(steps), np.array(lrs), model


def milestone_steps(recipe: Recipe, n_train: int) -> list[int]:
    """The training steps at which the recipe's learning-rate milestones take effect."""
    per_epoch = len(batch_bounds(n_train, recipe.batch_size))
    return [m * per_epoch for m in recipe.milestones]


def list_column(perms: torch.Tensor):
    """(T, width) as a polars list column, built from the array: a ResNet-18 run's
    permutations are millions of entries, gigabytes as Python lists."""
    import polars as pl

    column = pl.Series("perm", perms.numpy())
    return column.cast(pl.List(column.dtype.inner))


# seeds tried at most per run asked for, when runs do not converge
MAX_TRIES_PER_RUN = 4


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

    sym = unit_groups(model_spec)
    taus, perms = [], []
    kept = 0
    seeds = range(settings.first_seed, settings.first_seed + MAX_TRIES_PER_RUN * settings.runs)
    for seed in seeds:
        if kept == settings.runs:
            break
        run, steps, lrs, model = run_permutations(
            model_spec, recipe, train, seed, settings.every_k_steps, sym, device
        )
        if test is not None and accuracy(model, test, device) < min_accuracy:
            continue
        kept += 1
        for (key, group), p in run.items():
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
                        "perm": list_column(p),
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


def stage_of(group: str) -> str | None:
    """The ResNet stage ``layerN`` of a unit group (its residual stream ``layerN`` and its
    blocks' inner channels ``layerN.B``); None for the groups of other models."""
    match = re.fullmatch(r"(layer\d+)(\.\d+)?", group)
    return match.group(1) if match else None


def mean_tau(table):
    """Per (key, step): the mean tau over runs and unit groups (the curve of Figure 4), its
    minimum and the lr; for a ResNet also the mean over each stage's groups, in columns
    ``mean_tau_layer1`` ... (a wide table: one row per step whatever the model)."""
    import polars as pl

    curve = (
        table.group_by("key", "step")
        .agg(
            pl.col("tau").mean().alias("mean_tau"),
            pl.col("tau").min().alias("min_tau"),
            pl.col("lr").first(),
        )
        .sort("key", "step")
    )
    stage = {g: stage_of(g) for g in table["group"].unique().to_list()}
    staged = table.with_columns(
        pl.col("group").replace_strict(stage, return_dtype=pl.String).alias("stage")
    ).drop_nulls("stage")
    if staged.is_empty():
        return curve
    per_stage = (
        staged.group_by("key", "step", "stage")
        .agg(pl.col("tau").mean())
        .with_columns(pl.concat_str(pl.lit("mean_tau_"), "stage").alias("stage"))
        .pivot(on="stage", index=["key", "step"], values="tau")
    )
    columns = sorted(c for c in per_stage.columns if c.startswith("mean_tau_"))
    return curve.join(per_stage.select("key", "step", *columns), on=["key", "step"], how="left")


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
    dashed verticals at the milestone steps; a ResNet's per-stage means (`mean_tau`) as thin
    lines beside the mean over all its unit groups."""
    # local: keeps matplotlib, polars out of importing symbnn.analyses.permutation_frequency
    from symbnn.report.figures import plt, save_figure

    keys = list(dict.fromkeys(curve["key"].to_list()))
    stages = [c for c in curve.columns if c.startswith("mean_tau_")]
    colours = plt.get_cmap("viridis")([i / max(len(stages) - 1, 1) for i in range(len(stages))])
    fig, axes = plt.subplots(1, len(keys), figsize=(7.5 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        part = curve.filter(curve["key"] == key)
        label = "mean tau, all unit groups" if stages else "mean tau"
        ax.plot(part["step"], part["mean_tau"], color="tab:blue", lw=1.2, label=label, zorder=3)
        for column, colour in zip(stages, colours):
            stage = column.removeprefix("mean_tau_")
            ax.plot(part["step"], part[column], color=colour, lw=0.6, label=f"mean tau, {stage}")
        lowest = min(float(part[c].min()) for c in ["mean_tau", *stages])
        ax.set_ylim(min(-0.05, lowest - 0.05), 1.05)
        ax.set_xlabel("training step")
        ax.set_ylabel("Kendall's tau, consecutive permutations")
        ax.set_title(KEY_TITLES.get(key, f'sorting key "{key}"'))
        for i, m in enumerate(milestones):
            ax.axvline(m, color="grey", ls="--", lw=1, label="lr milestone" if i == 0 else None)
        twin = ax.twinx()
        twin.step(part["step"], part["lr"], where="pre", color="tab:red", alpha=0.6, lw=1)
        twin.set_ylabel("learning rate", color="tab:red")
        twin.set_ylim(0, float(part["lr"].max()) * 1.1)
        ax.legend(loc="lower left", fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path)
