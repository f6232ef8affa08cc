"""The fused CPU pass of symbnn.metrics (symbnn.ensemble_pass) against a straightforward
float64 implementation of the definitions, its validation messages, and its routes (in place,
converted blocks, torch) against each other."""

import math

import numba
import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from symbnn import ensemble_pass
from symbnn.metrics import (
    _per_input,
    aupr,
    fpr_at_95,
    mutual_information,
    ood_scores,
    uncertainty_metrics,
)


def softmax_probs(k, n, c, seed, dtype=np.float32, sharp=2.0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(k, n, c)) * sharp
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).astype(dtype)


# ------------------------------------------------------------------ the float64 reference


def entropy(q):
    return -np.where(q > 0, q * np.log(np.where(q > 0, q, 1.0)), 0.0).sum(-1)


def reference_per_input(probs, labels=None):
    members = probs.astype(np.float64)
    members = members / members.sum(-1, keepdims=True)
    p = members.mean(0)
    out = {
        "p": p,
        "conf": p.max(-1),
        "pred": p.argmax(-1),
        "entropy": entropy(p),
        "mi": np.maximum(entropy(p) - entropy(members).mean(0), 0.0),
    }
    if labels is not None:
        onehot = np.eye(p.shape[-1])[labels]
        out["correct"] = (out["pred"] == labels).astype(float)
        out["brier"] = ((p - onehot) ** 2).sum(-1)
        out["nll"] = -np.log(np.maximum(p[np.arange(len(labels)), labels], 2.0**-24))
    return out


def reference_fpr95(s_in, s_out):
    """The smallest P_in(score >= t) over thresholds t with P_out(score >= t) >= 0.95."""
    best = 1.0
    for t in np.unique(np.r_[s_in, s_out]):
        if (s_out >= t).mean() >= 0.95:
            best = min(best, (s_in >= t).mean())
    return best


def reference_metrics(probs_in, labels, probs_out, score, bins=15):
    a, b = reference_per_input(probs_in, labels), reference_per_input(probs_out)
    ece = 0.0
    for i in range(bins):  # bins (i/B, (i+1)/B], the first closed at 0
        lo, hi = i / bins, (i + 1) / bins
        inside = (a["conf"] > lo) & (a["conf"] <= hi) | ((i == 0) & (a["conf"] <= hi))
        if inside.any():
            ece += abs(a["correct"][inside].sum() - a["conf"][inside].sum()) / len(labels)

    def scores(x):
        return {"msp": 1 - x["conf"], "entropy": x["entropy"], "mi": x["mi"]}[score]

    s_in, s_out = scores(a), scores(b)
    return {
        "accuracy": a["correct"].mean(),
        "ece": ece,
        "brier": a["brier"].mean(),
        "nll": a["nll"].mean(),
        "aupr": average_precision_score(
            np.r_[np.zeros(len(s_in)), np.ones(len(s_out))], np.r_[s_in, s_out]
        ),
        "fpr95": reference_fpr95(s_in, s_out),
        "idmi": a["mi"].mean(),
        "oodmi": b["mi"].mean(),
    }


CASES = [  # (K, N, M, C): odd sizes so that thread runs end mid-array; C = 1 and C > 16
    (7, 333, 211, 10),
    (1, 50, 40, 3),
    (3, 1201, 17, 37),
    (16, 1000, 1000, 10),
    (2, 9, 5, 1),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("score", ["msp", "entropy", "mi"])
def test_metrics_match_the_float64_reference(case, score):
    k, n, m, c = case
    labels = np.random.default_rng(1).integers(0, c, n)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-7)):
        probs_in = softmax_probs(k, n, c, seed=2, dtype=dtype)
        probs_out = softmax_probs(k, m, c, seed=3, dtype=dtype, sharp=0.7)
        want = reference_metrics(probs_in, labels, probs_out, score)
        got = uncertainty_metrics(probs_in, labels, probs_out, score=score)
        assert got.keys() == want.keys()
        for key in want:
            assert got[key] == pytest.approx(want[key], abs=tol, rel=tol), (dtype, key)
        fewer = uncertainty_metrics(probs_in, labels, probs_out, score, mutual_information=False)
        assert fewer == {key: v for key, v in got.items() if key not in ("idmi", "oodmi")}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_per_input_values_match_the_reference(dtype):
    probs = softmax_probs(5, 400, 10, seed=4, dtype=dtype)
    want = reference_per_input(probs)
    tol = {np.float64: 1e-13, np.float32: 1e-7, np.float16: 1e-13}[dtype]
    np.testing.assert_allclose(mutual_information(probs), want["mi"], rtol=0, atol=tol)
    np.testing.assert_allclose(ood_scores(probs, "entropy"), want["entropy"], rtol=0, atol=tol)
    np.testing.assert_allclose(ood_scores(probs), 1 - want["conf"], rtol=0, atol=tol)


def test_float32_members_are_weighted_by_their_row_sums():
    """float32: p = sum_k x_k / sum_k s_k and the entropies weighted by s_k / sum_k s_k
    (symbnn.ensemble_pass); float64: the plain mean of the renormalised members."""
    rng = np.random.default_rng(13)
    probs = softmax_probs(5, 200, 6, seed=13, dtype=np.float64)
    probs *= 1 + 2e-5 * rng.uniform(-1, 1, (5, 200, 1))  # rows off 1 within the tolerance
    x = probs.astype(np.float32).astype(np.float64)
    s = x.sum(-1, keepdims=True)
    p = x.sum(0) / s.sum(0)
    weights = (s / s.sum(0))[..., 0]
    mi = entropy(p) - (weights * entropy(x / s)).sum(0)
    got, _ = _per_input(probs.astype(np.float32), "p", {"conf", "mi"}, ndim=(3,))
    np.testing.assert_allclose(got["conf"], p.max(-1), rtol=1e-13)
    np.testing.assert_allclose(got["mi"], mi, rtol=0, atol=1e-7)
    plain, _ = _per_input(probs, "p", {"conf", "mi"}, ndim=(3,))
    want = reference_per_input(probs)
    np.testing.assert_allclose(plain["conf"], want["conf"], rtol=1e-13)
    np.testing.assert_allclose(plain["mi"], want["mi"], rtol=0, atol=1e-13)
    # the two predictives differ by about max |s_k - 1| (here 2e-5) times the members' spread
    gap = np.abs(got["conf"] - plain["conf"]).max()
    assert 0 < gap < 2e-5


def test_identical_members_have_zero_mutual_information():
    one = softmax_probs(1, 300, 10, seed=5, dtype=np.float64)
    assert np.all(mutual_information(np.repeat(one, 4, axis=0)) <= 1e-15)
    one32 = one.astype(np.float32)
    assert np.all(mutual_information(np.repeat(one32, 4, axis=0)) < 1e-6)  # float32 logs


def test_routes_and_layouts_agree():
    probs = softmax_probs(6, 517, 10, seed=6, dtype=np.float32)
    labels = np.random.default_rng(7).integers(0, 10, 517)
    want, _ = _per_input(probs, "p", {"conf", "mi", "brier", "nll"}, ndim=(3,), labels=labels)
    variants = {
        "torch tensor (in place)": torch.from_numpy(probs),
        "non-contiguous view": np.ascontiguousarray(probs.transpose(1, 0, 2)).transpose(1, 0, 2),
        "small blocks": probs,
    }
    for label, x in variants.items():
        batch = 50 if label == "small blocks" else None
        got, _ = _per_input(
            x, "p", {"conf", "mi", "brier", "nll"}, ndim=(3,), labels=labels, batch=batch
        )
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=f"{label}: {key}")
    # the torch route (the GPU's, here on the CPU) computes in float64 throughout
    got, _ = _per_input(
        torch.from_numpy(probs),
        "p",
        {"conf", "mi", "brier", "nll"},
        ndim=(3,),
        labels=labels,
        route="torch",
    )
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-7, err_msg=key)
    # bfloat16 is converted block by block (and allowed its storage's 1e-2 row tolerance)
    rounded = torch.from_numpy(probs).bfloat16()
    np.testing.assert_allclose(
        mutual_information(rounded).numpy(),
        reference_per_input(rounded.float().numpy())["mi"],
        atol=1e-7,
    )
    # integer probabilities (one-hot members) are read as float32
    onehot = np.eye(4, dtype=np.uint8)[np.random.default_rng(8).integers(0, 4, (3, 20))]
    np.testing.assert_allclose(
        mutual_information(onehot), reference_per_input(onehot)["mi"], atol=1e-6
    )


def test_results_do_not_depend_on_the_thread_count():
    probs = softmax_probs(64, 20_000, 10, seed=9)  # large enough for the parallel path
    labels = np.random.default_rng(10).integers(0, 10, 20_000)
    before = numba.get_num_threads()
    try:
        results = []
        for threads in sorted({1, before}):
            numba.set_num_threads(threads)
            results.append(uncertainty_metrics(probs, labels, probs[:, :5000], score="mi"))
    finally:
        numba.set_num_threads(before)
    assert all(r == results[0] for r in results)


def test_run_rows_split_the_inputs_evenly():
    for n, c, threads in ((10_000, 10, 2), (7, 1000, 4), (1, 3, 2), (100_003, 100, 3)):
        rows = ensemble_pass.run_rows(n, c, threads)
        runs = -(-n // rows)
        assert rows * c <= ensemble_pass.RUN_ELEMENTS + c
        assert runs >= min(n, threads)  # every thread has work


# ------------------------------------------------------------------------------ validation


@pytest.mark.parametrize("kind", ["numpy32", "numpy16", "torch32", "blocks"])
def test_bad_values_are_named_by_member_and_input(kind):
    good = softmax_probs(4, 300, 5, seed=11, dtype=np.float64)
    cast = {"numpy32": np.float32, "numpy16": np.float16, "torch32": np.float32}
    batch = 40 if kind == "blocks" else None

    def wrap(x):
        x = x.astype(cast.get(kind, np.float64))
        return torch.from_numpy(x) if kind == "torch32" else x

    labels = np.zeros(300, dtype=np.int64)
    nan = good.copy()
    nan[2, 207, 3] = np.nan
    nan[3, 250, 0] = np.inf  # later: the first one is named
    with pytest.raises(
        ValueError, match=r"'t': contains NaN or inf .*member 2, input 207, class 3"
    ):
        uncertainty_metrics(wrap(nan), labels, wrap(good), names=("t", "o"), batch=batch)
    negative = good.copy()
    negative[1, 99, 4] = -0.25
    with pytest.raises(ValueError, match=r"'o': contains negative .*-0\.25 at member 1, input 99"):
        uncertainty_metrics(wrap(good), labels, wrap(negative), names=("t", "o"), batch=batch)
    off = good.copy()
    off[3, 5] *= 1.001  # within float16's tolerance (1e-2), not float32/64's (1e-4)
    off[0, 280] *= 1.05  # the worst row
    with pytest.raises(ValueError, match=r"rows must sum to 1 .*off by 0\.0.*member 0, input 280"):
        mutual_information(wrap(off), batch=batch)
    labels[17] = 5
    with pytest.raises(ValueError, match=r"label 5 at input 17 is outside \[0, 5\)"):
        uncertainty_metrics(wrap(good), labels, wrap(good), batch=batch)


def test_complex_and_text_arrays_are_refused():
    with pytest.raises(ValueError, match="probabilities must be real numbers, got dtype complex64"):
        mutual_information(np.ones((2, 3, 1), dtype=np.complex64))
    with pytest.raises(ValueError, match="probabilities must be real numbers"):
        mutual_information(np.full((2, 3, 1), "a"))


# ---------------------------------------------------------------------------- detection


@pytest.mark.parametrize("seed", range(8))
def test_detection_matches_its_definitions_with_ties(seed):
    rng = np.random.default_rng(seed)
    n_in, n_out = rng.integers(1, 80, size=2)
    s_in, s_out = rng.normal(size=n_in), rng.normal(0.7, size=n_out)
    if seed % 2:
        s_in, s_out = np.round(s_in, 1), np.round(s_out, 1)
    labels = np.r_[np.zeros(n_in), np.ones(n_out)]
    assert aupr(s_in, s_out) == pytest.approx(
        average_precision_score(labels, np.r_[s_in, s_out]), rel=1e-12
    )
    assert fpr_at_95(s_in, s_out) == reference_fpr95(s_in, s_out)
    assert fpr_at_95(torch.tensor(s_in), torch.tensor(s_out)) == reference_fpr95(s_in, s_out)


def test_log_of_the_pass_is_within_4e_7_relative():
    from symbnn.ensemble_pass import _xlogx32

    @numba.njit
    def xlogx(values):
        out = np.empty(values.shape[0], dtype=np.float64)
        for i in range(values.shape[0]):
            out[i] = _xlogx32(values[i])
        return out

    x = np.r_[
        np.float32(0.0),
        np.float32(1.0),
        np.float32(1e-45),  # subnormal
        np.geomspace(1e-38, 1.0, 20001).astype(np.float32),
        np.random.default_rng(12).random(20001).astype(np.float32),
    ]
    got = xlogx(x)
    exact = np.where(x > 0, x.astype(np.float64) * np.log(np.where(x > 0, x, 1.0)), 0.0)
    assert got[0] == 0.0 and got[1] == 0.0 and abs(got[2]) < 1e-40
    normal = x >= np.finfo(np.float32).tiny  # subnormals: |x log x| < 1.1e-36, not exact
    assert np.all(np.abs(got - exact)[normal] <= 4e-7 * np.abs(exact)[normal])
    assert np.all(np.abs(got[~normal]) < 1.1e-36)  # |x log x| < 2^-126 * 88
    assert math.isfinite(got.sum())
