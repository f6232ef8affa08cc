"""Mean-field variational BNNs on OptuNet with the paper's prior N(0, 0.1^2) and rho0 = -7,
the same epochs, batches (symbnn's data order of seed 0) and learning rates, 3 ELBO samples per
step, means starting at seed 0's initial weights: symbnn's Bayes by backprop against

- BLiTZ's Bayesian layers (`blitz-bayesian-pytorch`), the paper's library;
- bayesian-torch's mean-field layers (`Conv2dReparameterization`, `LinearReparameterization`);
- posteriors' diagonal VI (`posteriors.vi.diag`, torchopt's SGD with the same schedule).

symbnn's side is its method as the workflow runs it (`BayesByBackprop`: for OptuNet on a CPU
the batched trainer's hand-written pass, one thread for one model: the row says so).

Each row: seconds per epoch (each side after an untimed warm-up on one batch), and accuracy and
NLL of K draws; and whether it optimises the same objective, the ELBO / N,
mean CE + (log q - log p) / N.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from peer_context import Context, ensemble_probs, ensemble_quality, stacked
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
from torch.func import functional_call
from torch.nn import functional as F

from symbnn.data.core import ImageData
from symbnn.methods.base import Mode
from symbnn.methods.bnn import BayesByBackprop
from symbnn.settings import Bnn
from symbnn.train.loop import fit_module, seed_batches
from symbnn.train.seeding import build_seeded_model

PAPER_PRIOR = {  # BLiTZ's keywords for the paper's prior
    "prior_pi": 1.0,
    "prior_sigma_1": 0.1,
    "prior_sigma_2": 0.4,
    "posterior_rho_init": -7.0,
}
SEED = 0


@dataclasses.dataclass
class _Setup:
    """What every side shares: settings, recipe, the job's case and its warm-up data."""

    ctx: Context
    settings: Bnn
    recipe: object
    case: str
    tiny: ImageData

    def quality(self, probs: torch.Tensor, m: Measured, epochs: int) -> str:
        per_epoch = f"{m.wall / epochs:.2f} s per epoch (training and draws)"
        return f"{ensemble_quality(probs, self.ctx.test.labels)}; {per_epoch}"

    @torch.no_grad()
    def draws(self, model: nn.Module) -> torch.Tensor:
        """K stochastic forward passes on the test images (a draw of the weights each)."""
        model.eval()
        x = self.ctx.test.normalize(self.ctx.test.images)
        return torch.stack([torch.softmax(model(x), -1) for _ in range(self.ctx.ensemble)])


def _seeded_means(model: nn.Module, spec: dict, names: dict[str, str]) -> None:
    """The means of ``model`` at seed SEED's initial weights (OptuNet's names -> the peer's)."""
    net = build_seeded_model(spec, SEED)
    with torch.no_grad():
        for name, value in net.state_dict().items():
            layer, kind = name.rsplit(".", 1)  # conv1.weight -> conv1, weight
            model.get_parameter(f"{layer}.{names[kind]}").copy_(value)


def _optunet_of(layers: dict[str, nn.Module], pool: int):
    class PeerOptuNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name, layer in layers.items():
                setattr(self, name, layer)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.max_pool2d(F.relu(self.conv1(x)), pool, pool)
            x = F.relu(self.conv2(x)).mean(dim=(2, 3))
            return self.fc2(F.relu(self.fc1(x)))

    return PeerOptuNet


def blitz_optunet(spec: dict, own_init: bool) -> nn.Module:
    """OptuNet of BLiTZ's Bayesian layers with the paper's prior; means at seed 0's initial
    weights (``own_init``: BLiTZ's own N(0, 0.1^2))."""
    from blitz.modules import BayesianConv2d, BayesianLinear
    from blitz.utils import variational_estimator

    net = build_seeded_model(spec, SEED)
    c1, c2 = net.conv1, net.conv2
    layers = {
        "conv1": BayesianConv2d(
            c1.in_channels, c1.out_channels, c1.kernel_size, bias=False, **PAPER_PRIOR
        ),
        "conv2": BayesianConv2d(
            c2.in_channels,
            c2.out_channels,
            c2.kernel_size,
            groups=c2.groups,
            bias=False,
            **PAPER_PRIOR,
        ),  # fmt: skip
        "fc1": BayesianLinear(net.fc1.in_features, net.fc1.out_features, **PAPER_PRIOR),
        "fc2": BayesianLinear(net.fc2.in_features, net.fc2.out_features, **PAPER_PRIOR),
    }
    model = variational_estimator(_optunet_of(layers, net.pool_size))()
    if not own_init:
        _seeded_means(model, spec, {"weight": "weight_mu", "bias": "bias_mu"})
    return model


def bayesian_torch_optunet(spec: dict, settings: Bnn) -> nn.Module:
    """OptuNet of bayesian-torch's reparameterised layers, prior N(0, sigma1^2) (its
    `prior_variance` is the prior's standard deviation: it fills prior_weight_sigma)."""
    from bayesian_torch.layers import Conv2dReparameterization, LinearReparameterization

    net = build_seeded_model(spec, SEED)
    c1, c2 = net.conv1, net.conv2
    prior = {
        "prior_mean": 0.0,
        "prior_variance": settings.prior_sigma1,
        "posterior_rho_init": settings.rho_init,
    }
    layers = {
        "conv1": Conv2dReparameterization(
            c1.in_channels, c1.out_channels, c1.kernel_size[0], bias=False, **prior
        ),
        "conv2": Conv2dReparameterization(
            c2.in_channels,
            c2.out_channels,
            c2.kernel_size[0],
            groups=c2.groups,
            bias=False,
            **prior,
        ),  # fmt: skip
        "fc1": LinearReparameterization(net.fc1.in_features, net.fc1.out_features, **prior),
        "fc2": LinearReparameterization(net.fc2.in_features, net.fc2.out_features, **prior),
    }
    for layer in layers.values():
        layer.dnn_to_bnn_flag = True  # forward returns the output alone
    model = _optunet_of(layers, net.pool_size)()
    with torch.no_grad():  # OptuNet's convolutions have no bias; the peer's name it "kernel"
        for name in ("conv1", "conv2"):
            model.get_parameter(f"{name}.mu_kernel").copy_(getattr(net, name).weight)
        for name in ("fc1", "fc2"):
            model.get_parameter(f"{name}.mu_weight").copy_(getattr(net, name).weight)
            model.get_parameter(f"{name}.mu_bias").copy_(getattr(net, name).bias)
    return model


def _bayesian_torch_kl(model: nn.Module) -> torch.Tensor:
    return sum(m.kl_loss() for m in model.modules() if hasattr(m, "kl_loss"))


def _posteriors_vi(setup: _Setup, train: ImageData):
    """posteriors' diagonal VI on the plain OptuNet: log posterior = mean log-likelihood +
    log prior / N at temperature 1 / N (its NELBO is then symbnn's loss), log sd starting
    at log softplus(rho0), torchopt's SGD with the recipe's momentum and per-epoch rates."""
    import posteriors
    import torchopt

    ctx, settings, recipe = setup.ctx, setup.settings, setup.recipe
    model = build_seeded_model(ctx.optunet_spec, SEED)
    n, per_epoch = len(ctx.train), math.ceil(len(train) / recipe.batch_size)

    def log_posterior(params, batch):
        x, y = batch
        logits = functional_call(model, params, (x,))
        prior = posteriors.diag_normal_log_prob(params, 0.0, settings.prior_sigma1)
        return -F.cross_entropy(logits, y) + prior / n, logits

    def lr(count) -> float:
        return recipe.lr_at(min(int(count) // per_epoch, recipe.epochs - 1))

    optimizer = torchopt.sgd(lr=lr, momentum=recipe.momentum, nesterov=recipe.nesterov)
    sd0 = math.log(F.softplus(torch.tensor(settings.rho_init)).item())
    # stl off: its default sticking-the-landing gradient of log q on the means is noise of
    # size 1 / (sigma N), which at rho0 = -7 throws the means far off in the first steps
    transform = posteriors.vi.diag.build(
        log_posterior, optimizer, temperature=1.0 / n, n_samples=settings.elbo_samples,
        stl=False, init_log_sds=sd0,
    )  # fmt: skip
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    state = transform.init(params)
    batches = seed_batches(train, recipe.batch_size, SEED, recipe.epochs, "cpu", recipe.augment)
    for _, x, y in batches:
        state, _ = transform.update(state, (x, y), inplace=True)
    draws = posteriors.vi.diag.sample(state, (ctx.ensemble,))
    return stacked([{k: v[i] for k, v in draws.items()} for i in range(ctx.ensemble)])


def _peer_rows(setup: _Setup, mine: Measured, threads: int) -> list[Row]:
    """BLiTZ's, bayesian-torch's and posteriors' rows against symbnn's run ``mine``."""
    ctx, settings, recipe, case = setup.ctx, setup.settings, setup.recipe, setup.case
    job, epochs, rows = JOB, recipe.epochs, []

    def elbo_fit(build, kl):
        def fit(train: ImageData = ctx.train) -> torch.Tensor:
            torch.manual_seed(SEED)  # both libraries draw their noise from the global generator
            model = build()

            def loss(m: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
                nll = sum(F.cross_entropy(m(x), y) for _ in range(settings.elbo_samples))
                return nll / settings.elbo_samples + settings.kl_weight * kl(m) / len(ctx.train)

            fit_module(model, recipe, train, SEED, "cpu", loss)
            return setup.draws(model)

        return fit

    def blitz_kl(m: nn.Module) -> torch.Tensor:
        return m.nn_kl_divergence()

    peers = [
        (
            "blitz.modules", "blitz-bayesian-pytorch", "pip install --no-deps blitz-bayesian-pytorch",
            elbo_fit(lambda: blitz_optunet(ctx.optunet_spec, ctx.blitz_own_init), blitz_kl),
            "yes: the ELBO / N with a sampled KL (log q - log p at the drawn weights)",
        ),
        (
            "bayesian_torch", "bayesian-torch", "pip install --no-deps bayesian-torch",
            elbo_fit(lambda: bayesian_torch_optunet(ctx.optunet_spec, settings),
                     _bayesian_torch_kl),
            "no: its KL term is each layer's mean KL per weight (the sum divided by the layer's "
            "size), so the prior weighs far less; analytic Gaussian KL",
        ),
        (
            "posteriors", "posteriors", "pip install --no-deps posteriors torchopt optree tensordict",
            lambda train=ctx.train: ensemble_probs(
                ctx.optunet_spec, _posteriors_vi(setup, train), ctx.test, ctx.test
            ),
            "same objective (the ELBO / N) and estimator (its sticking-the-landing default "
            "off); sigma as exp(log sd), not softplus(rho)",
        ),
    ]  # fmt: skip
    for module, dist, install, fit, same in peers:
        found, why = peer(module, install)
        if found is None:
            rows.append(missing(job, case, dist, threads, why))
            continue
        run = measure(fit, warmup=lambda fit=fit: fit(setup.tiny))
        library = version(dist) + (
            " (own mean init)" if "blitz" in dist and ctx.blitz_own_init else ""
        )
        rows.append(
            peer_row(
                job, case, library, threads, run, mine, setup.quality(run.result, run, epochs), same
            )
        )
    return rows


JOB = "variational BNN (train + K draws)"


def rows_bnn(ctx: Context, threads: int) -> list[Row]:
    """symbnn's Bayes by backprop (its method as the workflow runs it: the batched trainer's
    hand-written OptuNet pass) and the three peers at ``threads`` threads. Each side first
    trains on one batch, untimed (one-off imports and compiles)."""
    settings = Bnn()  # the paper's priors: pi 1, sigma1 0.1, rho0 -7; 3 ELBO samples; no decay
    problem = ctx.problem(epochs=ctx.bnn_epochs)
    recipe = settings.recipe.apply(problem.recipe)
    case = (
        f"OptuNet, {recipe.epochs} epochs x {math.ceil(len(ctx.train) / recipe.batch_size)} "
        f"steps, {settings.elbo_samples} ELBO samples, prior N(0, {settings.prior_sigma1}^2), "
        f"{ctx.ensemble} draws"
    )
    setup = _Setup(ctx, settings, recipe, case, ctx.train.limited(recipe.batch_size))

    def ours(train: ImageData = ctx.train) -> torch.Tensor:
        bnn, fitting = BayesByBackprop(), dataclasses.replace(problem, train=train)
        fitted = bnn.fit(fitting, Mode(SEED, {}), settings, SEED, ctx.ensemble)
        samples = bnn.sample(fitting, fitted, ctx.ensemble, settings, SEED)
        return ensemble_probs(ctx.optunet_spec, samples, ctx.test, ctx.test)

    seen: list[tuple[int, str]] = []
    with symbnn_threads(seen):
        mine = measure(ours, warmup=lambda: ours(setup.tiny))
    quality = setup.quality(mine.result, mine, recipe.epochs)
    rows = [ours_row(JOB, case, threads, mine, quality, "symbnn" + own_threads(seen, threads))]
    return rows + _peer_rows(setup, mine, threads)
