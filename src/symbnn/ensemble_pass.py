"""One fused pass over an ensemble's class probabilities (the CPU engine of `symbnn.metrics`).

For a C-ordered (K, N, C) float32 or float64 array, one numba kernel reads every member's
probabilities once and produces, per input, what the metrics need: the predictive p, its top
class and confidence, its entropy, the mutual information H(p) - mean_k H(q_k) with q_k the
member's row renormalised by its sum s_k, and with labels the correctness, Brier score and
NLL. The same pass validates the input: it counts the values that are not finite or negative
and the rows whose sum is off 1 by more than ``atol`` (`symbnn.metrics` then diagnoses a bad
array in full, naming the first bad member and row).

Two predictives. Unweighted (float64 input, hence float16 storage): p = (1/K) sum_k q_k and
the members' entropies averaged likewise. Weighted (float32 input): the q_k weighted by
their row sums, p = sum_k x_k / sum_k s_k, and the entropies with the same weights,
sum_k s_k H(q_k) / sum_k s_k = (sum_k s_k log s_k - sum_k sum_c x log x) / sum_k s_k: flat
sums of the stored values, with no per-member rescaling (the MI keeps its bound MI >= 0).
The two differ by at most about max_k |s_k - 1| times the members' spread: a few 1e-8 for
float32 softmax outputs (rows within 4e-7 of 1), at most 1e-4 by the validation.

Layout. Threads own disjoint runs of inputs (``rows`` at a time, all members). Within a run,
each member's rows are summed, then one flat, vectorised loop over its contiguous (rows x C)
values accumulates x (weighted; unweighted: x / s, the reciprocals spread over each row's
classes) and x log x into float64 per class.

Precision. The predictive, its entropy, the NLL and every sum are float64. x log x of float32
probabilities is computed in float32 by `_xlogx` (a vectorisable logarithm of its own, within
4e-7 relative: libm's logf is a scalar call and would be most of the cost), float64
probabilities use libm's log; the member entropies of float32 inputs, hence their mutual
information, are therefore good to about 1e-7 nats.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

# Rows of per-input output (`ensemble_pass`'s ``out``).
CONF, PRED, ENTROPY, MI, CORRECT, BRIER, NLL = range(7)
OUTPUTS = 7
# the smallest positive float16: stored probabilities below it read as 0 (`symbnn.metrics`)
NLL_FLOOR = 2.0**-24
# float64 values per thread scratch array: a run's per-class accumulators stay in L2.
RUN_ELEMENTS = 16384

# No "fast" flags that assume finite values: the pass must see NaN and inf to count them.
# "reassoc" lets the flat loops vectorise their sums; divisions stay exact (no "arcp": 3 * (1/3)
# is not 1).
_FLAGS = {"contract", "nsz", "reassoc"}


@intrinsic
def _bits(typingctx, value):
    """The IEEE bits of a float32 as an int32 (an LLVM bitcast, free inside vector code)."""
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def _from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the low 32 bits of an integer."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = args[0]
        if bits.bitwidth > 32:
            value = builder.trunc(value, ir.IntType(32))
        return builder.bitcast(value, ir.FloatType())

    return types.float32(bits), codegen


_LN2 = math.log(2.0)
_SQRT_HALF_BITS = 0x3F3504F3  # the bits of float32 sqrt(1/2)


@numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")
def _xlogx32(x):
    """x log x for a float32 x >= 0 (0 at 0), in plain arithmetic that vectorises. x = 2^e m
    with m in [sqrt(1/2), sqrt(2)) read off the bits; log m = 2 atanh(u), u = (m-1)/(m+1),
    |u| < 0.172, by its series to u^9 (truncation below 3e-9 relative). At x = 0 (and for
    subnormals) the bits give a finite log, so x log x is 0 (resp. below 1.1e-36) with no test."""
    bits = _bits(x)
    e = (bits - np.int32(_SQRT_HALF_BITS)) >> np.int32(23)
    m = _from_bits(bits - (e << np.int32(23)))
    u = (m - np.float32(1.0)) / (m + np.float32(1.0))
    u2 = u * u
    p = np.float32(1.0 / 9.0) * u2 + np.float32(1.0 / 7.0)
    p = p * u2 + np.float32(1.0 / 5.0)
    p = p * u2 + np.float32(1.0 / 3.0)
    p = p * u2 + np.float32(1.0)
    return x * (np.float32(2.0) * u * p + np.float32(e) * np.float32(_LN2))


def _xlogx(x):
    """x log x, 0 at 0 (numba only: float32 by `_xlogx32`, float64 by libm)."""
    raise NotImplementedError


@overload(_xlogx)
def _xlogx_overload(x):
    if x == types.float32:
        return lambda x: _xlogx32(x)
    if x == types.float64:
        return lambda x: x * np.log(x) if x > 0.0 else 0.0
    return None


@numba.njit(inline="always", error_model="numpy")
def _log1p_small(d):
    """log(1 + d) for |d| <= 1e-2 (a valid row's sum is 1 + d), error below 2e-15."""
    return d * (1.0 - d * (0.5 - d * (1.0 / 3.0 - d * (0.25 - d * (0.2 - d / 6.0)))))


@numba.njit(parallel=True, fastmath=_FLAGS, error_model="numpy", cache=True)
def ensemble_pass(
    flat, k, n, c, weighted, entropy, mutual, labels, atol, rows, out, offset, counts
):
    """The (K, N, C) probabilities ``flat`` (C-ordered, flattened; float32 or float64) of K
    members on N inputs into ``out[:, offset:offset + N]`` (rows CONF .. NLL): CONF and PRED
    always, ENTROPY when ``entropy`` or ``mutual``, MI when ``mutual``, CORRECT, BRIER and NLL
    when ``labels`` holds N labels (else it is empty). ``weighted``: the members renormalised
    and weighted by their row sums (module docstring), else renormalised and averaged.
    ``counts[t]`` gets run t's number of values that are not finite or negative, and of rows
    whose sum is off 1 by more than ``atol``; outputs computed from bad values are
    meaningless."""
    runs = (n + rows - 1) // rows
    with_labels = labels.shape[0] == n
    for run in numba.prange(runs):
        r0 = run * rows
        rr = min(rows, n - r0)
        size = rr * c
        acc = np.zeros(size)  # per class: sum_k x (weighted) or sum_k x / s
        xlx = np.zeros(size if mutual else 0)  # the same of x log x
        # per row: sum_k s and sum_k s log s (weighted), or K and sum_k log s
        total = np.zeros(rr) if weighted else np.full(rr, float(k))
        log_part = np.zeros(rr)
        inv = np.empty(rr)
        spread = np.empty(0 if weighted else size, flat.dtype)  # 1 / s over each row
        good = 0
        off = 0
        for member in range(k):
            base = (member * n + r0) * c
            # slices, not flat[base + j]: numba's negative-index wraparound would stop vectors
            seg = flat[base : base + size]
            for r in range(rr):
                row = seg[r * c : (r + 1) * c]
                s = 0.0
                for j in range(c):
                    s += row[j]
                inv[r] = s
            if weighted:
                for r in range(rr):
                    off += abs(inv[r] - 1.0) > atol
                    total[r] += inv[r]
                if mutual:
                    for r in range(rr):
                        log_part[r] += inv[r] * _log1p_small(inv[r] - 1.0)
                if mutual:
                    for j in range(size):
                        x = seg[j]
                        good += (x >= 0) & (x - x == 0)
                        acc[j] += x
                        xlx[j] += _xlogx(x)
                else:
                    for j in range(size):
                        x = seg[j]
                        good += (x >= 0) & (x - x == 0)
                        acc[j] += x
                continue
            for r in range(rr):
                d = inv[r] - 1.0
                off += abs(d) > atol
                if mutual:
                    log_part[r] += _log1p_small(d)
                inv[r] = 1.0 / inv[r]
            for r in range(rr):
                w = inv[r]
                part = spread[r * c : (r + 1) * c]
                for j in range(c):
                    part[j] = w
            if mutual:
                for j in range(size):
                    x = seg[j]
                    good += (x >= 0) & (x - x == 0)
                    acc[j] += x * spread[j]
                    xlx[j] += _xlogx(x) * spread[j]
            else:
                for j in range(size):
                    x = seg[j]
                    good += (x >= 0) & (x - x == 0)
                    acc[j] += x * spread[j]
        counts[run, 0] = k * size - good
        counts[run, 1] = off
        for r in range(rr):
            i = offset + r0 + r
            row = acc[r * c : (r + 1) * c]
            norm = total[r]
            top, best = row[0] / norm, 0
            for j in range(1, c):
                p = row[j] / norm
                if p > top:  # the first class among ties
                    top, best = p, j
            out[CONF, i] = top
            out[PRED, i] = best
            h = 0.0
            if entropy or mutual:
                for j in range(c):
                    p = row[j] / norm
                    if p > 0.0:
                        h -= p * np.log(p)
                out[ENTROPY, i] = h
            if mutual:
                # the members' mean entropy: (sum_k w_k log s_k - sum_c xlx) / sum_k w_k
                members = log_part[r]
                for j in range(c):
                    members -= xlx[r * c + j]
                # MI >= 0 by concavity of H; clamp rounding noise (identical members)
                out[MI, i] = max(h - members / norm, 0.0)
            if with_labels:
                y = labels[r0 + r]
                out[CORRECT, i] = 1.0 if best == y else 0.0
                brier = 0.0
                for j in range(c):
                    gap = row[j] / norm - (1.0 if j == y else 0.0)
                    brier += gap * gap
                out[BRIER, i] = brier
                out[NLL, i] = -np.log(max(row[y] / norm, NLL_FLOOR))


def run_rows(n: int, c: int, threads: int) -> int:
    """Inputs per thread run for N inputs of C classes: runs of about RUN_ELEMENTS values (at
    most one row more), their number rounded up to a multiple of ``threads`` so that the
    threads get equal shares."""
    runs = -(-n * c // RUN_ELEMENTS)
    runs = -(-runs // threads) * threads
    return max(1, -(-n // runs))
