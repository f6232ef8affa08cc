"""MCMC convergence diagnostics with numpy and scipy (docs/maths.md 4.7): split-R-hat and the
bulk and tail effective sample sizes, rank-normalised (Vehtari, Gelman, Simpson, Carpenter &
Buerkner 2021), and nested R-hat for many short chains grouped in superchains (Margossian,
Hoffman, Sountsov, Riou-Durand, Vehtari & Gelman 2024).

Draws are an array (chains, draws) or (chains, draws, quantities); every function returns
one value per quantity (a float for 2-D input, an array (quantities,) for 3-D).
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

# the quantiles whose indicator ESS is the tail ESS
TAIL_QUANTILES = (0.05, 0.95)


def _as_draws(draws: np.ndarray, least: int = 2) -> tuple[np.ndarray, bool]:
    """(chains, draws, quantities) float64, and whether the input had quantities."""
    array = np.asarray(draws, dtype=np.float64)
    if array.ndim not in (2, 3):
        raise ValueError(
            f"draws must be (chains, draws) or (chains, draws, quantities), got shape {array.shape}"
        )
    if array.shape[1] < least:
        raise ValueError(f"need at least {least} draws per chain, got {array.shape[1]}")
    if not np.isfinite(array).all():
        raise ValueError("draws must be finite")
    return (array if array.ndim == 3 else array[..., None]), array.ndim == 3


def _shaped(values: np.ndarray, many: bool) -> np.ndarray | float:
    return values if many else float(values[0])


def split_chains(array: np.ndarray) -> np.ndarray:
    """Each chain cut into its first and second halves (the middle draw of an odd count left
    out): (2 chains, draws // 2, ...)."""
    half = array.shape[1] // 2
    return np.concatenate([array[:, :half], array[:, array.shape[1] - half :]])


def rank_normalize(array: np.ndarray) -> np.ndarray:
    """Per quantity, every draw of every chain replaced by the normal quantile of its pooled
    rank r (ties averaged) among the S draws: Phi^-1((r - 3/8) / (S + 1/4))."""
    chains, draws, quantities = array.shape
    pooled = array.reshape(chains * draws, quantities)
    ranks = stats.rankdata(pooled, axis=0)
    z = special.ndtri((ranks - 0.375) / (pooled.shape[0] + 0.25))
    return z.reshape(array.shape)


def _variances(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per quantity, the mean within-chain variance W and the pooled estimate
    var+ = (n - 1) / n W + B / n of the marginal variance (B / n: the variance of the chain
    means)."""
    n = array.shape[1]
    within = array.var(axis=1, ddof=1).mean(axis=0)
    between_over_n = array.mean(axis=1).var(axis=0, ddof=1)
    return within, within * ((n - 1) / n) + between_over_n


def _rhat(array: np.ndarray) -> np.ndarray:
    """sqrt(var+ / W) per quantity (nan where the chains are constant)."""
    within, plus = _variances(array)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(plus / within)


def rhat(draws: np.ndarray) -> np.ndarray | float:
    """Rank-normalised split-R-hat: the larger of the split-R-hats of the rank-normalised
    draws (location) and of the rank-normalised distances to the median (scale)."""
    array, many = _as_draws(draws, least=4)
    split = split_chains(array)
    folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
    bulk = _rhat(rank_normalize(split))
    tail = _rhat(rank_normalize(folded))
    return _shaped(np.maximum(bulk, tail), many)


def _autocovariance(array: np.ndarray) -> np.ndarray:
    """Per chain and quantity, the autocovariance at every lag (divided by n, the biased
    estimator), by FFT: (chains, draws, quantities)."""
    n = array.shape[1]
    centred = array - array.mean(axis=1, keepdims=True)
    size = 1 << (2 * n - 1).bit_length()  # no circular wrap-around
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=1)[:, :n] / n


def _ess_one(autocov: np.ndarray, within: float, plus: float, chains: int) -> float:
    """The ESS of one quantity from its chains' autocovariances (chains, n): Geyer's initial
    positive sequence of the pooled autocorrelations, made monotone, as Stan estimates it."""
    n = autocov.shape[1]
    # rho_t = 1 - (W - mean over chains of the lag-t autocovariance) / var+, rho_0 = 1
    rho = 1.0 - (within - autocov.mean(axis=0)) / plus
    rho[0] = 1.0
    # the pairs P_j = rho_2j + rho_2j+1 from j = 0 while they stay positive, up to lag n - 3;
    # the last pair looked at gives only its even term, kept when the pair was or the term is
    # non-negative
    pair = rho[0] + rho[1]
    pairs, last, last_kept = [pair], rho[0], True
    j = 1
    while 2 * j < n - 2 and pair > 0:
        pair = rho[2 * j] + rho[2 * j + 1]
        last, last_kept = rho[2 * j], pair >= 0
        if last_kept:
            pairs.append(pair)
        j += 1
    summed = np.minimum.accumulate(pairs[: j - 1])  # monotone: no pair above the one before
    trailing = last if last_kept else max(last, 0.0)
    tau = -1.0 + 2.0 * summed.sum() + trailing
    total = chains * n
    return total / max(tau, 1.0 / np.log10(total))


def _ess(array: np.ndarray) -> np.ndarray:
    """The ESS of each quantity of (chains, n, quantities) draws."""
    chains = array.shape[0]
    within, plus = _variances(array)
    autocov = _autocovariance(array)
    out = np.empty(array.shape[2])
    for q in range(array.shape[2]):
        if not plus[q] > 0:
            out[q] = np.nan  # constant draws carry no information on their spread
            continue
        out[q] = _ess_one(autocov[:, :, q], within[q], plus[q], chains)
    return out


def ess_bulk(draws: np.ndarray) -> np.ndarray | float:
    """Bulk ESS: the ESS of the rank-normalised split chains."""
    array, many = _as_draws(draws, least=4)
    return _shaped(_ess(rank_normalize(split_chains(array))), many)


def ess_tail(draws: np.ndarray) -> np.ndarray | float:
    """Tail ESS: the smaller of the ESS of the indicators I(draw <= q) of the 5% and 95%
    quantiles q of all the draws, on the split chains."""
    array, many = _as_draws(draws, least=4)
    pooled = array.reshape(-1, array.shape[2])
    values = [
        _ess(split_chains(array <= np.quantile(pooled, p, axis=0)).astype(np.float64))
        for p in TAIL_QUANTILES
    ]
    return _shaped(np.minimum(*values), many)


def nested_rhat(draws: np.ndarray, superchains: np.ndarray) -> np.ndarray | float:
    """Nested R-hat: sqrt(1 + B / W) with B the variance between the superchains' means and W
    the mean over superchains of the variance of their chains' means plus the mean
    within-chain variance (`superchains`: a label per chain; every superchain must hold the
    same number of chains)."""
    array, many = _as_draws(draws, least=1)
    labels = np.asarray(superchains)
    if labels.shape != (array.shape[0],):
        raise ValueError(
            f"need one superchain label per chain ({array.shape[0]}), got {labels.shape}"
        )
    groups = [array[labels == label] for label in np.unique(labels)]
    sizes = {len(group) for group in groups}
    if len(groups) < 2 or len(sizes) != 1:
        raise ValueError(
            f"nested R-hat needs two or more superchains of equal size, got sizes "
            f"{sorted(len(g) for g in groups)}"
        )
    (m,) = sizes
    n = array.shape[1]
    chain_means = np.stack([g.mean(axis=1) for g in groups])  # (superchains, m, quantities)
    super_means = chain_means.mean(axis=1)
    between = super_means.var(axis=0, ddof=1)
    between_chains = chain_means.var(axis=1, ddof=1) if m > 1 else np.zeros_like(super_means)
    within_chains = (
        np.stack([g.var(axis=1, ddof=1).mean(axis=0) for g in groups])
        if n > 1
        else np.zeros_like(super_means)
    )
    within = (between_chains + within_chains).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _shaped(np.sqrt(1.0 + between / within), many)
