"""MMDAgg's aggregated permutation test (Schrab et al. 2023, JMLR 24(194)), reimplemented from
the paper's description.

Variant: permutations (also for equal sample sizes, where MMDAgg would use a wild bootstrap),
uniform weights w = 1/20 over the twenty kernels, level alpha = 0.05, B1 = 2000 permutations
for the quantiles, B2 = 2000 independent ones for the level correction, B3 = 50 bisection
steps (the reference defaults). The same permutations serve all twenty kernels.

1. Statistic under every permutation: for the 0/1 vector a marking which pooled samples land
   in the "X" group (b = 1 - a), with K zero on its diagonal,
       MMD^2_u = a'Ka / (n(n-1)) + b'Kb / (m(m-1)) - 2 a'Kb / (nm),
   and b'Kb, a'Kb follow from a'Ka, r'a (r = K 1) and 1'K1. So all kernels and
   permutations cost one batched product K @ A. When one group is much smaller than the other
   (the paper's 1,000 target networks against 100 samples), its own sum s'Ks (s: that group's
   0/1 vector) is cheaper still: a sum over the group's pairs, gathered from K, instead of a
   product over all N^2 entries; the other terms follow from it, r's and 1'K1 alike.
2. Bisection for the level correction u_alpha: the largest u with
       P_u = #{b in B2 : exists l, M2[l, b] > q_l(u)} / B2 <= alpha,
   q_l(u) the ceil((B1 + 1)(1 - u w_l))-th smallest of kernel l's B1 permuted statistics and
   the observed one.
3. Reject H0 when some kernel's observed statistic exceeds q_l(u_alpha).

The aggregated p-value is the smallest alpha at which step 3 rejects. A statistic s exceeds
q_l(u) exactly when c_l(s) = #{B1 + 1 values >= s} <= (B1 + 1) u w_l, so with uniform
weights the test rejects at u when min_l c_l <= (B1 + 1) u / 20, and
    p = #{b in B2 : min_l c_l(M2[:, b]) <= min_l c_l(observed)} / B2.
MMDAgg at level alpha rejects iff p <= alpha (checked in the tests). Its resolution is 1/B2.
Since the observed statistic is among the B1 + 1 values, min_l c_l(observed) >= 1, so p never
falls below the null chance that some kernel's permuted statistic tops all B1 others (at most
about 20 / (B1 + 1), ~1% at B1 = 2000): p says where MMDAgg's decision flips, not how
overwhelming the evidence is beyond that.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numba
import numpy as np
import torch

from symbnn.memory import require_memory
from symbnn.settings import Mmd, MmdTest
from symbnn.threads import numba_threads_for

PRODUCT_MAX_BYTES = 256 * 2**20


# MMDAgg settings (level alpha, permutations b1 for the quantiles and b2 for the level
# correction, bisection steps b3): the settings layer's section, with its defaults and bounds.
AggTestConfig = MmdTest
MMD = Mmd()  # library defaults are the settings layer's
DEFAULT_TEST = AggTestConfig()


@dataclass(frozen=True)
class AggregatedTest:
    p_value: float  # smallest level at which MMDAgg rejects (resolution 1/b2)
    reject: bool  # MMDAgg's decision at config.alpha (bisection, as published)
    u_alpha: float  # the level correction
    statistics: np.ndarray  # (L,) observed MMD^2_u per kernel
    kernel_p_values: np.ndarray  # (L,) single-kernel permutation p-values (observed included)
    config: AggTestConfig


# on a CPU the small group's pair sums replace the product K @ A when they read fewer than
# this fraction of the product's multiply-adds (a gathered entry costs several of BLAS's
# multiply-adds: on one core the pair sums ran 5x faster at 1,000 + 100 samples, 1.6x at
# 300 + 100 and 2x slower at 50 + 50)
GATHER_SHARE = 0.05


@functools.lru_cache(maxsize=2)
def permutation_orders(n: int, m: int, n_perms: int, seed: int) -> np.ndarray:
    """(1 + n_perms, n + m) int64, read-only: row 0 the observed order (0, 1, ..., n + m - 1),
    row p > 0 a uniform random permutation of the pooled samples; a row's first n entries are
    the X group of its split. Kept for the next call: every layer and unit of a method's MMD
    tests the same sample sizes with the same seed."""
    rng = np.random.default_rng(seed)
    orders = np.empty((1 + n_perms, n + m), dtype=np.int64)
    orders[0] = np.arange(n + m)
    orders[1:] = np.argsort(rng.random((n_perms, n + m)), axis=1)
    orders.flags.writeable = False
    return orders


def _indicators(orders: np.ndarray, n: int, device: torch.device) -> torch.Tensor:
    a = np.zeros((orders.shape[1], orders.shape[0]))
    a[orders[:, :n], np.arange(orders.shape[0])[:, None]] = 1.0
    return torch.from_numpy(a).to(device)


def small_group_pays(n: int, m: int) -> bool:
    """Whether the smaller group's pair sums cost less than the product K @ A."""
    small = min(n, m)
    return small * (small - 1) / 2 < GATHER_SHARE * (n + m) ** 2


def permuted_statistics(
    kernels: torch.Tensor, n: int, indicators: torch.Tensor, max_bytes: int = PRODUCT_MAX_BYTES
) -> torch.Tensor:
    """(L, P) MMD^2_u of each kernel (L, N, N; zero diagonal) for each split in ``indicators``
    (N, P), computed as one batched product per chunk of splits (memory ~ max_bytes)."""
    n_kernels, n_rows, _ = kernels.shape
    m = n_rows - n
    flat = kernels.reshape(n_kernels * n_rows, n_rows)
    row_sums = kernels.sum(dim=2)  # r = K 1, (L, N)
    total = row_sums.sum(dim=1, keepdim=True)  # 1'K1, (L, 1)
    step = max(1, max_bytes // (8 * n_kernels * n_rows))
    out = []
    for start in range(0, indicators.shape[1], step):
        a = indicators[:, start : start + step]
        ka = (flat @ a).reshape(n_kernels, n_rows, -1)
        aka = ka.mul_(a.unsqueeze(0)).sum(dim=1)  # a'Ka, (L, p); in place: no second copy
        ra = row_sums @ a  # 1'Ka
        akb = ra - aka
        bkb = total - 2.0 * ra + aka
        out.append(aka / (n * (n - 1)) + bkb / (m * (m - 1)) - 2.0 * akb / (n * m))
    return torch.cat(out, dim=1)


def small_group_statistics(kernels: torch.Tensor, n: int, orders: np.ndarray) -> torch.Tensor:
    """`permuted_statistics` for the splits of `orders` (`permutation_orders`) on a CPU, from
    the smaller group's own sums: for its 0/1 vector s, s'Ks = 2 * (sum of K over the group's
    pairs i < j) (zero diagonal, K symmetric), r's its row sums, and the other two terms of
    MMD^2_u follow as in `permuted_statistics`."""
    n_kernels, n_rows, _ = kernels.shape
    m = n_rows - n
    small_first = n <= m  # the X group (first n of each order) is the small one
    groups = np.sort(orders[:, :n] if small_first else orders[:, n:], axis=1)  # rows in order
    values = kernels.double().contiguous().cpu().numpy()
    pair_sums = np.empty((n_kernels, len(groups)))
    with numba_threads_for(groups.shape[1] ** 2 * len(groups) * n_kernels // 2):
        _pair_sums_cpu(values, groups, pair_sums)
    row_sums = values.sum(axis=2)  # (L, N)
    ss = torch.from_numpy(2.0 * pair_sums)  # s'Ks, (L, P)
    rs = torch.from_numpy(row_sums[:, groups].sum(axis=2))  # r's, (L, P)
    total = torch.from_numpy(row_sums.sum(axis=1, keepdims=True))  # 1'K1, (L, 1)
    cross = rs - ss  # a'Kb
    other = total - 2.0 * rs + ss  # the larger group's own sum
    aka, bkb = (ss, other) if small_first else (other, ss)
    return aka / (n * (n - 1)) + bkb / (m * (m - 1)) - 2.0 * cross / (n * m)


@numba.njit(parallel=True, fastmath={"reassoc", "contract", "nsz"}, error_model="numpy", cache=True)
def _pair_sums_cpu(kernels, groups, out):
    """out[l, p] = sum of kernels[l, i, j] over the pairs i < j of groups[p] (ascending). A
    kernel at a time, so that the reads stay in one N x N matrix (within the CPU's last-level
    cache at the paper's sizes), a member's row read in ascending columns. Each split's sum on
    one thread, reassociated (vectorised) in an order fixed by the compiled code: repeatable
    and independent of the thread count. (Twenty kernels side by side per pair, an (N, N, L)
    copy, measured no faster: its 194 MB at N = 1,100 no longer fit the cache.)"""
    size = groups.shape[1]
    for kernel in range(kernels.shape[0]):
        matrix = kernels[kernel]
        for split in numba.prange(groups.shape[0]):
            members = groups[split]
            total = 0.0
            for a in range(size - 1):
                row = matrix[members[a]]
                for b in range(a + 1, size):
                    total += row[members[b]]
            out[kernel, split] = total


def _counts_at_least(sorted_rows: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """#{entries of sorted_rows[l] >= values[l, b]} for every l, b."""
    return sorted_rows.shape[1] - torch.searchsorted(
        sorted_rows.contiguous(), values.contiguous(), side="left"
    )


def _bisect_level(
    m1_sorted: torch.Tensor, m2: torch.Tensor, weights: torch.Tensor, config: AggTestConfig
) -> float:
    """MMDAgg's step 2: u_alpha by bisection on [0, min 1/w]."""
    u_min, u_max = 0.0, float((1.0 / weights).min())
    # in numpy: fifty small comparisons, where torch's per-call overhead was most of the cost
    m1, m2, w = m1_sorted.numpy(), m2.numpy(), weights.numpy()
    for _ in range(config.b3):
        u = (u_min + u_max) / 2.0
        q = _quantiles(m1, w, u)
        p_u = float((m2 > q[:, None]).any(axis=0).mean())
        if p_u <= config.alpha:
            u_min = u
        else:
            u_max = u
    return u_min


def _quantiles(m1_sorted: np.ndarray, weights: np.ndarray, u: float) -> np.ndarray:
    """q_l(u): the ceil(S (1 - u w_l))-th smallest of each row of m1_sorted (S per row)."""
    index = np.ceil(m1_sorted.shape[1] * (1.0 - u * weights)).astype(np.int64) - 1
    return m1_sorted[np.arange(len(weights)), index]


def permutation_test_bytes(n_rows: int, config: AggTestConfig, n_kernels: int = 20) -> int:
    """Peak bytes of `mmdagg_test` on ``n_rows`` pooled samples: the random keys, their
    argsort and the 0/1 indicators (n_rows per permutation each), the statistics of every
    kernel and permutation with their sorted copy, and the chunked products."""
    permutations = 1 + config.b1 + config.b2
    product = min(PRODUCT_MAX_BYTES, 8 * n_kernels * n_rows * permutations)  # one chunk
    return permutations * (24 * n_rows + 40 * n_kernels) + 2 * product


def require_permutation_memory(n_rows: int, config: AggTestConfig, n_kernels: int = 20) -> None:
    """MemoryLimitError naming b1/b2 when the test on ``n_rows`` samples cannot fit."""
    require_memory(
        ("b1", "b2"),
        permutation_test_bytes(n_rows, config, n_kernels),
        f"MMDAgg's permutation test of {n_rows} samples with b1 = {config.b1} and b2 = "
        f"{config.b2} permutations",
    )


def mmdagg_test(
    kernels: torch.Tensor, n: int, *, config: AggTestConfig = DEFAULT_TEST, seed: int = MMD.seed
) -> AggregatedTest:
    """The aggregated test on (L, N, N) kernel matrices (zero diagonal; centring advised)
    whose first ``n`` rows are the X samples. Deterministic for a given seed."""
    n_kernels, n_rows, _ = kernels.shape
    require_permutation_memory(n_rows, config, n_kernels)
    orders = permutation_orders(n, n_rows - n, config.b1 + config.b2, seed)
    if kernels.device.type == "cpu" and small_group_pays(n, n_rows - n):
        stats = small_group_statistics(kernels, n, orders).cpu()
    else:
        stats = permuted_statistics(kernels, n, _indicators(orders, n, kernels.device)).cpu()
    observed = stats[:, 0]
    m1_sorted = torch.sort(stats[:, : config.b1 + 1], dim=1).values  # observed + B1 permuted
    m2 = stats[:, config.b1 + 1 :]  # B2 for the correction
    weights = torch.full((n_kernels,), 1.0 / n_kernels, dtype=torch.float64)

    u_alpha = _bisect_level(m1_sorted, m2, weights, config)
    q = _quantiles(m1_sorted.numpy(), weights.numpy(), u_alpha)
    reject = bool((observed.numpy() > q).any())

    c_obs = _counts_at_least(m1_sorted, observed[:, None])[:, 0]
    c_null = _counts_at_least(m1_sorted, m2).min(dim=0).values
    p_value = float((c_null <= c_obs.min()).double().mean())
    return AggregatedTest(
        p_value=p_value,
        reject=reject,
        u_alpha=u_alpha,
        statistics=observed.numpy(),
        kernel_p_values=(c_obs.double() / (config.b1 + 1)).numpy(),
        config=config,
    )
