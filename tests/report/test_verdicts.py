import numpy as np
import pytest

from symbnn.report.verdicts import (
    CONTRADICTED,
    HOLDS,
    WITHIN_NOISE,
    all_of,
    compare_groups,
    compare_paired,
    min_p_value_rank_sum,
    min_p_value_signed_rank,
)


def test_a_clear_ordering_holds_and_its_reverse_is_contradicted():
    low, high = (
        [1.0, 1.1, 0.9, 1.2, 1.05, 0.95, 1.15, 0.85],
        [3.0, 3.2, 2.9, 3.1, 2.8, 3.3, 3.05, 2.95],
    )
    holds = compare_groups(low, high, claim_lower=True)
    assert holds.outcome == HOLDS and holds.p_value < 0.001 and holds.shift < 0
    assert compare_groups(high, low, claim_lower=True).outcome == CONTRADICTED


def test_ordered_means_within_the_spread_are_within_noise():
    # the case: a point estimate below the mean, but inside one standard deviation
    z = np.array([-1.5, -1.0, -0.5, -0.2, 0.2, 0.5, 1.0, 1.5])
    multi = 29.4 + 10.8 * z
    one = 34.9 + 10.8 * z[::-1]
    verdict = compare_groups(multi, one, claim_lower=True)
    assert np.mean(multi) < np.mean(one)
    assert verdict.outcome == WITHIN_NOISE and verdict.p_value > 0.05


def test_too_few_figures_can_never_hold():
    assert min_p_value_signed_rank(4) == pytest.approx(0.125)
    verdict = compare_paired([1, 2, 3, 4], [10, 20, 30, 40], claim_lower=True)
    assert verdict.outcome == WITHIN_NOISE and verdict.p_value is None
    assert "cannot reach" in verdict.text()
    assert min_p_value_rank_sum(8, 8) < 0.001


def test_paired_differences_decide_the_paired_claim():
    idmi = [0.10, 0.12, 0.09, 0.11, 0.13, 0.10, 0.08, 0.12]
    oodmi = [v + 0.05 + 0.001 * i for i, v in enumerate(idmi)]
    assert compare_paired(oodmi, idmi, claim_lower=False).outcome == HOLDS
    assert compare_paired(idmi, oodmi, claim_lower=False).outcome == CONTRADICTED
    noisy = [v + (0.02 if i % 2 else -0.02) for i, v in enumerate(idmi)]
    assert compare_paired(noisy, idmi, claim_lower=False).outcome == WITHIN_NOISE


def test_an_intersection_holds_only_when_every_part_holds():
    assert all_of([]) == WITHIN_NOISE
    h = compare_groups([1] * 8, [2] * 8, claim_lower=True)
    w = compare_groups([1, 2] * 4, [2, 1] * 4, claim_lower=True)
    c = compare_groups([2] * 8, [1] * 8, claim_lower=True)
    assert all_of([h, h]) == HOLDS
    assert all_of([h, w]) == WITHIN_NOISE
    assert all_of([h, w, c]) == CONTRADICTED
