"""SWAG and MC Dropout at the OptuNet mode of seed 0: `symbnn.methods.swag` / `.dropout`
against torch-uncertainty's `SWAG` and `mc_dropout` wrappers, driven by the same SGD steps on
the same batches; time to fit and to sample and predict, accuracy and NLL of the ensemble.
Each side runs once per thread count."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import torch
from peer_context import Context, ensemble_probs, ensemble_quality
from peer_measure import (
    Measured,
    Row,
    measure,
    missing,
    ours_row,
    own_threads,
    peer,
    peer_row,
    symbnn_threads,
    version,
)
from torch import nn
from torch.nn import functional as F

from symbnn.data.core import ImageData
from symbnn.methods.base import Mode
from symbnn.methods.dropout import McDropout
from symbnn.methods.swag import SwagGaussian
from symbnn.methods.swag import fit as symbnn_swag
from symbnn.models import build_model
from symbnn.train.loop import fit_module, seed_batches
from symbnn.train.seeding import build_seeded_model

TU_INSTALL = "pip install torch-uncertainty lightning"


def _timing(m: Measured, fit: float) -> str:
    return f"fit {fit:.1f} s + sample/predict {m.wall - fit:.2f} s"


def _tu_swag(ctx: Context, mode: Mode, settings) -> tuple[Any, float]:
    """torch-uncertainty's SWAG wrapper fed the same SGD run as symbnn's fit: the same ramp
    and constant learning rate, batches and collection steps (its update_wrapper is called
    at each of symbnn's collection steps, as one "cycle" each)."""
    from torch_uncertainty.methods import SWAG

    recipe = ctx.recipe
    model = build_model(ctx.optunet_spec)
    model.load_state_dict(mode.state)
    model.train()
    wrapper = SWAG(
        model,
        cycle_start=0,
        cycle_length=1,
        scale=settings.scale,
        max_num_models=settings.rank,
        num_estimators=ctx.ensemble,
    )
    steps_per_epoch = math.ceil(len(ctx.train) / recipe.batch_size)
    lrs, collect = symbnn_swag.schedule(settings, recipe, steps_per_epoch)
    optimizer = torch.optim.SGD(
        model.parameters(),
        lr=lrs[0],
        momentum=recipe.momentum,
        nesterov=recipe.nesterov,
        weight_decay=recipe.weight_decay,
    )
    epochs = symbnn_swag.fit_epochs(settings, recipe)
    order = symbnn_swag.data_order_seed(mode.seed, 0)
    start, cycles = time.perf_counter(), 0
    batches = seed_batches(ctx.train, recipe.batch_size, order, epochs, "cpu", recipe.augment)
    for step, (_, x, y) in enumerate(batches, start=1):
        for group in optimizer.param_groups:
            group["lr"] = lrs[step - 1]
        loss = F.cross_entropy(wrapper(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step in collect:
            cycles += 1
            wrapper.update_wrapper(cycles)
    return wrapper, time.perf_counter() - start


@torch.no_grad()
def _wrapper_probs(wrapper: nn.Module, data: ImageData, like: ImageData) -> torch.Tensor:
    """(K, N, C) probabilities of a torch-uncertainty ensemble wrapper (outputs (K N, C))."""
    wrapper.eval()
    logits = wrapper(like.normalize(data.images))
    return torch.softmax(logits.float(), -1).reshape(-1, len(data), logits.shape[-1])


def rows_swag(ctx: Context, threads: int) -> tuple[list[Row], tuple[torch.Tensor, torch.Tensor]]:
    """SWAG at the OptuNet mode of seed 0; the rows and symbnn's ensemble predictions (test,
    OOD) for the metrics job."""
    job = f"SWAG (fit + {ctx.ensemble} samples)"
    settings = ctx.experiment.methods.swag
    if ctx.sizes.swag_snapshots is not None:
        snapshots = ctx.sizes.swag_snapshots
        settings = dataclasses.replace(settings, snapshots=snapshots, rank=snapshots)
    mode = Mode(seed=0, state=ctx.pair("optunet")[0][0])
    problem = ctx.problem()
    epochs = symbnn_swag.fit_epochs(settings, ctx.recipe)
    case = f"OptuNet mode, {epochs} epochs, {settings.snapshots} snapshots, rank {settings.rank}"

    def ours():
        start = time.perf_counter()
        fitted = SwagGaussian().fit(problem, mode, settings, 0, ctx.ensemble)
        fit = time.perf_counter() - start
        samples = SwagGaussian().sample(problem, fitted, ctx.ensemble, settings, 0)
        return samples, ensemble_probs(ctx.optunet_spec, samples, ctx.test, ctx.test), fit

    seen: list[tuple[int, str]] = []
    with symbnn_threads(seen):
        mine = measure(ours)
    samples, probs, fit = mine.result
    quality = f"{ensemble_quality(probs, ctx.test.labels)}; {_timing(mine, fit)}"
    rows = [ours_row(job, case, threads, mine, quality, "symbnn" + own_threads(seen, threads))]
    probs_out = ensemble_probs(ctx.optunet_spec, samples, ctx.ood, ctx.test)
    tu, why = peer("torch_uncertainty", TU_INSTALL)
    if tu is None:
        return rows + [missing(job, case, "torch-uncertainty", threads, why)], (probs, probs_out)

    def theirs():
        wrapper, fit_seconds = _tu_swag(ctx, mode, settings)
        return _wrapper_probs(wrapper, ctx.test, ctx.test), fit_seconds

    peer_run = measure(theirs)
    probs_t, fit_t = peer_run.result
    timing = (
        f"fit {fit_t:.1f} s (draws its {ctx.ensemble} samples anew at each of the "
        f"{settings.snapshots} updates) + predict {peer_run.wall - fit_t:.2f} s"
    )
    quality = f"{ensemble_quality(probs_t, ctx.test.labels)}; {timing}"
    same = "yes: SWAG's moments over the same SGD steps; samples drawn at each update there"
    rows.append(
        peer_row(job, case, version("torch-uncertainty"), threads, peer_run, mine, quality, same)
    )
    return rows, (probs, probs_out)


class DropoutOptuNet(nn.Module):
    """The same OptuNet with an `nn.Dropout` module before its last layer, the form
    torch-uncertainty's `mc_dropout` wrapper needs (it switches such modules on at test time)."""

    def __init__(self, net: nn.Module, rate: float) -> None:
        super().__init__()
        self.net = net
        self.dropout = nn.Dropout(rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.net
        x = F.max_pool2d(F.relu(n.conv1(x)), n.pool_size, n.pool_size)
        x = F.relu(n.conv2(x)).mean(dim=(2, 3))
        return n.fc2(self.dropout(F.relu(n.fc1(x))))


def rows_dropout(ctx: Context, threads: int) -> list[Row]:
    """MC Dropout from the mode seed (dropout needs its own training): symbnn's fit (dropout
    hooks) and draw (masks folded into weights, K networks evaluated) vs torch-uncertainty's
    wrapper around the same network with an nn.Dropout module (K stochastic passes)."""
    job = f"MC Dropout (train + {ctx.ensemble} samples)"
    settings = ctx.experiment.methods.dropout
    recipe = ctx.recipe
    case = (
        f"OptuNet from seed 0, rate {settings.rate} before the last layer, {recipe.epochs} epochs"
    )
    seed = 0
    problem = ctx.problem()
    mode = Mode(seed=seed, state={})  # dropout trains the mode's seed anew

    def ours():
        start = time.perf_counter()
        fitted = McDropout().fit(problem, mode, settings, 0, ctx.ensemble)
        fit = time.perf_counter() - start
        samples = McDropout().sample(problem, fitted, ctx.ensemble, settings, 0)
        return ensemble_probs(ctx.optunet_spec, samples, ctx.test, ctx.test), fit

    seen: list[tuple[int, str]] = []
    with symbnn_threads(seen):
        mine = measure(ours)
    probs, fit = mine.result
    quality = f"{ensemble_quality(probs, ctx.test.labels)}; {_timing(mine, fit)}"
    rows = [ours_row(job, case, threads, mine, quality, "symbnn" + own_threads(seen, threads))]
    tu, why = peer("torch_uncertainty", TU_INSTALL)
    if tu is None:
        return rows + [missing(job, case, "torch-uncertainty", threads, why)]
    from torch_uncertainty.methods import mc_dropout

    def theirs():
        start = time.perf_counter()
        torch.manual_seed(0)  # nn.Dropout draws its masks from the global generator
        model = DropoutOptuNet(build_seeded_model(ctx.optunet_spec, seed), settings.rate)
        fit_module(model, recipe, ctx.train, seed, "cpu", lambda m, x, y: F.cross_entropy(m(x), y))
        fit_seconds = time.perf_counter() - start
        wrapper = mc_dropout(model, num_estimators=ctx.ensemble, last_layer=True, on_batch=True)
        return _wrapper_probs(wrapper, ctx.test, ctx.test), fit_seconds

    peer_run = measure(theirs)
    probs_t, fit_t = peer_run.result
    timing = f"fit {fit_t:.1f} s + predict {peer_run.wall - fit_t:.2f} s"
    quality = f"{ensemble_quality(probs_t, ctx.test.labels)}; {timing}"
    same = "yes: dropout before the last layer, the same recipe; its masks from another stream"
    rows.append(
        peer_row(job, case, version("torch-uncertainty"), threads, peer_run, mine, quality, same)
    )
    return rows
