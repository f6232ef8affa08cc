"""Weight matching of network B onto A: symbnn (`symbnn.api.align`, the structure traced by
`symbnn.api.symmetry_of`) against rebasin (`PermutationCoordinateDescent`), on the trained MLP
and OptuNet pairs and a large network with random weights (and BatchNorm statistics).

Time: tracing the graph and matching to convergence. Quality: the test loss barrier after
alignment (`symbnn.alignment.interpolation`), whether the permuted network still computes the
same function, and the weight distance ||A - P B|| / ||A - B||. symbnn runs the matching of a
small network on one torch thread whatever the process's count (`symbnn.threads`,
`torch_threads_for`): the row says so, from the count seen inside the matching.
"""

from __future__ import annotations

import math

import torch
from peer_context import Context, model_with
from peer_measure import (
    Row,
    measure,
    missing,
    own_threads,
    paired,
    peer,
    peer_row,
    symbnn_threads,
    version,
)
from torch import nn

from symbnn import api
from symbnn.alignment.interpolation import grid, loss_barrier, network_curve
from symbnn.models import build_model

JOB = "alignment (weight matching)"
CASES = ("mlp", "optunet", "large")
KEPT = 1e-5  # largest relative logit change of a permutation that keeps B's function


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


def _random_net(spec: dict, seed: int) -> dict:
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


class _Case:
    """One pair to align: spec, states, example inputs, label, and how its quality reads."""

    def __init__(self, ctx: Context, case: str) -> None:
        if case == "large":
            self.spec = ctx.sizes.resnet
            self.a, self.b = (_random_net(self.spec, seed) for seed in (0, 1))
            gen = torch.Generator().manual_seed(0)
            self.x = torch.randn(8, 3, 32, 32, generator=gen)
            n = sum(p.numel() for p in build_model(self.spec).parameters())
            self.label = f"{self.spec['name']}, random weights and normalisation ({n:,} params)"
            self.data, self.accs = None, None
        else:
            self.spec = ctx.mlp_spec if case == "mlp" else ctx.optunet_spec
            (self.a, self.b), self.accs = ctx.pair(case)
            self.x = ctx.test.normalize(ctx.test.images[:256])
            n = sum(p.numel() for p in build_model(self.spec).parameters())
            widths = "-".join(map(str, ctx.mlp_spec["widths"]))
            what = f"MLP {widths}" if case == "mlp" else "OptuNet 4-12-10"
            accs = f"test acc {self.accs[0]:.2f}, {self.accs[1]:.2f}"
            self.label = f"{what} ({n:,} params), trained ({accs})"
            self.data = {"test": ctx.test}
        self.model = build_model(self.spec)
        self.before = _weight_distance(self.a, self.b, self.model)
        self.unaligned = _barrier(self.spec, self.a, self.b, self.data)[0] if self.data else None

    def quality(self, aligned: dict) -> tuple[str, float, bool]:
        """(the row's quality text, ||A - PB|| / ||A - B||, whether B's function is kept)."""
        change = _function_change(self.spec, self.b, aligned, self.x)
        kept = change < KEPT
        dist = _weight_distance(self.a, aligned, self.model) / self.before
        text = f"||A-PB||/||A-B|| {dist:.4f}; " + (
            "function kept" if kept else f"function CHANGED (max |dlogit| {change:.2g})"
        )
        if self.data:
            barrier, acc_b = _barrier(self.spec, self.a, aligned, self.data)
            text = f"barrier {barrier:.3f} (unaligned {self.unaligned:.3f}); " + text
            if not kept:  # the barrier is then to another network
                text += f", permuted B's test acc {acc_b:.2f} (B's {self.accs[1]:.2f})"
        return text, dist, kept


def rows_alignment(ctx: Context, case: str, threads: int) -> list[Row]:
    """Weight matching of B onto A, symbnn vs rebasin, on one case at ``threads`` threads
    (set by the caller)."""
    c = _Case(ctx, case)
    seen: list[tuple[int, str]] = []
    with symbnn_threads(seen):  # an untimed run
        _symbnn_align(c.spec, c.a, c.b, c.x, 1)
    library = "symbnn" + own_threads(seen, threads)

    def ours():
        return _symbnn_align(c.spec, c.a, c.b, c.x, None)

    rebasin, why = peer("rebasin", "pip install --no-deps rebasin torchview graphviz")
    if rebasin is None:
        run = measure(ours, ctx.repeats)
        text = c.quality(run.result)[0]
        rows = [Row(JOB, c.label, library, threads, run.wall, run.cpu, run.peak, text)]
        return rows + [missing(JOB, c.label, "rebasin", threads, why)]
    run = paired(ours, lambda: _rebasin_align(rebasin, c.spec, c.a, c.b, c.x), ctx.repeats)
    text, dist, _ = c.quality(run.ours.result)
    m = run.ours
    rows = [Row(JOB, c.label, library, threads, m.wall, m.cpu, m.peak, text)]
    # its sweeps after the first gain little: the first alone, as an extra row
    one = measure(lambda: _symbnn_align(c.spec, c.a, c.b, c.x, 1), ctx.repeats)
    rows.append(
        Row(
            JOB,
            c.label,
            library.replace("symbnn", "symbnn, one sweep", 1),
            threads,
            one.wall,
            one.cpu,
            one.peak,
            c.quality(one.result)[0],
            one.wall / m.wall,
            one.cpu / max(m.cpu, 1e-9),
        )
    )
    text_r, dist_r, kept_r = c.quality(run.theirs.result)
    same = "yes: weight matching by coordinate descent over linear assignments"
    if not kept_r:  # a distance reached by permutations that are not symmetries of B
        same = "no: its permutations change B's function (not all are symmetries of B)"
    row = peer_row(
        JOB, c.label, version("rebasin"), threads, run.theirs, m, text_r, same,
        (run.ratio, run.cpu_ratio),
    )  # fmt: skip
    row.verdict += f"; symbnn's distance at most rebasin's: {'yes' if dist <= dist_r else 'no'}"
    return rows + [row]
