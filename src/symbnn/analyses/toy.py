"""The toy posterior of the paper's Figure 1 (section 3.1, appendix A).

Two Gaussian classes in 2-D (identity covariance), thousands of 2-2-1 ReLU perceptrons trained
from seeds with SGD and binary cross-entropy, the few that did not train (high training loss)
dropped, and the output-layer weights (w_1, w_2) looked at in four forms:

* ``trained``: as trained;
* ``scaled``: each hidden neuron's incoming weights rescaled to L2 norm ``norm`` (the paper
  picks 3 "for visual purposes"; the output weights absorb the inverse scale);
* ``sorted_output``: then the two hidden neurons ordered by decreasing output weight, the
  order appendix A.2 uses for the figure (sorting from the last layer);
* ``canonical``: the canonical form of docs/maths.md, section 2 (sorted by the largest incoming
  weight, input side first), at the same norm.

Every form must compute the same function as the trained network: `function_gaps` measures
it per network on random inputs in float64.

The class means are not legible in our copy of the paper; they are a setting
(default (-2, -2) and (2, 2)). The paper "ensured that the samples were fully separable":
here a point drawn on the wrong side of the bisector of the two means is drawn again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symbnn.analyses.stacked_mlp import (
    State,
    dataset_loss,
    mlp_spec,
    stacked_forward,
    train_stacked,
)
from symbnn.settings import Toy
from symbnn.symmetry import apply_permutations, apply_scales, canonicalize, unit_groups

WIDTHS = (2, 2, 1)
STAGES = ("trained", "scaled", "sorted_output", "canonical")
HIDDEN = "layers.0"  # the hidden unit group (and scale group) of the 2-2-1 MLP
OUTPUT_WEIGHT = "layers.1.weight"


def toy_data(n_per_class: int, class_means, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs (2n, 2) float32, labels (2n,) in {0, 1}): class c drawn from N(mean_c, I),
    every point on its own side of the bisector of the means (linearly separable)."""
    mean0, mean1 = (torch.tensor(m, dtype=torch.float64) for m in class_means)
    normal = mean1 - mean0
    if float(normal.norm()) == 0:
        raise ValueError(f"class_means must differ, got {class_means!r}")
    centre = (mean0 + mean1) / 2
    g = torch.Generator().manual_seed(int(seed))
    classes = []
    for label, mean in ((0, mean0), (1, mean1)):
        points = torch.empty(0, 2, dtype=torch.float64)
        while len(points) < n_per_class:
            draw = mean + torch.randn(n_per_class, 2, generator=g, dtype=torch.float64)
            side = (draw - centre) @ normal
            points = torch.cat([points, draw[side > 0 if label else side < 0]])
        classes.append(points[:n_per_class])
    labels = torch.cat([torch.zeros(n_per_class), torch.ones(n_per_class)])
    return torch.cat(classes).float(), labels


def train_toy(
    settings: Toy, inputs: torch.Tensor, labels: torch.Tensor, dtype=torch.float32
) -> State:
    seeds = range(settings.first_seed, settings.first_seed + settings.n_networks)
    return train_stacked(
        WIDTHS,
        inputs,
        labels,
        seeds,
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        lr=settings.lr,
        loss="bce",
        dtype=dtype,
    )


def inliers(losses: torch.Tensor | np.ndarray, max_loss: float) -> np.ndarray:
    """Boolean mask of the networks kept: finite final training loss of at most ``max_loss``."""
    losses = np.asarray(losses, dtype=np.float64)
    return np.isfinite(losses) & (losses <= max_loss)


def select(state: State, mask: np.ndarray) -> State:
    index = torch.from_numpy(np.flatnonzero(mask))
    return {name: t[index] for name, t in state.items()}


def symmetry_forms(state: State, norm: float) -> dict[str, State]:
    """The four forms of STAGES (float64), each computing the trained networks' function."""
    if norm <= 0:
        raise ValueError(f"norm must be positive, got {norm}")
    sym = unit_groups(mlp_spec(WIDTHS))
    trained = {k: v.to(torch.float64) for k, v in state.items()}
    # the canonical form's scales are 1 / ||incoming row||; times `norm` gives rows of norm `norm`
    canonical = canonicalize(
        trained, sym, scale="unitnorm", key="max", softmax_shift=False, on_dead="keep"
    )
    to_norm = {HIDDEN: canonical.scales[HIDDEN] * norm}
    scaled = apply_scales(trained, sym, to_norm)
    by_output = scaled[OUTPUT_WEIGHT][:, 0, :].argsort(dim=1, descending=True, stable=True)
    sorted_output = apply_permutations(scaled, sym, {HIDDEN: by_output})
    canonical_normed = apply_scales(
        canonical.state, sym, {HIDDEN: torch.full_like(canonical.scales[HIDDEN], norm)}
    )
    return {
        "trained": trained,
        "scaled": scaled,
        "sorted_output": sorted_output,
        "canonical": canonical_normed,
    }


@torch.no_grad()
def function_gaps(reference: State, transformed: State, inputs: torch.Tensor) -> torch.Tensor:
    """(K,) per network: max |f(x) - f_T(x)| / max |f(x)| over ``inputs`` (float64, eval)."""
    x = inputs.to(torch.float64)
    a = stacked_forward({k: v.to(torch.float64) for k, v in reference.items()}, x)
    b = stacked_forward({k: v.to(torch.float64) for k, v in transformed.items()}, x)
    scale = a.abs().flatten(1).max(dim=1).values.clamp_min(torch.finfo(torch.float64).tiny)
    return (a - b).abs().flatten(1).max(dim=1).values / scale


def check_inputs(n: int, seed: int = Toy.default("data_seed"), spread: float = 4.0) -> torch.Tensor:
    """Random inputs around the data (both classes and the boundary between them)."""
    g = torch.Generator().manual_seed(int(seed))
    return spread * torch.randn(n, 2, generator=g, dtype=torch.float64)


@dataclass
class ToyPosterior:
    inputs: torch.Tensor
    labels: torch.Tensor
    seeds: np.ndarray
    losses: np.ndarray  # final training loss of every network (float64)
    kept: np.ndarray  # inlier mask
    forms: dict[str, State]  # STAGES -> stacked states of the kept networks
    gaps: dict[str, float]  # STAGES -> largest relative function gap over kept networks


def run_toy(settings: Toy) -> ToyPosterior:
    """Data, training, outlier removal, symmetry forms and the function check; raises if a
    form changes some network's function by more than ``settings.tolerance``."""
    inputs, labels = toy_data(settings.n_per_class, settings.class_means, settings.data_seed)
    state = train_toy(settings, inputs, labels)
    losses = dataset_loss(state, inputs, labels, "bce").numpy()
    kept = inliers(losses, settings.max_loss)
    if not kept.any():
        raise ValueError(
            f"analyses.toy.max_loss = {settings.max_loss}: every network is an outlier "
            f"(smallest training loss {np.nanmin(losses):.3g})"
        )
    forms = symmetry_forms(select(state, kept), settings.norm)
    x = check_inputs(settings.check_inputs, settings.data_seed)
    gaps = {
        stage: float(function_gaps(forms["trained"], form, x).max())
        for stage, form in forms.items()
    }
    broken = {stage: gap for stage, gap in gaps.items() if not gap <= settings.tolerance}
    if broken:
        raise AssertionError(
            f"symmetry forms change the network function beyond {settings.tolerance}: {broken}"
        )
    seeds = np.arange(settings.first_seed, settings.first_seed + settings.n_networks)
    return ToyPosterior(inputs, labels, seeds, losses, kept, forms, gaps)


def output_weights(result: ToyPosterior) -> dict[str, np.ndarray]:
    """STAGES -> (kept networks, 2) output-layer weights (the last bias left out, as in the paper)."""
    return {stage: form[OUTPUT_WEIGHT][:, 0, :].numpy() for stage, form in result.forms.items()}


def weights_table(result: ToyPosterior):
    """One row per kept network: seed, training loss and (w_1, w_2) in every form."""
    import polars as pl

    columns = {"seed": result.seeds[result.kept], "train_loss": result.losses[result.kept]}
    for stage, w in output_weights(result).items():
        columns[f"{stage}_w1"], columns[f"{stage}_w2"] = w[:, 0], w[:, 1]
    return pl.DataFrame(columns)


def summary_table(result: ToyPosterior, settings: Toy):
    """Two text columns (quantity, value): the counts, the losses and each form's largest
    relative function gap, printed so that gaps of 1e-15 stay visible."""
    import polars as pl

    n, outliers = len(result.losses), int((~result.kept).sum())
    kept_losses = result.losses[result.kept]
    rows = [
        ("networks trained", f"{n}"),
        (
            f"outliers removed (training loss > {settings.max_loss:g})",
            f"{outliers} ({100 * outliers / n:.2f}%)",
        ),
        ("median training loss (kept)", f"{np.median(kept_losses):.3g}"),
        ("largest training loss (kept)", f"{kept_losses.max():.3g}"),
    ]
    rows += [(f"function gap, {stage}", f"{result.gaps[stage]:.2e}") for stage in STAGES[1:]]
    rows.append(("function gap tolerance", f"{settings.tolerance:.0e}"))
    return pl.DataFrame({"quantity": [r[0] for r in rows], "value": [r[1] for r in rows]})


def toy_figure(result: ToyPosterior, path, bins: int = 120) -> None:
    """Paper Figures 5 and 1: the training data, then the density of the output weights in
    each form (log colour scale)."""
    from matplotlib.colors import LogNorm

    # local: keeps matplotlib, polars out of importing symbnn.analyses.toy
    from symbnn.report.figures import plt, save_figure

    weights = output_weights(result)
    titles = {
        "trained": "as trained",
        "scaled": "scale-normalised",
        "sorted_output": "+ sorted by output weight",
        "canonical": "canonical form (key max)",
    }
    fig, axes = plt.subplots(1, 5, figsize=(22, 4.3))
    x, y = result.inputs.numpy(), result.labels.numpy()
    for label, colour in ((0, "tab:blue"), (1, "tab:orange")):
        axes[0].scatter(*x[y == label].T, s=5, c=colour, label=f"class {label}")
    axes[0].set_title(f"training data ({len(x)} points)")
    axes[0].legend(loc="upper left")
    axes[0].set_aspect("equal")
    for ax, stage in zip(axes[1:], STAGES):
        w = weights[stage]
        low, high = np.quantile(w, 0.005), np.quantile(w, 0.995)
        pad = 0.05 * (high - low)
        edges = np.linspace(low - pad, high + pad, bins + 1)
        ax.hist2d(w[:, 0], w[:, 1], bins=[edges, edges], norm=LogNorm(), cmap="viridis")
        ax.set_title(titles[stage])
        ax.set_xlabel("output weight of hidden neuron 1")
        ax.set_aspect("equal")
    axes[1].set_ylabel("output weight of hidden neuron 2")
    fig.suptitle(
        f"Toy posterior: {int(result.kept.sum())} of {len(result.kept)} two-layer perceptrons "
        f"(outliers removed), output-layer weights"
    )
    save_figure(fig, path)
