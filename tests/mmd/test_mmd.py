"""The MMD engine against a direct, one-kernel-at-a-time implementation, and its statistics."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.spatial.distance import cdist

from symbnn.mmd import (
    AggTestConfig,
    MMDInputError,
    aggtest,
    mmd_values,
    pooled_distances,
    two_sample_mmd,
)
from symbnn.mmd.aggtest import (
    _indicators,
    mmdagg_test,
    permutation_orders,
    permuted_statistics,
    small_group_statistics,
)
from symbnn.mmd.distances import PooledDistances, _centre_into
from symbnn.mmd.kernels import (
    _block_sums_cpu,
    _expm1_scaled,
    _mmd_values_numba,
    _mmd_values_torch,
    _packed_pairs,
    _segment_sums,
    all_bandwidths,
    centred_kernel_matrices,
)

SMALL_TEST = AggTestConfig(b1=199, b2=199, b3=30)


# --- the direct reference: raw samples, one kernel at a time --------------------------------


def group_indicators(n, m, n_perms, seed, device):
    """(n + m, 1 + n_perms) 0/1 matrix: column 0 marks the first n samples (the observed
    split), column p > 0 the n samples a uniform random permutation puts first."""
    return _indicators(permutation_orders(n, m, n_perms, seed), n, device)


def direct_bandwidths(cross: np.ndarray) -> np.ndarray:
    d = np.sort(cross.ravel())
    lam_min = d[0] if d[0] >= 0.1 else max(d[int(np.floor(0.05 * d.size))], 0.1)
    lam_max = max(d[-1], 0.3)
    return np.geomspace(lam_min / 2, 2 * lam_max, 10)


def direct_mmd(k: np.ndarray, n: int) -> float:
    """Unbiased MMD^2 straight from the formula of docs/maths.md, section 5, on a full kernel matrix."""
    m = k.shape[0] - n
    kxx, kyy, kxy = k[:n, :n], k[n:, n:], k[:n, n:]
    return (
        (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
        + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
        - 2 * kxy.sum() / (n * m)
    )


def direct_all(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    z = np.concatenate([x, y])
    n = len(x)
    values, bandwidths = [], []
    for metric, kernel in (
        ("cityblock", lambda d, lam: np.exp(-d / lam)),
        ("euclidean", lambda d, lam: np.exp(-(d**2) / lam**2)),
    ):
        lams = direct_bandwidths(cdist(x, y, metric))
        for lam in lams:
            values.append(direct_mmd(kernel(cdist(z, z, metric), lam), n))
        bandwidths.extend(lams)
    return np.array(values), np.array(bandwidths)


def sample(rng, n, d, shift=0.0, scale=1.0, offset=0.0):
    return offset + scale * (rng.standard_normal((n, d)) + shift)


# --- exactness ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n,m,d,scale,offset",
    [
        (7, 5, 13, 1.0, 0.0),  # smallest cross distance above 0.1: lambda_min = min
        (9, 4, 3, 0.01, 0.0),  # all distances tiny: 5% quantile floored at 0.1, lambda_max 0.3
        (12, 12, 40, 0.05, 3.0),  # far from the origin, mixed regime
        (5, 30, 1, 1.0, -2.0),  # one parameter
    ],
)
def test_matches_direct_implementation(n, m, d, scale, offset):
    rng = np.random.default_rng(n * 100 + d)
    x, y = sample(rng, n, d, scale=scale, offset=offset), sample(rng, m, d, 0.3, scale, offset)
    got = two_sample_mmd(x, y, device="cpu")
    want_values, want_bw = direct_all(x, y)
    np.testing.assert_allclose(got.bandwidths, want_bw, rtol=1e-12)
    np.testing.assert_allclose(got.values, want_values, rtol=1e-10, atol=1e-12)
    assert got.median == pytest.approx(np.median(want_values), abs=1e-12)
    assert got.max == pytest.approx(want_values.max(), abs=1e-12)


def test_distance_matrices_match_cdist_and_centring_saves_float32():
    rng = np.random.default_rng(1)
    x, y = sample(rng, 20, 300), sample(rng, 9, 300)
    l1, l2 = pooled_distances(x, y, device="cpu")
    z = np.concatenate([x, y])
    np.testing.assert_allclose(l1.numpy(), cdist(z, z, "cityblock"), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(l2.numpy(), cdist(z, z, "sqeuclidean"), rtol=1e-10, atol=1e-9)
    assert np.array_equal(l1.numpy(), l1.numpy().T) and np.all(np.diag(l2.numpy()) == 0)
    # float32 samples close together far from 0: ||x||^2 is 1e6 times the squared distances.
    z32 = (100.0 + 0.1 * rng.standard_normal((29, 300))).astype(np.float32)
    l1, l2 = pooled_distances(z32[:20], z32[20:], device="cpu")
    truth = z32.astype(np.float64)
    eye = np.eye(29)
    assert np.max(np.abs((l1.numpy() + eye) / (cdist(truth, truth, "cityblock") + eye) - 1)) < 1e-5
    assert (
        np.max(np.abs((l2.numpy() + eye) / (cdist(truth, truth, "sqeuclidean") + eye) - 1)) < 1e-4
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_centring_kernel_matches_numpy_in_any_number_of_row_bands(dtype):
    # The L2 part centres each block with its own kernel; the small blocks of the other tests
    # take its one-thread path, so the row bands of the threaded path are checked here.
    block = (3.0 + np.random.default_rng(4).standard_normal((37, 53))).astype(dtype)
    want = block - block.mean(axis=0, dtype=np.float64).astype(dtype)
    for parts in (1, 2, 3, 40):
        out = np.full_like(block, np.nan)
        _centre_into(block, out, parts)
        # the same float64 sums in another order: the means agree to rounding
        atol = 4 * np.finfo(dtype).eps * np.abs(block).max()
        np.testing.assert_allclose(out, want, rtol=0, atol=atol)
    # one scratch buffer serves the blocks of a layer, whatever their widths and dtypes
    acc = PooledDistances(37, "cpu")
    first = acc._scratch_like(block)
    assert np.shares_memory(first, acc._scratch_like(block[:, :11]))  # narrower: reused
    for width, kind in ((11, dtype), (53, np.float64), (40, np.float32)):
        part = block[:, :width].astype(kind)
        centred = acc._scratch_like(part)
        assert centred.shape == part.shape and centred.dtype == part.dtype
        assert centred.flags.c_contiguous


def test_torch_backend_matches_numba_backend():
    """The GPU code path (torch.cdist + matmul), run on the CPU."""
    rng = np.random.default_rng(8)
    for dtype, rtol in ((np.float64, 1e-10), (np.float32, 1e-5)):
        x, y = sample(rng, 11, 700).astype(dtype), sample(rng, 6, 700, 0.2).astype(dtype)
        a = pooled_distances(x, y, chunk_cols=300, device="cpu")
        b = pooled_distances(x, y, chunk_cols=300, device="cpu", backend="torch")
        for u, v in zip(a, b):
            np.testing.assert_allclose(v.numpy(), u.numpy(), rtol=rtol)


def test_kernel_sums_gpu_code_matches_cpu_code():
    # The GPU route (torch ops on packed pairs), run on the CPU, against the numba route, and
    # its segment sums against torch.expm1 summed directly.
    rng = np.random.default_rng(9)
    x, y = sample(rng, 40, 30), sample(rng, 13, 30, 0.4)
    l1, l2 = pooled_distances(x, y, device="cpu")
    bandwidths = all_bandwidths(l1, l2, 40)
    scales = (-1.0 / bandwidths[:10], -1.0 / bandwidths[10:] ** 2)
    np.testing.assert_allclose(
        _mmd_values_torch(l1, l2, 40, *scales),
        _mmd_values_numba(l1, l2, 40, *scales),
        rtol=1e-11,
        atol=1e-15,
    )
    packed = torch.from_numpy(rng.random(70000) * 3)
    sizes, neg_inv = (40000, 1000, 29000), torch.tensor([-0.1, -1.0, -7.0], dtype=torch.float64)
    want = [
        torch.expm1(seg[None] * neg_inv[:, None]).sum(1).numpy()
        for seg in torch.split(packed, sizes)
    ]
    np.testing.assert_allclose(
        _segment_sums(packed, sizes, neg_inv).numpy(), np.stack(want), rtol=1e-12
    )


@pytest.mark.parametrize("scale", [-1.0, -1e-3, -7.3, -1e4])
def test_vectorized_expm1_is_within_a_few_ulp_of_numpy(scale):
    # The CPU kernels' own expm1 over the whole range it meets: products from -1e7 (past the
    # floor where it returns -1) up to -1e-300 (where expm1(x) = x), and exact zeros.
    values = np.concatenate([np.linspace(0.0, 60.0, 100_001), np.geomspace(1e-300, 1e3, 100_001)])
    out = np.empty_like(values)
    _expm1_scaled(values, scale, out)
    want = np.expm1(values * scale)
    ulps = np.abs(out - want) / np.spacing(np.abs(want))
    assert np.all((ulps <= 4) | (np.abs(out - want) < 1e-300))


@pytest.mark.parametrize("n_rows, n", [(57, 40), (58, 3), (9, 7)])
def test_triangle_kernel_sums_match_expm1_on_packed_pairs(n_rows, n):
    # The CPU's one-pass sums over the matrix's upper triangle (its own vectorised expm1)
    # against torch.expm1 on the packed distinct pairs; scales from far below to far above
    # the distances (exponents from -1e4 to -1e-5), odd and even N.
    rng = np.random.default_rng(n_rows)
    z = torch.from_numpy(rng.random((n_rows, 5)) * 3)
    dist = torch.cdist(z, z, p=1)
    dist = (dist + dist.T) / 2
    dist.fill_diagonal_(0.0)
    neg_inv = -torch.logspace(-6, 3, 12, dtype=torch.float64)
    packed, sizes = _packed_pairs(dist, n)
    want = [
        torch.expm1(seg[None] * neg_inv[:, None]).sum(1).numpy()
        for seg in torch.split(packed, sizes)
    ]
    got = _block_sums_cpu(dist.numpy(), n, neg_inv.numpy())
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-13, atol=1e-300)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 9),
    m=st.integers(2, 9),
    d=st.integers(1, 70),
    chunk=st.integers(1, 80),
    seed=st.integers(0, 2**16),
)
def test_chunked_accumulation_equals_unchunked(n, m, d, chunk, seed):
    rng = np.random.default_rng(seed)
    x, y = sample(rng, n, d), sample(rng, m, d, 0.5)
    whole = pooled_distances(x, y, device="cpu")
    chunked = pooled_distances(x, y, chunk_cols=chunk, device="cpu")
    for a, b in zip(whole, chunked):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        mmd_values(*chunked, n)[0], mmd_values(*whole, n)[0], rtol=1e-9, atol=1e-12
    )


def test_chunked_float32_matches_float64_closely():
    rng = np.random.default_rng(2)
    x, y = sample(rng, 40, 2000), sample(rng, 15, 2000, 0.1)
    want = two_sample_mmd(x, y, device="cpu").values
    for chunk in (None, 333, 1024):
        got = two_sample_mmd(
            x.astype(np.float32), y.astype(np.float32), chunk_cols=chunk, device="cpu"
        ).values
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-8)


# --- the aggregated test -----------------------------------------------------------------------


def kernels_of(x, y):
    l1, l2 = pooled_distances(x, y, device="cpu")
    values, bw = mmd_values(l1, l2, len(x))
    return centred_kernel_matrices(l1, l2, torch.from_numpy(bw)), values


def test_permuted_statistics_match_direct_mmd_of_each_split():
    rng = np.random.default_rng(3)
    x, y = sample(rng, 8, 4), sample(rng, 6, 4, 0.4)
    k, values = kernels_of(x, y)
    a = group_indicators(8, 6, 5, seed=7, device=torch.device("cpu"))
    got = permuted_statistics(k, 8, a, max_bytes=2000)  # several chunks of splits
    np.testing.assert_allclose(got[:, 0].numpy(), values, rtol=1e-10, atol=1e-12)
    for p in range(a.shape[1]):
        order = np.concatenate(
            [np.flatnonzero(a[:, p].numpy()), np.flatnonzero(1 - a[:, p].numpy())]
        )
        for j in range(k.shape[0]):
            want = direct_mmd(k[j].numpy()[np.ix_(order, order)], 8)
            assert got[j, p].item() == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("n, m", [(9, 4), (4, 9), (6, 6)])
def test_small_group_sums_match_the_product(n, m):
    # the X group small, the Y group small, equal groups: every split of the product's
    rng = np.random.default_rng(4)
    k, _ = kernels_of(sample(rng, n, 3), sample(rng, m, 3, 0.5))
    orders = permutation_orders(n, m, 40, 9)
    want = permuted_statistics(k, n, group_indicators(n, m, 40, 9, torch.device("cpu")))
    got = small_group_statistics(k, n, orders)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)


def test_both_ways_of_summing_give_the_same_test(monkeypatch):
    rng = np.random.default_rng(8)
    x = sample(rng, 40, 3)
    for y in (sample(rng, 6, 3), sample(rng, 6, 3, 0.6)):  # the null, and a shift
        k, _ = kernels_of(x, y)
        results = {}
        for share in (0.0, 1.0):  # the product always, the small group's sums always
            monkeypatch.setattr(aggtest, "GATHER_SHARE", share)
            results[share] = mmdagg_test(k, 40, config=SMALL_TEST, seed=3)
        product, pairs = results[0.0], results[1.0]
        assert (pairs.p_value, pairs.reject, pairs.u_alpha) == (
            product.p_value,
            product.reject,
            product.u_alpha,
        )
        np.testing.assert_array_equal(pairs.kernel_p_values, product.kernel_p_values)
        np.testing.assert_allclose(pairs.statistics, product.statistics, rtol=1e-12, atol=1e-15)


def test_permutation_orders_are_kept_and_read_only():
    orders = permutation_orders(5, 3, 10, 1)
    assert permutation_orders(5, 3, 10, 1) is orders  # every layer's test reuses them
    assert (orders[0] == np.arange(8)).all()
    assert all(sorted(row) == list(range(8)) for row in orders.tolist())
    with pytest.raises(ValueError, match="read-only"):
        orders[1, 0] = 0


def test_same_distribution_gives_mmd_near_zero_and_different_ones_are_detected():
    for seed in range(3):
        rng = np.random.default_rng(seed)
        x = sample(rng, 60, 5)
        same = two_sample_mmd(
            x, sample(rng, 40, 5), pvalue=True, config=SMALL_TEST, seed=seed, device="cpu"
        )
        diff = two_sample_mmd(
            x,
            sample(rng, 40, 5, shift=0.8),
            pvalue=True,
            config=SMALL_TEST,
            seed=seed,
            device="cpu",
        )
        assert abs(same.median) < 0.005 and np.abs(same.values).max() < 0.02
        assert diff.median > 0.04
        assert not same.test.reject
        # Each kernel's statistic tops all its permutations, yet the aggregated p-value cannot
        # fall below the chance that a null split does so for some kernel (~20 / (b1 + 1)).
        assert diff.test.reject and diff.test.p_value <= 0.05
        assert diff.test.kernel_p_values.min() == 1 / 200
        np.testing.assert_allclose(diff.test.statistics, diff.values, rtol=1e-9, atol=1e-12)


def test_p_values_are_roughly_uniform_under_the_null():
    rng = np.random.default_rng(5)
    config = AggTestConfig(b1=99, b2=99, b3=20)
    p = []
    for seed in range(60):
        x, y = sample(rng, 14, 3), sample(rng, 10, 3)
        k, _ = kernels_of(x, y)
        p.append(mmdagg_test(k, 14, config=config, seed=seed).p_value)
    p = np.array(p)
    assert stats.kstest(p, "uniform").pvalue > 1e-3
    assert 0.3 < p.mean() < 0.7
    assert np.mean(p <= 0.05) < 0.2


@pytest.mark.parametrize("shift", [0.0, 0.4, 0.7])
@pytest.mark.parametrize("alpha", [0.05, 0.3])
def test_decision_is_p_value_below_alpha(shift, alpha):
    rng = np.random.default_rng(int(shift * 10))
    x, y = sample(rng, 20, 2), sample(rng, 12, 2, shift)
    k, _ = kernels_of(x, y)
    for seed in range(3):
        result = mmdagg_test(
            k, 20, config=AggTestConfig(alpha=alpha, b1=149, b2=149, b3=40), seed=seed
        )
        assert result.reject == (result.p_value <= alpha)
        assert 0 <= result.u_alpha <= 20 and result.kernel_p_values.shape == (20,)


def test_test_is_deterministic_per_seed():
    rng = np.random.default_rng(6)
    x, y = sample(rng, 15, 3), sample(rng, 9, 3, 0.3)
    a = two_sample_mmd(x, y, pvalue=True, seed=11, config=SMALL_TEST, device="cpu").test
    b = two_sample_mmd(x, y, pvalue=True, seed=11, config=SMALL_TEST, device="cpu").test
    assert a.p_value == b.p_value and np.array_equal(a.kernel_p_values, b.kernel_p_values)


# --- bad inputs ------------------------------------------------------------------------------


def test_bad_inputs_give_clear_errors():
    rng = np.random.default_rng(7)
    x = sample(rng, 5, 4)
    with pytest.raises(MMDInputError, match="at least 2 samples"):
        two_sample_mmd(x, x[:1])
    with pytest.raises(MMDInputError, match="differ in size: 4 vs 3"):
        two_sample_mmd(x, x[:, :3])
    bad = x.copy()
    bad[2, 1] = math.nan
    with pytest.raises(MMDInputError, match="y holds NaN"):
        two_sample_mmd(x, bad)
    with pytest.raises(ValueError, match="alpha"):
        AggTestConfig(alpha=1.5)
