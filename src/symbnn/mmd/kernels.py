"""The twenty kernels of docs/maths.md, section 5 and their unbiased MMD^2 estimates.

Kernels (MMDAgg's "laplace_gaussian" collection): ten Laplace exp(-||x-y||_1 / lambda) on the
L1 matrix, then ten Gaussian exp(-||x-y||_2^2 / lambda^2) on the squared-L2 matrix, each on a
geometric grid of bandwidths chosen from the X-to-Y cross distances. Order everywhere:
laplace_0..laplace_9 (increasing bandwidth), then gaussian_0..gaussian_9.

Kernels are evaluated as k - 1: unbiased MMD^2 does not change when a constant is subtracted
from the kernel, and the shifted values stay small where wide bandwidths put k near 1 (where
plain block sums of k lose the signal). Sums run in float64: on the CPU one numba pass
over each distance matrix's upper triangle per bandwidth, with a vectorised expm1 of its own
(libm's exp is a scalar call and was most of the cost at small d) summed as it goes; chunked
torch ops on packed pairs on the GPU.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from symbnn.threads import numba_threads_for, torch_threads_for

N_BANDWIDTHS = 10
PAIR_CHUNK = 32768
# Kernel values per matrix below which the CPU sums run on one thread. At the default sample
# sizes (N = 1100: 6M values, about 5 ms of one core) a second thread lost more in wake-ups
# than it gained on the shared 2-core machine: 30 ms against 16 ms (medians of 30, load 4).
SERIAL_KERNEL_VALUES = 2**25
KERNEL_NAMES = tuple(f"laplace_{i}" for i in range(N_BANDWIDTHS)) + tuple(
    f"gaussian_{i}" for i in range(N_BANDWIDTHS)
)


def select_bandwidths(cross: torch.Tensor, number: int = N_BANDWIDTHS) -> torch.Tensor:
    """Geometric grid from lambda_min / 2 to 2 lambda_max (docs/maths.md, section 5) from X-to-Y distances.

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
    packed = torch.cat(
        [
            dist[:n, :n][ix[0], ix[1]],
            dist[n:, n:][iy[0], iy[1]],
            dist[:n, n:].reshape(-1),
        ]
    )
    return packed, (ix.shape[1], iy.shape[1], n * m)


_LOG2E = 1.4426950408889634
# Taylor coefficients of 2^f - 1 = e^(f ln 2) - 1: (ln 2)^i / i! for i = 1 .. 13; with
# |f| <= 1/2 the truncation is below 4e-18.
_POW2M1 = np.array([math.log(2.0) ** i / math.factorial(i) for i in range(1, 14)])
# Below 2^-58 (e^-40), 2^y - 1 is -1 to well within a float64 ulp of 1.
_EXP2_FLOOR = -58.0


@intrinsic
def _double_of_bits(typingctx, bits):
    """The float64 whose IEEE bits are an int64 (an LLVM bitcast, free in vector code)."""
    if bits != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@numba.njit(fastmath={"contract"}, error_model="numpy", cache=True)
def _exp2m1(y):
    """2^y - 1 for y <= 0, in plain arithmetic that vectorises (libm's exp is a scalar call):
    y = k + f with k = rint(y) and |f| <= 1/2 (f exact), 2^f - 1 by its Taylor series, 2^k
    written straight into a float64's exponent bits, then 2^k (2^f - 1) + (2^k - 1). Within a
    few ulp of expm1(y ln 2); y < -58 gives -1 + O(1e-18). Its own function, compiled without
    "reassoc": the caller's reassociation (which vectorises its sums) must not turn
    2^k (2^f - 1) + (2^k - 1) into 2^k 2^f - 1, which loses every digit near 0."""
    y = max(y, _EXP2_FLOOR)
    k = np.rint(y)
    f = y - k
    p = 0.0
    for i in range(_POW2M1.shape[0] - 1, -1, -1):  # Horner; unrolled by LLVM
        p = p * f + _POW2M1[i]
    two_k = _double_of_bits((np.int64(k) + 1023) << 52)
    return two_k * (p * f) + (two_k - 1.0)


@numba.njit(fastmath={"contract", "reassoc", "nsz"}, error_model="numpy", cache=True)
def _expm1_sum(values, scale):
    """sum_j expm1(values[j] * scale) for products <= 0, in one vectorised pass (reassociated
    sum, so the order is fixed by the compiled code and repeatable)."""
    to_base2 = scale * _LOG2E
    total = 0.0
    for j in range(values.shape[0]):
        total += _exp2m1(values[j] * to_base2)
    return total


@numba.njit(error_model="numpy", cache=True)
def _expm1_scaled(values, scale, out):
    """out[j] = expm1(values[j] * scale) for products <= 0: `_expm1_sum`'s terms one by one
    (for tests)."""
    to_base2 = scale * _LOG2E
    for j in range(values.shape[0]):
        out[j] = _exp2m1(values[j] * to_base2)


@numba.njit(parallel=True, cache=True)
def _block_sums_cpu(dist, n, scales):
    """out[s, l] = sum of expm1(dist[i, j] * scales[l]) over the distinct pairs of segment s
    (X-X with i < j, Y-Y with i < j, all X-Y), read straight from the symmetric (N, N) matrix:
    no packed copy, no kernel values stored, one pass over the upper triangle per bandwidth.
    Rows are paired (i, N - 1 - i) so that the two threads get equal work; partial sums per
    row in float64. Rows are passed on as slices: a loop from a runtime start index would
    carry numba's negative-index wraparound and not vectorise."""
    n_rows = dist.shape[0]
    n_scales = scales.shape[0]
    per_row = np.zeros((n_rows, 3, n_scales))
    for task in numba.prange((n_rows + 1) // 2):
        first = np.int64(task)
        for side in range(2):
            i = first if side == 0 else n_rows - 1 - first
            if side == 1 and i == first:  # the middle row of an odd N: done once
                continue
            start = i + 1
            row = dist[i, start:]
            for l in range(n_scales):
                if i < n:
                    per_row[i, 0, l] = _expm1_sum(row[: n - start], scales[l])
                    per_row[i, 2, l] = _expm1_sum(row[n - start :], scales[l])
                else:
                    per_row[i, 1, l] = _expm1_sum(row, scales[l])
    return per_row.sum(axis=0)


def _segment_sums(
    packed: torch.Tensor, sizes: tuple[int, int, int], neg_inv: torch.Tensor
) -> torch.Tensor:
    """(3, L): per segment of packed pair values v (X-X, Y-Y, X-Y) and per scale s, the sum of
    expm1(v * s), with torch ops (the GPU route)."""
    scale = neg_inv.to(packed.device)[:, None]
    out = []
    for seg in torch.split(packed, sizes):
        total = torch.zeros(len(neg_inv), dtype=torch.float64, device=packed.device)
        # Chunks of pairs keep the (L, chunk) temporaries in cache.
        for start in range(0, seg.numel(), PAIR_CHUNK):
            total += (
                torch.mul(seg[start : start + PAIR_CHUNK].unsqueeze(0), scale).expm1_().sum(dim=1)
            )
        out.append(total)
    return torch.stack(out)


def _unbiased(sums, n: int, m: int):
    """MMD^2_u from the (3, L) sums of k - 1 over distinct X-X, Y-Y and X-Y pairs: each
    unordered X-X and Y-Y pair stands for two ordered ones."""
    s_xx, s_yy, s_xy = sums
    return 2.0 * s_xx / (n * (n - 1)) + 2.0 * s_yy / (m * (m - 1)) - 2.0 * s_xy / (n * m)


def _mmd_values_numba(
    l1: torch.Tensor, l2sq: torch.Tensor, n: int, neg_inv1: torch.Tensor, neg_inv2: torch.Tensor
) -> np.ndarray:
    """The CPU route: straight from the matrices' upper triangles, no packed copies."""
    n_rows = l1.shape[0]
    out = []
    for dist, neg_inv in ((l1, neg_inv1), (l2sq, neg_inv2)):
        values = n_rows * (n_rows - 1) // 2 * len(neg_inv)
        with numba_threads_for(values if values >= SERIAL_KERNEL_VALUES else 0):
            sums = _block_sums_cpu(
                np.ascontiguousarray(dist.double().numpy()), n, neg_inv.double().numpy()
            )
        out.append(_unbiased(sums, n, n_rows - n))
    return np.concatenate(out)


def _mmd_values_torch(
    l1: torch.Tensor, l2sq: torch.Tensor, n: int, neg_inv1: torch.Tensor, neg_inv2: torch.Tensor
) -> np.ndarray:
    """The GPU route: torch ops on the packed distinct pairs, one matrix at a time."""
    m = l1.shape[0] - n
    out = []
    for dist, neg_inv in ((l1, neg_inv1), (l2sq, neg_inv2)):
        packed, sizes = _packed_pairs(dist, n)
        out.append(_unbiased(_segment_sums(packed, sizes, neg_inv).cpu(), n, m))
        del packed
    return torch.cat(out).numpy()


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
    return torch.cat(
        [
            select_bandwidths(l1[:n, n:]),
            select_bandwidths(l2sq[:n, n:].sqrt()),
        ]
    )


def mmd_values(
    l1: torch.Tensor, l2sq: torch.Tensor, n: int, bandwidths: torch.Tensor | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(twenty MMD^2_u values, twenty bandwidths) from the pooled distance matrices, whose
    first ``n`` rows are the X (target) samples. Kernels are evaluated on distinct pairs only."""
    m = l1.shape[0] - n
    if bandwidths is None:
        with torch_threads_for(n * m, l1.device):  # a sort of the n x m cross distances: small
            bandwidths = all_bandwidths(l1, l2sq, n)
    lam1, lam2 = bandwidths[:N_BANDWIDTHS], bandwidths[N_BANDWIDTHS:]
    # Laplace exp(-d1 / lambda), Gaussian exp(-d2^2 / lambda^2): scales of the distances.
    route = _mmd_values_numba if l1.device.type == "cpu" else _mmd_values_torch
    values = route(l1, l2sq, n, -1.0 / lam1, -1.0 / lam2**2)
    return values, bandwidths.cpu().numpy()


def centred_kernel_matrices(
    l1: torch.Tensor, l2sq: torch.Tensor, bandwidths: torch.Tensor
) -> torch.Tensor:
    """(20, N, N) kernel matrices with zero diagonal and off-diagonal entries centred on their
    mean: the statistic is unchanged, and sums of permuted blocks stay well conditioned."""
    k = torch.cat(
        [
            laplace_shifted(l1, bandwidths[:N_BANDWIDTHS]),
            gaussian_shifted(l2sq, bandwidths[N_BANDWIDTHS:]),
        ]
    )
    n_rows = l1.shape[0]
    k.diagonal(dim1=1, dim2=2).zero_()  # expm1(0) is 0 already; make it exact
    mean_off = k.sum(dim=(1, 2)) / (n_rows * (n_rows - 1))
    k -= mean_off[:, None, None]
    k.diagonal(dim1=1, dim2=2).zero_()
    return k
