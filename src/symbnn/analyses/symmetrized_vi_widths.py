"""Mean-field and symmetrised VI on one-hidden-layer MLPs of several widths on the packaged
digits, against a deep-ensemble reference posterior (after Gelberg et al., 2024).

Task. The packaged digits (4,000 training and 1,000 test MNIST images), average-pooled to
``image_size`` x ``image_size`` pixels and normalised, fitted by MLPs n_in-H-10 for every H in
``widths``. G = S_H permutes the hidden units; log|G| = log H! (about 205 nats for H = 64).

Families. q is a mean-field Gaussian over every weight and bias, fitted by the ELBO with
reparameterised mini-batch draws and Adam. The symmetrised posterior q_sym(w) = (1/|G|)
sum_g q(g w) (`symbnn.analyses.symmetrized_vi`) is fitted with the ELBO whose KL term uses
log q_sym. For one hidden layer the mean-field density factorises over hidden units: unit i
owns row i of the first weight, bias i and column i of the output weight (f = n_in + 1 + 10
numbers); write u_j(w) for unit j's numbers in w, q_i for unit i's factor of q, and
L_ij(w) = log q_i(u_j(w)). Then sum_g q(g w) = q_out(w) perm(exp L(w)), a permanent, and

    log q_sym(w) = log q(w) - log|G| + Omega(w),
    Omega(w) = log perm(exp L) - sum_i L_ii >= 0,

so  ELBO_sym(q) = ELBO_mf(q) + log|G| - E_q[Omega]: the constant log|G| plus the mean-field
ELBO of q, less the overlap E_q[Omega] of q's permuted copies (0 when they do not overlap).

Estimator. The permanent of an H x H matrix cannot be enumerated for H = 64 (64! terms), and
a Monte-Carlo average over uniformly drawn permutations almost never draws the few
permutations close to the identity that carry the overlap. Two deterministic bounds of it
instead, each O(H^2 f) per draw:

* upper: perm(A) <= prod_i sum_j A_ij (every permutation is among the maps rows -> columns),
  and the same over columns; the smaller one gives Omega_hi >= Omega. With it the reported
  ELBO is a certified lower bound of ELBO_sym (hence of log p(D)); the training objective
  uses it. It over-states the overlap: for k identical units it counts k log k where the
  truth is log k!.
* lower: the identity and the H(H-1)/2 transpositions alone (a sum of a subset of the
  nonnegative terms) give Omega_lo <= Omega, an ELBO that is an upper estimate.

The truth lies between; the table reports both (``overlap_lo``, ``overlap_hi``), so the
estimator's bias is bounded by their gap, and where the gap is 0 the ELBO is exact up to
Monte-Carlo noise. KL(q || p) is the closed form of two diagonal Gaussians; the expected
log-likelihood and Omega are averaged over ``eval_samples`` draws.

Predictions. A permutation does not change the network's function, so q_sym and q have the
same predictive: any difference in NLL, accuracy or ECE between the families comes from the
different q the two objectives fit. Likewise the NS MMD (MMD between canonical forms,
`symbnn.symmetry.canonicalize`, which removes permutations and scalings) sees q_sym and q
alike; the raw-weight MMD favours q_sym by construction (its draws are permutation-mixed, as
independent SGD runs are).
"""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import torch
from torch.nn import functional as F

from symbnn import metrics
from symbnn.analyses import stacked_mlp
from symbnn.data import load_dataset
from symbnn.settings import SymmetrizedViWidths
from symbnn.symmetry import apply_permutations, canonicalize, random_permutations, unit_groups
from symbnn.train.mlp_stacked import stacked_forward
from symbnn.train.seeding import build_seeded_model

FAMILIES = ("mean_field", "symmetrised")
State = dict[str, torch.Tensor]
W1, B1, W2, B2 = "layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias"
NAMES = (W1, B1, W2, B2)
LOG_2PI = math.log(2 * math.pi)

# ---------------------------------------------------------------- data


def pooled_digits(
    image_size: int, data_root: str | Path = "data", dataset: str = "digits"
) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """{split: (inputs (n, image_size^2), labels)}: normalised digits of ``dataset`` (the
    packaged ones or MNIST), average-pooled."""
    out = {}
    for split in ("train", "test"):
        data = load_dataset(dataset, split, data_root)
        images = data.normalize(data.images)
        images = F.adaptive_avg_pool2d(images, image_size) if image_size != 28 else images
        out[split] = (images.flatten(1), data.labels)
    return out


# ---------------------------------------------------------------- the permanent's bounds


def units(state: State) -> torch.Tensor:
    """(..., H, f) each hidden unit's numbers: incoming weights, bias, outgoing weights."""
    return torch.cat([state[W1], state[B1][..., None], state[W2].transpose(-1, -2)], dim=-1)


def unit_log_densities(theta: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """L (..., H, H) in float64, L[i, j] = log q_i(unit j of theta); theta (..., H, f), mu and
    sigma (H, f) or broadcastable (..., H, f). Expanded into matrix products (no H x H x f
    tensor); float64 keeps the cancellation of the expansion harmless."""
    theta, mu, sigma = theta.double(), mu.double(), sigma.double()
    a = sigma.pow(-2)
    quad = theta.square() @ a.transpose(-1, -2)  # (..., j, i): sum_f theta_jf^2 / sigma_if^2
    cross = theta @ (mu * a).transpose(-1, -2)
    own = (mu.square() * a).sum(-1) + 2 * torch.log(sigma).sum(-1) + LOG_2PI * mu.shape[-1]
    return (-0.5 * quad + cross).transpose(-1, -2) - 0.5 * own[..., :, None]


def overlap_bounds(L: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(lower, upper) bounds of Omega = log perm(exp L) - trace L, each (...,):
    lower from the identity and every transposition, upper from the row and column sums."""
    diag = torch.diagonal(L, dim1=-2, dim2=-1)
    trace = diag.sum(-1)
    rows = torch.logsumexp(L, -1).sum(-1)
    cols = torch.logsumexp(L, -2).sum(-1)
    upper = torch.minimum(rows, cols) - trace
    h = L.shape[-1]
    i, j = torch.triu_indices(h, h, 1)
    swaps = L[..., i, j] + L[..., j, i] - diag[..., i] - diag[..., j]
    lower = torch.logsumexp(
        torch.cat([torch.zeros_like(trace)[..., None], swaps], -1), -1
    )  # log(1 + sum_tau ...)
    return lower.clamp_min(0.0), upper.clamp_min(0.0)


# ---------------------------------------------------------------- replicas of mean-field q


class StackedMeanField(torch.nn.Module):
    """R mean-field Gaussians over an MLP's weights, stacked on a leading axis (R, *shape):
    fitted side by side (Adam is per-coordinate, so summing their losses fits each alone)."""

    def __init__(self, spec: dict, seeds: list[int], rho_init: float) -> None:
        super().__init__()
        inits = [build_seeded_model(spec, s).state_dict() for s in seeds]
        self.mu = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.stack([d[n] for d in inits]).float()) for n in NAMES]
        )
        self.rho = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.full_like(m, rho_init)) for m in self.mu]
        )

    def means(self) -> State:
        return dict(zip(NAMES, self.mu))

    def stds(self) -> State:
        return {n: F.softplus(r) for n, r in zip(NAMES, self.rho)}

    def draw(self, count: int, gen: torch.Generator | None) -> State:
        """(R, count, *shape) reparameterised draws."""
        out = {}
        for name, mu, sigma in zip(NAMES, self.mu, self.stds().values()):
            eps = torch.randn((mu.shape[0], count, *mu.shape[1:]), generator=gen)
            out[name] = mu[:, None] + sigma[:, None] * eps
        return out

    def kl(self, prior_std: float) -> torch.Tensor:
        """(R,) closed-form KL(q || N(0, prior_std^2 I))."""
        total = 0.0
        for mu, sigma in zip(self.mu, self.stds().values()):
            ratio = (sigma / prior_std).square()
            term = 0.5 * (ratio + (mu / prior_std).square() - 1.0 - torch.log(ratio))
            total = total + term.reshape(mu.shape[0], -1).sum(1)
        return total

    def unit_kl(self, prior_std: float) -> torch.Tensor:
        """(R, H) KL of each hidden unit's factor to the prior."""
        mu, sigma = units(self.means()), units(self.stds())
        ratio = (sigma / prior_std).square()
        return 0.5 * (ratio + (mu / prior_std).square() - 1.0 - torch.log(ratio)).sum(-1)

    def overlap(
        self, draws: State, replicas: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(lower, upper) of Omega for draws (R', S, *shape) of the replicas selected by
        ``replicas`` (a boolean mask; all by default) -> each (R', S)."""
        mu, sigma = units(self.means()), units(self.stds())
        if replicas is not None:
            mu, sigma = mu[replicas], sigma[replicas]
        return overlap_bounds(unit_log_densities(units(draws), mu[:, None], sigma[:, None]))


def flat(draws: State) -> State:
    return {n: t.reshape(-1, *t.shape[2:]) for n, t in draws.items()}


def log_likelihood(draws: State, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(R, S) sum over the batch of log p(y | x, w) per draw."""
    r, s = next(iter(draws.values())).shape[:2]
    logits = stacked_forward(flat(draws), x)
    nll = F.cross_entropy(
        logits.transpose(1, 2), y.expand(logits.shape[0], -1), reduction="none"
    ).sum(1)
    return -nll.reshape(r, s)


def fit(
    spec: dict,
    x: torch.Tensor,
    y: torch.Tensor,
    seeds: list[int],
    families: list[str],
    settings: SymmetrizedViWidths,
    gen_seed: int = 0,
) -> StackedMeanField:
    """Replica r (seed seeds[r]) maximises its family's ELBO (the symmetrised one with the
    upper bound of the overlap, i.e. a certified lower bound of ELBO_sym), by Adam on
    mini-batches of ``batch_size`` images."""
    q = StackedMeanField(spec, seeds, settings.rho_init)
    sym = torch.tensor([f == "symmetrised" for f in families])
    gen = torch.Generator().manual_seed(104729 + gen_seed)
    optimizer = torch.optim.Adam(q.parameters(), lr=settings.lr)
    n = len(x)
    batch = min(settings.batch_size, n)
    for _ in range(settings.steps):
        index = torch.randint(0, n, (batch,), generator=gen)
        w = q.draw(settings.elbo_samples, gen)
        fit_term = log_likelihood(w, x[index], y[index]).mean(1) * (n / batch)
        fit_term = fit_term - q.kl(settings.prior_std)
        if sym.any():
            _, upper = q.overlap({k: v[sym] for k, v in w.items()}, sym)
            fit_term = fit_term.index_add(0, sym.nonzero().flatten(), -upper.mean(1).float())
        loss = -fit_term.sum() / n
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return q


# ---------------------------------------------------------------- evaluation


def predictive(draws: State, x: torch.Tensor) -> torch.Tensor:
    """(R, N, C) predictive mean probabilities over the S draws of each replica."""
    r, s = next(iter(draws.values())).shape[:2]
    probs = torch.softmax(stacked_forward(flat(draws), x).double(), -1)
    return probs.reshape(r, s, *probs.shape[1:]).mean(1)


def prediction_metrics(probs: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    nll = -torch.log(probs.gather(1, y[:, None]).clamp_min(1e-300)).mean()
    return {
        "test_nll": float(nll),
        "test_accuracy": metrics.accuracy(probs, y),
        "test_ece": metrics.ece(probs, y),
    }


def canonical(state: State, spec: dict) -> State:
    return canonicalize(
        {k: v.double() for k, v in state.items()}, unit_groups(spec), on_dead="keep"
    ).state


def layerwise_mmd(reference: State, samples: State) -> float:
    # local: keeps scipy out of importing symbnn.analyses.symmetrized_vi_widths
    from symbnn.analyses.symmetrized_vi import layerwise_mmd as mmd

    return mmd({k: reference[k] for k in NAMES}, {k: samples[k] for k in NAMES})


@torch.no_grad()
def evaluate(
    q: StackedMeanField,
    spec: dict,
    families: list[str],
    data: dict[str, tuple[torch.Tensor, torch.Tensor]],
    reference: State,
    settings: SymmetrizedViWidths,
    gen_seed: int = 0,
) -> list[dict]:
    """One row per replica: ELBO split, overlap bounds, test metrics, MMDs to the reference."""
    gen = torch.Generator().manual_seed(7919 + gen_seed)
    x, y = data["train"]
    log_g = math.lgamma(spec["widths"][1] + 1)
    w = q.draw(settings.eval_samples, gen)
    expected_ll = torch.stack(
        [
            log_likelihood({k: v[r : r + 1] for k, v in w.items()}, x, y)[0]
            for r in range(len(families))
        ]
    ).mean(1)
    kl = q.kl(settings.prior_std)
    lower, upper = q.overlap(w)
    probs = predictive(w, data["test"][0])
    unit_kl = q.unit_kl(settings.prior_std)
    sym_spec = unit_groups(spec)
    ref_canonical = canonical(reference, spec)
    rows = []
    for r, family in enumerate(families):
        mf_elbo = float(expected_ll[r] - kl[r])
        symmetrized = family == "symmetrised"
        constant = log_g if symmetrized else 0.0
        hi, lo = float(upper[r].mean()), float(lower[r].mean())
        elbo = mf_elbo + constant - (hi if symmetrized else 0.0)
        samples = {k: v[r, : settings.mmd_samples] for k, v in w.items()}
        if symmetrized:  # q_sym's draws: g w, g uniform on G
            perms = random_permutations(sym_spec, settings.mmd_samples, gen)
            samples = apply_permutations(samples, sym_spec, perms)
        rows.append(
            {
                "family": family,
                "elbo": elbo,
                "elbo_upper": elbo + (hi - lo if symmetrized else 0.0),
                "log_group_order": constant,
                "elbo_fit": elbo - constant,
                "expected_log_likelihood": float(expected_ll[r]),
                "kl": float(kl[r]),
                "overlap_lo": lo,
                "overlap_hi": hi,
                **prediction_metrics(probs[r], data["test"][1]),
                "units_at_prior": float((unit_kl[r] < 1.0).float().mean()),
                "ns_mmd": layerwise_mmd(ref_canonical, canonical(samples, spec)),
                "mmd": layerwise_mmd(reference, samples),
            }
        )
    return rows


def reference_posterior(
    spec: dict, x: torch.Tensor, y: torch.Tensor, settings: SymmetrizedViWidths
) -> State:
    """A deep ensemble: ``reference_runs`` independent SGD runs trained side by side."""
    return stacked_mlp.train_stacked(
        spec["widths"],
        x,
        y,
        range(10_000, 10_000 + settings.reference_runs),
        epochs=settings.reference_epochs,
        batch_size=settings.reference_batch_size,
        lr=settings.reference_lr,
        loss="cross_entropy",
    )


def compare(settings: SymmetrizedViWidths, data_root: str | Path = "data") -> pl.DataFrame:
    """One row per (width, family, seed), plus one ``reference`` row per width (the deep
    ensemble's own test metrics; its ELBO and MMD columns are null)."""
    data = pooled_digits(settings.image_size, data_root, settings.dataset)
    x, y = data["train"]
    seeds = [int(s) for s in settings.seeds]
    families = [f for f in FAMILIES for _ in seeds]
    rows = []
    for width in settings.widths:
        spec = stacked_mlp.mlp_spec([x.shape[1], width, 10])
        reference = reference_posterior(spec, x, y, settings)
        probs = torch.softmax(stacked_forward(reference, data["test"][0]).double(), -1).mean(0)
        rows.append(
            {"width": width, "family": "reference", "seed": None}
            | prediction_metrics(probs, data["test"][1])
        )
        q = fit(spec, x, y, seeds * len(FAMILIES), families, settings, gen_seed=width)
        evaluated = evaluate(q, spec, families, data, reference, settings, gen_seed=width)
        for seed, row in zip(seeds * len(FAMILIES), evaluated):
            rows.append({"width": width, "seed": seed} | row)
    return pl.DataFrame(rows, infer_schema_length=None).select(
        "width", "family", "seed", *[c for c in COLUMNS if c in rows[1]]
    )


COLUMNS = (
    "elbo",
    "elbo_upper",
    "log_group_order",
    "elbo_fit",
    "expected_log_likelihood",
    "kl",
    "overlap_lo",
    "overlap_hi",
    "test_nll",
    "test_accuracy",
    "test_ece",
    "units_at_prior",
    "ns_mmd",
    "mmd",
)
# the summary leaves out the ELBO's parts that its fit column already sums up
SUMMARY = tuple(c for c in COLUMNS if c not in ("elbo_upper", "expected_log_likelihood", "kl"))


def _fmt(mean: float | None, std: float | None, digits: int) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return ""
    if std is None or math.isnan(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def summary(table: pl.DataFrame) -> pl.DataFrame:
    """Mean ± standard deviation over seeds per (width, family), as text (``seeds`` is 1 for
    the reference: one ensemble); the ELBO columns in
    nats for the whole training set (``elbo`` = ``log_group_order`` + ``elbo_fit``)."""
    digits = {"test_accuracy": 3, "test_ece": 3, "test_nll": 3, "units_at_prior": 2}
    digits |= {"ns_mmd": 4, "mmd": 4}
    grouped = table.group_by("width", "family", maintain_order=True).agg(
        pl.len().alias("seeds"),
        *[pl.col(c).mean().alias(f"{c}_mean") for c in SUMMARY],
        *[pl.col(c).std().alias(f"{c}_std") for c in SUMMARY],
    )
    out = []
    for row in grouped.to_dicts():
        out.append(
            {"width": row["width"], "family": row["family"], "seeds": row["seeds"]}
            | {c: _fmt(row[f"{c}_mean"], row[f"{c}_std"], digits.get(c, 1)) for c in SUMMARY}
        )
    return pl.DataFrame(out)


def gaps(table: pl.DataFrame) -> pl.DataFrame:
    """Per width, symmetrised minus mean-field, paired by seed (mean ± std over seeds): the
    ELBO gain, the part of it that is log|G|, and the differences of the fit, NLL and NS MMD."""
    vi = table.filter(pl.col("family") != "reference")
    mf = vi.filter(pl.col("family") == "mean_field")
    sym = vi.filter(pl.col("family") == "symmetrised")
    paired = mf.join(sym, on=["width", "seed"], suffix="_sym")
    cols = ("elbo", "elbo_fit", "test_nll", "test_accuracy", "ns_mmd")
    diffs = paired.select(
        "width",
        "log_group_order_sym",
        *[(pl.col(f"{c}_sym") - pl.col(c)).alias(c) for c in cols],
    )
    grouped = diffs.group_by("width", maintain_order=True).agg(
        pl.col("log_group_order_sym").first().alias("log_group_order"),
        *[pl.col(c).mean().alias(f"{c}_mean") for c in cols],
        *[pl.col(c).std().alias(f"{c}_std") for c in cols],
    )
    digits = {"test_nll": 3, "test_accuracy": 3, "ns_mmd": 4}
    return pl.DataFrame(
        [
            {"width": r["width"], "log_group_order": f"{r['log_group_order']:.1f}"}
            | {f"{c}_gain": _fmt(r[f"{c}_mean"], r[f"{c}_std"], digits.get(c, 1)) for c in cols}
            for r in grouped.to_dicts()
        ]
    )
