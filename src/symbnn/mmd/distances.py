"""Pooled L1 and squared-L2 distance matrices of n + m samples, accumulated over column blocks.

Both distances are sums over the parameter axis, so a layer far too large for memory is fed
block by block (`PooledDistances.add`) and only the (N, N) float64 accumulators persist.

CPU: L1 is a compiled numba kernel over the upper triangle (tiles of row pairs, column panels
that stay in cache, float32 partial sums per panel added into float64); squared L2 takes the
Gram route (||x||^2 + ||y||^2 - 2 x.y) with one BLAS syrk per block (half a matmul: only the
upper triangle). GPU: ``torch.cdist(p=1)`` and a matmul per block, accumulated in float64.

Each block is centred on its own column means before the Gram product: distances do not
change, but the norms shrink from ||x|| to the spread of the samples, which removes the
cancellation that float32 otherwise suffers when samples sit close together far from 0.

Precision: float64 blocks are computed in float64 throughout (the exactness tests); other
blocks (float32 weights) in float32 per block with float64 accumulation across blocks, which
keeps distances to ~1e-7 relative. A float32 block whose values are so large that a float32
sum of squares could overflow (|w| above ~5e15 for a million columns) is computed in float64
instead, so any weight a float32 store can hold gives finite distances.

Threads: numba follows NUMBA_NUM_THREADS (default: all cores), the BLAS its own setting
(OPENBLAS_NUM_THREADS for scipy's).
"""

from __future__ import annotations

import math

import numba
import numpy as np
import scipy.linalg.blas as blas
import torch

import symbnn.device
from symbnn.threads import numba_threads_for

# A tile pair's column panels (2 x TILE rows x PANEL floats = 256 KiB) stay in L2 while each
# row panel of the inner loop (2 KiB) stays in L1.
TILE = 64
# float32 partial sums over 512 terms keep ~1e-7 relative error before joining float64.
PANEL = 512


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """symbnn.device's choice ("auto": the GPU when one is visible, else the CPU, logged) as a
    torch.device."""
    return torch.device(symbnn.device.resolve_device(str(device)))


@numba.njit(fastmath=True, boundscheck=False, cache=True)
def _l1_pair(x, y, zero):
    # `zero` carries the accumulator type: float32 sums for float32 rows, float64 for float64.
    s = zero
    for k in range(x.shape[0]):
        s += abs(x[k] - y[k])
    return s


@numba.njit(parallel=True, fastmath=True, boundscheck=False, cache=True)
def _l1_upper_accumulate(z, out, zero, tile, panel, tile_i, tile_j):
    """out[i, j] += sum_k |z[i, k] - z[j, k]| for i < j; threads own disjoint tile pairs."""
    n_rows, n_cols = z.shape
    for t in numba.prange(tile_i.shape[0]):
        i0 = tile_i[t] * tile
        i1 = min(n_rows, i0 + tile)
        j0 = tile_j[t] * tile
        j1 = min(n_rows, j0 + tile)
        for k0 in range(0, n_cols, panel):
            k1 = min(n_cols, k0 + panel)
            for i in range(i0, i1):
                xi = z[i, k0:k1]
                for j in range(max(j0, i + 1), j1):
                    out[i, j] += _l1_pair(xi, z[j, k0:k1], zero)


@numba.njit(parallel=True, cache=True)
def _add_upper(out, part):
    """out[i, j] += part[i, j] for j >= i (C-ordered): the triangle a syrk writes, widened to
    float64 as it is added (numpy's mixed-type += goes through casting buffers and took 40% of the L2 part
    at d = 392)."""
    for i in numba.prange(out.shape[0]):
        for j in range(i, out.shape[1]):
            out[i, j] += part[i, j]


@numba.njit(parallel=True, fastmath=True, boundscheck=False, cache=True)
def _centre_into(block, out, parts):
    """out = block minus its column means (float64 sums, the mean rounded to the block's
    dtype, as numpy's ``block - block.mean(0, dtype=float64).astype(dtype)``), in two passes
    over contiguous rows: ``parts`` threads each sum a band of rows, then each row is
    written centred into ``out``, a buffer kept from block to block. For a 1100 x 15252
    float32 block: 8 ms here against numpy's 27 ms, whose float64 column means cast as they
    reduce and whose fresh output array faults its pages in one by one."""
    n, d = block.shape
    sums = np.zeros((parts, d))
    band = -(-n // parts)
    for p in numba.prange(parts):
        acc = sums[p]
        for i in range(p * band, min(n, (p + 1) * band)):
            row = block[i]
            for k in range(d):
                acc[k] += row[k]
    mean = np.empty(d, dtype=block.dtype)
    for k in range(d):
        total = 0.0
        for p in range(parts):
            total += sums[p, k]
        mean[k] = total / n
    for i in numba.prange(n):
        row = block[i]
        dst = out[i]
        for k in range(d):
            dst[k] = row[k] - mean[k]


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """float64 stays float64 (exact checks); everything else is computed in float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def float32_safe_peak(n_columns: int) -> float:
    """The largest |value| for which a float32 block of ``n_columns`` columns cannot overflow:
    centred values are at most twice it, a Gram entry sums n_columns products of two of them
    and an L1 distance n_columns differences; a factor 2 spare."""
    return math.sqrt(np.finfo(np.float32).max / (16.0 * max(1, n_columns)))


def _block_dtype(block: np.ndarray) -> np.dtype:
    """The dtype a block is computed in: `_compute_dtype`, widened to float64 when its float32
    sums could overflow (see `float32_safe_peak`)."""
    dtype = _compute_dtype(block.dtype)
    if dtype == np.float32 and block.size:
        peak = max(abs(float(block.max())), abs(float(block.min())))
        if not peak <= float32_safe_peak(block.shape[1]):  # NaN also takes the float64 path
            return np.dtype(np.float64)
    return dtype


class PooledDistances:
    """Accumulates the L1 and squared-L2 distance matrices of ``n_rows`` pooled samples.

    Feed every column block of the pooled (n_rows, d) sample once, in any order and any
    widths, then call `result`. Memory: two (n_rows, n_rows) float64 matrices plus one block
    and its centred copy.
    """

    def __init__(
        self, n_rows: int, device: str | torch.device = "auto", backend: str | None = None
    ) -> None:
        self.n_rows = int(n_rows)
        self.device = resolve_device(device)
        # "numba" on the CPU, "torch" elsewhere; torch on the CPU exists to test the GPU code.
        self.backend = backend or ("numba" if self.device.type == "cpu" else "torch")
        if self.backend not in ("numba", "torch") or (
            self.backend == "numba" and self.device.type != "cpu"
        ):
            raise ValueError(f"backend {self.backend!r} cannot run on {self.device}")
        self.n_columns = 0
        self._scratch: np.ndarray | None = None  # the centred block of the L2 part
        shape = (self.n_rows, self.n_rows)
        if self.backend == "numba":
            self._l1 = np.zeros(shape)
            self._gram = np.zeros(shape)
            tiles = -(-self.n_rows // TILE)
            self._tile_i, self._tile_j = np.triu_indices(tiles)
        else:
            self._l1 = torch.zeros(shape, dtype=torch.float64, device=self.device)
            self._gram = torch.zeros(shape, dtype=torch.float64, device=self.device)

    def add(self, block: np.ndarray) -> None:
        """Add one column block of shape (n_rows, c) of the pooled sample."""
        block = self.prepare(block)
        self.add_l1(block)
        self.add_l2(block)
        self.n_columns += block.shape[1]

    def prepare(self, block: np.ndarray) -> np.ndarray | torch.Tensor:
        """The block as the backend wants it: C-ordered float32/64, on the device."""
        if block.ndim != 2 or block.shape[0] != self.n_rows:
            raise ValueError(f"block of shape {block.shape} does not have {self.n_rows} rows")
        block = np.ascontiguousarray(block, dtype=_block_dtype(block))
        return block if self.backend == "numba" else torch.from_numpy(block).to(self.device)

    def add_l1(self, block: np.ndarray | torch.Tensor) -> None:
        """L1 part of `add` for a prepared block (separate so that benchmarks can time it)."""
        if block.shape[1] == 0:
            return
        if self.backend == "numba":
            with numba_threads_for(self.n_rows**2 * block.shape[1] // 2):
                _l1_upper_accumulate(
                    block, self._l1, block.dtype.type(0), TILE, PANEL, self._tile_i, self._tile_j
                )
        else:
            self._l1 += torch.cdist(block, block, p=1).double()

    def add_l2(self, block: np.ndarray | torch.Tensor) -> None:
        """Squared-L2 (Gram) part of `add` for a prepared block."""
        if block.shape[1] == 0:
            return
        if self.backend == "numba":
            centred = self._scratch_like(block)
            with numba_threads_for(block.size):
                _centre_into(block, centred, numba.get_num_threads())
            syrk = blas.dsyrk if block.dtype == np.float64 else blas.ssyrk
            # centred.T is Fortran-ordered, so BLAS reads it in place; trans=1 gives A A^T.
            # The result is Fortran-ordered: its lower triangle, transposed, is a C-ordered
            # upper triangle that the accumulation reads row by row.
            lower = syrk(1.0, centred.T, trans=1, lower=1)
            with numba_threads_for(self.n_rows**2 // 2):
                _add_upper(self._gram, lower.T)
        else:
            centred = block - block.mean(dim=0, keepdim=True)
            self._gram += (centred @ centred.T).double()

    def _scratch_like(self, block: np.ndarray) -> np.ndarray:
        """A C-ordered buffer of the block's shape and dtype, reused from block to block."""
        if (
            self._scratch is None
            or self._scratch.dtype != block.dtype
            or self._scratch.size < block.size
        ):
            self._scratch = np.empty(block.size, dtype=block.dtype)
        return self._scratch[: block.size].reshape(block.shape)

    def result(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(L1, squared L2) as symmetric float64 tensors on the device, zero diagonal."""
        l1 = torch.as_tensor(self._l1, device=self.device)
        gram = torch.as_tensor(self._gram, device=self.device)
        upper = torch.triu(l1, diagonal=1)
        d1 = upper + upper.T
        # Only the upper triangle of the Gram matrix is trusted (syrk writes no other part).
        gram = torch.triu(gram) + torch.triu(gram, diagonal=1).T
        norms = gram.diagonal()
        d2 = (norms[:, None] + norms[None, :] - 2.0 * gram).clamp_min_(0.0)
        d2.fill_diagonal_(0.0)
        return d1, d2


def pooled_distances(
    x: np.ndarray,
    y: np.ndarray,
    *,
    chunk_cols: int | None = None,
    device: str | torch.device = "auto",
    backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(L1, squared L2) distance matrices of the pooled sample [x; y] from in-memory arrays
    of shape (n, d) and (m, d), fed in column blocks of ``chunk_cols`` (all at once if None)."""
    x = np.asarray(x).reshape(len(x), -1)
    y = np.asarray(y).reshape(len(y), -1)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"x has {x.shape[1]} columns, y has {y.shape[1]}")
    acc = PooledDistances(len(x) + len(y), device, backend)
    step = x.shape[1] if chunk_cols is None else max(1, int(chunk_cols))
    for start in range(0, x.shape[1], step):
        acc.add(np.concatenate([x[:, start : start + step], y[:, start : start + step]]))
    return acc.result()
