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

Inputs are numpy arrays, torch tensors (CPU or CUDA: the computation runs where the tensor is),
or lazily read array-likes with ``shape`` and slicing such as a zarr array. Probabilities are
validated (finite, non-negative, rows summing to 1 within a tolerance that allows float16
storage), cast to float64 and each row renormalised, so storage rounding does not show up as
calibration error or mutual information. The input axis is processed in blocks of ``batch``
inputs (all K members at once), so memory is O(K * batch * C + N) whatever N is. Scalar metrics
are Python floats; per-input arrays come back as the input's kind (numpy, or a torch tensor on
the input's device), in float64.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from symbnn.settings import Metrics

# library defaults are the settings layer's
METRICS = Metrics()
SCORES = Metrics.choices("ood_score")
DEFAULT_BINS = METRICS.bins
# the smallest positive float16: stored probabilities below it read as 0
NLL_FLOOR = 2.0**-24
# Row-sum tolerance: float16/bfloat16 keep ~3 (resp. ~2) significant digits per probability.
LOW_PRECISION_ATOL = 1e-2
ATOL = 1e-4
# Elements of float64 per block (K * batch * C) when no batch is given: 32 MiB.
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


def _low_precision(block: Any) -> bool:
    if _is_torch(block):
        return block.dtype in (torch.float16, torch.bfloat16)
    return np.asarray(block).dtype == np.float16


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
            atol = atol or (LOW_PRECISION_ATOL if _low_precision(raw) else ATOL)
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


def _entropy(p: torch.Tensor) -> torch.Tensor:
    return -torch.special.xlogy(p, p).sum(-1)  # xlogy(0, 0) = 0


def _per_input(
    probs: Any,
    name: str,
    want: set[str],
    *,
    ndim: tuple[int, ...],
    labels: Any = None,
    batch: int | None = None,
) -> tuple[dict[str, torch.Tensor], int]:
    """Validate ``probs`` and return per-input float64 vectors (N,) for the quantities in
    ``want`` (conf, pred, correct, brier, entropy, mi) and C, in one pass over blocks."""
    probs = _lazy(probs)
    if not hasattr(probs, "shape"):
        raise ValueError(f"predictions {name!r}: not an array ({type(probs).__name__})")
    k, n, c = _shape(probs, name, ndim)
    y = None
    if labels is not None:
        y = check_labels(labels, n, c, name).to(_device(probs))
    check_probabilities(probs, name, ndim=ndim, batch=batch)
    device = _device(probs)
    parts: dict[str, list[torch.Tensor]] = {key: [] for key in want}
    with torch.no_grad():
        for start, raw in _raw_blocks(probs, n, _batch_size(batch, k, c)):
            members = _to_float64(raw, device)
            members = members / members.sum(-1, keepdim=True)  # undo storage rounding
            p = members.mean(0)
            pred = p.argmax(-1)  # first index among ties
            conf = p.gather(-1, pred[:, None])[:, 0]
            out = {"conf": conf, "pred": pred}
            if y is not None:
                yb = y[start : start + p.shape[0]]
                out["correct"] = (pred == yb).to(torch.float64)
                onehot = torch.nn.functional.one_hot(yb, c).to(torch.float64)
                out["brier"] = ((p - onehot) ** 2).sum(-1)
                p_label = p.gather(-1, yb[:, None])[:, 0]
                out["nll"] = -torch.log(p_label.clamp_min(NLL_FLOOR))
            if want & {"entropy", "mi"}:
                out["entropy"] = _entropy(p)
            if "mi" in want:
                # MI >= 0 by concavity of H; clamp rounding noise (identical members).
                out["mi"] = (out["entropy"] - _entropy(members).mean(0)).clamp_min(0)
            for key in want:
                parts[key].append(out[key])
    return {key: torch.cat(value) for key, value in parts.items()}, c


def _like(values: torch.Tensor, reference: Any) -> Any:
    return values if _is_torch(reference) else values.cpu().numpy()


# ------------------------------------------------------------------------------- metrics


def accuracy(p: Any, y: Any, *, batch: int | None = None) -> float:
    """Top-1 accuracy of the predictive. ``p`` is (N, C) (a predictive) or (K, N, C) (an
    ensemble, averaged over K); ``y`` the (N,) integer labels."""
    stats, _ = _per_input(p, "p", {"correct"}, ndim=(2, 3), labels=y, batch=batch)
    return float(stats["correct"].mean())


def _ece_from(conf: torch.Tensor, correct: torch.Tensor, bins: int) -> float:
    edges = torch.linspace(0.0, 1.0, bins + 1, dtype=torch.float64, device=conf.device)
    # searchsorted (left) gives i with edges[i-1] < conf <= edges[i]: bins (lo, hi]; conf 0 -> i = 0
    # joins the first bin, and rounding above 1 joins the last.
    index = (torch.searchsorted(edges, conf) - 1).clamp(0, bins - 1)
    gap = torch.zeros(bins, dtype=torch.float64, device=conf.device).index_add_(
        0, index, correct - conf
    )
    # sum_b |B_b|/N |acc_b - conf_b| = sum_b |sum_{i in b} (correct_i - conf_i)| / N
    return float(gap.abs().sum() / conf.numel())


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


def _score_from(stats: dict[str, torch.Tensor], kind: str) -> torch.Tensor:
    return 1 - stats["conf"] if kind == "msp" else stats[_score_key(kind)]


def ood_scores(probs: Any, kind: str = METRICS.ood_score, *, batch: int | None = None) -> Any:
    """Per-input OOD score (N,), higher = more OOD: "msp" 1 - max_c p_c, "entropy" H(p), "mi"
    mutual information. ``probs`` is (K, N, C), or (N, C) for "msp" and "entropy"."""
    key = _score_key(kind)
    stats, _ = _per_input(probs, "probs", {key}, ndim=(3,) if kind == "mi" else (2, 3), batch=batch)
    return _like(_score_from(stats, kind), probs)


def _scores(score_in: Any, score_out: Any) -> tuple[torch.Tensor, torch.Tensor]:
    out = []
    for score, name in ((score_in, "score_in"), (score_out, "score_out")):
        try:
            s = _to_float64(score if _is_torch(score) else np.asarray(score))
        except TypeError as exc:
            raise ValueError(f"{name}: scores must be real numbers, got {exc}") from None
        if s.ndim != 1 or s.numel() == 0:
            raise ValueError(f"{name}: expected a non-empty 1-D array, got shape {tuple(s.shape)}")
        if not bool(torch.isfinite(s).all()):
            raise ValueError(f"{name}: scores contain NaN or inf")
        out.append(s)
    a, b = out
    device = b.device if b.device.type != "cpu" else a.device
    return a.to(device), b.to(device)


def aupr(score_in: Any, score_out: Any) -> float:
    """Average precision of detecting OOD (positive class) by score >= threshold, thresholds at
    the distinct score values (as sklearn's ``average_precision_score``)."""
    s_in, s_out = _scores(score_in, score_out)
    n_out = s_out.numel()
    scores = torch.cat([s_in, s_out])
    is_out = torch.cat([torch.zeros_like(s_in), torch.ones_like(s_out)])
    order = torch.argsort(scores, descending=True)
    scores, is_out = scores[order], is_out[order]
    # One threshold per distinct score: the last position of each run of equal scores, so ties
    # enter together whatever order the sort left them in.
    last = torch.ones_like(scores, dtype=torch.bool)
    last[:-1] = scores[1:] != scores[:-1]
    at = torch.nonzero(last)[:, 0]
    tp = is_out.cumsum(0)[at]
    precision = tp / (at + 1).to(torch.float64)
    new_tp = torch.diff(tp, prepend=tp.new_zeros(1))
    # sum_t (R_t - R_{t-1}) P_t with R_t = tp_t / n_out, keeping the counts integer until the end.
    return float((new_tp * precision).sum() / n_out)


def fpr_at_95(score_in: Any, score_out: Any) -> float:
    """False-positive rate on the in-distribution inputs at the threshold t* = the
    ceil(0.95 n_out)-th largest OOD score, flagging score >= t* (ties at t* flagged: detected
    OOD and false positives alike)."""
    s_in, s_out = _scores(score_in, score_out)
    n_out = s_out.numel()
    k = -(-95 * n_out // 100)  # ceil(0.95 n_out) in integers: 0.95 * 20 must give 19, not 19.000001
    threshold = torch.sort(s_out, descending=True).values[k - 1]
    return float((s_in >= threshold).to(torch.float64).mean())


def uncertainty_metrics(
    probs_in: Any,
    labels: Any,
    probs_out: Any,
    score: str = METRICS.ood_score,
    *,
    bins: int = DEFAULT_BINS,
    batch: int | None = None,
    names: tuple[str, str] = ("in", "out"),
) -> dict[str, float]:
    """All metrics of an ensemble: ``probs_in`` (K, N, C) on the in-distribution test set with
    (N,) ``labels``, ``probs_out`` (K, M, C) on the OOD set, OOD ``score`` "msp", "entropy" or
    "mi". Returns accuracy, ece, brier, nll, aupr, fpr95, idmi, oodmi (NLL and MI in nats)
    as floats. ``names`` name the two arrays in error messages."""
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
    s_in, _ = _per_input(
        probs_in,
        name_in,
        {"conf", "correct", "brier", "nll", "mi", key},
        ndim=(3,),
        labels=labels,
        batch=batch,
    )
    s_out, _ = _per_input(probs_out, name_out, {"mi", key}, ndim=(3,), batch=batch)
    return {
        "accuracy": float(s_in["correct"].mean()),
        "ece": _ece_from(s_in["conf"], s_in["correct"], bins),
        "brier": float(s_in["brier"].mean()),
        "nll": float(s_in["nll"].mean()),
        "aupr": aupr(_score_from(s_in, score), _score_from(s_out, score)),
        "fpr95": fpr_at_95(_score_from(s_in, score), _score_from(s_out, score)),
        "idmi": float(s_in["mi"].mean()),
        "oodmi": float(s_out["mi"].mean()),
    }
