"""Loss and accuracy along the linear path between two networks, or two mean-field Gaussian
posteriors, and the loss barrier.

Networks. theta(t) = (1 - t) theta_A + t theta_B for every float state entry (integer
buffers such as num_batches_tracked are A's). Interpolated BatchNorm running statistics do
not describe the interpolated network's activations (the variance collapses mid-path), so
with ``reset_bn`` each network on the path first re-estimates them: running statistics
reset, then train-mode forwards (no gradient, cumulative average) over ``bn_batches``
batches of the reset data, then evaluation in eval mode. The reset changes the endpoints
too, so a curve is computed with the same choice at every t.

Mean-field Gaussians. mean(t) and std(t) are interpolated linearly; the loss at t is the
expected loss E_{w ~ q_t}[L(w)], estimated with S draws w_s = mean(t) + std(t) eps_s that
reuse the same eps_s at every t (common random numbers: the curve is smooth in t and its
barrier not inflated by independent noise at each t); accuracy and the predictive NLL are
those of the S-draw predictive mean.

Loss barrier (see `loss_barrier`): the largest rise of the path's loss over the mean of the
endpoints' losses, max_t L(t) - ((1 - t) L(0) + t L(1)).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np
import polars as pl
import torch
from torch import nn
from torch.nn import functional as F

from symbnn.data.core import ImageData
from symbnn.memory import require_memory
from symbnn.models import build_model
from symbnn.settings import Alignment, Methods, SymmetrizedVi
from symbnn.train.batchnorm import batchnorm_layers, refresh_batchnorm

Data = ImageData | tuple[torch.Tensor, torch.Tensor]

BN_BATCH_SIZE = 128  # batch size of the BatchNorm re-estimation
CURVE_ROW_BYTES = 400  # one row of a curve table as a Python dict (t, split, loss, accuracy)


def batches(
    data: Data, batch_size: int = Methods.default("predict_batch")
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Normalised (x, y) batches of an ImageData, or of in-memory (x, y) tensors."""
    image_data = isinstance(data, ImageData)
    x, y = (data.images, data.labels) if image_data else data
    if len(x) != len(y):
        raise ValueError(f"inputs and labels differ in length: {len(x)} vs {len(y)}")
    for start in range(0, len(x), batch_size):
        inputs = x[start : start + batch_size]
        yield (data.normalize(inputs) if image_data else inputs), y[start : start + batch_size]


def lerp_state(
    a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], t: float
) -> dict[str, torch.Tensor]:
    if set(a) != set(b):
        raise ValueError(f"states differ in entries: {sorted(set(a) ^ set(b))}")
    return {
        k: ((1 - t) * a[k] + t * b[k].to(a[k].dtype)) if a[k].is_floating_point() else a[k].clone()
        for k in a
    }


@torch.no_grad()
def evaluate_logits(
    model: nn.Module,
    data: Data,
    batch_size: int = Methods.default("predict_batch"),
    device: torch.device | str = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels) of the whole set, eval mode, on the CPU; ``model`` is on ``device``."""
    model.eval()
    dtype = next(model.parameters()).dtype
    outs, labels = [], []
    for x, y in batches(data, batch_size):
        outs.append(model(x.to(device, dtype)).cpu())
        labels.append(y)
    return torch.cat(outs), torch.cat(labels)


def loss_and_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    return float(F.cross_entropy(logits.double(), labels)), float(
        (logits.argmax(1) == labels).double().mean()
    )


def predictive_accuracy_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """(accuracy, NLL) of the predictive mean (1/S) sum_s softmax(logits[s]) of S draws'
    logits (S, N, C), computed as a log-mean-exp of the log-softmaxes."""
    log_pred = torch.logsumexp(logits.log_softmax(-1), 0) - math.log(len(logits))
    return float((log_pred.argmax(1) == labels).double().mean()), float(
        F.nll_loss(log_pred, labels)
    )


def network_curve(
    spec: dict[str, Any],
    a: Mapping[str, torch.Tensor],
    b: Mapping[str, torch.Tensor],
    ts: Sequence[float],
    sets: Mapping[str, Data],
    reset_bn: bool | None = None,
    reset_data: Data | None = None,
    bn_batches: int = Alignment().bn_batches,
    device: torch.device | str = "cpu",
) -> pl.DataFrame:
    """One row per (t, split): loss (mean cross-entropy) and accuracy of theta(t), evaluated
    on ``device``. ``reset_bn`` None: reset when the model has BatchNorm and ``reset_data`` is
    given."""
    model = build_model(spec).to(device)
    bn = bool(batchnorm_layers(model))
    if reset_bn is None:
        reset_bn = bn and reset_data is not None
    if reset_bn and reset_data is None:
        raise ValueError(
            "reset_bn needs reset_data (training batches to re-estimate BatchNorm statistics)"
        )
    rows = []
    for t in ts:
        model.load_state_dict(lerp_state(a, b, float(t)))
        if reset_bn and bn:  # cumulative average over the batches (momentum None)
            dtype = next(model.parameters()).dtype
            refresh_batchnorm(
                model,
                (
                    x.to(device, dtype)
                    for x, _ in islice(batches(reset_data, BN_BATCH_SIZE), bn_batches)
                ),
                size_weighted=False,
            )
        for split, data in sets.items():
            loss, acc = loss_and_accuracy(*evaluate_logits(model, data, device=device))
            rows.append({"t": float(t), "split": split, "loss": loss, "accuracy": acc})
    return pl.DataFrame(rows)


@torch.no_grad()
def gaussian_curve(
    spec: dict[str, Any],
    mean_a: Mapping[str, torch.Tensor],
    std_a: Mapping[str, torch.Tensor],
    mean_b: Mapping[str, torch.Tensor],
    std_b: Mapping[str, torch.Tensor],
    ts: Sequence[float],
    sets: Mapping[str, Data],
    samples: int = SymmetrizedVi().alignment_samples,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> pl.DataFrame:
    """One row per (t, split) along the path between two mean-field Gaussians: expected loss
    (loss), predictive accuracy and predictive NLL, from ``samples`` common-noise draws,
    evaluated on ``device``."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    model = build_model(spec).to(device)
    gen = torch.Generator().manual_seed(seed)
    noise = [
        {
            k: torch.randn(v.shape, generator=gen, dtype=torch.float64)
            for k, v in mean_a.items()
            if v.is_floating_point()
        }
        for _ in range(samples)
    ]
    rows = []
    for t in ts:
        mean, std = lerp_state(mean_a, mean_b, float(t)), lerp_state(std_a, std_b, float(t))
        logits_by_split: dict[str, list[torch.Tensor]] = {s: [] for s in sets}
        labels: dict[str, torch.Tensor] = {}
        for eps in noise:
            model.load_state_dict(
                {
                    k: (mean[k] + std[k] * eps[k].to(mean[k].dtype)) if k in eps else mean[k]
                    for k in mean
                }
            )
            for split, data in sets.items():
                logits, labels[split] = evaluate_logits(model, data, device=device)
                logits_by_split[split].append(logits.double())
        for split in sets:
            stack = torch.stack(logits_by_split[split])  # (S, N, C)
            y = labels[split]
            expected_loss = float(torch.stack([F.cross_entropy(l, y) for l in stack]).mean())
            accuracy, nll = predictive_accuracy_nll(stack, y)
            rows.append(
                {
                    "t": float(t),
                    "split": split,
                    "loss": expected_loss,
                    "accuracy": accuracy,
                    "nll": nll,
                }
            )
    return pl.DataFrame(rows)


def loss_barrier(ts: Sequence[float], losses: Sequence[float]) -> dict[str, float]:
    """Barrier of a loss curve sampled at ``ts`` (which must include 0 and 1).

    ``barrier``: max_t L(t) - ((1 - t) L(0) + t L(1)), the largest rise over the endpoints'
    (t-weighted) mean (Frankle et al. 2020; Entezari et al. 2022; Git Re-Basin). It is >= 0
    since t = 0 gives 0. ``barrier_midpoint``: max_t L(t) - (L(0) + L(1)) / 2, the rise over
    the plain mean of the endpoints (the two agree when L(0) = L(1)).
    """
    t = np.asarray(ts, dtype=float)
    loss = np.asarray(losses, dtype=float)
    if t.shape != loss.shape or t.ndim != 1:
        raise ValueError(f"ts and losses must be 1-D of one length, got {t.shape} and {loss.shape}")
    if not (np.isclose(t, 0).any() and np.isclose(t, 1).any()):
        raise ValueError("the interpolation grid must include both endpoints t = 0 and t = 1")
    l0, l1 = loss[np.isclose(t, 0)][0], loss[np.isclose(t, 1)][0]
    rise = loss - ((1 - t) * l0 + t * l1)
    k = int(np.argmax(rise))
    return {
        "barrier": float(rise[k]),
        "t_max": float(t[k]),
        "barrier_midpoint": float(loss.max() - (l0 + l1) / 2),
        "loss_0": float(l0),
        "loss_1": float(l1),
    }


def barrier_table(curves: pl.DataFrame, by: Sequence[str] = ("alignment", "split")) -> pl.DataFrame:
    """One row per group of a curve table (columns t, loss and the ``by`` columns)."""
    rows = []
    for key, part in curves.sort("t").group_by(list(by), maintain_order=True):
        row = dict(zip(by, key))
        row.update(loss_barrier(part["t"].to_list(), part["loss"].to_list()))
        row["accuracy_min"] = float(part["accuracy"].min())
        rows.append(row)
    return pl.DataFrame(rows)


def grid(points: int) -> list[float]:
    if points < 2:
        raise ValueError(f"an interpolation grid needs at least 2 points, got {points}")
    # the grid as an array and a list, then a curve row per point, split and alignment
    require_memory("points", points * (8 + 32 + 4 * CURVE_ROW_BYTES), "the interpolation path")
    return [float(x) for x in np.linspace(0.0, 1.0, points)]
