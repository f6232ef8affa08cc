"""Symmetrised (permutation-invariant) variational posterior, after Gelberg et al. (2024),
against plain mean-field VI on a small MLP task.

Family. q is a mean-field Gaussian over every weight (`symbnn.methods.bnn.fit.MeanFieldBNN`);
G is the group of admissible hidden-unit permutations of the network (every unit group of
`symbnn.symmetry.unit_groups`; for an MLP 2-H-2, G = S_H). The symmetrised posterior is the
mixture of q's images under G,

    q_sym(w) = (1/|G|) sum_{g in G} q(g w).

It is G-invariant (q_sym(g w) = q_sym(w)): it puts equal mass on every permuted copy of the
mode that q covers, as the true posterior does. Sampling: w ~ q, then a uniform g, return g w.

Objective (the paper's "ELBO with a modified KL term"). The likelihood and the isotropic
Gaussian prior p are G-invariant, so under q_sym an invariant function has the same
expectation as under q, and

    ELBO(q_sym) = E_q[log p(D | w)] - KL_sym,   KL_sym = E_q[log q_sym(w) - log p(w)],

the mean-field ELBO with log q(w) replaced by log q_sym(w) in the KL term, still estimated by
reparameterised draws from q. Since q/|G| <= q_sym and E_q[log q_sym - log q] = -KL(q || q_sym),
KL(q || p) - log|G| <= KL_sym <= KL(q || p): for the same q the symmetrised ELBO is never
lower, and at most log|G| higher (reached when q's permuted copies do not overlap).

Estimator of log q_sym(w) (documented choice):
* |G| <= ``max_enumerate`` (default 5040): exact, a log-sum-exp over every g of log q(g w),
  minus log|G|.
* otherwise: the identity term exactly plus a Monte-Carlo estimate of the rest,
  q_sym(w) ~ q(w)/|G| + (1 - 1/|G|) (1/M) sum_m q(g_m w), g_m uniform on G without the
  identity (fresh draws per call). The estimate of q_sym is unbiased; its log is biased low
  (Jensen), so KL_sym is under-estimated and the ELBO over-estimated by that bias.

The comparison (`compare`) fits both families on two Gaussian classes in 2-D and reports
ELBO (total, nats), test accuracy and predictive NLL (S-draw predictive mean) and the
parameter-weighted layer-wise MMD (`symbnn.mmd.two_sample_mmd`, docs/maths.md, section 5) between each
family's samples and a target posterior of independent SGD runs.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import torch
from torch.nn import functional as F

from symbnn.alignment import align_gaussian
from symbnn.alignment.interpolation import gaussian_curve, grid, predictive_accuracy_nll
from symbnn.analyses import stacked_mlp
from symbnn.methods.bnn.fit import MeanFieldBNN, gaussian_state, log_normal
from symbnn.settings import SymmetrizedVi
from symbnn.symmetry import apply_permutations, random_permutations, unit_groups
from symbnn.symmetry.structure import Symmetry
from symbnn.train.mlp_stacked import stacked_forward
from symbnn.train.seeding import build_seeded_model

FAMILIES = ("mean_field", "symmetrised")

# ---------------------------------------------------------------- the task


def two_gaussians(n: int, seed: int, separation: float) -> tuple[torch.Tensor, torch.Tensor]:
    """n points, balanced classes, class c ~ N(+-(separation, separation), I) in 2-D."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    centre = separation * (2.0 * y.double() - 1.0)[:, None].expand(n, 2)
    x = centre + torch.randn(n, 2, generator=g, dtype=torch.float64)
    order = torch.randperm(n, generator=g)
    return x[order].float(), y[order]


def mlp_spec(hidden: int) -> dict[str, Any]:
    return stacked_mlp.mlp_spec([2, hidden, 2])


# ---------------------------------------------------------------- the symmetrised family


def _check_structure(sym: Symmetry) -> None:
    if sym.couplings or any(g.blocks > 1 for g in sym.groups):
        raise ValueError(
            f"{sym.architecture}: the symmetrised family handles plain unit groups only "
            "(no grouped convolutions)"
        )


def group_order(sym: Symmetry) -> int:
    return math.prod(math.factorial(g.width) for g in sym.groups)


def all_permutations(sym: Symmetry) -> dict[str, torch.Tensor]:
    """Every element of G as stacked permutations (|G|, width) per unit group."""
    per_group = [list(itertools.permutations(range(g.width))) for g in sym.groups]
    combos = list(itertools.product(*per_group))
    return {
        g.name: torch.tensor([c[i] for c in combos], dtype=torch.int64)
        for i, g in enumerate(sym.groups)
    }


class SymmetrizedMeanField:
    """q_sym over a mean-field base q (a `MeanFieldBNN`); see the module docstring."""

    def __init__(
        self,
        base: MeanFieldBNN,
        sym: Symmetry,
        max_enumerate: int,
        mc_permutations: int,
        generator: torch.Generator | None = None,
    ) -> None:
        _check_structure(sym)
        self.base, self.sym = base, sym
        self.order = group_order(sym)
        self.exact = self.order <= max_enumerate
        self.perms = all_permutations(sym) if self.exact else None
        self.mc = int(mc_permutations)
        self.generator = generator or torch.Generator().manual_seed(0)

    def log_q(self, weights: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean-field log q of stacked weights (n, *shape) -> (n,)."""
        total = 0.0
        for name, mu, sigma in zip(self.base.names, self.base.mu, self.base.sigmas()):
            w = weights[name]
            total = total + log_normal(w, mu, sigma).reshape(w.shape[0], -1).sum(1)
        return total

    def _non_identity(self, n: int) -> dict[str, torch.Tensor]:
        perms = random_permutations(self.sym, n, self.generator)
        while True:
            identity = torch.ones(n, dtype=torch.bool)
            for g in self.sym.groups:
                identity &= (perms[g.name] == torch.arange(g.width)).all(1)
            if not identity.any():
                return perms
            redraw = random_permutations(self.sym, int(identity.sum()), self.generator)
            for g in self.sym.groups:
                perms[g.name][identity] = redraw[g.name]

    def log_density(self, weights: dict[str, torch.Tensor]) -> torch.Tensor:
        """log q_sym of stacked weights (n, *shape) -> (n,), differentiable in weights and q."""
        n = next(iter(weights.values())).shape[0]
        perms = self.perms if self.exact else self._non_identity(self.mc)
        k = next(iter(perms.values())).shape[0]
        tiled = {name: w.repeat_interleave(k, 0) for name, w in weights.items()}
        moved = apply_permutations(
            tiled, self.sym, {g: p.repeat(n, 1) for g, p in perms.items()}, check=False
        )
        terms = self.log_q(moved).reshape(n, k)
        if self.exact:
            return torch.logsumexp(terms, 1) - math.log(self.order)
        identity = self.log_q(weights) - math.log(self.order)
        rest = torch.logsumexp(terms, 1) - math.log(k) + math.log1p(-1.0 / self.order)
        return torch.logaddexp(identity, rest)

    @torch.no_grad()
    def sample_states(self, count: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """count draws g w, w ~ q and g uniform on G."""
        draws = self.base.sample_states(count, gen)
        return apply_permutations(draws, self.sym, random_permutations(self.sym, count, gen))


# ---------------------------------------------------------------- fitting and evaluation


def log_prior(weights: dict[str, torch.Tensor], std: float) -> torch.Tensor:
    return sum(log_normal(w, 0.0, std).reshape(w.shape[0], -1).sum(1) for w in weights.values())


def _draws(q: MeanFieldBNN, count: int, gen: torch.Generator | None) -> dict[str, torch.Tensor]:
    """count reparameterised draws from q, stacked (count, *shape), differentiable."""
    out = {}
    for name, mu, sigma in zip(q.names, q.mu, q.sigmas()):
        eps = torch.randn((count, *mu.shape), generator=gen, dtype=mu.dtype)
        out[name] = mu + sigma * eps
    return out


def _log_likelihood(
    weights: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    """(count,) sum over data of log p(y | x, w) for each stacked draw."""
    logits = stacked_forward(weights, x.expand(next(iter(weights.values())).shape[0], *x.shape))
    return -F.cross_entropy(
        logits.transpose(1, 2), y.expand(logits.shape[0], -1), reduction="none"
    ).sum(1)


def kl_terms(
    q: MeanFieldBNN,
    qsym: SymmetrizedMeanField,
    family: str,
    weights: dict[str, torch.Tensor],
    prior_std: float,
) -> torch.Tensor:
    """(count,) log q_family(w) - log p(w) for stacked draws w ~ q."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r} (known: {', '.join(FAMILIES)})")
    log_q = qsym.log_q(weights) if family == "mean_field" else qsym.log_density(weights)
    return log_q - log_prior(weights, prior_std)


def fit(
    spec: dict[str, Any],
    x: torch.Tensor,
    y: torch.Tensor,
    family: str,
    seed: int,
    settings: SymmetrizedVi,
) -> tuple[MeanFieldBNN, SymmetrizedMeanField]:
    """Maximise the family's ELBO (full batch, Adam) from seed's initial weights."""
    if spec.get("name") != "mlp" or spec.get("bias", True) is False:
        raise ValueError(f"the symmetrised-VI comparison runs on MLPs with biases, got {spec}")
    q = MeanFieldBNN(
        build_seeded_model(spec, seed),
        settings.rho_init,
        1.0,
        settings.prior_std,
        settings.prior_std,
    )
    gen = torch.Generator().manual_seed(int(seed) + 104729)
    qsym = SymmetrizedMeanField(
        q, unit_groups(spec), settings.max_enumerate, settings.mc_permutations, gen
    )
    optimizer = torch.optim.Adam(q.parameters(), lr=settings.lr)
    for _ in range(settings.steps):
        w = _draws(q, settings.elbo_samples, gen)
        loss = -(
            _log_likelihood(w, x, y) - kl_terms(q, qsym, family, w, settings.prior_std)
        ).mean() / len(x)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return q, qsym


@dataclass
class Evaluation:
    elbo: float
    elbo_stderr: float
    test_accuracy: float
    test_nll: float


@torch.no_grad()
def evaluate(
    q: MeanFieldBNN,
    qsym: SymmetrizedMeanField,
    family: str,
    train: tuple[torch.Tensor, torch.Tensor],
    test: tuple[torch.Tensor, torch.Tensor],
    samples: int,
    prior_std: float,
    seed: int = 0,
) -> Evaluation:
    """ELBO of the family (total nats) and the predictive's test accuracy and NLL. The
    predictive of q_sym equals q's (permutations preserve the function)."""
    gen = torch.Generator().manual_seed(seed)
    w = _draws(q, samples, gen)
    per_draw = _log_likelihood(w, *train) - kl_terms(q, qsym, family, w, prior_std)
    x, y = test
    accuracy, nll = predictive_accuracy_nll(stacked_forward(w, x.expand(samples, *x.shape)), y)
    return Evaluation(
        float(per_draw.mean()), float(per_draw.std() / math.sqrt(samples)), accuracy, nll
    )


def layerwise_mmd(target: dict[str, torch.Tensor], samples: dict[str, torch.Tensor]) -> float:
    """Parameter-weighted mean over state entries of the median of the twenty MMD^2_u (docs/maths.md, section 5)."""
    # local: keeps zarr out of importing symbnn.analyses.symmetrized_vi
    from symbnn.mmd import two_sample_mmd

    total, weight = 0.0, 0
    for name in target:
        layer = two_sample_mmd(
            target[name].double().numpy(), samples[name].double().numpy(), device="cpu"
        )
        total += layer.median * layer.n_params
        weight += layer.n_params
    return total / weight


def compare(settings: SymmetrizedVi) -> pl.DataFrame:
    """One row per (family, seed): ELBO, its standard error, test accuracy, test NLL, MMD to
    the SGD target posterior; plus the group order |G| and whether log q_sym was exact."""
    spec = mlp_spec(settings.hidden)
    train = two_gaussians(settings.n_train, settings.data_seed, settings.separation)
    test = two_gaussians(settings.n_test, settings.data_seed + 1, settings.separation)
    # the target posterior: independent SGD runs, trained side by side
    target = stacked_mlp.train_stacked(
        spec["widths"],
        *train,
        range(10_000, 10_000 + settings.target_runs),
        epochs=settings.target_epochs,
        batch_size=settings.target_batch_size,
        lr=settings.target_lr,
        loss="cross_entropy",
    )
    rows = []
    for seed in settings.seeds:
        for family in FAMILIES:
            q, qsym = fit(spec, *train, family, seed, settings)
            result = evaluate(
                q, qsym, family, train, test, settings.eval_samples, settings.prior_std, seed
            )
            gen = torch.Generator().manual_seed(int(seed) + 1)
            draws = (
                q.sample_states(settings.mmd_samples, gen)
                if family == "mean_field"
                else qsym.sample_states(settings.mmd_samples, gen)
            )
            rows.append(
                {
                    "family": family,
                    "seed": int(seed),
                    "elbo": result.elbo,
                    "elbo_stderr": result.elbo_stderr,
                    "test_accuracy": result.test_accuracy,
                    "test_nll": result.test_nll,
                    "mmd_to_target": layerwise_mmd(target, draws),
                    "group_order": qsym.order,
                    "exact_log_q_sym": qsym.exact,
                }
            )
    return pl.DataFrame(rows)


def summary(table: pl.DataFrame) -> pl.DataFrame:
    """Mean over seeds per family."""
    return (
        table.group_by("family", maintain_order=True)
        .agg(
            pl.len().alias("seeds"),
            *(pl.col(c).mean() for c in ("elbo", "test_accuracy", "test_nll", "mmd_to_target")),
        )
        .with_columns(pl.lit(np.log(float(table["group_order"][0]))).alias("log_group_order"))
    )


def variational_alignment_curves(settings: SymmetrizedVi) -> pl.DataFrame:
    """Two mean-field posteriors of the toy task (the first seed and the next one), the path
    between them as fitted ("none") and after aligning B's means and stds to A's
    ("weight_matching"), at `alignment_points` points with `alignment_samples` draws each:
    the columns of `symbnn.alignment.interpolation.gaussian_curve` plus ``alignment``."""
    seeds = (settings.seeds[0], settings.seeds[0] + 1)
    points, samples = settings.alignment_points, settings.alignment_samples
    spec = mlp_spec(settings.hidden)
    train = two_gaussians(settings.n_train, settings.data_seed, settings.separation)
    test = two_gaussians(settings.n_test, settings.data_seed + 1, settings.separation)
    (mean_a, std_a), (mean_b, std_b) = (
        gaussian_state(fit(spec, *train, "mean_field", s, settings)[0]) for s in seeds
    )
    aligned_mean, aligned_std, _ = align_gaussian(mean_a, std_a, mean_b, std_b, unit_groups(spec))
    sets = {"train": train, "test": test}
    parts = [
        gaussian_curve(spec, mean_a, std_a, m, s, grid(points), sets, samples).with_columns(
            pl.lit(label).alias("alignment")
        )
        for label, m, s in (("none", mean_b, std_b), ("weight_matching", aligned_mean, aligned_std))
    ]
    return pl.concat(parts).select("alignment", "split", "t", "loss", "accuracy", "nll")
