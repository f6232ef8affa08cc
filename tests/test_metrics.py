import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from symbnn.metrics import (
    accuracy,
    aupr,
    brier,
    check_labels,
    check_probabilities,
    ece,
    fpr_at_95,
    mutual_information,
    ood_scores,
    uncertainty_metrics,
)

LN2 = math.log(2)


def H(*p):
    return -sum(x * math.log(x) for x in p if x > 0)


def random_probs(k, n, c, seed=0, dtype=np.float64):
    logits = np.random.default_rng(seed).normal(size=(k, n, c)) * 2
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(dtype)


# ------------------------------------------------------------------ accuracy, ECE, Brier


def test_accuracy_ties_take_the_first_class():
    p = np.array([[0.5, 0.5], [0.3, 0.7]])
    assert accuracy(p, [0, 0]) == 0.5
    assert accuracy(p, [1, 1]) == 0.5
    # Two members that disagree average to a tie: class 0 wins.
    members = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
    assert accuracy(members, [0]) == 1.0


def test_all_correct_and_all_wrong_by_hand():
    p = np.tile([0.8, 0.2], (4, 1))
    assert accuracy(p, np.zeros(4, int)) == 1.0
    assert ece(p, np.zeros(4, int)) == pytest.approx(0.2)  # |1 - 0.8|
    assert brier(p, np.zeros(4, int)) == pytest.approx(0.08)  # 0.2^2 + 0.2^2
    assert accuracy(p, np.ones(4, int)) == 0.0
    assert ece(p, np.ones(4, int)) == pytest.approx(0.8)  # |0 - 0.8|
    assert brier(p, np.ones(4, int)) == pytest.approx(1.28)  # 0.8^2 + 0.8^2


def test_ece_bins_by_hand():
    # 15 bins: 0.95 -> (14/15, 1], 0.55 -> (8/15, 9/15].
    p = np.array([[0.95, 0.05], [0.95, 0.05], [0.45, 0.55]])
    y = np.array([0, 1, 1])
    # bin 14: |(1 - .95) + (0 - .95)| = .9; bin 8: |1 - .55| = .45; / N
    assert ece(p, y) == pytest.approx((0.9 + 0.45) / 3)
    # Two bins [0, .5], (.5, 1]: a confidence of exactly .5 goes low, exactly 1 goes in the last.
    p = np.array([[0.5, 0.5], [0.75, 0.25], [1.0, 0.0]])
    y = np.array([0, 1, 0])
    assert ece(p, y, bins=2) == pytest.approx((0.5 + 0.75) / 3)
    # Confidence below 1/15 (20 uniform classes): both in the first bin, |(1 - .05) + (0 - .05)| / 2.
    assert ece(np.full((2, 20), 0.05), [0, 1]) == pytest.approx(0.45)


def test_brier_by_hand_and_ensemble_average():
    p = np.array([[0.7, 0.2, 0.1], [0.7, 0.2, 0.1]])
    assert brier(p, [0, 2]) == pytest.approx((0.14 + 1.34) / 2)
    members = np.array([[[0.9, 0.1, 0.0]], [[0.5, 0.3, 0.2]]])  # mean (.7, .2, .1)
    assert brier(members, [0]) == pytest.approx(0.14)


def test_single_class():
    ones_in, ones_out = np.ones((3, 4, 1)), np.ones((3, 5, 1))
    m = uncertainty_metrics(ones_in, np.zeros(4, int), ones_out)
    assert m["accuracy"] == 1.0 and m["ece"] == 0.0 and m["brier"] == 0.0
    assert m["idmi"] == 0.0 and m["oodmi"] == 0.0
    # Every score is 0: one threshold, AP is the base rate, and all in-distribution inputs flag.
    assert m["aupr"] == pytest.approx(5 / 9, abs=1e-15)
    assert m["fpr95"] == 1.0
    assert np.all(ood_scores(ones_in, "entropy") == 0)


# ---------------------------------------------------------------------------- OOD scores


def test_aupr_ties_by_hand_and_fpr_tie_rule():
    s_in, s_out = np.array([0.2, 0.5]), np.array([0.5, 0.8])
    # t=.8: P=1, R=1/2; t=.5 (one of each): P=2/3, R=1. Ordering the tie either way would give 1 or 5/6.
    assert aupr(s_in, s_out) == pytest.approx(5 / 6)
    assert aupr(s_in, s_out) == pytest.approx(
        average_precision_score([0, 0, 1, 1], np.r_[s_in, s_out])
    )
    # t* = 2nd largest OOD score = .5; the ID input tied at .5 is a false positive.
    assert fpr_at_95(s_in, s_out) == 0.5
    # ceil(.95 * 20) = 19th largest of 1..20 is 2: ID scores 2 and 5 flag.
    assert fpr_at_95([1.0, 2.0, 5.0], np.arange(1.0, 21.0)) == pytest.approx(2 / 3)
    # OOD ties at t*: 18 OOD at 1 and two at 0 -> t* = 0 flags everything.
    tied = np.r_[np.zeros(2), np.ones(18)]
    assert fpr_at_95(tied, tied) == 1.0


def test_identical_sets_give_the_base_rate():
    s = np.random.default_rng(1).random(20)
    assert aupr(s, s) == 0.5  # P = 1/2 at every threshold
    assert fpr_at_95(s, s) == 0.95  # 19 of 20 distinct scores flag
    assert fpr_at_95(s[:10], s[:10]) == 1.0  # ceil(9.5) = 10: all flag
    # The same distribution with twice the OOD inputs (each value twice): base rate 2/3.
    assert aupr(s, np.r_[s, s]) == pytest.approx(2 / 3, abs=1e-15)
    # All scores tied, unequal sizes.
    assert aupr(np.zeros(3), np.zeros(5)) == pytest.approx(5 / 8, abs=1e-15)


def test_perfect_and_reversed_separation():
    assert aupr([0.1, 0.2, 0.3], [0.5, 0.6]) == 1.0
    assert fpr_at_95([0.1, 0.2, 0.3], [0.5, 0.6]) == 0.0
    # Reversed: OOD at ranks 3, 4, 5 -> AP = (1/3 + 2/4 + 3/5) / 3.
    assert aupr([0.5, 0.6], [0.1, 0.2, 0.3]) == pytest.approx(43 / 90)
    assert fpr_at_95([0.5, 0.6], [0.1, 0.2, 0.3]) == 1.0


@pytest.mark.parametrize("seed", range(6))
def test_aupr_matches_sklearn(seed):
    rng = np.random.default_rng(seed)
    n_in, n_out = rng.integers(1, 60, size=2)
    s_in, s_out = rng.normal(size=n_in), rng.normal(0.5, size=n_out)
    if seed % 2:  # coarse scores: many ties within and across the sets
        s_in, s_out = np.round(s_in, 1), np.round(s_out, 1)
    want = average_precision_score(np.r_[np.zeros(n_in), np.ones(n_out)], np.r_[s_in, s_out])
    assert aupr(s_in, s_out) == pytest.approx(want, rel=1e-12)
    assert aupr(
        torch.tensor(s_in, dtype=torch.float32), torch.tensor(s_out, dtype=torch.float32)
    ) == pytest.approx(
        average_precision_score(
            np.r_[np.zeros(n_in), np.ones(n_out)], np.r_[s_in, s_out].astype(np.float32)
        ),
        rel=1e-12,
    )


def test_mutual_information_by_hand():
    same = np.repeat(random_probs(1, 5, 4, seed=2), 3, axis=0)
    np.testing.assert_allclose(mutual_information(same), 0.0, atol=1e-14)
    disagree = np.array([[[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]]])
    assert mutual_information(disagree)[0] == pytest.approx(LN2)
    half = np.array([[[0.5, 0.5]], [[1.0, 0.0]]])
    assert mutual_information(half)[0] == pytest.approx(H(0.75, 0.25) - LN2 / 2)
    out = mutual_information(torch.tensor(disagree))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    assert isinstance(mutual_information(disagree), np.ndarray)


def test_ood_score_kinds():
    probs = np.array([[[0.6, 0.4], [1.0, 0.0]], [[0.2, 0.8], [1.0, 0.0]]])  # p = (.4, .6), (1, 0)
    np.testing.assert_allclose(ood_scores(probs), [0.4, 0.0])
    np.testing.assert_allclose(ood_scores(probs, "entropy"), [H(0.4, 0.6), 0.0])
    np.testing.assert_allclose(
        ood_scores(probs, "mi"), [H(0.4, 0.6) - (H(0.6, 0.4) + H(0.2, 0.8)) / 2, 0.0]
    )
    np.testing.assert_allclose(
        ood_scores(probs[0], "entropy"), [H(0.6, 0.4), 0.0]
    )  # (N, C) predictive
    with pytest.raises(ValueError, match="unknown OOD score 'max'"):
        ood_scores(probs, "max")
    with pytest.raises(ValueError, match=r"expected shape \(K, N, C\)"):
        ood_scores(probs[0], "mi")


# ------------------------------------------------------------------------ everything at once

PROBS_IN = np.array([[[1.0, 0.0], [0.0, 1.0]], [[0.6, 0.4], [0.2, 0.8]]])  # p = (.8, .2), (.1, .9)
PROBS_OUT = np.array([[[1.0, 0.0], [0.5, 0.5]], [[0.0, 1.0], [0.5, 0.5]]])  # p = (.5, .5) twice
LABELS = np.array([0, 0])
MI_IN = [H(0.8, 0.2) - H(0.6, 0.4) / 2, H(0.1, 0.9) - H(0.2, 0.8) / 2]


def test_uncertainty_metrics_by_hand():
    m = uncertainty_metrics(PROBS_IN, LABELS, PROBS_OUT)
    assert m == pytest.approx(
        {
            "accuracy": 0.5,
            "ece": (0.2 + 0.9) / 2,
            "brier": (0.08 + 1.62) / 2,
            "nll": -(np.log(0.8) + np.log(0.1)) / 2,  # predictive p_0 = .8, .1
            "aupr": 1.0,  # msp: in .2, .1; out .5, .5
            "fpr95": 0.0,
            "idmi": sum(MI_IN) / 2,
            "oodmi": LN2 / 2,
        }
    )
    assert all(type(v) is float for v in m.values())
    # MI scores: out (ln 2, 0), in (.164, .075): ranks OOD, ID, ID, OOD -> AP = 1/2 + 1/2 * 2/4;
    # t* = 0 (2nd largest OOD score) flags both ID inputs.
    m = uncertainty_metrics(PROBS_IN, LABELS, PROBS_OUT, score="mi")
    assert m["aupr"] == pytest.approx(0.75) and m["fpr95"] == 1.0
    m = uncertainty_metrics(PROBS_IN, LABELS, PROBS_OUT, score="entropy")
    assert m["aupr"] == 1.0 and m["fpr95"] == 0.0


def test_ood_set_identical_to_in_distribution():
    probs = random_probs(3, 20, 5, seed=3)
    m = uncertainty_metrics(probs, np.zeros(20, int), probs)
    assert m["aupr"] == 0.5
    assert m["fpr95"] == 0.95  # the 20 MSP scores are distinct: t* flags 19 of each
    assert m["idmi"] == m["oodmi"] > 0


def test_batches_dtypes_and_tensors_agree():
    probs_in, probs_out = random_probs(4, 23, 6, seed=4), random_probs(4, 11, 6, seed=5)
    labels = np.random.default_rng(6).integers(0, 6, 23)
    want = uncertainty_metrics(probs_in, labels, probs_out, score="entropy")
    assert uncertainty_metrics(
        probs_in, labels, probs_out, score="entropy", batch=5
    ) == pytest.approx(want, rel=1e-12)
    got = uncertainty_metrics(
        torch.tensor(probs_in),
        torch.tensor(labels),
        torch.tensor(probs_out),
        score="entropy",
        batch=7,
    )
    assert got == pytest.approx(want, rel=1e-12)
    # float16 storage: accepted, and close to the float64 values.
    half = uncertainty_metrics(
        probs_in.astype(np.float16), labels, probs_out.astype(np.float16), score="entropy"
    )
    assert half == pytest.approx(want, abs=5e-3)


def test_zarr_array_is_read_in_blocks(tmp_path):
    zarr = pytest.importorskip("zarr")
    probs = random_probs(3, 9, 4, seed=7, dtype=np.float16)
    arr = zarr.create_array(
        tmp_path / "p.zarr", shape=probs.shape, dtype="float16", chunks=(1, 4, 4)
    )
    arr[...] = probs
    np.testing.assert_allclose(
        mutual_information(arr, batch=4), mutual_information(probs), rtol=1e-12
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_tensors_stay_on_the_gpu():
    probs = torch.tensor(random_probs(3, 50, 5, seed=8), device="cuda", dtype=torch.float16)
    scores = ood_scores(probs, "mi")
    assert scores.device.type == "cuda"
    np.testing.assert_allclose(
        scores.cpu().numpy(), ood_scores(probs.cpu(), "mi").numpy(), rtol=1e-10, atol=1e-12
    )
    labels = torch.zeros(50, dtype=torch.int64, device="cuda")
    assert uncertainty_metrics(probs, labels, probs) == pytest.approx(
        uncertainty_metrics(probs.cpu(), labels.cpu(), probs.cpu()), rel=1e-10
    )


# ---------------------------------------------------------------------------- bad inputs


def test_rows_not_summing_to_one_name_the_array():
    bad = np.array([[[0.5, 0.47], [0.5, 0.5]]], dtype=np.float32)
    with pytest.raises(
        ValueError, match=r"predictions 'test': rows must sum to 1 .*worst row off by 0\.03"
    ):
        uncertainty_metrics(bad, [0, 0], PROBS_OUT[:1], names=("test", "ood"))
    with pytest.raises(ValueError, match=r"predictions 'ood': rows must sum"):
        uncertainty_metrics(PROBS_OUT[:1], [0, 0], bad, names=("test", "ood"))
    # float16 storage rounding is tolerated, the same error in float32 is not.
    slightly = np.array([[[0.5, 0.495]]])
    check_probabilities(slightly.astype(np.float16), "x")
    with pytest.raises(ValueError, match="within 0.0001"):
        check_probabilities(slightly.astype(np.float32), "x")


def test_nan_negative_and_shape_errors():
    nan = np.array([[[0.5, np.nan]]])
    with pytest.raises(
        ValueError, match=r"predictions 'test': contains NaN or inf .*member 0, input 0, class 1"
    ):
        check_probabilities(nan, "test")
    with pytest.raises(ValueError, match="predictions 'p': contains NaN"):
        accuracy(torch.tensor(nan[0]), [0])
    with pytest.raises(ValueError, match="predictions 'test': contains negative"):
        check_probabilities(np.array([[1.5, -0.5]]), "test")
    with pytest.raises(
        ValueError, match=r"predictions 'test': expected shape \(N, C\) or \(K, N, C\), got \(4,\)"
    ):
        check_probabilities(np.full(4, 0.25), "test")
    with pytest.raises(
        ValueError, match="predictions 'ood': 3 members and 2 classes, but 'in' has 2 and 2"
    ):
        uncertainty_metrics(
            PROBS_IN, LABELS, np.concatenate([PROBS_OUT, PROBS_OUT[:1]]), names=("in", "ood")
        )


def test_label_errors_name_the_array():
    with pytest.raises(ValueError, match="labels of predictions 'test': 3 labels for 2 inputs"):
        uncertainty_metrics(PROBS_IN, [0, 1, 1], PROBS_OUT, names=("test", "ood"))
    with pytest.raises(ValueError, match=r"label 2 at input 1 is outside \[0, 2\)"):
        brier(PROBS_IN, [0, 2])
    with pytest.raises(ValueError, match="must be integers"):
        check_labels(np.array([0.0, 1.0]), 2, 2, "test")
    with pytest.raises(ValueError, match="score_out: scores contain NaN"):
        aupr([0.1], [np.nan])
