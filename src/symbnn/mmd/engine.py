"""One layer, end to end: pooled distances -> twenty MMD^2_u values -> optional MMDAgg test."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symbnn.mmd.aggtest import MMD, AggregatedTest, AggTestConfig, mmdagg_test
from symbnn.mmd.distances import pooled_distances
from symbnn.mmd.kernels import centred_kernel_matrices, mmd_values

MIN_SAMPLES = 2


class MMDInputError(ValueError):
    """Inputs the MMD cannot be computed from; the message names the culprit."""


@dataclass(frozen=True)
class LayerMMD:
    values: np.ndarray  # (20,) MMD^2_u, laplace_0..9 then gaussian_0..9
    bandwidths: np.ndarray  # (20,) the matching bandwidths
    n_target: int
    n_method: int
    n_params: int
    test: AggregatedTest | None = None

    @property
    def median(self) -> float:
        return float(np.median(self.values))

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def max(self) -> float:
        return float(np.max(self.values))


def check_sample_sizes(n: int, m: int, where: str = "") -> None:
    if n < MIN_SAMPLES or m < MIN_SAMPLES:
        raise MMDInputError(
            f"{where}the unbiased MMD needs at least {MIN_SAMPLES} samples on each side, "
            f"got {n} target and {m} method samples"
        )


def mmd_from_distances(
    l1: torch.Tensor,
    l2sq: torch.Tensor,
    n: int,
    *,
    n_params: int = 0,
    pvalue: bool = MMD.pvalue,
    seed: int = MMD.seed,
    config: AggTestConfig = AggTestConfig(),
    where: str = "",
) -> LayerMMD:
    """Twenty MMD^2_u values (and, if asked, the MMDAgg test) from pooled distance matrices
    whose first ``n`` rows are the target samples. A value that is not finite is an
    MMDInputError (prefixed with ``where``)."""
    m = l1.shape[0] - n
    check_sample_sizes(n, m)
    values, bandwidths = mmd_values(l1, l2sq, n)
    test = None
    if pvalue:
        kernels = centred_kernel_matrices(l1, l2sq, torch.from_numpy(bandwidths))
        test = mmdagg_test(kernels, n, config=config, seed=seed)
    result = LayerMMD(values, bandwidths, n, m, n_params, test)
    _check_finite(result, where)
    return result


def two_sample_mmd(
    x: np.ndarray,
    y: np.ndarray,
    *,
    pvalue: bool = MMD.pvalue,
    seed: int = MMD.seed,
    device: str | torch.device = "auto",
    chunk_cols: int | None = None,
    config: AggTestConfig = AggTestConfig(),
) -> LayerMMD:
    """The layer-wise MMD of in-memory samples x (n, ...) and y (m, ...), flattened per sample."""
    x = np.asarray(x).reshape(len(x), -1)
    y = np.asarray(y).reshape(len(y), -1)
    check_sample_sizes(len(x), len(y))
    if x.shape[1] != y.shape[1]:
        raise MMDInputError(f"samples differ in size: {x.shape[1]} vs {y.shape[1]} parameters")
    for label, values in (("x", x), ("y", y)):
        if not np.isfinite(values).all():
            raise MMDInputError(f"{label} holds NaN or infinite values")
    l1, l2sq = pooled_distances(x, y, chunk_cols=chunk_cols, device=device)
    return mmd_from_distances(
        l1, l2sq, len(x), n_params=x.shape[1], pvalue=pvalue, seed=seed, config=config
    )


def _check_finite(result: LayerMMD, where: str) -> None:
    """MMDInputError when a value, a bandwidth or the p-value is NaN or infinite: no such
    number is returned, printed or written."""
    parts = {"MMD values": result.values, "bandwidths": result.bandwidths}
    if result.test is not None:
        parts["p-value"] = np.asarray([result.test.p_value], dtype=np.float64)
    bad = [name for name, values in parts.items() if not np.isfinite(values).all()]
    if bad:
        raise MMDInputError(
            f"{where}the {' and '.join(bad)} are not finite (the weights span too wide a range "
            "even for float64 distances, or a store is damaged: `symbnn store validate` it)"
        )
