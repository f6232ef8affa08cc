"""The reference posterior of an experiment as a weight store: HMC chains started at the
pool's kept modes (or at draws from the prior), written to `reference/hmc.zarr` in the
target store's layout (docs/stores.md), one row per kept sample, chain after chain.

Besides the state arrays, each row's info records its chain and where it started:

    info/chain         chain index k (its momentum seed is `reference.seed + k`)
    info/seed          the chain's momentum seed
    info/mode_index    the starting mode (k mod `reference.modes`): chains sharing it form a
                       superchain
    info/mode_seed     the pool seed of the starting network (-1 for a start from the prior)
    info/unit          = mode_index, so that a comparison made unit by unit
                       (`symbnn.mmd.ensembles.method_mmd`) sees each mode's chains as one
                       one-mode posterior
    info/step, accepted, accept_prob, energy_error, step_size   the sampler's record
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from symbnn.methods.base import Problem
from symbnn.methods.pool import select_mode
from symbnn.reference.hmc import HmcSettings
from symbnn.reference.network import Layout, NetworkChains, prior_precision, sample_network
from symbnn.settings import Data, Reference
from symbnn.store import Store, StoreError, StoreWriter, open_store
from symbnn.train.seeding import build_seeded_model

_PRIOR_TAG = 0x505249  # "PRI": a prior start's stream, apart from the chain's momenta


def hmc_settings(reference: Reference) -> HmcSettings:
    return HmcSettings(
        burn_in=reference.burn_in_iterations,
        draws=reference.draws,
        leapfrog_steps=reference.leapfrog_steps,
        target_accept=reference.target_accept,
    )


def pool_starts(
    pool_path: str | os.PathLike,
    rows: Sequence[int | None],
    reference: Reference,
    layout: Layout,
) -> tuple[dict[str, torch.Tensor], list[int]]:
    """Each chain's starting parameters (name -> (K, *shape)) and its mode's pool seed: mode
    m is the pool's m-th kept network, `rows` the pool rows of modes 0..modes-1."""
    if None in rows or len(rows) < reference.modes:
        raise StoreError(
            f"{pool_path}: the acceptance rule keeps {sum(r is not None for r in rows)} pool "
            f"networks, fewer than reference.modes ({reference.modes}); raise methods.pool or "
            "lower reference.modes"
        )
    modes = [select_mode(pool_path, list(rows), m) for m in range(reference.modes)]
    chosen = [modes[m] for m in reference.chain_modes()]
    state = {name: torch.stack([mode.state[name] for mode in chosen]) for name in layout.names}
    return state, [mode.seed for mode in chosen]


def prior_starts(
    layout: Layout, reference: Reference, precision: float
) -> tuple[dict[str, torch.Tensor], list[int]]:
    """Each chain's start drawn from the prior N(0, 1 / precision) (one draw per mode, from
    the stream of seed + mode), and -1 for its pool seed."""
    if precision <= 0:
        raise ValueError(
            "reference.start prior needs a proper prior: the recipe's weight decay is 0"
        )
    draws = []
    for m in range(reference.modes):
        rng = np.random.default_rng([reference.seed + m, _PRIOR_TAG])
        draws.append(rng.standard_normal(layout.size) / np.sqrt(precision))
    theta = torch.from_numpy(np.stack([draws[m] for m in reference.chain_modes()]))
    return layout.unflatten(theta, torch.float32), [-1] * reference.chains


def run_reference(
    problem: Problem, reference: Reference, pool_path: str | os.PathLike | None, rows
) -> tuple[NetworkChains, list[int]]:
    """The chains of `reference` for the experiment `problem` (its model, recipe and training
    set); with start pool, from the pool's kept networks `rows`."""
    precision = prior_precision(len(problem.train), problem.recipe.weight_decay)
    layout = Layout.of(build_seeded_model(problem.model_spec, 0))
    if reference.start == "pool":
        if pool_path is None:
            raise ValueError("reference.start pool needs the pool store")
        initial, mode_seeds = pool_starts(pool_path, rows, reference, layout)
    else:
        initial, mode_seeds = prior_starts(layout, reference, precision)
    chains = sample_network(
        problem.model_spec,
        problem.train,
        initial,
        reference.chain_seeds(),
        hmc_settings(reference),
        precision,
        temperature=reference.temperature,
        device=problem.device,
    )
    return chains, mode_seeds


def reference_info(chains: NetworkChains, mode_seeds: list[int], reference: Reference) -> dict:
    """The info columns of the store's rows (chain after chain)."""
    records = chains.run.records()
    draws = reference.draws
    modes = np.repeat(np.asarray(reference.chain_modes(), dtype=np.int64), draws)
    return {
        "chain": records["chain"].astype(np.int64),
        "seed": records["seed"].astype(np.int64),
        "mode_index": modes,
        "mode_seed": np.repeat(np.asarray(mode_seeds, dtype=np.int64), draws),
        "unit": modes,
        "step": records["step"].astype(np.int64),
        "accepted": records["accepted"].astype(bool),
        "accept_prob": records["accept_prob"].astype(np.float64),
        "energy_error": records["energy_error"].astype(np.float64),
        "step_size": records["step_size"].astype(np.float64),
    }


def write_reference_store(
    out_path: str | os.PathLike,
    experiment: str,
    problem: Problem,
    data: Data,
    reference: Reference,
    chains: NetworkChains,
    mode_seeds: list[int],
) -> Store:
    """The chains' kept samples as a store (atomically, under the store digest)."""
    states = {
        name: value.reshape(-1, *value.shape[2:]).numpy() for name, value in chains.states.items()
    }
    info = reference_info(chains, mode_seeds, reference)
    attrs = {
        "experiment": experiment,
        "architecture": problem.model_spec,
        "recipe": problem.recipe.to_dict(),
        "data": data.to_dict(),
        "method": "hmc",
        "reference": reference.to_dict(),
        "gradients_per_chain": int(chains.evaluations),
    }
    n = len(info["chain"])
    with StoreWriter(out_path, attrs, kind="reference", expected_samples=n) as writer:
        writer.append(state=states, info=info)
    return open_store(out_path)
