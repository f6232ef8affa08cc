"""Bayes by backprop for a block of modes in one batched run (`symbnn.methods.bnn.fit` has the
method, its maths and the loop reference `train_bnn`).

K modes with S ELBO draws each are K * S stacked networks of the batched trainer's
hand-written pass: network (k, s) carries the draw w = mu_k + sigma_k * eps_(k,s) and reads
mode k's minibatch, so the stacked pass gives each draw's gradient g_s of the mean minibatch
nll. With c = kl_weight / N and p' the derivative of the log prior, the ELBO's gradients are
then elementwise (`elbo_gradients`):

    d/d mu  = (1/S) sum_s [g_s - c p'(w_s)],
    d/d rho = ((1/S) sum_s [g_s - c p'(w_s)] eps_s - c / sigma) * sigmoid(rho)

(the -c / sigma from the -log sigma of log q(w_s) = -log(2 pi)/2 - log sigma - eps_s^2 / 2;
sigma = softplus(rho) has derivative sigmoid(rho)). The means and rhos of a mode sit in one
row of a flat tensor, stepped by the recipe's SGD. Each mode draws its noise from its own
stream, tensor after tensor and draw after draw, as `MeanFieldBNN.draw` does, so a mode's q
is what it gets alone (bit for bit) and what the loop gets up to float summation order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch.nn import functional as F

from symbnn.methods.base import Problem
from symbnn.methods.bnn.noise import noise_generator
from symbnn.progress import progress as progress_bar
from symbnn.settings import Bnn
from symbnn.train.batched import hand_written, seeded_parameters, stacked_net
from symbnn.train.flat import FlatStack
from symbnn.train.seeding import build_seeded_model, seed_generator
from symbnn.train.sgd import StackedSGD
from symbnn.train.stepping import StackedGradients, batch_steps, chunks_of, in_shards


def log_prior_grad(w: torch.Tensor, pi: float, sigma1: float, sigma2: float) -> torch.Tensor:
    """d/dw of `symbnn.methods.bnn.fit.log_scale_mixture_prior`, elementwise: -w / s^2 weighted by
    each component's responsibility."""
    if pi >= 1.0:
        return w / -(sigma1**2)
    if pi <= 0.0:
        return w / -(sigma2**2)
    # responsibility of the first component: sigmoid(log pi N1 - log (1 - pi) N2)
    logit = (
        math.log(pi / (1.0 - pi))
        + math.log(sigma2 / sigma1)
        + 0.5 * w.square() * (1.0 / sigma2**2 - 1.0 / sigma1**2)
    )
    first = torch.sigmoid(logit)
    return -w * (first / sigma1**2 + (1.0 - first) / sigma2**2)


def elbo_gradients(
    mu: torch.Tensor,
    rho: torch.Tensor,
    w: torch.Tensor,
    eps: torch.Tensor,
    nll_grads: torch.Tensor,
    kl_per_datum: float,
    prior: tuple[float, float, float],
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients (mu's, rho's) of the ELBO loss (1/S) sum_s [nll_s + c (log q(w_s) - log
    p(w_s))] (see the module docstring): mu, rho (K, D); the draws w, their noise eps and the
    nll gradients g_s at them (K, S, D); c = `kl_per_datum`; prior (pi, sigma1, sigma2)."""
    draws = w.shape[1]
    per_draw = log_prior_grad(w, *prior).mul_(-kl_per_datum).add_(nll_grads)
    grad_mu = per_draw.sum(1).div_(draws)
    grad_rho = per_draw.mul_(eps).sum(1).div_(draws)
    grad_rho.sub_(kl_per_datum / F.softplus(rho)).mul_(torch.sigmoid(rho))
    return grad_mu, grad_rho


def draw_noise(
    eps: FlatStack, noise: Sequence[torch.Generator], draws: int, shapes: dict[str, torch.Size]
) -> None:
    """Each mode's `draws` standard normal draws of the step into `eps`, from the mode's own
    generator in `MeanFieldBNN.draw`'s order (draw after draw, tensor after tensor), so that a
    mode draws what it draws alone."""
    for row, gen in enumerate(noise):
        for s in range(draws):
            for name, shape in shapes.items():
                view = eps.views[name][row * draws + s]
                view.copy_(torch.randn(shape, generator=gen, dtype=view.dtype, device=view.device))


def initial_posteriors(
    shapes: dict[str, torch.Size], means: dict[str, torch.Tensor], rho_init: float
) -> FlatStack:
    """q's parameters of K modes as rows: a mode's means (`means`: name -> (K, *shape)), then
    its rhos (all `rho_init`), each in the networks' flat layout."""
    first = next(iter(means.values()))
    layout = {f"{part}:{name}": s for part in ("mu", "rho") for name, s in shapes.items()}
    q = FlatStack(layout, first.shape[0], first.device, first.dtype)
    for name in shapes:
        q.views[f"mu:{name}"].copy_(means[name])
        q.views[f"rho:{name}"].fill_(rho_init)
    return q


def posterior_of(
    q: FlatStack, row: int, shapes: dict[str, torch.Size]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Mode `row`'s means and rhos (name -> tensor) out of `initial_posteriors`' layout."""
    means = {name: q.views[f"mu:{name}"][row].clone() for name in shapes}
    return means, {name: q.views[f"rho:{name}"][row].clone() for name in shapes}


def train_bnn_batched(
    problem: Problem,
    seeds: Sequence[int],
    settings: Bnn,
    chunk: int | None = None,
    progress: bool = False,
) -> list[tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]:
    """`symbnn.methods.bnn.fit.train_bnn` for every seed in one batched run (the model needs a
    hand-written pass): per seed, q's means and rhos (name -> tensor, on the problem's
    device)."""
    recipe = settings.recipe.apply(problem.recipe)
    device, dtype = torch.device(problem.device), torch.float32
    template = build_seeded_model(problem.model_spec, seeds[0])
    if not hand_written(template, problem.train, recipe.augment):
        raise ValueError("the batched BNN fit needs a model with a hand-written stacked pass")
    net = stacked_net(template, problem.train, device, recipe.augment, dtype=dtype)
    shapes = {name: p.shape for name, p in template.named_parameters()}
    means = seeded_parameters(template, seeds, device, dtype)
    draws, n = settings.elbo_samples, len(problem.train)
    kl_per_datum = settings.kl_weight / n
    prior = (settings.prior_pi, settings.prior_sigma1, settings.prior_sigma2)
    targets = problem.train.targets.to(device)
    steps = recipe.epochs * math.ceil(n / recipe.batch_size)
    bar = progress_bar(
        total=steps * len(seeds),
        desc=f"fit bnn ({len(seeds)} modes x {draws} draws)",
        unit="mode-step",
        enabled=progress,
    )

    def shard(part: slice) -> FlatStack:
        k = part.stop - part.start
        w = FlatStack(shapes, k * draws, device, dtype)
        eps, nll_grads = w.zeros_like(), w.zeros_like()
        width = w.data.shape[1]
        q = initial_posteriors(shapes, {n: m[part] for n, m in means.items()}, settings.rho_init)
        mu, rho = q.data[:, :width], q.data[:, width:]
        q_grads = q.zeros_like()
        present = torch.zeros(width, dtype=dtype, device=device)
        present[w.index] = 1.0  # padding gets no gradient
        noise = [noise_generator(seed, device) for seed in seeds[part]]
        orders = [seed_generator(seed, "order") for seed in seeds[part]]
        gradients = StackedGradients(
            net,
            targets,
            "cross_entropy",
            chunks_of(net, recipe.batch_size, k * draws, chunk, device),
        )
        optimizer = StackedSGD(
            {"all": q.data}, recipe.momentum, recipe.nesterov, recipe.weight_decay
        )
        stacked = (k, draws, width)
        for step, idx in batch_steps(n, recipe.batch_size, recipe.epochs, orders, device):
            draw_noise(eps, noise, draws, shapes)
            sigma = F.softplus(rho)
            torch.mul(sigma[:, None], eps.data.view(stacked), out=w.data.view(stacked))
            w.data.view(stacked).add_(mu[:, None])
            gradients(w, idx.repeat_interleave(draws, 0), nll_grads)
            grad_mu, grad_rho = elbo_gradients(
                mu,
                rho,
                w.data.view(stacked),
                eps.data.view(stacked),
                nll_grads.data.view(stacked),
                kl_per_datum,
                prior,
            )
            q_grads.data[:, :width] = grad_mu
            torch.mul(grad_rho, present, out=q_grads.data[:, width:])
            optimizer.step({"all": q_grads.data}, recipe.lr_at(step.epoch), scratch=True)
            bar.update(k)
        return q

    shards = in_shards(shard, len(seeds), device)
    bar.close()
    return [posterior_of(q, row, shapes) for q in shards for row in range(q.data.shape[0])]
