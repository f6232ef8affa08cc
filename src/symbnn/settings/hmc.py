"""Settings of the full-batch HMC reference posterior (docs/maths.md 4.7): a second target
beside the paper's, built only on request (`make run-hmc`, or `enabled: true`)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from symbnn.settings.base import MAX_DRAWS, MAX_NETWORKS, MAX_SEED, ConfigError, Section, setting

# burn-in iterations when `burn_in` is unset: a warm start from a trained network needs few,
# a start from the prior many more (the chains must first find a mode)
POOL_BURN_IN, PRIOR_BURN_IN = 20, 200


@dataclasses.dataclass(frozen=True)
class Reference(Section):
    DOC = (
        "the full-batch HMC reference posterior: chains on the whole training set under a "
        "Gaussian prior of precision N x the recipe's weight decay, written to "
        "reference/hmc.zarr beside the paper's target (which `posterior` keeps describing); "
        "built by `make run-hmc` (the workflow's target reference_all), and by every run when "
        "`enabled` is true"
    )
    enabled: bool = setting(
        False, "build the reference in every run (false: only the target reference_all does)"
    )
    chains: int = setting(8, "HMC chains, one momentum seed each", ge=1, le=MAX_NETWORKS)
    modes: int = setting(
        4,
        "starting networks the chains share, chain k starting from mode k mod modes (with "
        "start pool: the pool's kept modes); the chains of one mode form a superchain",
        ge=1,
        le=MAX_NETWORKS,
    )
    start: Literal["pool", "prior"] = setting(
        "pool",
        "where chains start: pool (the methods' pool's kept networks, whose seeds are "
        "disjoint from the target's) or prior (a draw from the Gaussian prior)",
    )
    burn_in: int | None = setting(
        None,
        f"adapting iterations before the kept ones; none: {POOL_BURN_IN} from the pool, "
        f"{PRIOR_BURN_IN} from the prior",
        ge=0,
        le=MAX_DRAWS * 10,
    )
    draws: int = setting(40, "kept samples per chain", ge=4, le=MAX_DRAWS)
    leapfrog_steps: int = setting(10, "leapfrog steps per trajectory", ge=1, le=10_000)
    target_accept: float = setting(
        0.65, "acceptance probability the step size is adapted toward", gt=0, lt=1
    )
    temperature: float = setting(1.0, "temperature T of the posterior (T < 1: cold)", gt=0)
    seed: int = setting(
        0,
        "seed of chain 0's momenta (chain k: seed + k); with start prior also its starting draw",
        ge=0,
        le=MAX_SEED,
    )
    test_digits: int = setting(
        20,
        "test inputs whose predictive probability of the true class is a diagnosed quantity",
        ge=1,
        le=MAX_NETWORKS,
    )

    def check(self, where: str) -> None:
        if self.modes > self.chains:
            raise ConfigError(
                f"{where}.modes: {self.modes} starting modes for {self.chains} chains; every "
                "mode needs a chain"
            )

    @property
    def burn_in_iterations(self) -> int:
        if self.burn_in is not None:
            return self.burn_in
        return POOL_BURN_IN if self.start == "pool" else PRIOR_BURN_IN

    def chain_seeds(self) -> list[int]:
        return [self.seed + k for k in range(self.chains)]

    def chain_modes(self) -> list[int]:
        """The starting mode of each chain."""
        return [k % self.modes for k in range(self.chains)]
