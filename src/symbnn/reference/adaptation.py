"""Step sizes for HMC: a starting guess by doubling or halving, and dual averaging during
burn-in (Hoffman & Gelman 2014, Algorithms 4 and 5), one step size per chain.

Each chain's numbers are Python floats computed with `math`, chain by chain: a vectorised
exp or log over the chains may round an element differently depending on whether it falls in
the vector loop or its scalar tail, which would make a chain's step size depend on its place
in the batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

# Hoffman & Gelman's constants: gamma (how hard the iterate is pulled), t0 (damps the first
# iterations), kappa (the averaging's forgetting exponent); the iterate is pulled toward
# log(10 * initial step size)
GAMMA = 0.05
T0 = 10.0
KAPPA = 0.75
SHRINK_TARGET = 10.0

# the starting guess stops after this many doublings or halvings (a factor of 2^50 either way)
MAX_DOUBLINGS = 50


def log_accept(energy_error: float) -> float:
    """log min(1, exp(-dH)); -inf where dH is not finite (a divergent trajectory)."""
    if not math.isfinite(energy_error):
        return -math.inf
    return min(0.0, -energy_error)


class DualAveraging:
    """Dual averaging of one chain's log step size toward the acceptance probability
    `target`: `update(accept_prob)` after each burn-in iteration; `step_size` is the iterate
    to use next, `final` the averaged step size to freeze after burn-in."""

    def __init__(self, initial: float, target: float) -> None:
        if not 0.0 < target < 1.0:
            raise ValueError(f"target acceptance must lie in (0, 1), got {target}")
        if not initial > 0:
            raise ValueError(f"the initial step size must be positive, got {initial}")
        self.target = float(target)
        self.mu = math.log(SHRINK_TARGET * initial)
        self.log_step = math.log(initial)
        self.log_average = 0.0
        self.gap = 0.0  # H-bar: running mean of target - acceptance
        self.iteration = 0

    @property
    def step_size(self) -> float:
        return math.exp(self.log_step)

    @property
    def final(self) -> float:
        """The averaged step size (the initial one before any update)."""
        return self.step_size if self.iteration == 0 else math.exp(self.log_average)

    def update(self, accept_prob: float) -> None:
        self.iteration += 1
        m = self.iteration
        weight = 1.0 / (m + T0)
        self.gap = self.gap * (1.0 - weight) + (self.target - accept_prob) * weight
        self.log_step = self.mu - self.gap * (math.sqrt(m) / GAMMA)
        eta = m**-KAPPA
        self.log_average = self.log_step * eta + self.log_average * (1.0 - eta)


def reasonable_step_sizes(
    energy_change: Callable[[list[float]], Sequence[float]], start: float, chains: int
) -> list[float]:
    """Per chain, a step size at which one leapfrog step is accepted with probability near
    1/2: from `start`, doubled while exp(-dH) > 1/2, or halved while it is below.
    `energy_change(step_sizes)` is each chain's H after one leapfrog step minus H before, from
    a fixed state and momentum; chains that have stopped keep their step size (and their
    result is ignored)."""
    log_half = math.log(0.5)
    steps = [float(start)] * chains
    first = energy_change(steps)
    directions = [1.0 if log_accept(e) > log_half else -1.0 for e in first]
    active = [True] * chains
    for _ in range(MAX_DOUBLINGS):
        trial = [s * 2.0**d if a else s for s, d, a in zip(steps, directions, active)]
        changes = energy_change(trial)
        for k in range(chains):
            if active[k]:
                steps[k] = trial[k]
                # on: while the acceptance is still on the starting side of 1/2
                active[k] = directions[k] * log_accept(changes[k]) > directions[k] * log_half
        if not any(active):
            break
    return steps
