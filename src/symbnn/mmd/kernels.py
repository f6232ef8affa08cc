"""The twenty kernels of SPEC section 5 and their unbiased MMD^2 estimates.

Kernels (MMDAgg's "laplace_gaussian" collection): ten Laplace exp(-||x-y||_1 / lambda) on the
L1 matrix, then ten Gaussian exp(-||x-y||_2^2 / lambda^2) on the squared-L2 matrix, each on a
geometric grid of bandwidths chosen from the X-to-Y cross distances. Order everywhere:
laplace_0..laplace_9 (increasing bandwidth), then gaussian_0..gaussian_9.

Kernels are evaluated as k - 1: unbiased MMD^2 does not change when a constant is subtracted
from the kernel, and the shifted values stay small where wide bandwidths put k near 1 (where
plain block sums of k lose the signal, FACTS). Sums run in float64: a numba loop on the CPU,
chunked torch ops on the GPU.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

from symbnn.mmd.threads import threads_for

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
        bandwidths = all_bandwidths(l1, l2sq, n)
    lam1, lam2 = bandwidths[:N_BANDWIDTHS], bandwidths[N_BANDWIDTHS:]
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
