"""Izmailov et al.'s agreement and total variation (symbnn.reference.predictive) on hand-made
probability arrays, and the per-chain and per-unit tables on tiny fake predictions stores."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from symbnn.reference.predictive import (
    agreement,
    chain_table,
    compare,
    mean_predictive,
    summary_table,
    target_row,
    total_variation,
)


def test_identical_predictives_agree_fully_with_no_distance():
    p = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [1 / 3, 1 / 3, 1 / 3]])
    assert agreement(p, p) == 1.0 and total_variation(p, p) == 0.0


def test_a_constructed_case_gives_its_known_values():
    p = np.array([[0.6, 0.4], [0.9, 0.1], [0.2, 0.8], [0.5, 0.5]])
    q = np.array([[0.4, 0.6], [0.8, 0.2], [0.2, 0.8], [0.0, 1.0]])
    # argmax: p 0,0,1,0 (the tie goes to class 0) against q 1,0,1,1: 2 of 4 agree
    assert agreement(p, q) == 0.5
    # half L1 per digit: 0.2, 0.1, 0.0, 0.5 -> mean 0.2
    assert total_variation(p, q) == pytest.approx(0.2)


def test_disjoint_certain_predictives_are_at_distance_one():
    p, q = np.eye(3), np.roll(np.eye(3), 1, axis=1)
    assert agreement(p, q) == 0.0 and total_variation(p, q) == 1.0


def test_shapes_that_do_not_match_are_refused():
    with pytest.raises(ValueError, match=r"\(4, 2\) and \(4, 3\)"):
        total_variation(np.ones((4, 2)), np.ones((4, 3)))
    with pytest.raises(ValueError, match="non-empty"):
        agreement(np.ones((0, 2)), np.ones((0, 2)))


class FakePredictions:
    """A predictions store's reading interface over an in-memory (S, N, C) array."""

    def __init__(self, test):
        self.test, self.path = np.asarray(test, dtype=np.float16), Path("fake.zarr")
        self.n_samples = len(self.test)

    def read(self, name, rows=slice(None)):
        assert name == "test"
        return self.test[rows]


def random_probs(rng, shape):
    logits = rng.normal(size=shape)
    e = np.exp(logits)
    return e / e.sum(axis=-1, keepdims=True)


def test_the_mean_predictive_averages_the_chosen_samples_block_by_block(monkeypatch):
    monkeypatch.setattr("symbnn.reference.predictive.BLOCK", 2)
    probs = random_probs(np.random.default_rng(0), (5, 7, 3))
    store = FakePredictions(probs)
    expected = store.test[[0, 2, 3, 4]].astype(np.float64).mean(axis=0)
    assert np.allclose(mean_predictive(store, [0, 2, 3, 4]), expected)
    assert np.allclose(mean_predictive(store), store.test.astype(np.float64).mean(axis=0))


def test_units_and_chains_are_compared_with_their_own_samples():
    rng = np.random.default_rng(1)
    reference = FakePredictions(random_probs(rng, (6, 9, 4)))
    chains = np.repeat([0, 1, 2], 2)
    target = random_probs(rng, (9, 4))
    table = chain_table(reference, chains, target)
    assert table["chain"].to_list() == [0, 1, 2] and table["n_samples"].to_list() == [2, 2, 2]
    own = mean_predictive(reference, [2, 3])
    rest = mean_predictive(reference, [0, 1, 4, 5])
    assert table["tv_rest"][1] == pytest.approx(total_variation(rest, own))
    assert table["tv_target"][1] == pytest.approx(total_variation(target, own))
    # a method whose unit 1 is the reference itself: agreement 1 and TV 0 against it
    method = FakePredictions(np.concatenate([random_probs(rng, (2, 9, 4)), reference.test]))
    ref_mean = mean_predictive(reference)
    rows = compare(ref_mean, target, method, np.array([0, 0] + [1] * 6), ("m", "1"))
    assert [r["unit"] for r in rows] == [0, 1] and rows[1]["n_samples"] == 6
    assert rows[1]["agreement"] == 1.0 and rows[1]["tv"] == pytest.approx(0.0, abs=1e-12)
    assert rows[0]["tv_target"] == pytest.approx(
        total_variation(mean_predictive(method, [0, 1]), target)
    )
    summary = summary_table(pl.DataFrame([target_row(ref_mean, target, 3), *rows]))
    assert summary["compared"].to_list() == ["target", "m"]
    assert summary["units"].to_list() == [1, 2]


def test_one_chain_has_no_spread_to_compare_with():
    reference = FakePredictions(random_probs(np.random.default_rng(2), (3, 4, 2)))
    with pytest.raises(ValueError, match="one chain"):
        chain_table(reference, np.zeros(3, dtype=int), np.full((4, 2), 0.5))
