"""Verdicts with uncertainty: a claimed ordering between two sets of replicated figures is
decided by a stated test at a stated level, with three outcomes.

- ``holds``: the test rejects "no difference" at `LEVEL` and the difference points the claimed
  way;
- ``contradicted``: the test rejects and the difference points the other way;
- ``within noise``: the test does not reject (the figures do not say which way it goes).

Two tests (docs/maths.md, section 6.10, states them):

- `compare_groups`: two independent sets of figures (one value per mode of the one-mode
  variant against one per replicate of the multi-mode variant; one method's replicates against
  another row's) by the two-sided Mann-Whitney U test, exact when there are no ties; the
  direction is the sign of the Hodges-Lehmann shift (median of all pairwise differences).
- `compare_paired`: two figures measured on the same unit (OOD against in-distribution mutual
  information of one mode or replicate) by the two-sided Wilcoxon signed-rank test on the
  differences, exact for small samples; the direction is the sign of their median.

With too few figures a test can never reach the level (e.g. 4 paired values: the smallest
two-sided signed-rank p-value is 2/16 = 0.125): `min_p_value` says so, and such a case comes out
"within noise" with the reason given, never "holds".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

LEVEL = 0.05
HOLDS, WITHIN_NOISE, CONTRADICTED = "holds", "within noise", "contradicted"
OUTCOMES = (HOLDS, WITHIN_NOISE, CONTRADICTED)
RANK_SUM = "two-sided Mann-Whitney U"
SIGNED_RANK = "two-sided Wilcoxon signed-rank"


@dataclass(frozen=True)
class Verdict:
    outcome: str  # one of OUTCOMES
    test: str
    p_value: float | None  # None when there were too few figures to test
    shift: float  # estimated difference a - b (Hodges-Lehmann or median of differences)
    n: tuple[int, ...]  # figures on each side (one number for a paired test)
    note: str = ""

    def text(self) -> str:
        sizes = "/".join(map(str, self.n))
        p = "-" if self.p_value is None else f"{self.p_value:.3g}"
        return f"{self.test}, n={sizes}, p={p}{self.note}"


def _finite(values: Sequence[float]) -> np.ndarray:
    array = np.asarray([v for v in values if v is not None], dtype=np.float64)
    return array[np.isfinite(array)]


def min_p_value_rank_sum(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney test of these sizes can give."""
    return 2.0 / math.comb(n_a + n_b, n_a) if n_a and n_b else 1.0


def min_p_value_signed_rank(n: int) -> float:
    """The smallest two-sided p-value an exact signed-rank test of n differences can give."""
    return 2.0 / 2**n if n else 1.0


def _outcome(p: float | None, shift: float, claim_lower: bool, level: float) -> str:
    if p is None or p >= level or shift == 0:
        return WITHIN_NOISE
    return HOLDS if (shift < 0) == claim_lower else CONTRADICTED


def compare_groups(
    a: Sequence[float], b: Sequence[float], claim_lower: bool, level: float = LEVEL
) -> Verdict:
    """Is `a` below `b` (claim_lower) or above it (not claim_lower)? Two independent sets."""
    x, y = _finite(a), _finite(b)
    n = (len(x), len(y))
    if min(n) == 0:
        return Verdict(WITHIN_NOISE, RANK_SUM, None, math.nan, n, "; no figures to compare")
    shift = float(np.median(np.subtract.outer(x, y)))
    if min_p_value_rank_sum(*n) >= level:
        note = f"; {n[0]} and {n[1]} figures cannot reach p < {level}"
        return Verdict(WITHIN_NOISE, RANK_SUM, None, shift, n, note)
    p = float(stats.mannwhitneyu(x, y, alternative="two-sided", method="auto").pvalue)
    return Verdict(_outcome(p, shift, claim_lower, level), RANK_SUM, p, shift, n)


def compare_paired(
    a: Sequence[float], b: Sequence[float], claim_lower: bool, level: float = LEVEL
) -> Verdict:
    """Is `a` below (claim_lower) or above `b`, figure by figure on the same units?"""
    pairs = [(u, v) for u, v in zip(a, b) if u is not None and v is not None]
    diff = _finite([u - v for u, v in pairs])
    n = (len(diff),)
    if not len(diff):
        return Verdict(WITHIN_NOISE, SIGNED_RANK, None, math.nan, n, "; no figures to compare")
    shift = float(np.median(diff))
    if min_p_value_signed_rank(len(diff)) >= level:
        note = f"; {len(diff)} paired figures cannot reach p < {level}"
        return Verdict(WITHIN_NOISE, SIGNED_RANK, None, shift, n, note)
    if np.all(diff == 0):
        return Verdict(WITHIN_NOISE, SIGNED_RANK, 1.0, 0.0, n)
    p = float(stats.wilcoxon(diff, alternative="two-sided", method="auto").pvalue)
    return Verdict(_outcome(p, shift, claim_lower, level), SIGNED_RANK, p, shift, n)


def all_of(verdicts: Sequence[Verdict]) -> str:
    """An intersection of claims ("lowest among all rows" = below each other row): holds when
    every comparison holds (an intersection-union test, valid at the level of each one),
    contradicted when any is contradicted, within noise otherwise."""
    outcomes = [v.outcome for v in verdicts]
    if not outcomes:
        return WITHIN_NOISE
    if CONTRADICTED in outcomes:
        return CONTRADICTED
    return HOLDS if all(o == HOLDS for o in outcomes) else WITHIN_NOISE


def count_outcomes(outcomes: Sequence[str]) -> str:
    """'2 hold, 1 within noise, 0 contradicted' for a list of outcomes."""
    counts = {o: 0 for o in OUTCOMES}
    for outcome in outcomes:
        counts[outcome] += 1
    return (
        f"{counts[HOLDS]} hold, {counts[WITHIN_NOISE]} within noise, "
        f"{counts[CONTRADICTED]} contradicted"
    )


__all__ = [
    "CONTRADICTED",
    "HOLDS",
    "LEVEL",
    "OUTCOMES",
    "Verdict",
    "WITHIN_NOISE",
    "all_of",
    "compare_groups",
    "compare_paired",
    "count_outcomes",
    "min_p_value_rank_sum",
    "min_p_value_signed_rank",
]
