"""Uncertainty metrics (accuracy, ECE, Brier, AUPR, FPR95, NLL) of the same (K, N, C)
predictions: `symbnn.metrics.uncertainty_metrics` (its validation of every probability and
label inside the timed path) against torch-uncertainty's metric classes (and torchmetrics'
accuracy and average precision, as its ClassificationRoutine uses them); symbnn with the mutual
information (idmi, oodmi) as an extra row; and the streaming pass, the physical limit: one
`numpy.add.reduce` over the members of the same input arrays (in and out of distribution),
measured in the same run.

Goals: symbnn at least twice as fast as torch-uncertainty, or within 1.5 times the streaming
pass; with the mutual information, within twice the streaming pass.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from peer_context import Context
from peer_measure import (
    Row,
    measure,
    missing,
    ours_row,
    own_threads,
    paired,
    peer,
    peer_row,
    symbnn_threads,
    version,
)
from torch.nn import functional as F

from symbnn.metrics import uncertainty_metrics

JOB = "uncertainty metrics"
METRIC_NAMES = ("accuracy", "ece", "brier", "aupr", "fpr95", "nll")
PEER_GOAL = 2.0  # torch-uncertainty's time / symbnn's, at least
PASS_GOAL = 1.5  # symbnn's time / the streaming pass's, at most
PASS_GOAL_MI = 2.0  # the same with the mutual information


def _tu_metrics(probs_in: torch.Tensor, labels, probs_out: torch.Tensor) -> dict:
    """The six metrics with torch-uncertainty's classes on the predictive means, in float32:
    what its routine feeds them."""
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


def streaming_pass(probs_in: torch.Tensor, probs_out: torch.Tensor) -> float:
    """One read of both inputs: the sum over the members (numpy's add.reduce)."""
    total = np.add.reduce(probs_in.numpy(), axis=0)
    return float(total[0, 0] + np.add.reduce(probs_out.numpy(), axis=0)[0, 0])


def _fmt(values: dict) -> str:
    return ", ".join(f"{k} {values[k]:.4f}" for k in METRIC_NAMES)


def _pass_row(case: str, threads: int, stream, ours, ours_mi) -> Row:
    """The streaming pass's row: symbnn's time over it, with and without the mutual
    information, against the goals."""
    ratio, ratio_mi = ours.wall / stream.wall, ours_mi.wall / stream.wall
    cpu, cpu_mi = ours.cpu / max(stream.cpu, 1e-9), ours_mi.cpu / max(stream.cpu, 1e-9)
    met, met_mi = ratio <= PASS_GOAL, ratio_mi <= PASS_GOAL_MI
    verdict = (
        f"symbnn/pass wall {ratio:.2f}x (CPU {cpu:.2f}x), goal at most {PASS_GOAL:g}x: "
        f"{'met' if met else 'slower'}; with mutual information {ratio_mi:.2f}x (CPU "
        f"{cpu_mi:.2f}x), goal at most {PASS_GOAL_MI:g}x: {'met' if met_mi else 'slower'}"
    )
    return Row(
        JOB,
        case,
        "streaming pass (numpy add.reduce over the members, one thread)",
        threads,
        stream.wall,
        stream.cpu,
        stream.peak,
        "reads every input once: the time no metric pass can beat",
        stream.wall / ours.wall,
        stream.cpu / max(ours.cpu, 1e-9),
        "no: sums only",
        verdict,
    )


def rows_metrics(
    ctx: Context,
    probs_in: torch.Tensor,
    labels: torch.Tensor,
    probs_out: torch.Tensor,
    case: str,
    threads: int,
) -> list[Row]:
    """symbnn, symbnn with the mutual information, the streaming pass and torch-uncertainty
    on the same predictions, at ``threads`` threads (set by the caller)."""

    def ours():
        return uncertainty_metrics(probs_in, labels, probs_out, mutual_information=False)

    seen: list[tuple[int, str]] = []
    with symbnn_threads(seen):  # an untimed run
        ours()
    note = own_threads(seen, threads)
    stream = measure(lambda: streaming_pass(probs_in, probs_out), ctx.repeats)
    full = measure(lambda: uncertainty_metrics(probs_in, labels, probs_out), ctx.repeats)
    tu, why = peer("torch_uncertainty", "pip install torch-uncertainty lightning")
    if tu is None:
        mine = measure(ours, ctx.repeats)
        run = None
    else:
        run = paired(ours, lambda: _tu_metrics(probs_in, labels, probs_out), ctx.repeats)
        mine = run.ours
    rows = [ours_row(JOB, case, threads, mine, _fmt(mine.result), "symbnn" + note)]
    mi = f"idmi {full.result['idmi']:.4f}, oodmi {full.result['oodmi']:.4f} (nats)"
    row_mi = ours_row(JOB, case, threads, full, mi, "symbnn, with mutual information" + note)
    row_mi.ratio, row_mi.cpu_ratio = full.wall / mine.wall, full.cpu / max(mine.cpu, 1e-9)
    rows += [row_mi, _pass_row(case, threads, stream, mine, full)]
    if run is None:
        return rows + [missing(JOB, case, "torch-uncertainty", threads, why)]
    diff = max(abs(run.theirs.result[k] - mine.result[k]) for k in METRIC_NAMES)
    worst = max(METRIC_NAMES, key=lambda k: abs(run.theirs.result[k] - mine.result[k]))
    quality = f"{_fmt(run.theirs.result)}; largest |difference| {diff:.1e} ({worst})"
    same = "yes: the six metrics of the predictive mean (float32 there, float64 here)"
    row = peer_row(
        JOB, case, version("torch-uncertainty"), threads, run.theirs, mine, quality, same,
        (run.ratio, run.cpu_ratio), PEER_GOAL,
    )  # fmt: skip
    row.verdict = _goal_verdict(run.ratio, run.cpu_ratio, mine, stream)
    return rows + [row]


def _goal_verdict(ratio: float, cpu_ratio: float, ours, stream) -> str:
    """Met when symbnn is PEER_GOAL times as fast as the peer or within PASS_GOAL times the
    streaming pass; the figures of both either way."""
    to_pass, cpu_to_pass = ours.wall / stream.wall, ours.cpu / max(stream.cpu, 1e-9)
    met = ratio >= PEER_GOAL or to_pass <= PASS_GOAL
    return (
        f"{'goal met' if met else 'slower'}: peer/symbnn wall {ratio:.2f}x (CPU "
        f"{cpu_ratio:.2f}x; goal at least {PEER_GOAL:g}x), or symbnn/streaming pass wall "
        f"{to_pass:.2f}x (CPU {cpu_to_pass:.2f}x; goal at most {PASS_GOAL:g}x)"
    )


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
