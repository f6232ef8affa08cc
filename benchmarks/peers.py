"""symbnn side by side with the libraries a researcher would otherwise install (issue 21).

One run, the same inputs on both sides of every row, one markdown table: wall time, peak
memory and the quality figure of the job.

- alignment of two networks (weight matching): symbnn (`symbnn.api.align`, structure derived
  by `symbnn.api.symmetry_of`) vs `rebasin` (`PermutationCoordinateDescent`), on an MLP and an
  OptuNet trained on the packaged digits (the default experiment's data and recipe) and on an
  untrained ResNet-18 with random BatchNorm statistics. Time: tracing the graph and matching.
  Quality: the test loss barrier after alignment (`symbnn.alignment.interpolation`), whether
  the permuted network still computes the same function, and the weight distance ||A - P B||;
- uncertainty metrics (accuracy, ECE, Brier, AUPR, FPR95, NLL) of the same predictions:
  `symbnn.metrics.uncertainty_metrics` (validation of every probability and label included)
  vs torch-uncertainty's metric classes (torchmetrics Accuracy and BinaryAveragePrecision, as
  its ClassificationRoutine uses them): values and time, at the default experiment's size
  (16 members x 1,000 images), on the SWAG row's predictions and at the paper's (100 x
  10,000); symbnn's time with the mutual information (idmi, oodmi) as an extra row;
- SWAG and MC Dropout at the same OptuNet mode: `symbnn.methods.swag` / `.dropout` vs
  torch-uncertainty's `SWAG` and `mc_dropout` wrappers, driven by the same SGD steps on the same
  batches; time to fit and to sample and predict, accuracy and NLL of the 16-member ensemble;
- variational BNN with the paper's priors (BLiTZ's: pi = 1, sigma1 = 0.1, rho0 = -7):
  `symbnn.methods.bnn.train_bnn` vs `blitz-bayesian-pytorch`'s layers, the same epochs, batches,
  learning rates and 3 ELBO samples per step: seconds per epoch, accuracy of 16 draws;
- laplace-torch: a note row (symbnn's Laplace is built on it).

A peer that cannot be imported is a row saying so, with the reason. The peers are the
optional extra `peers` (pyproject.toml); torch-uncertainty and lightning come with the test
extra too, and the others install beside the pinned torch without touching it:

    .venv/bin/pip install --no-deps rebasin==0.0.47 torchview graphviz blitz-bayesian-pytorch==0.2.8
    .venv/bin/python benchmarks/peers.py            # all jobs, written to docs/benchmarks.md
    .venv/bin/python benchmarks/peers.py --jobs alignment metrics --repeats 7 --json peers.json
    .venv/bin/python benchmarks/peers.py --jobs bnn --blitz-own-init   # BLiTZ's own mean init

The table goes into docs/benchmarks.md as the generated block "peers" when every job ran
(--write: also for a subset; --no-write: print only). Alignment and metrics run --repeats
times as alternating pairs (symbnn, then the peer, then the peer, then symbnn, ...) after
one untimed run each: times are medians and the ratio is the median of the pairs' ratios,
which moves far less with the load of a shared machine than either time. Training jobs run
once (the BNN after an untimed warm-up on 64 images on both sides). The footer gives the
CPU, torch's and numba's threads (--threads sets torch's), the load average and a
calibration figure (`benchmarks/machine.py`). Peak memory is the rise of this process's resident
memory over its level when the job starts, in its last run (the kernel's high-water mark,
reset per job through /proc/self/clear_refs; "-" where that is not available). Memory that an
earlier job freed and the allocator kept is not counted again, so a job may show less than it
would in a process of its own; glibc's allocator is left as it is, since making it hand big
blocks back to the system (M_MMAP_THRESHOLD) made symbnn's metrics job 2-3 times slower.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from machine import Conditions, LoadGate, add_gate_arguments, publish, written
from torch import nn
from torch.nn import functional as F

from symbnn import api
from symbnn.alignment.interpolation import grid, loss_barrier, network_curve
from symbnn.data import load_dataset
from symbnn.data.core import ImageData
from symbnn.methods import bnn as symbnn_bnn
from symbnn.methods import dropout as symbnn_dropout
from symbnn.methods import swag as symbnn_swag
from symbnn.methods.base import Mode, Problem, generator
from symbnn.metrics import accuracy as ensemble_accuracy
from symbnn.metrics import uncertainty_metrics
from symbnn.models import build_model
from symbnn.predictions import predict_probabilities
from symbnn.settings import Bnn, Recipe
from symbnn.settings.load import load_config
from symbnn.train.engine import train_seeds
from symbnn.train.evaluate import unstack
from symbnn.train.loop import fit_module, seed_batches
from symbnn.train.seeding import build_seeded_model

ROOT = Path(__file__).resolve().parents[1]
ENSEMBLE = 16  # members of every sampled ensemble (the default experiment's n_samples)
MLP_WIDTHS = [784, 128, 128, 10]
MLP_EPOCHS = 4  # the MLP learns the digits in a few epochs
SWAG_PREDICTIONS = "the SWAG row's 16 members: (16, 1000, 10), OOD (16, 1000, 10)"
PAPER_SIZE = "the paper's MNIST size: (100, 10000, 10), OOD (100, 10000, 10), synthetic"
DEFAULT_SIZE = "the default experiment's size: (16, 1000, 10), OOD (16, 1000, 10), synthetic"
METRIC_NAMES = ("accuracy", "ece", "brier", "aupr", "fpr95", "nll")


# ---------------------------------------------------------------- measuring


@dataclass
class Row:
    job: str
    case: str
    library: str
    seconds: float | None
    peak_mib: float | None
    quality: str
    ratio: float | None = None  # this row's time / symbnn's on the same job
    verdict: str = "-"


def yes_no(condition: bool) -> str:
    return "yes" if condition else "no"


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
        return True
    except OSError:
        return False


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float | None]:
    """(fn's result, wall seconds, peak memory rise in MiB) of one run."""
    gc.collect()
    base = _status_kib("VmRSS") if _reset_peak() else None
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    high = _status_kib("VmHWM")
    return result, seconds, None if base is None or high is None else (high - base) / 1024


def measure(
    fn: Callable[[], Any], repeats: int = 1, warmup: Callable[[], Any] | None = None
) -> tuple[Any, float, float | None]:
    """(fn's last result, median wall seconds, peak memory rise in MiB of the last run) over
    ``repeats`` runs, after ``warmup`` (untimed: one-off costs such as lazy imports)."""
    if warmup is not None:
        warmup()
    runs = [_timed(fn) for _ in range(max(1, repeats))]
    return runs[-1][0], statistics.median(r[1] for r in runs), runs[-1][2]


@dataclass
class Paired:
    """symbnn's and a peer's runs on one job, alternating: medians and the median ratio."""

    ours: Any
    seconds: float
    peak: float | None
    theirs: Any
    seconds_peer: float
    peak_peer: float | None
    ratio: float  # median over the pairs of (peer's seconds / symbnn's seconds)


def paired(ours: Callable[[], Any], theirs: Callable[[], Any], repeats: int) -> Paired:
    """Both sides ``repeats`` times, each pair back to back (who goes first alternates), after
    one untimed run of each: a ratio of two runs seconds apart moves far less with the
    machine's load than either time."""
    ours(), theirs()
    mine, peer_runs = [], []
    for i in range(max(1, repeats)):
        if i % 2 == 0:
            mine.append(_timed(ours))
            peer_runs.append(_timed(theirs))
        else:
            peer_runs.append(_timed(theirs))
            mine.append(_timed(ours))
    return Paired(
        mine[-1][0],
        statistics.median(r[1] for r in mine),
        mine[-1][2],
        peer_runs[-1][0],
        statistics.median(r[1] for r in peer_runs),
        peer_runs[-1][2],
        statistics.median(p[1] / m[1] for m, p in zip(mine, peer_runs, strict=True)),
    )


def peer(module: str, install: str) -> tuple[Any, str | None]:
    """(the imported module, None) or (None, why it cannot be used here)."""
    try:
        return importlib.import_module(module), None
    except Exception as exc:  # ImportError, or a peer that breaks on this torch at import
        return None, f"not usable here: {type(exc).__name__}: {exc} ({install})"


def missing(job: str, case: str, library: str, reason: str) -> Row:
    return Row(job, case, library, None, None, reason)


# ---------------------------------------------------------------- shared inputs


class Context:
    """What every row shares: the default experiment's data and recipe; the trained pairs
    (seeds 0 and 1) of the MLP and the OptuNet, trained when first asked for."""

    def __init__(self, args) -> None:
        self.experiment = load_config(ROOT / "config.yaml").experiments["default"]
        self.train = load_dataset("digits", "train")
        self.test = load_dataset("digits", "test")
        self.ood = load_dataset(
            "natural_patches", "test", **self.experiment.data.ood_options.to_dict()
        )
        self.optunet_spec = self.experiment.model.to_dict()
        self.mlp_spec = {"name": "mlp", "widths": MLP_WIDTHS}
        self.repeats = args.repeats
        self.bnn_epochs = args.bnn_epochs or self.experiment.recipe.epochs
        self.blitz_own_init = args.blitz_own_init
        self._pairs: dict[str, tuple[tuple[dict, dict], tuple[float, float]]] = {}

    def problem(self, **recipe_changes) -> Problem:
        recipe = dataclasses.replace(self.experiment.recipe, **recipe_changes)
        return Problem(self.optunet_spec, recipe, self.train, "cpu", test=self.test)

    def pair(self, name: str) -> tuple[tuple[dict, dict], tuple[float, float]]:
        """((state of seed 0, state of seed 1), their test accuracies) of "optunet" (the
        default experiment's model and recipe) or "mlp" (the MLP learns the digits in
        MLP_EPOCHS epochs of the same recipe)."""
        if name not in self._pairs:
            recipe = self.experiment.recipe
            if name == "mlp":
                recipe = shortened(recipe, MLP_EPOCHS)
            spec = self.mlp_spec if name == "mlp" else self.optunet_spec
            start = time.perf_counter()
            trained = train_seeds(spec, recipe, self.train, self.test, [0, 1])
            states = (unstack(trained.state, 0), unstack(trained.state, 1))
            accs = tuple(float(a) for a in trained.test_accuracy)
            self._pairs[name] = (states, accs)
            print(
                f"trained the {name} pair in {time.perf_counter() - start:.1f} s "
                f"(test accuracy {accs[0]:.3f}, {accs[1]:.3f})",
                file=sys.stderr,
                flush=True,
            )
        return self._pairs[name]


def shortened(recipe: Recipe, epochs: int) -> Recipe:
    """``recipe`` over ``epochs`` epochs, its milestones (multistep only) scaled with it:
    a cosine schedule scales by itself and takes none."""
    milestones = sorted({max(1, m * epochs // recipe.epochs) for m in recipe.milestones})
    return dataclasses.replace(recipe, epochs=epochs, milestones=tuple(milestones))


def model_with(spec: dict, state: dict) -> nn.Module:
    model = build_model(spec)
    model.load_state_dict(state)
    return model.eval()


@torch.no_grad()
def ensemble_probs(spec: dict, stacked: dict, data: ImageData, like: ImageData) -> torch.Tensor:
    """(K, N, C) softmax probabilities of every network of a stacked state dict."""
    model = build_model(spec)
    k = next(iter(stacked.values())).shape[0]
    out = []
    for i in range(k):
        model.load_state_dict(unstack(stacked, i))
        out.append(predict_probabilities(model, data, "cpu", normalized_like=like))
    return torch.stack(out)


def ensemble_quality(probs: torch.Tensor, labels: torch.Tensor) -> str:
    """Accuracy and NLL of the predictive mean (the same code for both libraries' ensembles;
    NLL floored at 2^-24 as symbnn.metrics does)."""
    log_pred = probs.double().mean(0).clamp_min(2.0**-24).log()
    return (
        f"acc {ensemble_accuracy(probs, labels):.4f}, NLL {float(F.nll_loss(log_pred, labels)):.4f}"
    )


# ---------------------------------------------------------------- alignment (rebasin)


def _weight_distance(a: dict, b: dict, model: nn.Module) -> float:
    names = [n for n, _ in model.named_parameters()]
    return math.sqrt(sum(float((a[n].double() - b[n].double()).square().sum()) for n in names))


@torch.no_grad()
def _function_change(spec: dict, before: dict, after: dict, x: torch.Tensor) -> float:
    """Largest |logit change| of network B permuted (eval mode), relative to its logit scale."""
    y0, y1 = model_with(spec, before)(x), model_with(spec, after)(x)
    return float((y1 - y0).abs().max() / y0.abs().max())


def _symbnn_align(spec: dict, a: dict, b: dict, x: torch.Tensor, sweeps: int | None) -> dict:
    model_a, model_b = model_with(spec, a), model_with(spec, b)
    sym = api.symmetry_of(model_a, x[:2])  # traced, as rebasin traces
    limit = {} if sweeps is None else {"max_sweeps": sweeps}
    aligned, _ = api.align(model_a, model_b, sym, **limit)
    return {k: v.detach().clone() for k, v in aligned.items()}


def _rebasin_align(rebasin, spec: dict, a: dict, b: dict, x: torch.Tensor) -> dict:
    model_a, model_b = model_with(spec, a), model_with(spec, b)  # eval: tracing runs a forward
    pcd = rebasin.PermutationCoordinateDescent(model_a, model_b, x[:2])
    pcd.rebasin()
    return {k: v.detach().clone() for k, v in model_b.state_dict().items()}


def row_alignment(ctx: Context, case: str) -> list[Row]:
    """Weight matching of B onto A, symbnn vs rebasin, on one case."""
    job = "alignment (weight matching)"
    if case == "resnet18":
        spec = {"name": "resnet18", "num_classes": 10}
        gen = torch.Generator().manual_seed(0)
        a, b = (_random_resnet(spec, seed) for seed in (0, 1))
        x = torch.randn(8, 3, 32, 32, generator=gen)
        label, data, accs = "ResNet-18, random weights and BatchNorm statistics (11.2M)", None, None
    else:
        spec = ctx.mlp_spec if case == "mlp" else ctx.optunet_spec
        (a, b), accs = ctx.pair(case)
        x = ctx.test.normalize(ctx.test.images[:256])
        n = sum(p.numel() for p in build_model(spec).parameters())
        what = "MLP " + "-".join(map(str, MLP_WIDTHS)) if case == "mlp" else "OptuNet 4-12-10"
        label = f"{what} ({n:,} params), trained (test acc {accs[0]:.2f}, {accs[1]:.2f})"
        data = {"test": ctx.test}
    model = build_model(spec)
    before = _weight_distance(a, b, model)
    unaligned = _barrier(spec, a, b, data)[0] if data else None

    def quality(aligned: dict) -> tuple[str, float, bool]:
        """(the row's quality text, ||A - PB|| / ||A - B||, whether B's function is kept)."""
        change = _function_change(spec, b, aligned, x)
        kept = "function kept" if change < 1e-5 else f"function CHANGED (max |dlogit| {change:.2g})"
        dist = _weight_distance(a, aligned, model) / before
        text = f"||A-PB||/||A-B|| {dist:.4f}; {kept}"
        if data:
            barrier, acc_b = _barrier(spec, a, aligned, data)
            text = f"barrier {barrier:.3f} (unaligned {unaligned:.3f}); " + text
            if change >= 1e-5:  # the barrier is then to another network
                text += f", permuted B's test acc {acc_b:.2f} (B's {accs[1]:.2f})"
        return text, dist, change < 1e-5

    def ours():
        return _symbnn_align(spec, a, b, x, None)

    rebasin, why = peer("rebasin", "pip install --no-deps rebasin torchview graphviz")
    if rebasin is None:
        aligned, seconds, peak = measure(ours, ctx.repeats)
        return [
            Row(job, label, "symbnn", seconds, peak, quality(aligned)[0]),
            missing(job, label, "rebasin", why),
        ]
    run = paired(ours, lambda: _rebasin_align(rebasin, spec, a, b, x), ctx.repeats)
    text, dist, _ = quality(run.ours)
    rows = [Row(job, label, "symbnn", run.seconds, run.peak, text)]
    # its sweeps after the first gain little: the first alone, as an extra row
    aligned, one, peak = measure(lambda: _symbnn_align(spec, a, b, x, 1), ctx.repeats)
    rows.append(
        Row(job, label, "symbnn, one sweep", one, peak, quality(aligned)[0], one / run.seconds)
    )
    text_r, dist_r, kept_r = quality(run.theirs)
    verdict = (
        f"symbnn at least as fast: {yes_no(run.ratio >= 1)}; "
        f"symbnn's distance at most rebasin's: {yes_no(dist <= dist_r)}"
    )
    if not kept_r:  # a distance reached by permutations that are not symmetries of B
        verdict += " (rebasin's permutation changes B's function)"
    rows.append(
        Row(
            job,
            label,
            _version("rebasin"),
            run.seconds_peer,
            run.peak_peer,
            text_r,
            run.ratio,
            verdict,
        )
    )
    return rows


def _random_resnet(spec: dict, seed: int) -> dict:
    torch.manual_seed(seed)
    model = build_model(spec)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.normal_(0.0, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _barrier(spec: dict, a: dict, b: dict, data: dict) -> tuple[float, float]:
    """(test loss barrier on the 11-point path A -> B, B's test accuracy)."""
    curve = network_curve(spec, a, b, grid(11), data)
    barrier = loss_barrier(curve["t"].to_list(), curve["loss"].to_list())["barrier"]
    return barrier, float(curve["accuracy"][-1])


# ---------------------------------------------------------------- uncertainty metrics


def _tu_metrics(probs_in: torch.Tensor, labels, probs_out: torch.Tensor) -> dict:
    """The six metrics with torch-uncertainty's classes (and torchmetrics' accuracy and
    average precision, which its ClassificationRoutine uses), on the predictive means, in
    float32: what the routine feeds them."""
    import torchmetrics
    from torch_uncertainty.metrics.classification import (
        FPR95,
        BrierScore,
        CalibrationError,
        CategoricalNLL,
    )
    from torch_uncertainty.ood_criteria import get_ood_criterion

    num_classes = probs_in.shape[-1]
    p_in, p_out = probs_in.float().mean(0), probs_out.float().mean(0)
    out = {}
    metric = torchmetrics.classification.MulticlassAccuracy(num_classes, average="micro")
    metric.update(p_in, labels)
    out["accuracy"] = float(metric.compute())
    metric = CalibrationError(task="multiclass", num_classes=num_classes, num_bins=15)
    metric.update(p_in, labels)
    out["ece"] = float(metric.compute())
    metric = BrierScore(num_classes=num_classes)
    metric.update(p_in, labels)
    out["brier"] = float(metric.compute())
    msp = get_ood_criterion("msp")
    scores = torch.cat([msp(p_in), msp(p_out)])
    is_ood = torch.cat([torch.zeros(len(p_in)), torch.ones(len(p_out))]).long()
    metric = torchmetrics.classification.BinaryAveragePrecision()
    metric.update(scores, is_ood)
    out["aupr"] = float(metric.compute())
    with warnings.catch_warnings():  # that it keeps every score: so does symbnn's
        warnings.simplefilter("ignore", UserWarning)
        metric = FPR95(pos_label=1)
    metric.update(scores, is_ood)
    out["fpr95"] = float(metric.compute())
    metric = CategoricalNLL()
    metric.update(p_in, labels)
    out["nll"] = float(metric.compute())
    return out


def _fmt_metrics(values: dict) -> str:
    return ", ".join(f"{k} {values[k]:.4f}" for k in METRIC_NAMES)


def row_metrics(
    ctx: Context, probs_in: torch.Tensor, labels: torch.Tensor, probs_out: torch.Tensor, case: str
) -> list[Row]:
    """The same (K, N, C) predictions through symbnn's metrics and torch-uncertainty's: the
    six metrics both compute (symbnn's validation of every probability and label included),
    then symbnn's with the mutual information (idmi, oodmi) as an extra row."""
    job = "uncertainty metrics"

    def ours():
        return uncertainty_metrics(probs_in, labels, probs_out, mutual_information=False)

    tu, why = peer("torch_uncertainty", "pip install torch-uncertainty lightning")
    if tu is None:
        values, seconds, peak = measure(ours, ctx.repeats)
        return [
            Row(job, case, "symbnn", seconds, peak, _fmt_metrics(values)),
            missing(job, case, "torch-uncertainty", why),
        ]
    run = paired(ours, lambda: _tu_metrics(probs_in, labels, probs_out), ctx.repeats)
    rows = [Row(job, case, "symbnn", run.seconds, run.peak, _fmt_metrics(run.ours))]
    full, seconds_mi, peak = measure(
        lambda: uncertainty_metrics(probs_in, labels, probs_out), ctx.repeats
    )
    mi = f"idmi {full['idmi']:.4f}, oodmi {full['oodmi']:.4f} (nats)"
    rows.append(
        Row(
            job,
            case,
            "symbnn, with mutual information",
            seconds_mi,
            peak,
            mi,
            seconds_mi / run.seconds,
            f"torch-uncertainty's time / this one: {run.seconds_peer / seconds_mi:.2f}",
        )
    )
    diff = max(abs(run.theirs[k] - run.ours[k]) for k in METRIC_NAMES)
    worst = max(METRIC_NAMES, key=lambda k: abs(run.theirs[k] - run.ours[k]))
    quality = f"{_fmt_metrics(run.theirs)}; largest |difference| {diff:.1e} ({worst})"
    verdict = f"symbnn at least 2x as fast: {yes_no(run.ratio >= 2)}"
    rows.append(
        Row(
            job,
            case,
            _version("torch-uncertainty"),
            run.seconds_peer,
            run.peak_peer,
            quality,
            run.ratio,
            verdict,
        )
    )
    return rows


def synthetic_predictions(
    k: int, n: int, seed: int = 0, classes: int = 10
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(K, N, C) in- and out-of-distribution float32 probabilities and (N,) labels:
    softmaxes of random logits, sharper in distribution."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=gen)
    centre = F.one_hot(labels, classes).float() * 4.0 + torch.randn(n, classes, generator=gen)
    logits_in = centre + torch.randn(k, n, classes, generator=gen)
    logits_out = torch.randn(k, n, classes, generator=gen) * 1.5
    return torch.softmax(logits_in, -1), labels, torch.softmax(logits_out, -1)


# ---------------------------------------------------------------- SWAG


def _symbnn_swag(ctx: Context, mode: Mode, settings) -> tuple[dict, float]:
    """symbnn's SWAG: the fit at the mode, then 16 draws (stacked state dicts)."""
    problem = ctx.problem()
    start = time.perf_counter()
    fitted = symbnn_swag.fit(problem, mode, settings, 0, ENSEMBLE)
    fit_seconds = time.perf_counter() - start
    return symbnn_swag.sample(problem, fitted, ENSEMBLE, settings, 0), fit_seconds


def _tu_swag(ctx: Context, mode: Mode, settings) -> tuple[Any, float]:
    """torch-uncertainty's SWAG wrapper fed the same SGD run as symbnn's fit: the same ramp
    and constant learning rate, batches and collection steps (its update_wrapper is called
    at each of symbnn's collection steps, as one "cycle" each)."""
    from torch_uncertainty.methods import SWAG

    recipe = ctx.experiment.recipe
    model = build_model(ctx.optunet_spec)
    model.load_state_dict(mode.state)
    model.train()
    wrapper = SWAG(
        model,
        cycle_start=0,
        cycle_length=1,
        scale=settings.scale,
        max_num_models=settings.rank,
        num_estimators=ENSEMBLE,
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


def row_swag(ctx: Context) -> tuple[list[Row], tuple[torch.Tensor, torch.Tensor]]:
    """SWAG at the OptuNet mode of seed 0; returns the rows and symbnn's ensemble predictions
    (test, OOD) for the metrics row."""
    job = "SWAG (fit + 16 samples)"
    settings = ctx.experiment.methods.swag
    mode = Mode(seed=0, state=ctx.pair("optunet")[0][0])
    epochs = symbnn_swag.fit_epochs(settings, ctx.experiment.recipe)
    case = f"OptuNet mode, {epochs} epochs, {settings.snapshots} snapshots, rank {settings.rank}"

    def ours():
        samples, fit_seconds = _symbnn_swag(ctx, mode, settings)
        probs = ensemble_probs(ctx.optunet_spec, samples, ctx.test, ctx.test)
        return samples, probs, fit_seconds

    (samples, probs, fit_s), seconds, peak = measure(ours)
    rows = [symbnn_ensemble_row(job, case, probs, fit_s, seconds, peak, ctx)]
    probs_out = ensemble_probs(ctx.optunet_spec, samples, ctx.ood, ctx.test)
    tu, why = peer("torch_uncertainty", "pip install torch-uncertainty lightning")
    if tu is None:
        return rows + [missing(job, case, "torch-uncertainty", why)], (probs, probs_out)

    def theirs():
        wrapper, fit_seconds = _tu_swag(ctx, mode, settings)
        return _wrapper_probs(wrapper, ctx.test, ctx.test), fit_seconds

    (probs_t, fit_t), seconds_t, peak = measure(theirs)
    timing = (
        f"fit {fit_t:.1f} s (draws its {ENSEMBLE} samples anew at each of the "
        f"{settings.snapshots} updates) + predict {seconds_t - fit_t:.2f} s"
    )
    rows.append(peer_ensemble_row(job, case, probs_t, timing, seconds_t, seconds, peak, ctx))
    return rows, (probs, probs_out)


# ---------------------------------------------------------------- MC Dropout


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


def symbnn_ensemble_row(job, case, probs, fit_seconds, seconds, peak, ctx: Context) -> Row:
    """symbnn's row of a method comparison: the ensemble's quality, fit and draw times."""
    timing = f"fit {fit_seconds:.1f} s + sample/predict {seconds - fit_seconds:.2f} s"
    quality = f"{ensemble_quality(probs, ctx.test.labels)}; {timing}"
    return Row(job, case, "symbnn", seconds, peak, quality)


def peer_ensemble_row(job, case, probs, timing, seconds, ours, peak, ctx: Context) -> Row:
    """torch-uncertainty's row of a method comparison, its time against symbnn's ``ours``."""
    quality = f"{ensemble_quality(probs, ctx.test.labels)}; {timing}"
    verdict = f"symbnn at least as fast: {yes_no(seconds >= ours)}"
    return Row(
        job, case, _version("torch-uncertainty"), seconds, peak, quality, seconds / ours, verdict
    )


def row_dropout(ctx: Context) -> list[Row]:
    """MC Dropout from the mode seed (dropout needs its own training): symbnn's fit (dropout
    hooks) and draw (masks folded into weights, 16 networks evaluated) vs torch-uncertainty's
    wrapper around the same network with an nn.Dropout module (16 stochastic passes)."""
    job = "MC Dropout (train + 16 samples)"
    settings = ctx.experiment.methods.dropout
    recipe = ctx.experiment.recipe
    case = (
        f"OptuNet from seed 0, rate {settings.rate} before the last layer, {recipe.epochs} epochs"
    )
    mode = Mode(seed=0, state=ctx.pair("optunet")[0][0])
    problem = ctx.problem()

    def ours():
        start = time.perf_counter()
        model = symbnn_dropout.train_with_dropout(
            problem, mode.seed, settings.rate, settings.layers
        )
        fitted = {"state": {k: v.detach().clone() for k, v in model.state_dict().items()}}
        fit_seconds = time.perf_counter() - start
        samples = symbnn_dropout.sample(problem, fitted, ENSEMBLE, settings, 0)
        return ensemble_probs(ctx.optunet_spec, samples, ctx.test, ctx.test), fit_seconds

    (probs, fit_s), seconds, peak = measure(ours)
    rows = [symbnn_ensemble_row(job, case, probs, fit_s, seconds, peak, ctx)]
    tu, why = peer("torch_uncertainty", "pip install torch-uncertainty lightning")
    if tu is None:
        return rows + [missing(job, case, "torch-uncertainty", why)]
    from torch_uncertainty.methods import mc_dropout

    def theirs():
        start = time.perf_counter()
        torch.manual_seed(0)  # nn.Dropout draws its masks from the global generator
        model = DropoutOptuNet(build_seeded_model(ctx.optunet_spec, mode.seed), settings.rate)
        fit_module(
            model, recipe, ctx.train, mode.seed, "cpu", lambda m, x, y: F.cross_entropy(m(x), y)
        )
        fit_seconds = time.perf_counter() - start
        wrapper = mc_dropout(model, num_estimators=ENSEMBLE, last_layer=True, on_batch=True)
        return _wrapper_probs(wrapper, ctx.test, ctx.test), fit_seconds

    (probs_t, fit_t), seconds_t, peak = measure(theirs)
    timing = f"fit {fit_t:.1f} s + predict {seconds_t - fit_t:.2f} s"
    rows.append(peer_ensemble_row(job, case, probs_t, timing, seconds_t, seconds, peak, ctx))
    return rows


# ---------------------------------------------------------------- variational BNN (BLiTZ)


PAPER_PRIOR = {
    "prior_pi": 1.0,
    "prior_sigma_1": 0.1,
    "prior_sigma_2": 0.4,
    "posterior_rho_init": -7.0,
}


def blitz_optunet(spec: dict, seed: int | None) -> nn.Module:
    """OptuNet built from BLiTZ's Bayesian layers with the paper's priors. Means start at
    seed ``seed``'s initial weights, as symbnn's do (``None``: BLiTZ's own N(0, 0.1^2))."""
    from blitz.modules import BayesianConv2d, BayesianLinear
    from blitz.utils import variational_estimator

    net = build_seeded_model(spec, 0 if seed is None else seed)
    c1, c2 = net.conv1, net.conv2

    @variational_estimator
    class BlitzOptuNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pool_size = net.pool_size
            self.conv1 = BayesianConv2d(
                c1.in_channels, c1.out_channels, c1.kernel_size, bias=False, **PAPER_PRIOR
            )
            self.conv2 = BayesianConv2d(
                c2.in_channels,
                c2.out_channels,
                c2.kernel_size,
                groups=c2.groups,
                bias=False,
                **PAPER_PRIOR,
            )
            self.fc1 = BayesianLinear(net.fc1.in_features, net.fc1.out_features, **PAPER_PRIOR)
            self.fc2 = BayesianLinear(net.fc2.in_features, net.fc2.out_features, **PAPER_PRIOR)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.max_pool2d(F.relu(self.conv1(x)), self.pool_size, self.pool_size)
            x = F.relu(self.conv2(x)).mean(dim=(2, 3))
            return self.fc2(F.relu(self.fc1(x)))

    model = BlitzOptuNet()
    if seed is not None:
        with torch.no_grad():
            for name, value in net.state_dict().items():
                layer, kind = name.rsplit(".", 1)  # conv1.weight -> conv1.weight_mu
                model.get_parameter(f"{layer}.{kind}_mu").copy_(value)
    return model


def row_bnn(ctx: Context) -> list[Row]:
    """Bayes by backprop on OptuNet, the same budget on both sides. Each side first trains
    on 64 images, untimed: symbnn's first `torch.func.functional_call` imports torch._dynamo
    (and sympy), about 1.4 s and 180 MiB once per process."""
    job = "variational BNN (train + 16 draws)"
    epochs = ctx.bnn_epochs
    settings = Bnn()  # the paper's priors: pi 1, sigma1 0.1, rho0 -7; 3 ELBO samples; no decay
    problem = ctx.problem(epochs=epochs)
    recipe = settings.recipe.apply(problem.recipe)
    case = (
        f"OptuNet, {epochs} epochs x {math.ceil(len(ctx.train) / recipe.batch_size)} steps, "
        f"{settings.elbo_samples} ELBO samples, prior N(0, {settings.prior_sigma1}^2)"
    )
    tiny = ctx.train.subset(slice(0, recipe.batch_size))

    def ours(train: ImageData = ctx.train):
        start = time.perf_counter()
        q = symbnn_bnn.train_bnn(dataclasses.replace(problem, train=train), 0, settings)
        fit_seconds = time.perf_counter() - start
        samples = q.sample_states(ENSEMBLE, generator(0))
        return ensemble_probs(ctx.optunet_spec, samples, ctx.test, ctx.test), fit_seconds

    (probs, fit_s), _, peak = measure(ours, warmup=lambda: ours(tiny))
    quality = f"{ensemble_quality(probs, ctx.test.labels)}; {fit_s / epochs:.2f} s per epoch"
    rows = [Row(job, case, "symbnn", fit_s / epochs, peak, quality)]
    blitz_module, why = peer("blitz.modules", "pip install --no-deps blitz-bayesian-pytorch")
    if blitz_module is None:
        return rows + [missing(job, case, "blitz-bayesian-pytorch", why)]

    def elbo(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return model.sample_elbo(
            x,
            y,
            F.cross_entropy,
            sample_nbr=settings.elbo_samples,
            complexity_cost_weight=settings.kl_weight / len(ctx.train),
        )

    def theirs(train: ImageData = ctx.train):
        torch.manual_seed(0)  # BLiTZ draws its noise from the global generator
        model = blitz_optunet(ctx.optunet_spec, None if ctx.blitz_own_init else 0)
        start = time.perf_counter()
        fit_module(model, recipe, train, 0, "cpu", elbo)
        fit_seconds = time.perf_counter() - start
        model.eval()
        with torch.no_grad():
            x = ctx.test.normalize(ctx.test.images)
            probs = torch.stack([torch.softmax(model(x), -1) for _ in range(ENSEMBLE)])
        return probs, fit_seconds

    (probs_b, fit_b), _, peak = measure(theirs, warmup=lambda: theirs(tiny))
    quality = f"{ensemble_quality(probs_b, ctx.test.labels)}; {fit_b / epochs:.2f} s per epoch"
    library = _version("blitz-bayesian-pytorch")
    if ctx.blitz_own_init:
        library += " (own mean init)"
    verdict = f"symbnn at least as fast: {yes_no(fit_b >= fit_s)}"
    rows.append(Row(job, case, library, fit_b / epochs, peak, quality, fit_b / fit_s, verdict))
    return rows


# ---------------------------------------------------------------- laplace-torch


def row_laplace() -> list[Row]:
    return [
        Row(
            "Laplace",
            "-",
            _version("laplace-torch"),
            None,
            None,
            "not compared: symbnn's Laplace (symbnn.methods.laplace) is laplace-torch itself "
            "(a dependency), with the default experiment's settings",
        )
    ]


# ---------------------------------------------------------------- report


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{dist} {version(dist)}"
    except PackageNotFoundError:
        return dist


def table(rows: list[Row]) -> str:
    head = ("job", "case", "library", "time s", "time / symbnn's", "peak MiB", "quality", "verdict")
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = (
            r.job,
            r.case,
            r.library,
            "-" if r.seconds is None else f"{r.seconds:.3g}",
            "-" if r.ratio is None else f"{r.ratio:.2f}",
            "-" if r.peak_mib is None else f"{r.peak_mib:.0f}",
            r.quality,
            r.verdict,
        )
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


JOBS = ("alignment", "metrics", "swag", "dropout", "bnn", "laplace")
DOC_INTRO = (
    "The `peers` block compares symbnn with the libraries a researcher would otherwise use, "
    "on the same inputs in one run: weight matching against rebasin, the uncertainty metrics "
    "against torch-uncertainty's metric classes, SWAG and MC Dropout against torch-uncertainty's "
    "wrappers, the variational BNN against BLiTZ. Times are medians; symbnn and the peer run "
    "in alternating pairs where both are cheap, and the ratio is the peer's time over symbnn's "
    "(the median of the pairs' ratios). The verdict says whether symbnn is at least as fast "
    "(for the metrics: at least twice as fast) and, for weight matching, whether its "
    "||A - PB|| is at most the peer's. On a shared machine times and ratios move with the "
    "load (two-thread CPU kernels most), so a verdict can flip with it: the footer gives the "
    "load and the calibration at both ends. Rerun it with `python benchmarks/peers.py` (the "
    "peers are the `peers` extra; `--help` for the options)."
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", type=int, default=5, help="runs (pairs) of the cheap jobs; medians"
    )
    parser.add_argument(
        "--bnn-epochs", type=int, default=None, help="both BNNs' budget (default: the recipe's)"
    )
    parser.add_argument(
        "--blitz-own-init",
        action="store_true",
        help="BLiTZ's means start at its own N(0, 0.1^2), not at symbnn's initial weights",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's)"
    )
    parser.add_argument("--jobs", nargs="+", choices=JOBS, default=JOBS, help="rows to run")
    parser.add_argument("--json", default=None, help="also write the rows here")
    write = parser.add_mutually_exclusive_group()
    write.add_argument(
        "--write",
        action="store_true",
        help="write the table into docs/benchmarks.md even when only some jobs ran",
    )
    write.add_argument("--no-write", action="store_true", help="print only")
    add_gate_arguments(parser)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    gate = LoadGate(args.settle)
    wall, conditions = time.perf_counter(), Conditions()
    ctx = Context(args)
    rows: list[Row] = []
    if "alignment" in args.jobs:
        for case in ("mlp", "optunet", "resnet18"):
            rows += row_alignment(ctx, case)
    swag_rows, probs = row_swag(ctx) if "swag" in args.jobs else ([], None)
    if "metrics" in args.jobs:
        rows += row_metrics(ctx, *synthetic_predictions(ENSEMBLE, 1_000), DEFAULT_SIZE)
        if probs is not None:
            rows += row_metrics(ctx, probs[0], ctx.test.labels, probs[1], SWAG_PREDICTIONS)
        rows += row_metrics(ctx, *synthetic_predictions(100, 10_000), PAPER_SIZE)
    rows += swag_rows
    if "dropout" in args.jobs:
        rows += row_dropout(ctx)
    if "bnn" in args.jobs:
        rows += row_bnn(ctx)
    if "laplace" in args.jobs:
        rows += row_laplace()
    text = (
        f"{table(rows)}\n\nMachine: {conditions.line()}. Medians of {args.repeats} runs "
        f"(alignment, metrics; training jobs once); whole run "
        f"{time.perf_counter() - wall:.0f} s."
    )
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))
    if args.write or (not args.no_write and set(args.jobs) == set(JOBS)):
        return written(
            lambda: publish("peers", "benchmarks/peers.py", DOC_INTRO, text, gate, args.allow_load)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
