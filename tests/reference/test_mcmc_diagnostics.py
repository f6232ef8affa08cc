"""The convergence diagnostics: split-R-hat and bulk and tail ESS against ArviZ where it is
installed (a test-only check: ArviZ is not a dependency), and on cases whose answer is known
by hand everywhere; nested R-hat on a hand-computed case and its limits."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from symbnn.reference.diagnostics import (
    ess_bulk,
    ess_tail,
    nested_rhat,
    rank_normalize,
    rhat,
    split_chains,
)


def ar1(chains: int, draws: int, phi: float, seed: int) -> np.ndarray:
    """Stationary AR(1) chains of unit variance: x_t = phi x_t-1 + sqrt(1 - phi^2) e_t."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((chains, draws))
    x = np.empty_like(noise)
    x[:, 0] = noise[:, 0]
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + math.sqrt(1 - phi**2) * noise[:, t]
    return x


def cases() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    shifted = rng.standard_normal((4, 101))
    shifted[0] += 1.5
    wide = rng.standard_normal((3, 60))
    wide[1] *= 3.0
    heavy = rng.standard_cauchy((4, 80))
    alternating = np.where(np.arange(64) % 2, 1.0, -1.0) + 0.1 * rng.standard_normal((2, 64))
    return [
        rng.standard_normal((4, 200)),
        ar1(3, 151, 0.9, 1),
        shifted,
        wide,
        heavy,
        alternating,
        rng.standard_normal((1, 40)),
    ]


@pytest.mark.parametrize("case", range(len(cases())))
def test_rhat_and_ess_match_arviz(case):
    az = pytest.importorskip("arviz")
    draws = cases()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = (
            az.rhat(draws, method="rank"),
            az.ess(draws, method="bulk"),
            az.ess(draws, method="tail"),
        )
    ours = (rhat(draws), ess_bulk(draws), ess_tail(draws))
    if draws.shape[0] > 1:
        assert ours[0] == pytest.approx(expected[0], rel=1e-10)
    assert ours[1] == pytest.approx(expected[1], rel=1e-10)
    assert ours[2] == pytest.approx(expected[2], rel=1e-10)


def test_iid_normal_chains_give_rhat_near_one_and_ess_near_the_draw_count():
    draws = np.random.default_rng(3).standard_normal((4, 1000))
    assert abs(rhat(draws) - 1.0) < 0.01
    assert 0.85 * 4000 < ess_bulk(draws) < 1.15 * 4000
    assert 0.75 * 4000 < ess_tail(draws) < 1.25 * 4000


def test_ess_of_autocorrelated_chains_follows_the_ar1_formula():
    # ESS = n (1 - phi) / (1 + phi) for an AR(1) chain
    phi = 0.8
    draws = ar1(4, 4000, phi, 7)
    expected = draws.size * (1 - phi) / (1 + phi)
    assert 0.85 * expected < ess_bulk(draws) < 1.15 * expected


def test_antithetic_chains_have_more_effective_draws_than_draws():
    draws = ar1(4, 2000, -0.5, 8)
    assert ess_bulk(draws) > draws.size * 1.5  # the formula gives 3 n


def test_shifted_chains_give_rhat_far_above_one():
    draws = np.random.default_rng(4).standard_normal((4, 500))
    draws[2] += 3.0
    # ranks bound the statistic (one chain of four all above the others: about 1.5)
    assert rhat(draws) > 1.3


def test_chains_of_different_spread_are_caught_by_the_folded_rhat():
    draws = np.random.default_rng(5).standard_normal((4, 1000))
    draws[0] *= 4.0  # same centre: only the distance to the median tells them apart
    assert rhat(draws) > 1.1


def test_a_trending_chain_is_caught_by_the_split():
    # one chain whose halves differ: without the split its mean would match the others
    draws = np.random.default_rng(6).standard_normal((4, 400)) * 0.1
    draws[:, :200] += 1.0
    assert rhat(draws) > 1.5


def test_three_dimensional_draws_give_one_value_per_quantity():
    rng = np.random.default_rng(9)
    draws = rng.standard_normal((3, 50, 4))
    draws[..., 2] += np.arange(3)[:, None]
    for fn in (rhat, ess_bulk, ess_tail):
        values = fn(draws)
        assert values.shape == (4,)
        expected = [fn(draws[..., q]) for q in range(4)]
        np.testing.assert_allclose(values, expected, rtol=1e-12)
    assert np.argmax(rhat(draws)) == 2


def test_split_and_rank_normalisation_by_hand():
    draws = np.arange(10.0).reshape(2, 5)  # odd count: the middle draw is left out
    split = split_chains(draws)
    assert split.tolist() == [[0, 1], [5, 6], [3, 4], [8, 9]]
    z = rank_normalize(np.array([[[3.0], [1.0]], [[2.0], [2.0]]]))
    # ranks 4, 1, 2.5, 2.5 of 4 draws: Phi^-1((r - 3/8) / 4.25)
    from scipy.stats import norm

    expected = norm.ppf((np.array([4, 1, 2.5, 2.5]) - 0.375) / 4.25)
    np.testing.assert_allclose(z.reshape(-1), expected)


def test_nested_rhat_on_a_hand_computed_case():
    # superchain A: chain means 1, 3; superchain B: 5, 7; every chain's variance 2.
    # B = var(2, 6) = 8; W = var of chain means in a superchain (2) + within-chain (2) = 4
    draws = np.array([[0.0, 2.0], [2.0, 4.0], [4.0, 6.0], [6.0, 8.0]])
    assert nested_rhat(draws, np.array([0, 0, 1, 1])) == pytest.approx(math.sqrt(3.0))


def test_nested_rhat_with_one_chain_per_superchain_is_the_plain_rhat():
    # sqrt(1 + B / W) = sqrt(R^2 + 1 / n) for the unsplit, unranked R-hat
    draws = np.random.default_rng(10).standard_normal((5, 30))
    draws[1] += 0.7
    n = draws.shape[1]
    w = draws.var(axis=1, ddof=1).mean()
    plain = math.sqrt(((n - 1) / n * w + draws.mean(axis=1).var(ddof=1)) / w)
    assert nested_rhat(draws, np.arange(5)) == pytest.approx(math.sqrt(plain**2 + 1 / n))


def test_nested_rhat_of_many_short_chains_tells_shared_from_distinct_modes():
    rng = np.random.default_rng(11)
    # 8 superchains of 16 chains with 4 draws each, every chain at its stationary law
    shared = rng.standard_normal((128, 4, 3))
    labels = np.repeat(np.arange(8), 16)
    assert (nested_rhat(shared, labels) < 1.05).all()
    distinct = shared + np.repeat(np.arange(8.0) - 3.5, 16)[:, None, None]
    assert (nested_rhat(distinct, labels) > 1.5).all()
    # one draw per chain: the chains' spread inside a superchain is the within part
    assert nested_rhat(shared[:, :1, 0], labels) < 1.1


def test_bad_draws_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="chains, draws"):
        rhat(np.zeros(10))
    with pytest.raises(ValueError, match="finite"):
        ess_bulk(np.array([[0.0, 1.0, np.nan, 2.0, 3.0]]))
    with pytest.raises(ValueError, match="at least 4 draws"):
        rhat(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="one superchain label per chain"):
        nested_rhat(np.zeros((4, 3)), np.array([0, 1]))
    with pytest.raises(ValueError, match="equal size"):
        nested_rhat(np.random.default_rng(0).standard_normal((3, 5)), np.array([0, 0, 1]))
