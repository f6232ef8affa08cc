"""Variational BNN by Bayes by backprop (Blundell et al., 2015) as a sampler of plain weights.

Maths. Every parameter tensor theta_i of the model gets a mean-field Gaussian factor

    q(w_i) = N(mu_i, sigma_i^2),   sigma_i = softplus(rho_i) = log(1 + exp(rho_i)),

drawn by reparameterisation w_i = mu_i + sigma_i * eps_i, eps_i ~ N(0, 1), so gradients flow
to (mu, rho). The prior is the scale mixture, independently per weight,

    p(w) = pi N(w; 0, s1^2) + (1 - pi) N(w; 0, s2^2),

with log p computed as logsumexp(log pi + log N(w; 0, s1^2), log(1 - pi) + log N(w; 0, s2^2))
(one component only when pi is 0 or 1). Bayes by backprop minimises the negative ELBO

    F(mu, rho) = KL(q || p) - E_q[log p(D | w)],

estimated per minibatch B of a data set of size N and per step from K reparameterised draws
w^(1..K) as

    loss = (1/K) sum_k mean_{(x,y) in B} nll(f(x; w^(k)), y)
           + kl_weight * (1/K) sum_k [log q(w^(k)) - log p(w^(k))] / N,

which is F / N in expectation when kl_weight = 1 and nll is -log p(y | x, w) (cross-entropy
for classification by default; the likelihood is pluggable, e.g. Gaussian for regression).
The forward pass uses `torch.func.functional_call` on the plain model with the drawn
parameters, so any shipped architecture works unchanged. BatchNorm running statistics are
not variational: the module's own buffers are updated by the train-mode forwards (one per
draw) and copied into every sample.

Setup of Laurent et al., "A Symmetry-Aware Exploration of Bayesian Neural Network
Posteriors" (ICLR 2024), appendix B.1: BLiTZ's default priors (pi = 1, s1 = 0.1, s2 = 0.4, so
p = N(0, 0.1^2)), posterior rho initialised to -7, the experiment's epochs, 3 Monte Carlo
ELBO samples per step, weight decay disabled. Here mu starts at the mode seed's initial
weights (`build_seeded_model`), training runs `fit_module` with the experiment recipe
changed by settings.recipe in the mode seed's data order (reparameterisation noise from
a generator derived from the mode seed), and the `count` samples are independent draws from
the trained q with a generator seeded by `seed`. The modes of a block train together in the
batched trainer where it has a hand-written pass for the model
(`symbnn.methods.bnn.stacked`), else one by one (`train_bnn`, the reference).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence

import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from symbnn.data.core import ImageData
from symbnn.methods.base import (
    Fitted,
    Mode,
    Problem,
    fits_in_batch,
    generator,
    retried,
    train_modes_until_converged,
    train_until_converged,
)
from symbnn.methods.bnn.noise import noise_generator
from symbnn.methods.bnn.stacked import train_bnn_batched
from symbnn.settings import Bnn
from symbnn.train.evaluate import accuracy
from symbnn.train.loop import fit_module
from symbnn.train.seeding import build_seeded_model

BNN = Bnn()  # library defaults are the settings layer's

_LOG_2PI = math.log(2 * math.pi)

Likelihood = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (outputs, targets) -> mean nll


# ---------------------------------------------------------------- densities and KL


def log_normal(
    x: torch.Tensor, mean: torch.Tensor | float, std: torch.Tensor | float
) -> torch.Tensor:
    """Elementwise log N(x; mean, std^2)."""
    std = torch.as_tensor(std, dtype=x.dtype, device=x.device)
    return -0.5 * _LOG_2PI - torch.log(std) - 0.5 * ((x - mean) / std) ** 2


def log_scale_mixture_prior(
    w: torch.Tensor, pi: float, sigma1: float, sigma2: float
) -> torch.Tensor:
    """Elementwise log(pi N(w; 0, sigma1^2) + (1 - pi) N(w; 0, sigma2^2)), via logsumexp."""
    if pi >= 1.0:
        return log_normal(w, 0.0, sigma1)
    if pi <= 0.0:
        return log_normal(w, 0.0, sigma2)
    parts = torch.stack(
        [math.log(pi) + log_normal(w, 0.0, sigma1), math.log1p(-pi) + log_normal(w, 0.0, sigma2)]
    )
    return torch.logsumexp(parts, dim=0)


def log_q_from_noise(sigma: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """Elementwise log N(mu + sigma eps; mu, sigma^2) = -log(2 pi)/2 - log sigma - eps^2/2."""
    return -0.5 * _LOG_2PI - torch.log(sigma) - 0.5 * eps**2


def kl_sample(
    w: torch.Tensor, sigma: torch.Tensor, eps: torch.Tensor, pi: float, sigma1: float, sigma2: float
) -> torch.Tensor:
    """One-draw Monte-Carlo estimate log q(w) - log p(w) for w = mu + sigma eps (summed)."""
    return (log_q_from_noise(sigma, eps) - log_scale_mixture_prior(w, pi, sigma1, sigma2)).sum()


def gaussian_kl(mu: torch.Tensor, sigma: torch.Tensor, prior_sigma: float) -> torch.Tensor:
    """Closed-form KL(N(mu, sigma^2) || N(0, prior_sigma^2)), summed over elements: the
    pi = 1 case of the Monte-Carlo estimator's expectation."""
    ratio = (sigma / prior_sigma) ** 2
    return 0.5 * (ratio + (mu / prior_sigma) ** 2 - 1.0 - torch.log(ratio)).sum()


def cross_entropy_nll(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(outputs, targets)


def gaussian_nll(noise_std: float) -> Likelihood:
    """Mean over the batch of -log N(y; f(x), noise_std^2) (regression likelihood)."""

    def nll(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        per_point = -log_normal(targets.reshape(outputs.shape), outputs, noise_std)
        return per_point.reshape(outputs.shape[0], -1).sum(1).mean()

    return nll


# ---------------------------------------------------------------- the variational model


class MeanFieldBNN(nn.Module):
    """Mean-field Gaussian q over every parameter of `net`. Its parameters are exactly
    `mu` and `rho` (one tensor each per parameter of `net`, in `names` order); `net` itself is
    kept unregistered and only supplies the architecture and its BatchNorm buffers."""

    def __init__(
        self,
        net: nn.Module,
        rho_init: float,
        prior_pi: float,
        prior_sigma1: float,
        prior_sigma2: float,
        noise: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        object.__setattr__(self, "net", net)  # not a submodule: its parameters are not ours
        params = dict(net.named_parameters())
        self.names = list(params)
        self.mu = nn.ParameterList([nn.Parameter(p.detach().clone()) for p in params.values()])
        self.rho = nn.ParameterList(
            [nn.Parameter(torch.full_like(p.detach(), float(rho_init))) for p in params.values()]
        )
        self.prior = (float(prior_pi), float(prior_sigma1), float(prior_sigma2))
        self.noise = noise  # generator for training draws; None = global RNG

    def train(self, mode: bool = True) -> MeanFieldBNN:
        super().train(mode)
        self.net.train(mode)
        return self

    def _apply(self, fn, recurse=True):  # .to(device) etc. also move the wrapped network
        self.net._apply(fn)
        return super()._apply(fn, recurse)

    def sigmas(self) -> list[torch.Tensor]:
        return [F.softplus(rho) for rho in self.rho]

    def draw(
        self, gen: torch.Generator | None = None
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One reparameterised draw w = mu + sigma eps and its estimate log q(w) - log p(w)."""
        gen = self.noise if gen is None else gen
        weights, kl = {}, torch.zeros((), dtype=self.mu[0].dtype, device=self.mu[0].device)
        for name, mu, sigma in zip(self.names, self.mu, self.sigmas()):
            eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype, device=mu.device)
            w = mu + sigma * eps
            weights[name] = w
            kl = kl + kl_sample(w, sigma, eps, *self.prior)
        return weights, kl

    def forward_with(self, weights: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        # buffers are not passed: the network's own BatchNorm statistics are used (and updated)
        return functional_call(self.net, weights, (x,), strict=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, _ = self.draw()
        return self.forward_with(weights, x)

    def elbo_loss(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        n_data: int,
        samples: int = BNN.elbo_samples,
        kl_weight: float = BNN.kl_weight,
        nll: Likelihood = cross_entropy_nll,
    ) -> torch.Tensor:
        """(1/K) sum_k [nll(batch; w_k) + kl_weight (log q(w_k) - log p(w_k)) / n_data]."""
        total = 0.0
        for _ in range(samples):
            weights, kl = self.draw()
            total = total + nll(self.forward_with(weights, x), y) + kl_weight * kl / n_data
        return total / samples

    @torch.no_grad()
    def sample_states(self, count: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """`count` draws from q as stacked plain state dicts (CPU), the network's buffers
        (BatchNorm statistics) copied into each; draws come sample after sample from `gen`."""
        template = self.net.state_dict()
        out = {
            name: t.detach().cpu().unsqueeze(0).repeat(count, *([1] * t.ndim)).clone()
            for name, t in template.items()
        }
        mus = [m.detach().cpu() for m in self.mu]
        sigmas = [s.detach().cpu() for s in self.sigmas()]
        for k in range(count):
            for name, mu, sigma in zip(self.names, mus, sigmas):
                eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype)
                out[name][k] = mu + sigma * eps
        return out


def variational_model(problem: Problem, seed: int, settings: Bnn) -> MeanFieldBNN:
    """q before training: mu at seed `seed`'s initial weights, rho at settings.rho_init."""
    net = build_seeded_model(problem.model_spec, seed).to(problem.device)
    return MeanFieldBNN(
        net,
        settings.rho_init,
        settings.prior_pi,
        settings.prior_sigma1,
        settings.prior_sigma2,
        noise_generator(seed, problem.device),
    )


def train_bnn(problem: Problem, seed: int, settings: Bnn) -> MeanFieldBNN:
    """Bayes by backprop from seed `seed`'s initial weights, with `fit_module`."""
    recipe = settings.recipe.apply(problem.recipe)
    bnn = variational_model(problem, seed, settings)
    n_data = len(problem.train)

    def loss_fn(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return model.elbo_loss(x, y, n_data, settings.elbo_samples, settings.kl_weight)

    fit_module(bnn, recipe, problem.train, seed, problem.device, loss_fn)
    return bnn.eval()


def mean_accuracy(bnn: MeanFieldBNN, test: ImageData, device: str) -> float:
    """Test accuracy of the network at q's means (the convergence check of a fit)."""
    net = copy.deepcopy(bnn.net)
    with torch.no_grad():
        for name, mu in zip(bnn.names, bnn.mu):
            net.get_parameter(name).copy_(mu)
    return accuracy(net, test, device)


def train_converged_bnn(
    problem: Problem,
    seed: int,
    settings: Bnn,
    what: str = "bnn",
    record: list[float] | None = None,
) -> tuple[MeanFieldBNN, int, float]:
    """(q, seed used, test accuracy at q's means): Bayes by backprop from ``seed``, then from
    fresh derived seeds while the means miss the target's convergence threshold (each
    attempt's accuracy appended to `record`)."""
    settings.recipe.apply(problem.recipe)  # fail before training
    return train_until_converged(
        what,
        problem,
        seed,
        lambda s: train_bnn(problem, s, settings),
        lambda q: mean_accuracy(q, problem.test, problem.device),
        record,
    )


def with_parameters(
    q: MeanFieldBNN, mus: Sequence[torch.Tensor], rhos: Sequence[torch.Tensor]
) -> MeanFieldBNN:
    """`q` with its means and rhos set to `mus` and `rhos` (tensors in `q.names` order)."""
    with torch.no_grad():
        for param, value in zip([*q.mu, *q.rho], [*mus, *rhos], strict=True):
            param.copy_(value)
    return q


def gaussian_state(q: MeanFieldBNN) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(means, standard deviations) of q as state dicts on the CPU (buffers carry std 0)."""
    mean = {k: v.detach().cpu().clone() for k, v in q.net.state_dict().items()}
    std = {k: torch.zeros_like(v) for k, v in mean.items()}
    for name, mu, sigma in zip(q.names, q.mu, q.sigmas()):
        mean[name], std[name] = mu.detach().cpu().clone(), sigma.detach().cpu().clone()
    return mean, std


def fit_modes(
    problem: Problem,
    modes: list[Mode],
    settings: Bnn,
    seeds: list[int],
    counts: list[int | None],
) -> list[Fitted]:
    """Train q for each mode's seed (the modes' states are ignored), retrying fresh seeds
    for the modes whose network at q's means misses the target's convergence threshold:
    their means, rhos and the network's buffers."""
    recipe = settings.recipe.apply(problem.recipe)  # fail before training
    if fits_in_batch(problem, recipe):

        def train(seeds: list[int]) -> list[MeanFieldBNN]:
            fitted = train_bnn_batched(problem, seeds, settings, progress=True)
            return [
                with_parameters(
                    variational_model(problem, s, settings),
                    list(mu.values()),
                    list(rho.values()),
                )
                for s, (mu, rho) in zip(seeds, fitted, strict=True)
            ]
    else:

        def train(seeds: list[int]) -> list[MeanFieldBNN]:
            return [train_bnn(problem, s, settings) for s in seeds]

    attempts: list[list[float]] = [[] for _ in modes]
    trained = train_modes_until_converged(
        "bnn",
        problem,
        [mode.seed for mode in modes],
        train,
        lambda q: mean_accuracy(q, problem.test, problem.device),
        attempts,
    )
    return [
        {
            "net": {name: t.detach().cpu() for name, t in bnn.net.state_dict().items()},
            "mu": [m.detach().cpu() for m in bnn.mu],
            "rho": [r.detach().cpu() for r in bnn.rho],
            "train_seed": used,
            "test_accuracy": score,
            **retried(problem, tries),
        }
        for (bnn, used, score), tries in zip(trained, attempts, strict=True)
    ]


def sample(
    problem: Problem, fitted: Fitted, count: int, settings: Bnn, seed: int
) -> dict[str, torch.Tensor]:
    """`count` independent draws from the trained q."""
    bnn = variational_model(problem, 0, settings)
    bnn.net.load_state_dict(fitted["net"])
    with_parameters(bnn, fitted["mu"], fitted["rho"])
    return bnn.eval().sample_states(count, generator(seed))


__all__ = [
    "log_normal",
    "log_scale_mixture_prior",
    "log_q_from_noise",
    "kl_sample",
    "gaussian_kl",
    "cross_entropy_nll",
    "gaussian_nll",
    "MeanFieldBNN",
    "gaussian_state",
    "with_parameters",
    "train_converged_bnn",
    "noise_generator",
    "variational_model",
    "train_bnn",
    "mean_accuracy",
]
