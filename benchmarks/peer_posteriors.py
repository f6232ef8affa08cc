"""symbnn against `posteriors` (normal-computing) on the OptuNet mode of seed 0:

- SGHMC: symbnn's momentum chain (Chen et al. 2014, eq. 15: `symbnn.methods.sghmc`, variant
  momentum) and its default scale-adapted chain (its method as the workflow runs it) against
  `posteriors.sgmcmc.sghmc` with the same dynamics (step eps = sqrt(lr / N), friction
  alpha = friction / eps, momenta from 0), the same batches, burn-in and sample steps. Time
  per effective sample of the test log-likelihood (the ESS of the samples' mean test
  log-likelihood, Geyer's initial monotone sequence), and the quality of the ensemble of all
  samples;
- diagonal Laplace: symbnn's Laplace with `laplace: {hessian: diag}` (laplace-torch's diagonal
  GGN, the prior precision fitted by marginal likelihood) against `posteriors.laplace.diag_ggn`
  given the same prior precision (it has no marginal likelihood): fit and K draws, the largest
  relative difference of the two posterior precisions, the quality of the sampled networks.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
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
    speed_verdict,
    symbnn_threads,
    version,
)
from torch.func import functional_call
from torch.nn import functional as F

from symbnn.methods.base import Mode, generator
from symbnn.methods.laplace.fit import fit_mode, image_loader, to_states
from symbnn.methods.sghmc import SghmcChains
from symbnn.methods.sghmc import fit as symbnn_sghmc
from symbnn.models import build_model
from symbnn.settings import Sghmc
from symbnn.train.loop import seed_batches

INSTALL = "pip install --no-deps posteriors torchopt optree tensordict"
SGHMC_LR, SGHMC_FRICTION = 0.005, 0.1  # SGD-equivalent rate on the mean loss; 1 - momentum
SEED = 0


def effective_sample_size(x: np.ndarray) -> float:
    """ESS of one chain's draws: n / (-1 + 2 sum of Geyer's initial monotone sequence of
    autocorrelation pairs), the denominator at least 1 / log10(n) as Stan bounds it."""
    n = len(x)
    centred = np.asarray(x, dtype=np.float64) - np.mean(x)
    if n < 4 or not centred.any():
        return math.nan
    spectrum = np.fft.rfft(centred, 2 * n)
    acov = np.fft.irfft(spectrum * np.conj(spectrum))[:n]
    rho = acov / acov[0]
    tau, smallest = -1.0, math.inf
    for k in range(0, n - 1, 2):
        pair = rho[k] + rho[k + 1]
        if pair <= 0:
            break
        smallest = min(smallest, pair)
        tau += 2.0 * smallest
    return n / max(tau, 1.0 / math.log10(n))


@torch.no_grad()
def _test_log_likelihoods(ctx: Context, samples: dict) -> np.ndarray:
    """Each sample's mean test log-likelihood."""
    probs = ensemble_probs(ctx.optunet_spec, samples, ctx.test, ctx.test)
    picked = probs.double().gather(-1, ctx.test.labels.expand(len(probs), -1)[..., None])
    return picked[..., 0].clamp_min(2.0**-24).log().mean(1).numpy()


class _Chain:
    """The SGHMC job's shared settings: mode, problem, schedule and the rows' texts."""

    def __init__(self, ctx: Context) -> None:
        s = ctx.sizes
        self.ctx = ctx
        self.mode = Mode(seed=SEED, state=ctx.pair("optunet")[0][0])
        self.problem = ctx.problem()
        chain = {"epochs": s.sghmc_epochs, "burn_in_epochs": s.sghmc_burn_in}
        chain["sample_every_epochs"] = s.sghmc_every
        self.momentum = Sghmc(variant="momentum", lr=SGHMC_LR, friction=SGHMC_FRICTION, **chain)
        self.scale_adapted = Sghmc(**chain)
        self.plan = symbnn_sghmc.schedule(self.momentum, self.problem.recipe, len(ctx.train))
        self.count = self.plan.capacity
        self.case = (
            f"OptuNet mode, {s.sghmc_epochs:g} epochs ({s.sghmc_burn_in:g} burn-in), a sample "
            f"every {self.plan.spacing} steps: {self.count} samples; momentum chains at lr "
            f"{SGHMC_LR:g}, friction {SGHMC_FRICTION:g}"
        )

    def quality(self, m: Measured) -> tuple[str, float]:
        """(the row's quality text, the effective sample size)."""
        samples = m.result
        ess = effective_sample_size(_test_log_likelihoods(self.ctx, samples))
        probs = ensemble_probs(self.ctx.optunet_spec, samples, self.ctx.test, self.ctx.test)
        text = (
            f"ESS of the test log-likelihood {ess:.1f} of {self.count}: {m.wall / ess:.3g} s "
            f"per effective sample (CPU {m.cpu / ess:.3g} s); {self.count}-sample ensemble "
            f"{ensemble_quality(probs, self.ctx.test.labels)}"
        )
        return text, ess

    def symbnn_chain(self, settings: Sghmc) -> dict:
        """symbnn's chain as the workflow runs it (`SghmcChains`: for OptuNet on a CPU the
        batched trainer's hand-written pass)."""
        method = SghmcChains()
        fitted = method.fit(self.problem, self.mode, settings, SEED, self.count)
        return method.sample(self.problem, fitted, self.count, settings, SEED)

    def posteriors_chain(self) -> dict:
        import posteriors

        ctx, recipe = self.ctx, self.problem.recipe
        n = len(ctx.train)
        model = build_model(ctx.optunet_spec)
        model.load_state_dict(self.mode.state)
        lr, precision = symbnn_sghmc.scaled(self.momentum, recipe, n)
        eps = math.sqrt(lr / n)  # the step on the summed potential is eps^2 = lr / N

        def log_posterior(params, batch):
            x, y = batch
            logits = functional_call(model, params, (x,))
            prior = sum(p.square().sum() for p in params.values()) * (precision / 2)
            return -n * F.cross_entropy(logits, y) - prior, logits

        transform = posteriors.sgmcmc.sghmc.build(
            log_posterior, lr=eps, alpha=SGHMC_FRICTION / eps, beta=0.0, momenta=0.0
        )
        state = transform.init({k: v.detach().clone() for k, v in model.named_parameters()})
        order = symbnn_sghmc.data_order_seed(self.mode.seed, SEED)
        epochs = math.ceil(
            (self.plan.burn_in + self.count * self.plan.spacing) / self.plan.steps_per_epoch
        )
        batches = seed_batches(
            ctx.train, self.plan.batch_size, order, epochs, "cpu", recipe.augment
        )
        draws = []
        for step, (_, x, y) in enumerate(batches, start=1):
            state, _ = transform.update(state, (x, y), inplace=True)
            if self.plan.is_sample(step):
                draws.append({k: v.detach().clone() for k, v in state.params.items()})
                if len(draws) == self.count:
                    break
        return stacked(draws)


def rows_sghmc(ctx: Context, threads: int) -> list[Row]:
    """symbnn's momentum and scale-adapted chains and posteriors' SGHMC, per effective sample."""
    job, c = "SGHMC (chain from the mode)", _Chain(ctx)
    seen: list[tuple[int, str]] = []
    with symbnn_threads(seen):
        mine = measure(lambda: c.symbnn_chain(c.momentum))
        adapted = measure(lambda: c.symbnn_chain(c.scale_adapted))
    note = own_threads(seen, threads)
    text, ess = c.quality(mine)
    rows = [ours_row(job, c.case, threads, mine, text, "symbnn, momentum variant" + note)]
    library = "symbnn, scale-adapted (default)" + note
    rows.append(ours_row(job, c.case, threads, adapted, c.quality(adapted)[0], library))
    found, why = peer("posteriors", INSTALL)
    if found is None:
        return rows + [missing(job, c.case, "posteriors", threads, why)]
    theirs = measure(c.posteriors_chain)
    text_p, ess_p = c.quality(theirs)
    same = (
        "yes, against the momentum row: the same SDE and step (its position moves with the "
        "old momentum, symbnn's with the new one)"
    )
    row = peer_row(job, c.case, version("posteriors"), threads, theirs, mine, text_p, same)
    per = (theirs.wall / ess_p) / (mine.wall / ess)
    cpu_per = (theirs.cpu / ess_p) / max(mine.cpu / ess, 1e-9)
    row.verdict = "per effective sample, " + speed_verdict(per, cpu_per)
    return rows + [row]


def rows_laplace(ctx: Context, threads: int) -> list[Row]:
    """symbnn's diagonal Laplace against posteriors' diagonal GGN Laplace at the same prior
    precision; K draws each, predicted by the sampled networks as they are."""
    job = f"Laplace, diagonal (fit + {ctx.ensemble} samples)"
    settings = dataclasses.replace(ctx.experiment.methods.laplace, hessian="diag")
    mode = Mode(seed=SEED, state=ctx.pair("optunet")[0][0])
    train = ctx.train.limited(min(ctx.sizes.laplace_images, len(ctx.train)))
    problem = dataclasses.replace(ctx.problem(), train=train)
    case = (
        f"OptuNet mode, all weights, diagonal GGN over {len(train)} training images (every "
        "class in proportion), prior precision by marginal likelihood in symbnn (given to "
        "posteriors)"
    )

    def ours():
        la, model, state = fit_mode(problem, mode, settings)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            flat = la.sample(ctx.ensemble, generator=generator(SEED, "cpu"))
        return la, to_states(flat, model, settings.subset, state)

    mine = measure(ours)
    la, samples = mine.result
    probs = ensemble_probs(ctx.optunet_spec, samples, ctx.test, ctx.test)
    prior = float(la.prior_precision)
    text = f"{ensemble_quality(probs, ctx.test.labels)}; prior precision {prior:.3g}"
    rows = [ours_row(job, case, threads, mine, text)]
    found, why = peer("posteriors", INSTALL)
    if found is None:
        return rows + [missing(job, case, "posteriors", threads, why)]
    import posteriors

    model = build_model(ctx.optunet_spec)
    model.load_state_dict(mode.state)
    model.eval()

    def forward(params, batch):
        return functional_call(model, params, (batch[0],)), torch.tensor([])

    def outer_log_likelihood(logits, batch):
        return -F.cross_entropy(logits, batch[1], reduction="sum")

    def theirs():
        diag = posteriors.laplace.diag_ggn
        transform = diag.build(forward, outer_log_likelihood, init_prec_diag=prior)
        state = transform.init({k: v.detach().clone() for k, v in model.named_parameters()})
        for x, y in image_loader(train):
            state, _ = transform.update(state, (x, y), inplace=True)
        draws = diag.sample(state, (ctx.ensemble,))
        return state, {k: v.detach() for k, v in draws.items()}

    peer_run = measure(theirs)
    state, draws = peer_run.result
    precision = torch.cat([state.prec_diag[k].reshape(-1) for k, _ in model.named_parameters()])
    ours_precision = la.posterior_precision.reshape(-1).to(precision.dtype)
    gap = float(((precision - ours_precision).abs() / ours_precision.abs()).max())
    probs_p = ensemble_probs(ctx.optunet_spec, draws, ctx.test, ctx.test)
    text_p = (
        f"{ensemble_quality(probs_p, ctx.test.labels)}; the posterior precisions differ by "
        f"{gap:.1e} at most (relative)"
    )
    same = "yes: GGN diagonal + prior precision; symbnn's time includes fitting that precision"
    return rows + [
        peer_row(job, case, version("posteriors"), threads, peer_run, mine, text_p, same)
    ]
