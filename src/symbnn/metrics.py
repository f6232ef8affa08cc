"""Uncertainty metrics of an ensemble of sampled networks, computed from stored predictions.

``probs`` has shape (K, N, C): the class probabilities p_k(x) of K sampled networks on N inputs.
The predictive is p(x) = mean_k p_k(x). Definitions:

- accuracy: fraction of inputs whose top-1 class of p (``argmax``, first index on ties) is the label.
- ECE: ``bins`` (15) equal-width bins of the top-label confidence max_c p_c over [0, 1]; bin b is
  (b/B, (b+1)/B], except the first, [0, 1/B] (a confidence of exactly 1 falls in the last bin);
  ECE = sum_b |B_b|/N |acc(B_b) - conf(B_b)|.
- Brier: mean over inputs of sum_c (p_c - onehot(y)_c)^2 (range [0, 2]).
- NLL: mean over inputs of -log p_y(x), the predictive's probability of the label, floored at
  2^-24 (float16 storage rounds smaller probabilities to 0).
- entropy: H(p) = -sum_c p_c log p_c, natural log, 0 log 0 = 0.
- mutual information: MI(x) = H(p(x)) - mean_k H(p_k(x)) in nats; IDMI and OODMI are its means
  over the in-distribution and the OOD set.
- OOD score (higher = more OOD): "msp" 1 - max_c p_c (default), "entropy" H(p), "mi" MI.
- AUPR: average precision with OOD as the positive class, as sklearn's
  ``average_precision_score``: AP = sum_t (R_t - R_{t-1}) P_t over thresholds t at the distinct
  score values, descending, where an input counts as positive at t when its score >= t. Tied
  scores therefore enter together (never in an arbitrary order): n identical scores in both sets
  give AP = n_out / (n_in + n_out), the base rate.
- FPR95: fraction of in-distribution inputs with score >= t*, where t* is the ceil(0.95 n_out)-th
  largest OOD score, the largest threshold detecting at least 95% of the OOD inputs. Tie rule:
  every input with score == t* is flagged, so OOD inputs tied at t* all count as detected (the
  detected fraction may exceed 95%) and in-distribution inputs tied at t* count as false
  positives. Equivalently, the smallest FPR(t) = P_in(score >= t) over thresholds with
  TPR(t) = P_out(score >= t) >= 0.95.

Inputs are numpy arrays, torch tensors (CPU or CUDA) or lazily read array-likes with
``shape`` and slicing such as a zarr array. Probabilities are validated (finite, non-negative,
rows summing to 1 within a tolerance that allows float16 storage) and each member's row is
renormalised by its sum, so storage rounding does not show up as calibration error or mutual
information. On the CPU one fused pass (`symbnn.ensemble_pass`) validates, renormalises and
averages every member in place, in the stored float32 or float64 (float16 and other dtypes
are converted to float64 block by block, ``batch`` inputs at a time, as are lazily read
arrays); the predictive, its entropy and every sum are float64. For float32 input the
renormalised members are weighted by their row sums (p = sum_k x_k / sum_k s_k; within a few
1e-8 of the plain mean for float32 softmax outputs, see `symbnn.ensemble_pass`) and their
entropies are computed in float32 (the mutual information is then good to about 1e-7 nats;
two identical float32 networks may show MI up to 1e-6 instead of 0). CUDA
tensors are processed on their device by torch operations in float64, ``batch`` inputs at a
time. A bad array is then diagnosed in full: the error names the first NaN/inf (member, input,
class), the most negative value or the row furthest from summing to 1. Scalar metrics are
Python floats; per-input arrays come back as the input's kind (numpy, or a torch tensor on
the input's device), in float64.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numba
import numpy as np
import torch

from symbnn import ensemble_pass
from symbnn.settings import Metrics
from symbnn.threads import numba_threads_for

# library defaults are the settings layer's
METRICS = Metrics()
SCORES = Metrics.choices("ood_score")
DEFAULT_BINS = METRICS.bins
# the smallest positive float16: stored probabilities below it read as 0
NLL_FLOOR = ensemble_pass.NLL_FLOOR
# Row-sum tolerance: float16/bfloat16 keep ~3 (resp. ~2) significant digits per probability.
LOW_PRECISION_ATOL = 1e-2
ATOL = 1e-4
# Elements per block (K * batch * C) when no batch is given: 32 MiB of float64 (arrays that the
# CPU pass cannot read in place; the GPU's blocks).
BLOCK_ELEMENTS = 2**22


# ----------------------------------------------------------------------------------- inputs


def _is_torch(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def _lazy(x: Any) -> Any:
    """Keep torch tensors, numpy arrays and sliceable array-likes (zarr) as they are, so that
    blocks are read one at a time; anything else (lists) goes through numpy once."""
    if _is_torch(x) or isinstance(x, np.ndarray):
        return x
    if hasattr(x, "shape") and hasattr(x, "__getitem__") and hasattr(x, "dtype"):
        return x
    return np.asarray(x)


def _low_precision_dtype(dtype: Any) -> bool:
    if isinstance(dtype, torch.dtype):
        return dtype in (torch.float16, torch.bfloat16)
    return np.dtype(dtype) == np.float16


def _to_float64(block: Any, device: torch.device | None = None) -> torch.Tensor:
    if _is_torch(block):
        if block.is_complex():
            raise TypeError(f"complex dtype {block.dtype}")
        return block.detach().to(torch.float64)
    arr = np.asarray(block)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"dtype {arr.dtype}")
    # ascontiguousarray: torch.from_numpy rejects negative strides; never written to in place.
    out = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    return out if device is None else out.to(device)


def _device(x: Any) -> torch.device:
    return x.device if _is_torch(x) else torch.device("cpu")


def _shape(probs: Any, name: str, ndims: tuple[int, ...]) -> tuple[int, int, int]:
    """(K, N, C) of a (K, N, C) ensemble or of a (N, C) predictive read as K = 1."""
    shape = tuple(int(s) for s in probs.shape)
    if len(shape) not in ndims:
        want = " or ".join({2: "(N, C)", 3: "(K, N, C)"}[d] for d in ndims)
        raise ValueError(
            f"predictions {name!r}: expected shape {want}, got {shape} ({len(shape)} dimensions)"
        )
    k, n, c = shape if len(shape) == 3 else (1, *shape)
    for size, axis in ((k, "members K"), (n, "inputs N"), (c, "classes C")):
        if size == 0:
            raise ValueError(f"predictions {name!r}: no {axis} (shape {shape})")
    return k, n, c


def _batch_size(batch: int | None, k: int, c: int) -> int:
    if batch is None:
        return max(1, BLOCK_ELEMENTS // (k * c))
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    return int(batch)


def _raw_blocks(probs: Any, n: int, batch: int) -> Iterator[tuple[int, Any]]:
    """(start, (K, b, C) block in the stored dtype) over the input axis."""
    for start in range(0, n, batch):
        if len(probs.shape) == 3:
            yield start, probs[:, start : start + batch]
        else:
            yield start, probs[start : start + batch][None]


def _check_block(block: torch.Tensor, start: int, atol: float, worst: dict) -> None:
    """Record the first non-finite value, the most negative value and the worst row sum."""
    finite = torch.isfinite(block)
    if not bool(finite.all()) and "nonfinite" not in worst:
        member, row, col = (int(i) for i in torch.nonzero(~finite)[0])
        worst["nonfinite"] = (float(block[member, row, col]), member, start + row, col)
    clean = torch.where(finite, block, 0.0)
    low = clean.min()
    if float(low) < 0 and float(low) < worst.get("negative", (0.0,))[0]:
        member, row, col = np.unravel_index(int(clean.argmin()), tuple(clean.shape))
        worst["negative"] = (float(low), int(member), start + int(row), int(col))
    off = (clean.sum(-1) - 1).abs()
    off_max = float(off.max())
    if off_max > atol and off_max > worst.get("rowsum", (0.0,))[0]:
        member, row = np.unravel_index(int(off.argmax()), tuple(off.shape))
        worst["rowsum"] = (off_max, int(member), start + int(row))


def _where(member: int, row: int, k3: bool) -> str:
    return f"member {member}, input {row}" if k3 else f"input {row}"


def check_probabilities(
    probs: Any,
    name: str = "probs",
    *,
    ndim: int | tuple[int, ...] = (2, 3),
    batch: int | None = None,
) -> tuple[int, int, int]:
    """Validate class probabilities of shape (K, N, C) (or (N, C) where ``ndim`` allows it) and
    return (K, N, C), K = 1 for (N, C). Raises ValueError naming the array ``name`` when the
    dimensions are wrong or empty, a value is NaN/inf or negative, or a row does not sum to 1
    within 1e-2 (float16/bfloat16 storage) or 1e-4 (other dtypes); the message gives the worst
    offender over the whole array."""
    ndims = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    probs = _lazy(probs)
    if not hasattr(probs, "shape"):
        raise ValueError(f"predictions {name!r}: not an array ({type(probs).__name__})")
    k, n, c = _shape(probs, name, ndims)
    k3 = len(probs.shape) == 3
    worst: dict = {}
    atol = None
    with torch.no_grad():
        for start, raw in _raw_blocks(probs, n, _batch_size(batch, k, c)):
            atol = atol or (LOW_PRECISION_ATOL if _low_precision_dtype(raw.dtype) else ATOL)
            try:
                block = _to_float64(raw)
            except TypeError as exc:
                raise ValueError(
                    f"predictions {name!r}: probabilities must be real numbers, got {exc}"
                ) from None
            _check_block(block, start, atol, worst)
    if "nonfinite" in worst:
        value, member, row, col = worst["nonfinite"]
        raise ValueError(
            f"predictions {name!r}: contains NaN or inf (first: {value} at "
            f"{_where(member, row, k3)}, class {col})"
        )
    if "negative" in worst:
        value, member, row, col = worst["negative"]
        raise ValueError(
            f"predictions {name!r}: contains negative probabilities (most negative: {value:.3g} at "
            f"{_where(member, row, k3)}, class {col})"
        )
    if "rowsum" in worst:
        off, member, row = worst["rowsum"]
        raise ValueError(
            f"predictions {name!r}: rows must sum to 1 within {atol:g} (worst row off by {off:.3g}: "
            f"{_where(member, row, k3)})"
        )
    return k, n, c


def check_labels(labels: Any, n: int, num_classes: int, name: str = "probs") -> torch.Tensor:
    """Labels for the predictions ``name`` as an int64 CPU/GPU tensor of shape (n,), with values
    in [0, num_classes); ValueError naming the predictions otherwise."""
    what = f"labels of predictions {name!r}"
    if _is_torch(labels):
        if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
            raise ValueError(f"{what}: must be integers, got {labels.dtype}")
        y = labels.detach()
    else:
        arr = np.asarray(labels)
        if arr.dtype.kind not in "iu":
            raise ValueError(f"{what}: must be integers, got {arr.dtype}")
        y = torch.from_numpy(np.ascontiguousarray(arr))
    if y.ndim != 1:
        raise ValueError(f"{what}: expected shape (N,), got {tuple(y.shape)}")
    if y.shape[0] != n:
        raise ValueError(f"{what}: {y.shape[0]} labels for {n} inputs")
    y = y.to(torch.int64)
    if n and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        bad = int(torch.nonzero((y < 0) | (y >= num_classes))[0])
        raise ValueError(
            f"{what}: label {int(y[bad])} at input {bad} is outside [0, {num_classes})"
        )
    return y


# ----------------------------------------------------------------------------- per input

# Keys of `_per_input`'s vectors and their rows in `symbnn.ensemble_pass`'s output.
_ROWS = {
    "conf": ensemble_pass.CONF,
    "pred": ensemble_pass.PRED,
    "entropy": ensemble_pass.ENTROPY,
    "mi": ensemble_pass.MI,
    "correct": ensemble_pass.CORRECT,
    "brier": ensemble_pass.BRIER,
    "nll": ensemble_pass.NLL,
}


def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -torch.special.xlogy(p, p).sum(-1)  # xlogy(0, 0) = 0


def _pass_dtype(dtype: Any) -> np.dtype:
    """The dtype the CPU pass reads: float32 stays float32 (member entropies in float32), every
    other real dtype is read as float64 (float16 storage, the workflow's, keeps its results
    exact: two identical networks have MI 0 to 1e-15); TypeError otherwise."""
    if isinstance(dtype, torch.dtype):
        if dtype.is_complex:
            raise TypeError(f"complex dtype {dtype}")
        return np.dtype(np.float32) if dtype == torch.float32 else np.dtype(np.float64)
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise TypeError(f"dtype {dtype}")
    return np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)


def _in_place(probs: Any, dtype: np.dtype) -> np.ndarray | None:
    """``probs`` as a C-ordered numpy array of ``dtype`` sharing its memory, or None when it
    must be converted or read in blocks."""
    if _is_torch(probs):
        if probs.device.type != "cpu" or probs.dtype not in (torch.float32, torch.float64):
            return None
        probs = probs.detach()
        return probs.numpy() if probs.is_contiguous() else None
    if isinstance(probs, np.ndarray) and probs.dtype == dtype and probs.flags.c_contiguous:
        return probs
    return None


def _as_block(raw: Any, dtype: np.dtype) -> np.ndarray:
    """A (K, b, C) block read from ``probs`` as a C-ordered array of ``dtype``."""
    if _is_torch(raw):
        raw = raw.detach().to(torch.float64 if dtype == np.float64 else torch.float32)
        return np.ascontiguousarray(raw.numpy())
    return np.ascontiguousarray(np.asarray(raw), dtype=dtype)


def _cpu_pass(
    probs: Any, k: int, n: int, c: int, y: np.ndarray, entropy: bool, mutual: bool, batch: int
) -> tuple[np.ndarray, np.ndarray]:
    """(rows of `symbnn.ensemble_pass`'s output, counts of (bad values, bad rows)) of the
    whole array: in place when it is a C-ordered float32/float64 array, else in
    blocks of ``batch`` inputs converted to `_pass_dtype`."""
    dtype = _pass_dtype(probs.dtype)
    atol = LOW_PRECISION_ATOL if _low_precision_dtype(probs.dtype) else ATOL
    out = np.empty((ensemble_pass.OUTPUTS, n))
    whole = _in_place(probs, dtype)
    if whole is not None:
        blocks: Iterator[tuple[int, np.ndarray]] = iter([(0, whole.reshape(k, n, c))])
    else:
        blocks = ((start, _as_block(raw, dtype)) for start, raw in _raw_blocks(probs, n, batch))
    bad = np.zeros(2, dtype=np.int64)
    for start, block in blocks:
        b = block.shape[1]
        labels = y[start : start + b] if len(y) else y
        # runs handed out one at a time: a thread the shared machine delays takes fewer
        with numba_threads_for(k * b * c), numba.parallel_chunksize(1):
            rows = ensemble_pass.run_rows(b, c, numba.get_num_threads())
            counts = np.zeros((-(-b // rows), 2), dtype=np.int64)
            ensemble_pass.ensemble_pass(
                block.reshape(-1),
                k,
                b,
                c,
                dtype == np.float32,  # weighted by the row sums (symbnn.ensemble_pass)
                entropy,
                mutual,
                labels,
                atol,
                rows,
                out,
                start,
                counts,
            )
        bad += counts.sum(0)
    return out, bad


def _torch_pass(
    probs: Any, k: int, n: int, c: int, y: torch.Tensor | None, batch: int
) -> np.ndarray:
    """The same rows as `_cpu_pass` by torch operations in float64 where the tensor is (the
    GPU route; ``probs`` validated already)."""
    device = _device(probs)
    out = torch.empty((ensemble_pass.OUTPUTS, n), dtype=torch.float64, device=device)
    with torch.no_grad():
        for start, raw in _raw_blocks(probs, n, batch):
            members = _to_float64(raw, device)
            members = members / members.sum(-1, keepdim=True)  # undo storage rounding
            p = members.mean(0)
            end = start + p.shape[0]
            pred = p.argmax(-1)  # first index among ties
            out[_ROWS["pred"], start:end] = pred.to(torch.float64)
            out[_ROWS["conf"], start:end] = p.gather(-1, pred[:, None])[:, 0]
            entropy = _entropy(p)
            out[_ROWS["entropy"], start:end] = entropy
            # MI >= 0 by concavity of H; clamp rounding noise (identical members).
            out[_ROWS["mi"], start:end] = (entropy - _entropy(members).mean(0)).clamp_min(0)
            if y is not None:
                yb = y[start:end]
                out[_ROWS["correct"], start:end] = (pred == yb).to(torch.float64)
                onehot = torch.nn.functional.one_hot(yb, c).to(torch.float64)
                out[_ROWS["brier"], start:end] = ((p - onehot) ** 2).sum(-1)
                p_label = p.gather(-1, yb[:, None])[:, 0]
                out[_ROWS["nll"], start:end] = -torch.log(p_label.clamp_min(NLL_FLOOR))
    return out.cpu().numpy()


def _per_input(
    probs: Any,
    name: str,
    want: set[str],
    *,
    ndim: tuple[int, ...],
    labels: Any = None,
    batch: int | None = None,
    route: str | None = None,
) -> tuple[dict[str, np.ndarray], int]:
    """Validate ``probs`` and return per-input float64 numpy vectors (N,) for the quantities
    in ``want`` (conf, pred, correct, brier, nll, entropy, mi) and C. ``route``: "numba" (the
    CPU pass, default on the CPU) or "torch" (default for CUDA tensors)."""
    probs = _lazy(probs)
    if not hasattr(probs, "shape"):
        raise ValueError(f"predictions {name!r}: not an array ({type(probs).__name__})")
    k, n, c = _shape(probs, name, ndim)
    step = _batch_size(batch, k, c)
    route = route or ("numba" if _device(probs).type == "cpu" else "torch")
    if route == "torch":
        y = None if labels is None else check_labels(labels, n, c, name).to(_device(probs))
        check_probabilities(probs, name, ndim=ndim, batch=batch)
        out = _torch_pass(probs, k, n, c, y, step)
    else:
        y = np.empty(0, dtype=np.int64)
        if labels is not None:
            y = check_labels(labels, n, c, name).cpu().numpy()
        try:
            # one network has MI 0 exactly: no member entropies (float32's would add noise)
            mutual = "mi" in want and k > 1
            out, bad = _cpu_pass(probs, k, n, c, y, "entropy" in want, mutual, step)
        except TypeError as exc:
            raise ValueError(
                f"predictions {name!r}: probabilities must be real numbers, got {exc}"
            ) from None
        if bad.any():  # name the first bad value or the worst row (raises)
            check_probabilities(probs, name, ndim=ndim, batch=batch)
        if "mi" in want and k == 1:
            out[_ROWS["mi"]] = 0.0
    return {key: out[_ROWS[key]] for key in want}, c


def _like(values: np.ndarray, reference: Any) -> Any:
    if _is_torch(reference):
        return torch.from_numpy(values).to(reference.device)
    return values


# ------------------------------------------------------------------------------- metrics


def accuracy(p: Any, y: Any, *, batch: int | None = None) -> float:
    """Top-1 accuracy of the predictive. ``p`` is (N, C) (a predictive) or (K, N, C) (an
    ensemble, averaged over K); ``y`` the (N,) integer labels."""
    stats, _ = _per_input(p, "p", {"correct"}, ndim=(2, 3), labels=y, batch=batch)
    return float(stats["correct"].mean())


def _ece_from(conf: np.ndarray, correct: np.ndarray, bins: int) -> float:
    edges = np.linspace(0.0, 1.0, bins + 1)
    # searchsorted (left) gives i with edges[i-1] < conf <= edges[i]: bins (lo, hi]; conf 0 -> i = 0
    # joins the first bin, and rounding above 1 joins the last.
    index = np.clip(np.searchsorted(edges, conf) - 1, 0, bins - 1)
    gap = np.bincount(index, weights=correct - conf, minlength=bins)
    # sum_b |B_b|/N |acc_b - conf_b| = sum_b |sum_{i in b} (correct_i - conf_i)| / N
    return float(np.abs(gap).sum() / conf.size)


def _check_bins(bins: int) -> int:
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    return int(bins)


def ece(p: Any, y: Any, bins: int = DEFAULT_BINS, *, batch: int | None = None) -> float:
    """Expected calibration error of the predictive over ``bins`` equal-width confidence bins
    (see the module docstring); ``p`` is (N, C) or (K, N, C)."""
    bins = _check_bins(bins)
    stats, _ = _per_input(p, "p", {"conf", "correct"}, ndim=(2, 3), labels=y, batch=batch)
    return _ece_from(stats["conf"], stats["correct"], bins)


def brier(p: Any, y: Any, *, batch: int | None = None) -> float:
    """Mean over inputs of sum_c (p_c - onehot(y)_c)^2; ``p`` is (N, C) or (K, N, C)."""
    stats, _ = _per_input(p, "p", {"brier"}, ndim=(2, 3), labels=y, batch=batch)
    return float(stats["brier"].mean())


def mutual_information(probs: Any, *, batch: int | None = None) -> Any:
    """Per-input mutual information H(mean_k p_k) - mean_k H(p_k) in nats, shape (N,), of a
    (K, N, C) ensemble (a single network, K = 1, has MI 0)."""
    stats, _ = _per_input(probs, "probs", {"mi"}, ndim=(3,), batch=batch)
    return _like(stats["mi"], probs)


def _score_key(kind: str) -> str:
    if kind not in SCORES:
        raise ValueError(f"unknown OOD score {kind!r}; choose one of {', '.join(SCORES)}")
    return {"msp": "conf", "entropy": "entropy", "mi": "mi"}[kind]


def _score_from(stats: dict[str, np.ndarray], kind: str) -> np.ndarray:
    return 1 - stats["conf"] if kind == "msp" else stats[_score_key(kind)]


def ood_scores(probs: Any, kind: str = METRICS.ood_score, *, batch: int | None = None) -> Any:
    """Per-input OOD score (N,), higher = more OOD: "msp" 1 - max_c p_c, "entropy" H(p), "mi"
    mutual information. ``probs`` is (K, N, C), or (N, C) for "msp" and "entropy"."""
    key = _score_key(kind)
    stats, _ = _per_input(probs, "probs", {key}, ndim=(3,) if kind == "mi" else (2, 3), batch=batch)
    return _like(_score_from(stats, kind), probs)


def _scores(score_in: Any, score_out: Any) -> tuple[np.ndarray, np.ndarray]:
    out = []
    for score, name in ((score_in, "score_in"), (score_out, "score_out")):
        raw = score.detach().cpu().numpy() if _is_torch(score) else np.asarray(score)
        if raw.dtype.kind not in "biuf":
            raise ValueError(f"{name}: scores must be real numbers, got dtype {raw.dtype}")
        s = raw.astype(np.float64, copy=False)
        if s.ndim != 1 or s.size == 0:
            raise ValueError(f"{name}: expected a non-empty 1-D array, got shape {s.shape}")
        if not np.isfinite(s).all():
            raise ValueError(f"{name}: scores contain NaN or inf")
        out.append(s)
    return out[0], out[1]


def _detection(s_in: np.ndarray, s_out: np.ndarray) -> tuple[float, float]:
    """(AUPR, FPR95) of finite 1-D scores from one sort of each set (module docstring).

    AP = sum_t (R_t - R_{t-1}) P_t over the distinct scores t: the recall only moves at the
    distinct OOD scores, by their count / n_out, where P_t = tp / (tp + fp) with tp, fp the
    OOD and in-distribution inputs scoring >= t, so the sum runs over the OOD values alone."""
    s_in, s_out = np.sort(s_in), np.sort(s_out)
    n_in, n_out = s_in.size, s_out.size
    first = np.flatnonzero(np.r_[True, s_out[1:] != s_out[:-1]])  # each distinct OOD value
    tp = n_out - first
    fp = n_in - np.searchsorted(s_in, s_out[first], side="left")
    count = np.diff(np.r_[first, n_out])
    aupr_value = float((count * (tp / (tp + fp))).sum() / n_out)
    k = -(-95 * n_out // 100)  # ceil(0.95 n_out) in integers: 0.95 * 20 must give 19, not 19.000001
    threshold = s_out[n_out - k]  # the k-th largest OOD score
    fpr = float(n_in - np.searchsorted(s_in, threshold, side="left")) / n_in
    return aupr_value, fpr


def aupr(score_in: Any, score_out: Any) -> float:
    """Average precision of detecting OOD (positive class) by score >= threshold, thresholds at
    the distinct score values (as sklearn's ``average_precision_score``)."""
    return _detection(*_scores(score_in, score_out))[0]


def fpr_at_95(score_in: Any, score_out: Any) -> float:
    """False-positive rate on the in-distribution inputs at the threshold t* = the
    ceil(0.95 n_out)-th largest OOD score, flagging score >= t* (ties at t* flagged: detected
    OOD and false positives alike)."""
    return _detection(*_scores(score_in, score_out))[1]


def uncertainty_metrics(
    probs_in: Any,
    labels: Any,
    probs_out: Any,
    score: str = METRICS.ood_score,
    *,
    bins: int = DEFAULT_BINS,
    batch: int | None = None,
    names: tuple[str, str] = ("in", "out"),
    mutual_information: bool = True,
) -> dict[str, float]:
    """All metrics of an ensemble: ``probs_in`` (K, N, C) on the in-distribution test set with
    (N,) ``labels``, ``probs_out`` (K, M, C) on the OOD set, OOD ``score`` "msp", "entropy" or
    "mi". Returns accuracy, ece, brier, nll, aupr, fpr95, idmi, oodmi (NLL and MI in nats)
    as floats; without idmi and oodmi when ``mutual_information`` is False (the members'
    entropies are the pass's main cost). ``names`` name the two arrays in error messages."""
    key = _score_key(score)
    bins = _check_bins(bins)
    name_in, name_out = names
    probs_in, probs_out = _lazy(probs_in), _lazy(probs_out)
    # Compare the shapes before reading anything: both sets come from the same K networks.
    k_in, _, c_in = _shape(probs_in, name_in, (3,))
    k_out, _, c_out = _shape(probs_out, name_out, (3,))
    if (k_out, c_out) != (k_in, c_in):
        raise ValueError(
            f"predictions {name_out!r}: {k_out} members and {c_out} classes, but {name_in!r} "
            f"has {k_in} and {c_in}"
        )
    extra = {key} | ({"mi"} if mutual_information else set())
    s_in, _ = _per_input(
        probs_in,
        name_in,
        {"conf", "correct", "brier", "nll"} | extra,
        ndim=(3,),
        labels=labels,
        batch=batch,
    )
    s_out, _ = _per_input(probs_out, name_out, extra, ndim=(3,), batch=batch)
    aupr_value, fpr95 = _detection(_score_from(s_in, score), _score_from(s_out, score))
    values = {
        "accuracy": float(s_in["correct"].mean()),
        "ece": _ece_from(s_in["conf"], s_in["correct"], bins),
        "brier": float(s_in["brier"].mean()),
        "nll": float(s_in["nll"].mean()),
        "aupr": aupr_value,
        "fpr95": fpr95,
    }
    if mutual_information:
        values["idmi"] = float(s_in["mi"].mean())
        values["oodmi"] = float(s_out["mi"].mean())
    return values
