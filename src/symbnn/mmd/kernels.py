"""The twenty kernels of SPEC section 5 and their unbiased MMD^2 estimates.

Kernels (MMDAgg's "laplace_gaussian" collection): ten Laplace exp(-||x-y||_1 / lambda) on the
L1 matrix, then ten Gaussian exp(-||x-y||_2^2 / lambda^2) on the squared-L2 matrix, each on a
geometric grid of bandwidths chosen from the X-to-Y cross distances. Order everywhere:
laplace_0..laplace_9 (increasing bandwidth), then gaussian_0..gaussian_9.

Kernels are evaluated as k - 1: unbiased MMD^2 does not change when a constant is subtracted
from the kernel, and the shifted values stay small where wide bandwidths put k near 1 (where
plain block sums of k lose the signal, FACTS). Sums run in float64: on the CPU one numba pass
over each distance matrix's upper triangle with an inlined, vectorisable expm1 (libm's exp is
a scalar call and was most of the cost at small d); chunked torch ops on packed pairs on the
GPU.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

from symbnn.mmd.threads import threads_for
from symbnn.symmetry.threads import cpu_threads_for

N_BANDWIDTHS = 10
PAIR_CHUNK = 32768
KERNEL_NAMES = tuple(f"laplace_{i}" for i in range(N_BANDWIDTHS)) + tuple(
    f"gaussian_{i}" for i in range(N_BANDWIDTHS)
)


def select_bandwidths(cross: torch.Tensor, number: int = N_BANDWIDTHS) -> torch.Tensor:
    """Geometric grid from lambda_min / 2 to 2 lambda_max (SPEC 5) from X-to-Y distances.

    lambda_min is the smallest distance, or the 5% quantile floored at 0.1 when the smallest
    is under 0.1; lambda_max is the largest distance floored at 0.3. The 5% quantile is the
    element at index floor(0.05 len) of the sorted distances, as in MMDAgg.
    """
    d = cross.reshape(-1).double()
    smallest = float(d.min())
    if smallest < 0.1:
        k = int(math.floor(d.numel() * 0.05))
        lam_min = max(float(torch.kthvalue(d.cpu(), k + 1).values), 0.1)
    else:
        lam_min = smallest
    lam_max = max(float(d.max()), 0.3)
    low, high = lam_min / 2.0, lam_max * 2.0
    ratio = (high / low) ** (1.0 / (number - 1))
    return torch.tensor([low * ratio**i for i in range(number)], dtype=torch.float64)


def _packed_pairs(dist: torch.Tensor, n: int) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """The distinct pairs of a symmetric (N, N) matrix as one vector: X-X pairs (i < i'),
    then Y-Y pairs (j < j'), then all X-Y pairs; with the three segment lengths."""
    m = dist.shape[0] - n
    ix = torch.triu_indices(n, n, 1, device=dist.device)
    iy = torch.triu_indices(m, m, 1, device=dist.device)
    packed = torch.cat([
        dist[:n, :n][ix[0], ix[1]],
        dist[n:, n:][iy[0], iy[1]],
        dist[:n, n:].reshape(-1),
    ])
    return packed, (ix.shape[1], iy.shape[1], n * m)


@numba.njit(parallel=True, fastmath=True, cache=True)
def _segment_sums_cpu(values, scales, bounds):
    """out[l, s] = sum over segment s of values of exp(v * scales[l]) - 1, one parallel
    region for all kernels and segments (sturdier than many small torch ops on a busy CPU).
    Blocks of 1024 terms are summed first; exp(t) - 1 loses nothing that matters in float64
    (absolute error 1e-16 per term)."""
    n_seg = bounds.shape[0] - 1
    out = np.zeros((scales.shape[0], n_seg))
    for task in numba.prange(scales.shape[0] * n_seg):
        k, seg = task // n_seg, task % n_seg
        c = scales[k]
        total = 0.0
        for start in range(bounds[seg], bounds[seg + 1], 1024):
            part = 0.0
            for i in range(start, min(start + 1024, bounds[seg + 1])):
                part += math.exp(values[i] * c) - 1.0
            total += part
        out[k, seg] = total
    return out


_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238          # ln 2 split so that k * _LN2_HI is exact for |k| < 2^20
_LN2_LO = 1.9082149292705877e-10
# Below this exponent exp(x) < 1e-17: expm1(x) is -1 to well within a float64 ulp of 1.
_EXP_FLOOR = -40.0


@numba.njit(inline="always", fastmath={"contract", "nsz"})
def _expm1_neg(x):
    """expm1(x) for x <= 0 in plain arithmetic, so that LLVM vectorises a loop of them (libm's
    exp is a scalar call): x = k ln2 + r, |r| <= ln2 / 2, Taylor series of e^r - 1 to r^13
    (truncation < 1e-17), 2^k from the bits of k (exact), then 2^k (e^r - 1) + (2^k - 1).
    Error within a few ulp of 1; x < -40 gives -1 + O(1e-18)."""
    x = max(x, _EXP_FLOOR)
    kf = math.floor(x * _LOG2E + 0.5)
    r = (x - kf * _LN2_HI) - kf * _LN2_LO
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    em1 = p * r                                   # e^r - 1
    kk = np.int64(-kf)                            # 0 .. 58
    two_k = 1.0
    two_k *= 0.5 if kk & 1 else 1.0
    two_k *= 0.25 if kk & 2 else 1.0
    two_k *= 0.0625 if kk & 4 else 1.0
    two_k *= 0.00390625 if kk & 8 else 1.0
    two_k *= 1.52587890625e-05 if kk & 16 else 1.0
    two_k *= 2.3283064365386963e-10 if kk & 32 else 1.0
    return two_k * em1 + (two_k - 1.0)


@numba.njit(parallel=True, fastmath={"contract", "nsz"}, cache=True)
def _block_sums_cpu(dist, n, scales):
    """out[s, l] = sum of expm1(dist[i, j] * scales[l]) over the distinct pairs of segment s
    (X-X with i < j, Y-Y with i < j, all X-Y), read straight from the symmetric (N, N) matrix:
    no packed copy, one pass over the upper triangle for all bandwidths. Rows are paired
    (i, N - 1 - i) so that the two threads get equal work; partial sums per row in float64."""
    n_rows = dist.shape[0]
    n_scales = scales.shape[0]
    per_row = np.zeros((n_rows, 3, n_scales))
    for task in numba.prange((n_rows + 1) // 2):
        buf = np.empty(n_rows)
        first = np.int64(task)
        for side in range(2):
            i = first if side == 0 else n_rows - 1 - first
            if side == 1 and i == first:          # the middle row of an odd N: done once
                continue
            row = dist[i]
            start = i + 1
            for l in range(n_scales):
                c = scales[l]
                # A pure map (vectorised), then plain sums: an in-loop float reduction would
                # need reassociation to vectorise, and that could reorder expm1's arithmetic.
                for j in range(start, n_rows):
                    buf[j] = _expm1_neg(row[j] * c)
                if i < n:
                    acc = 0.0
                    for j in range(start, n):
                        acc += buf[j]
                    per_row[i, 0, l] = acc
                    acc = 0.0
                    for j in range(n, n_rows):
                        acc += buf[j]
                    per_row[i, 2, l] = acc
                else:
                    acc = 0.0
                    for j in range(start, n_rows):
                        acc += buf[j]
                    per_row[i, 1, l] = acc
    return per_row.sum(axis=0)


def _segment_sums(packed: torch.Tensor, sizes: tuple[int, int, int], neg_inv: torch.Tensor) -> torch.Tensor:
    """(3, L): per segment (X-X, Y-Y, X-Y) and per scale s, the sum of expm1(v * s)."""
    if packed.device.type == "cpu":
        bounds = np.cumsum([0, *sizes])
        with threads_for(packed.numel() * len(neg_inv)):
            sums = _segment_sums_cpu(packed.numpy(), neg_inv.double().numpy(), bounds)
        return torch.from_numpy(sums.T.copy())
    return _segment_sums_torch(packed, sizes, neg_inv)


def _segment_sums_torch(packed: torch.Tensor, sizes: tuple[int, int, int], neg_inv: torch.Tensor) -> torch.Tensor:
    """`_segment_sums` with torch ops, for the GPU."""
    scale = neg_inv.to(packed.device)[:, None]
    out = []
    for seg in torch.split(packed, sizes):
        total = torch.zeros(len(neg_inv), dtype=torch.float64, device=packed.device)
        # Chunks of pairs keep the (L, chunk) temporaries in cache.
        for start in range(0, seg.numel(), PAIR_CHUNK):
            total += torch.mul(seg[start:start + PAIR_CHUNK].unsqueeze(0), scale).expm1_().sum(dim=1)
        out.append(total)
    return torch.stack(out)


def _unbiased_mmd(packed: torch.Tensor, sizes: tuple[int, int, int], neg_inv: torch.Tensor,
                  n: int, m: int) -> torch.Tensor:
    """MMD^2_u of the kernels exp(v * s), s in ``neg_inv``, on packed pair values v."""
    s_xx, s_yy, s_xy = _segment_sums(packed, sizes, neg_inv).cpu()
    # Packed pairs count each unordered X-X and Y-Y pair once: the ordered sums are twice that.
    return 2.0 * s_xx / (n * (n - 1)) + 2.0 * s_yy / (m * (m - 1)) - 2.0 * s_xy / (n * m)


def laplace_shifted(l1: torch.Tensor, bandwidths: torch.Tensor) -> torch.Tensor:
    """k - 1 for Laplace kernels, one per bandwidth, broadcast over ``l1``'s shape."""
    lam = bandwidths.to(l1.device).reshape(-1, *([1] * l1.dim()))
    return torch.expm1(-l1.unsqueeze(0) / lam)


def gaussian_shifted(l2sq: torch.Tensor, bandwidths: torch.Tensor) -> torch.Tensor:
    """k - 1 for Gaussian kernels, one per bandwidth, broadcast over ``l2sq``'s shape."""
    lam = bandwidths.to(l2sq.device).reshape(-1, *([1] * l2sq.dim()))
    return torch.expm1(-l2sq.unsqueeze(0) / lam**2)


def all_bandwidths(l1: torch.Tensor, l2sq: torch.Tensor, n: int) -> torch.Tensor:
    """The 20 bandwidths: 10 from the L1 cross distances, then 10 from the L2 ones."""
    return torch.cat([
        select_bandwidths(l1[:n, n:]),
        select_bandwidths(l2sq[:n, n:].sqrt()),
    ])


def mmd_values(l1: torch.Tensor, l2sq: torch.Tensor, n: int,
               bandwidths: torch.Tensor | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(twenty MMD^2_u values, twenty bandwidths) from the pooled distance matrices, whose
    first ``n`` rows are the X (target) samples. Kernels are evaluated on distinct pairs only."""
    m = l1.shape[0] - n
    if bandwidths is None:
        with cpu_threads_for(n * m, l1.device):  # a sort of the n x m cross distances: small
            bandwidths = all_bandwidths(l1, l2sq, n)
    lam1, lam2 = bandwidths[:N_BANDWIDTHS], bandwidths[N_BANDWIDTHS:]
    if l1.device.type == "cpu":
        # Straight from the matrices' upper triangles: no packed copies of the pairs.
        n_pairs = (n + m) * (n + m - 1) // 2
        out = []
        for dist, neg_inv in ((l1, -1.0 / lam1), (l2sq, -1.0 / lam2**2)):
            with threads_for(n_pairs * len(neg_inv)):
                s_xx, s_yy, s_xy = _block_sums_cpu(np.ascontiguousarray(dist.double().numpy()), n,
                                                   neg_inv.double().numpy())
            out.append(2.0 * s_xx / (n * (n - 1)) + 2.0 * s_yy / (m * (m - 1)) - 2.0 * s_xy / (n * m))
        return np.concatenate(out), bandwidths.cpu().numpy()
    p1, sizes = _packed_pairs(l1, n)
    values = _unbiased_mmd(p1, sizes, -1.0 / lam1, n, m)      # Laplace: exp(-d1 / lambda)
    del p1
    p2, _ = _packed_pairs(l2sq, n)
    values = torch.cat([values, _unbiased_mmd(p2, sizes, -1.0 / lam2**2, n, m)])   # exp(-d2^2 / lambda^2)
    return values.cpu().numpy(), bandwidths.cpu().numpy()


def centred_kernel_matrices(l1: torch.Tensor, l2sq: torch.Tensor, bandwidths: torch.Tensor) -> torch.Tensor:
    """(20, N, N) kernel matrices with zero diagonal and off-diagonal entries centred on their
    mean: the statistic is unchanged, and sums of permuted blocks stay well conditioned."""
    k = torch.cat([
        laplace_shifted(l1, bandwidths[:N_BANDWIDTHS]),
        gaussian_shifted(l2sq, bandwidths[N_BANDWIDTHS:]),
    ])
    n_rows = l1.shape[0]
    k.diagonal(dim1=1, dim2=2).zero_()  # expm1(0) is 0 already; make it exact
    mean_off = k.sum(dim=(1, 2)) / (n_rows * (n_rows - 1))
    k -= mean_off[:, None, None]
    k.diagonal(dim1=1, dim2=2).zero_()
    return k
