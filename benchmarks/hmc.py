"""Full-batch HMC on the default experiment: gradients and effective samples per second,
batched chains against a loop of chains and against a peer sampler, and whether chains started
from the pool and from the prior reach the same within-mode distribution.

Everything runs on the default experiment of config.yaml: its OptuNet (904 parameters), its
training digits (4,000), its prior (precision N x the recipe's weight decay, temperature 1),
and the reference's sampler (`symbnn.reference`: leapfrog steps, target acceptance and step
jitter of the `reference` settings' defaults). The starting networks are the methods' pool's
first seeds (`methods.first_seed` on), trained here with the experiment's recipe by the
batched trainer, as the pool's jobs train them.

1. Sampler throughput, at each thread count (torch's and numba's, `--threads`): the chains
   batched together through the batched trainer's passes (`sample_network`, as the workflow's
   reference_chains job runs them: one shard per thread), then the first `loop_chains` of the
   same chains run one at a time. A chain's samples are the same bit for bit both ways (the
   sampler's guarantee, checked here), so both share their effective sample sizes; only the
   time differs. Figures: full-batch gradients per second (all chains together) and
   effective samples per second: the bulk ESS (`symbnn.reference.diagnostics.ess_bulk`, split
   and rank-normalised) of each chain's mean test log-likelihood, summed over the batch's
   chains, over the time the row takes for as many chains (burn-in and step size search
   included; the loop: its seconds per chain times the chains).
2. A peer: pyro-ppl's `HMC(potential_fn=...)` without step size or mass adaptation, with the
   step size chain 0 adapted in the batch (its median kept step) and the same leapfrog steps,
   driven by `pyro.infer.MCMC` from chain 0's starting network, the same burn-in and draws, at
   the same threads. Its potential is what a pyro user writes: the plain `nn.Module` (float32)
   under autograd, summed over the same pieces of digits as symbnn's, the prior and the sum in
   float64. Skipped, with a line saying so, where pyro is not installed (the `peers` extra).
3. Pool start against prior start: chains from the prior (`symbnn.reference.chains.
   prior_starts`, a longer burn-in) beside the pool-started chains of part 1, both in
   canonical form (the experiment's symmetry settings); the MMD of the whole network's
   canonical weights between the two sets of kept samples with its MMDAgg permutation test,
   and as a control the same between the pool chains of two halves of the modes (different
   modes, same start). Samples within a chain are correlated, which the permutation test does
   not know: its p-values are too small for both rows alike.

    python benchmarks/hmc.py                 # full size (about 10 minutes on 2 idle cores)
    python benchmarks/hmc.py --quick         # toy size (seconds); prints only

The tables print, go to --json (default benchmarks/results/hmc-<time>.json) and, at full size,
into docs/benchmarks.md as the generated block "hmc" through the load gate
(`benchmarks/machine.py`; --allow-load writes it marked as measured under load, --no-write
prints only).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
from fits import default_problem
from machine import Conditions, LoadGate, add_gate_arguments, publish, write_results, written
from peer_measure import at_threads
from torch.nn import functional as F

from symbnn.mmd import AggTestConfig, two_sample_mmd
from symbnn.predictions import predict_probabilities
from symbnn.reference import diagnostics
from symbnn.reference.chains import prior_starts
from symbnn.reference.hmc import HmcSettings
from symbnn.reference.network import (
    DEFAULT_PIECE,
    FullBatchPotential,
    Layout,
    prior_precision,
    sample_network,
)
from symbnn.settings import Reference, load_config
from symbnn.settings.hmc import POOL_BURN_IN, PRIOR_BURN_IN
from symbnn.symmetry import canonicalize, unit_groups
from symbnn.train.batched import stacked_net, train_batched
from symbnn.train.batches import batch_bounds
from symbnn.train.seeding import build_seeded_model

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Reference()
SETTINGS = HmcSettings()  # the sampler's defaults (step jitter)
PEER_SEED = 0  # pyro's RNG seed
DOC_INTRO = (
    "The `hmc` block measures the full-batch HMC sampler of the reference posterior "
    "(`symbnn.reference`) on the default experiment's OptuNet, training digits and prior: "
    "full-batch gradients and bulk effective samples (of each chain's mean test "
    "log-likelihood) per second, for chains batched through the batched trainer's passes "
    "against the same chains run one at a time, at 1 and 2 threads; pyro-ppl's HMC on the same "
    "network, data and prior at the same step size, leapfrog steps and threads; and whether "
    "chains started from the prior reach the distribution of chains started from the pool's "
    "networks (MMD of canonical weights with its permutation test, beside a control between "
    "pool chains of different modes). Rerun it with `.venv/bin/python benchmarks/hmc.py` "
    "(about ten minutes on two idle cores; `--help` for the options)."
)


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How much each part samples. `images`/`test_images`: digits kept (None: all);
    `pool_epochs`: the starting networks' epochs (None: the recipe's)."""

    chains: int  # pool-started chains, batched together
    modes: int  # pool networks they start from (chain k from mode k mod modes)
    loop_chains: int  # of those chains, how many the loop runs one at a time
    burn_in: int
    draws: int
    leapfrog_steps: int
    prior_chains: int
    prior_burn_in: int
    prior_draws: int
    images: int | None = None
    test_images: int | None = None
    pool_epochs: int | None = None


# sized for about ten minutes on two idle cores (the reference's defaults where affordable:
# leapfrog steps, the burn-in from the pool and from the prior)
FULL = Sizes(
    chains=4,
    modes=2,
    loop_chains=1,
    burn_in=POOL_BURN_IN,
    draws=20,
    leapfrog_steps=REFERENCE.leapfrog_steps,
    prior_chains=2,
    prior_burn_in=PRIOR_BURN_IN,
    prior_draws=10,
)
QUICK = Sizes(
    chains=2,
    modes=2,
    loop_chains=1,
    burn_in=8,
    draws=8,
    leapfrog_steps=3,
    prior_chains=2,
    prior_burn_in=8,
    prior_draws=8,
    images=200,
    test_images=100,
    pool_epochs=1,
)


def timed(fn):
    """(result, wall seconds, CPU seconds of this process) of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


class Setup:
    """The default experiment's network, data, prior and the pool's starting networks."""

    def __init__(self, sizes: Sizes) -> None:
        problem, methods = default_problem("default")  # as its fit jobs build it, on the CPU
        self.spec = problem.model_spec
        self.recipe = problem.recipe
        self.train = problem.train if sizes.images is None else problem.train.limited(sizes.images)
        self.test = (
            problem.test if sizes.test_images is None else problem.test.limited(sizes.test_images)
        )
        self.precision = prior_precision(len(self.train), self.recipe.weight_decay)
        self.symmetry = load_config(ROOT / "config.yaml").experiments["default"].symmetry
        self.layout = Layout.of(build_seeded_model(self.spec, 0))
        self.pool_seeds = [methods.first_seed + m for m in range(sizes.modes)]
        recipe = self.recipe
        if sizes.pool_epochs is not None:
            recipe = dataclasses.replace(recipe, epochs=sizes.pool_epochs)
        (state, _, _), self.pool_train_s, _ = timed(
            lambda: train_batched(self.spec, recipe, self.train, self.pool_seeds)
        )
        self.pool = {name: value.detach().clone() for name, value in state.items()}
        self.pool_accuracy = self.accuracy(self.pool)

    def potential(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """symbnn's U and its gradient at the positions theta (k, D)."""
        net = stacked_net(build_seeded_model(self.spec, 0), self.train, "cpu", "none")
        return FullBatchPotential(
            net, self.train.targets, self.layout, theta.shape[0], self.precision
        )(theta)

    def starts(self, chains: int, modes: int) -> dict[str, torch.Tensor]:
        rows = [k % modes for k in range(chains)]
        return {name: value[rows] for name, value in self.pool.items()}

    def per_sample(self, states: dict[str, torch.Tensor]):
        """Every network of `states` (name -> (S, *shape)): its test probabilities."""
        model = build_seeded_model(self.spec, 0)
        count = next(iter(states.values())).shape[0]
        for s in range(count):
            model.load_state_dict({name: value[s] for name, value in states.items()})
            yield predict_probabilities(model, self.test, "cpu").double()

    def loglik(self, states: dict[str, torch.Tensor]) -> np.ndarray:
        """Each network's mean test log-likelihood (S,)."""
        labels = self.test.targets.long().view(-1, 1)
        return np.array(
            [
                float(torch.log(p.gather(1, labels).clamp_min(1e-300)).mean())
                for p in self.per_sample(states)
            ]
        )

    def accuracy(self, states: dict[str, torch.Tensor]) -> np.ndarray:
        labels = self.test.targets.long()
        return np.array(
            [float((p.argmax(1) == labels).double().mean()) for p in self.per_sample(states)]
        )


def settings_for(sizes: Sizes, prior: bool = False) -> HmcSettings:
    return HmcSettings(
        burn_in=sizes.prior_burn_in if prior else sizes.burn_in,
        draws=sizes.prior_draws if prior else sizes.draws,
        leapfrog_steps=sizes.leapfrog_steps,
        target_accept=REFERENCE.target_accept,
    )


def flat_states(states: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """name -> (K, draws, *shape) as name -> (K * draws, *shape)."""
    return {name: value.reshape(-1, *value.shape[2:]) for name, value in states.items()}


def chain_ess(loglik: np.ndarray) -> np.ndarray:
    """Each chain's bulk ESS of its test log-likelihood draws (K, draws); a chain whose
    draws never changed (no proposal accepted) counts 0 (the estimator gives NaN there)."""
    ess = np.array([diagnostics.ess_bulk(row[None, :]) for row in loglik])
    return np.where(np.isfinite(ess), ess, 0.0)


def run_batched(setup: Setup, sizes: Sizes, seeds: list[int], initial, prior=False):
    chains, wall, cpu = timed(
        lambda: sample_network(
            setup.spec, setup.train, initial, seeds, settings_for(sizes, prior), setup.precision
        )
    )
    return chains, wall, cpu


def sampler_row(label, threads, runs, loglik, wall, cpu, identical=None):
    """A row of part 1 from `runs` (the batched run, or the loop's one-chain runs) and the test
    log-likelihood draws (chains, draws) of all the batch's chains. Gradients: full-batch
    gradients of one chain each, all the row's chains together (the step size search
    included). ESS/s: the ESS of all the batch's chains over the time the row takes for as
    many chains; for the loop, its seconds per chain times the chains (a chain's cost is
    its gradients: the same whatever its draws, and the loop's chains are the batch's)."""
    n_chains = sum(r.run.samples.shape[0] for r in runs)
    grads = sum(r.evaluations * r.run.samples.shape[0] for r in runs)
    ess = chain_ess(loglik)
    seconds = wall / n_chains * loglik.shape[0]
    return {
        "sampler": label,
        "threads": threads,
        "chains": n_chains,
        "wall": wall,
        "cpu": cpu,
        "gradients": grads,
        "gradients_per_s": grads / wall,
        "ess_median": float(np.median(ess)),
        "ess_per_s": float(np.sum(ess)) / seconds,
        "acceptance": float(np.mean([r.run.accepted.mean() for r in runs])),
        "step_size": float(np.median(np.concatenate([r.run.step_size for r in runs]))),
        "identical": identical,
    }


def throughput(setup: Setup, sizes: Sizes, threads: int, seeds: list[int]):
    """Part 1 at `threads`: the batched row, the loop row, and the batched chains."""
    initial = setup.starts(sizes.chains, sizes.modes)
    with at_threads(threads):
        batched, wall, cpu = run_batched(setup, sizes, seeds, initial)
        loop_runs, loop_wall, loop_cpu = [], 0.0, 0.0
        for k in range(sizes.loop_chains):
            one = {name: value[k : k + 1] for name, value in initial.items()}
            run, w, c = run_batched(setup, sizes, [seeds[k]], one)
            loop_runs.append(run)
            loop_wall, loop_cpu = loop_wall + w, loop_cpu + c
    loglik = setup.loglik(flat_states(batched.states)).reshape(sizes.chains, sizes.draws)
    identical = all(
        torch.equal(run.states[name][0], batched.states[name][k])
        for k, run in enumerate(loop_runs)
        for name in run.states
    )
    rows = [
        sampler_row("symbnn batched", threads, [batched], loglik, wall, cpu),
        sampler_row(
            "symbnn loop",
            threads,
            loop_runs,
            loglik,
            loop_wall,
            loop_cpu,
            identical,
        ),
    ]
    return rows, batched, loglik


# ---------------------------------------------------------------- the peer


def pyro_version() -> str | None:
    if importlib.util.find_spec("pyro") is None:
        return None
    import pyro

    return pyro.__version__


def pyro_row(setup: Setup, sizes: Sizes, threads: int, step_size: float) -> dict:
    """pyro's HMC from chain 0's start at `threads`, the step size and leapfrog steps given."""
    import pyro
    from pyro.infer import HMC, MCMC

    model = build_seeded_model(setup.spec, 0)
    for p in model.parameters():
        p.requires_grad_(False)
    x = setup.train.normalize(setup.train.images)
    y = setup.train.targets
    sizes_flat = [math.prod(s) for s in setup.layout.shapes]
    precision = setup.precision
    # the sum in pieces, as symbnn's potential takes it (all 4,000 digits at once ran 4x slower)
    pieces = [slice(a, b) for a, b in batch_bounds(len(y), DEFAULT_PIECE)]
    calls = [0]

    def potential_fn(params):
        theta = params["theta"]
        calls[0] += 1
        parts = theta.to(torch.float32).split(sizes_flat)
        state = {
            name: part.reshape(shape)
            for name, part, shape in zip(
                setup.layout.names, parts, setup.layout.shapes, strict=True
            )
        }
        nll = 0.0
        for part in pieces:
            logits = torch.func.functional_call(model, state, (x[part],))
            nll = nll + F.cross_entropy(logits, y[part], reduction="sum").to(torch.float64)
        return nll + (theta * theta).sum() * (0.5 * precision)

    start = setup.layout.flatten(setup.starts(1, 1))[0]
    with torch.no_grad():
        theirs = float(potential_fn({"theta": start}))
    calls[0] = 0
    ours = float(setup.potential(start[None, :])[0][0])
    kernel = HMC(
        potential_fn=potential_fn,
        step_size=step_size,
        num_steps=sizes.leapfrog_steps,
        adapt_step_size=False,
        adapt_mass_matrix=False,
    )
    mcmc = MCMC(
        kernel,
        num_samples=sizes.draws,
        warmup_steps=sizes.burn_in,
        initial_params={"theta": start},
        disable_progbar=True,
    )
    with at_threads(threads):
        pyro.set_rng_seed(PEER_SEED)
        _, wall, cpu = timed(mcmc.run)
    samples = mcmc.get_samples()["theta"].to(torch.float64)
    states = setup.layout.unflatten(samples, torch.float32)
    loglik = setup.loglik(states).reshape(1, -1)
    moved = (samples[1:] != samples[:-1]).any(1).double().mean().item()
    ess = chain_ess(loglik)
    return {
        "sampler": f"pyro-ppl {pyro.__version__} HMC",
        "threads": threads,
        "chains": 1,
        "wall": wall,
        "cpu": cpu,
        "gradients": calls[0],
        "gradients_per_s": calls[0] / wall,
        "ess_median": float(np.median(ess)),
        "ess_per_s": float(np.sum(ess)) / wall,
        "acceptance": moved,
        "step_size": step_size,
        "identical": None,
        "potential_rel_diff": abs(theirs - ours) / abs(ours),
    }


# ---------------------------------------------------------------- pool vs prior


def canonical_rows(setup: Setup, states: dict[str, torch.Tensor]) -> np.ndarray:
    """The networks (name -> (S, *shape)) in canonical form, flattened: (S, D) float64."""
    sym = unit_groups(setup.spec)
    canon = canonicalize(
        states, sym, scale=setup.symmetry.scale, key=setup.symmetry.key, on_dead="keep"
    ).state
    return torch.cat(
        [canon[name].reshape(canon[name].shape[0], -1).double() for name in setup.layout.names], 1
    ).numpy()


def mmd_row(label: str, x: np.ndarray, y: np.ndarray, seed: int) -> dict:
    result = two_sample_mmd(x, y, pvalue=True, seed=seed, device="cpu")
    return {
        "comparison": label,
        "n": len(x),
        "m": len(y),
        "mmd_median": result.median,
        "p_value": result.test.p_value,
        "reject": bool(result.test.reject),
    }


def pool_vs_prior(setup: Setup, sizes: Sizes, batched, pool_loglik, threads: int, seed: int):
    reference = dataclasses.replace(
        REFERENCE, chains=sizes.prior_chains, modes=sizes.prior_chains, start="prior", seed=seed
    )
    initial, _ = prior_starts(setup.layout, reference, setup.precision)
    seeds = reference.chain_seeds()
    with at_threads(threads):
        prior, wall, _ = run_batched(setup, sizes, seeds, initial, prior=True)
    pool_states = flat_states(batched.states)
    prior_states = flat_states(prior.states)
    pool_canon = canonical_rows(setup, pool_states)
    prior_canon = canonical_rows(setup, prior_states)
    prior_loglik = setup.loglik(prior_states)
    rows = [mmd_row("pool start vs prior start", pool_canon, prior_canon, 0)]
    modes = np.repeat(np.arange(sizes.chains) % sizes.modes, sizes.draws)
    half = sizes.modes // 2
    if half >= 1:
        first, second = modes < half, modes >= half
        rows.append(
            mmd_row(
                f"control: pool modes 0..{half - 1} vs {half}..{sizes.modes - 1}",
                pool_canon[first],
                pool_canon[second],
                0,
            )
        )
    fits = {
        "pool": {
            "loglik": float(np.mean(pool_loglik)),
            "accuracy": float(np.mean(setup.accuracy(pool_states))),
            "acceptance": float(batched.run.accepted.mean()),
            "burn_in": sizes.burn_in,
        },
        "prior": {
            "loglik": float(np.mean(prior_loglik)),
            "accuracy": float(np.mean(setup.accuracy(prior_states))),
            "acceptance": float(prior.run.accepted.mean()),
            "burn_in": sizes.prior_burn_in,
            "wall": wall,
        },
    }
    return rows, fits


# ---------------------------------------------------------------- the report


def sampler_table(rows: list[dict]) -> list[str]:
    lines = [
        "| sampler | threads | chains | wall s | CPU s | full-batch gradients | gradients/s "
        "| bulk ESS per chain (median) | ESS/s | acceptance | step size "
        "| same samples as batched |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        same = {None: "-", True: "yes", False: "NO"}[r["identical"]]
        lines.append(
            f"| {r['sampler']} | {r['threads']} | {r['chains']} | {r['wall']:.1f} | {r['cpu']:.1f} "
            f"| {r['gradients']} | {r['gradients_per_s']:.2f} | {r['ess_median']:.1f} "
            f"| {r['ess_per_s']:.3f} | {r['acceptance']:.2f} | {r['step_size']:.2e} | {same} |"
        )
    return lines


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "- (no effective samples below)"


def speedups(rows: list[dict]) -> list[str]:
    lines = []
    for threads in sorted({r["threads"] for r in rows}):
        at = [r for r in rows if r["threads"] == threads]
        batched = next((r for r in at if r["sampler"] == "symbnn batched"), None)
        loop = next((r for r in at if r["sampler"] == "symbnn loop"), None)
        peer = next((r for r in at if r["sampler"].startswith("pyro")), None)
        parts = []
        if batched and loop:
            parts.append(
                f"batched / loop: {ratio(batched['gradients_per_s'], loop['gradients_per_s'])} "
                f"gradients/s, {ratio(batched['ess_per_s'], loop['ess_per_s'])} ESS/s"
            )
        if peer and loop:
            parts.append(
                f"one symbnn chain alone / pyro: "
                f"{ratio(loop['gradients_per_s'], peer['gradients_per_s'])} gradients/s, "
                f"{ratio(loop['ess_per_s'], peer['ess_per_s'])} ESS/s"
            )
        if peer and batched:
            parts.append(f"batched / pyro: {ratio(batched['ess_per_s'], peer['ess_per_s'])} ESS/s")
        if parts:
            lines.append(
                f"- {threads} thread{'s' if threads > 1 else ''}: " + "; ".join(parts) + "."
            )
    return lines


def verdict(mmd_rows: list[dict], fits: dict, alpha: float) -> str:
    main = mmd_rows[0]
    control = mmd_rows[1] if len(mmd_rows) > 1 else None
    fit = (
        f"the prior-started chains' mean test log-likelihood is {fits['prior']['loglik']:.3f} "
        f"(accuracy {fits['prior']['accuracy']:.3f}) against {fits['pool']['loglik']:.3f} "
        f"({fits['pool']['accuracy']:.3f}) for the pool-started ones"
    )
    if not main["reject"]:
        text = (
            f"Verdict: not distinguished: the test does not reject at level {alpha:g} "
            f"(p = {main['p_value']:.3f}); {fit}."
        )
    else:
        text = (
            f"Verdict: different: the chains started from the prior do not reach the "
            f"distribution of the pool-started chains at this burn-in (p = {main['p_value']:.3f} "
            f"at level {alpha:g}); {fit}."
        )
    if control is not None:
        text += (
            " Control: pool chains of different modes "
            f"{'differ' if control['reject'] else 'are not distinguished'} "
            f"(p = {control['p_value']:.3f}), so "
            + (
                "a rejection can come from the modes differing, not only from the start."
                if control["reject"]
                else "canonical form makes the pool's modes look alike; a rejection of the "
                "first row points at the start."
            )
        )
    return text


def report(setup: Setup, sizes: Sizes, rows, mmd_rows, fits, peer_note, conditions, alpha) -> str:
    lines = [
        f"Default experiment: OptuNet ({setup.layout.size} parameters), {len(setup.train)} "
        f"training digits, {len(setup.test)} test digits, prior precision N x weight decay = "
        f"{setup.precision:g}, temperature 1. Chains start from the pool's first "
        f"{sizes.modes} networks (seeds {setup.pool_seeds[0]}..{setup.pool_seeds[-1]}, test "
        f"accuracy {', '.join(f'{a:.3f}' for a in setup.pool_accuracy)}, trained here in "
        f"{setup.pool_train_s:.0f} s); {sizes.chains} chains (chain k from network k mod "
        f"{sizes.modes}), {sizes.burn_in} burn-in iterations (step size adapted toward "
        f"acceptance {REFERENCE.target_accept}) and {sizes.draws} kept draws of "
        f"{sizes.leapfrog_steps} leapfrog steps each; the loop runs the first "
        f"{sizes.loop_chains} of them one at a time. ESS: bulk ESS of each chain's mean test "
        "log-likelihood; ESS/s sums it over the batch's chains and divides by the time the row "
        "takes for as many chains (the loop: its seconds per chain times the chains; its "
        "chains are the batch's, bit for bit).",
        "",
        *sampler_table(rows),
        "",
    ]
    if peer_note:
        lines += [peer_note, ""]
    peers = [r for r in rows if r["sampler"].startswith("pyro")]
    if peers:
        lines += [
            "pyro-ppl: `HMC(potential_fn=...)`, no step size or mass matrix adaptation, the "
            "step size chain 0 adapted (the median of its kept steps) at the row's threads, no "
            "step jitter "
            f"(symbnn's draws each trajectory's step within +-{SETTINGS.step_jitter:.0%}), "
            "one chain from chain 0's start, the same burn-in and draws; its potential is the "
            f"plain `nn.Module` under autograd, summed over pieces of {DEFAULT_PIECE} digits as "
            "symbnn's is (float32 pass, float64 sum and prior), equal to symbnn's at the start "
            "to a relative "
            f"{max(r['potential_rel_diff'] for r in peers):.1e}; its acceptance is the share "
            "of kept draws that moved.",
            "",
        ]
    lines += speedups(rows)
    lines += [
        "",
        f"Pool start against prior start: {sizes.prior_chains} chains from prior draws "
        f"(burn-in {sizes.prior_burn_in}, {sizes.prior_draws} draws, {fits['prior']['wall']:.0f} s "
        f"at {rows[-1]['threads'] if rows else 1} threads) against the pool-started batched "
        f"chains above; MMD of the whole network's canonical weights (median of the twenty "
        f"kernels' MMD^2_u) with MMDAgg's permutation test. Samples within a chain are "
        f"correlated, so the p-values are too small on both rows alike.",
        "",
        "| comparison | samples | samples | MMD^2 median | p-value | rejects at "
        f"{alpha:g} | mean test log-lik | accuracy | acceptance |",
        "|---|---:|---:|---:|---:|---|---|---|---|",
    ]
    for i, r in enumerate(mmd_rows):
        fit_cells = (
            f"{fits['pool']['loglik']:.3f} / {fits['prior']['loglik']:.3f} "
            f"| {fits['pool']['accuracy']:.3f} / {fits['prior']['accuracy']:.3f} "
            f"| {fits['pool']['acceptance']:.2f} / {fits['prior']['acceptance']:.2f}"
            if i == 0
            else "- | - | -"
        )
        lines.append(
            f"| {r['comparison']} | {r['n']} | {r['m']} | {r['mmd_median']:.3g} "
            f"| {r['p_value']:.3f} | {'yes' if r['reject'] else 'no'} | {fit_cells} |"
        )
    lines += ["", verdict(mmd_rows, fits, alpha), "", f"Machine: {conditions}."]
    return "\n".join(lines)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="toy sizes (seconds): prints only, writes no docs block",
    )
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="thread counts (torch and numba)"
    )
    parser.add_argument("--seed", type=int, default=REFERENCE.seed, help="chain 0's seed")
    parser.add_argument("--json", default=None, help="where to write the results")
    parser.add_argument("--no-write", action="store_true", help="print only, leave the docs alone")
    parser.add_argument("--skip-peer", action="store_true", help="leave pyro's row out")
    parser.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="change one of the sizes (e.g. draws=60; names: "
        + ", ".join(f.name for f in dataclasses.fields(Sizes))
        + "); a changed size prints only, writes no docs block",
    )
    add_gate_arguments(parser)
    args = parser.parse_args(argv)
    if min(args.threads) < 1:
        parser.error("--threads must be positive")
    sizes = QUICK if args.quick else FULL
    names = {f.name for f in dataclasses.fields(Sizes)}
    for item in args.size:
        name, _, value = item.partition("=")
        if name not in names or not value.strip().isdigit() or int(value) < 1:
            parser.error(
                f"--size {item!r}: expected NAME=POSITIVE_INTEGER, NAME one of {sorted(names)}"
            )
        sizes = dataclasses.replace(sizes, **{name: int(value)})
    if sizes.loop_chains > sizes.chains or sizes.modes > sizes.chains:
        parser.error("--size: loop_chains and modes must not exceed chains")
    args.sizes = sizes
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    sizes = args.sizes
    gate = LoadGate(args.settle)
    conditions = Conditions()
    started = time.perf_counter()

    def say(message: str) -> None:
        print(f"[{time.perf_counter() - started:.0f} s] {message}", file=sys.stderr, flush=True)

    say("training the starting networks ...")
    setup = Setup(sizes)
    seeds = [args.seed + k for k in range(sizes.chains)]
    rows, peer_note = [], None
    batched = pool_loglik = None
    version = None if args.skip_peer else pyro_version()
    if args.skip_peer:
        peer_note = "pyro-ppl: left out (--skip-peer)."
    elif version is None:
        peer_note = (
            "pyro-ppl: not installed here, its rows are skipped (install the `peers` extra: "
            "`.venv/bin/pip install --no-deps "
            "$(.venv/bin/python benchmarks/peers.py --requirements)`)."
        )
    for threads in args.threads:
        say(f"symbnn's chains at {threads} thread(s) ...")
        part, batched, pool_loglik = throughput(setup, sizes, threads, seeds)
        rows += part
        if version is not None:
            say(f"pyro's chain at {threads} thread(s) ...")
            chain0_step = float(np.median(batched.run.step_size[0]))
            rows.append(pyro_row(setup, sizes, threads, chain0_step))
    say("prior-started chains ...")
    alpha = AggTestConfig().alpha
    mmd_rows, fits = pool_vs_prior(setup, sizes, batched, pool_loglik, max(args.threads), args.seed)
    text = report(setup, sizes, rows, mmd_rows, fits, peer_note, conditions.line(), alpha)
    total = time.perf_counter() - started
    text += f"\n\nWhole run: {total:.0f} s."
    print(text)
    status = 0
    if sizes != FULL:
        print("not the full sizes: not written to docs/benchmarks.md", file=sys.stderr)
    elif not args.no_write:
        status = written(
            lambda: publish("hmc", "benchmarks/hmc.py", DOC_INTRO, text, gate, args.allow_load)
        )
    out = write_results(
        "hmc",
        args.json,
        {
            "args": {k: v for k, v in vars(args).items() if k != "sizes"},
            "sizes": dataclasses.asdict(sizes),
            "samplers": rows,
            "pool_vs_prior": mmd_rows,
            "fits": fits,
            "peer_note": peer_note,
            "seconds": total,
            "table": text,
        },
    )
    print(f"results: {out}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
