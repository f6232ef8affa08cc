"""Deterministic stratified subsets: what `data.train_limit` / `data.test_limit` keep.

`stratified_indices(labels, n)` keeps exactly n images, every class in proportion to its
share of the whole split: class c gets the floor of its quota n * count_c / total, and the
images left over go to the classes with the largest remainders (ties to the lower class
index): largest-remainder (Hamilton) rounding. Each class contributes its first images in
file order, and the kept indices stay in their original order, so the subset depends only
on the split and n.
"""

from __future__ import annotations

import numpy as np
import torch


def class_quotas(counts: np.ndarray, n: int) -> np.ndarray:
    """Images per class summing to exactly ``n`` (0 <= n <= counts.sum()), proportional to
    ``counts`` by largest-remainder rounding."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if not 0 <= n <= total:
        raise ValueError(f"cannot keep {n} of {total} images")
    exact = counts * n  # quotas times total, in integers: no float rounding
    quotas = exact // total
    remainders = exact - quotas * total
    left = n - int(quotas.sum())
    # largest remainder first; a stable sort keeps the lower class index first among ties
    order = np.argsort(-remainders, kind="stable")
    quotas[order[:left]] += 1
    return quotas


def stratified_indices(labels: torch.Tensor, n: int) -> torch.Tensor:
    """Indices of ``n`` images (all of them when n >= len(labels)) stratified by label, in
    their original order (see the module docstring)."""
    labels_np = labels.cpu().numpy()
    if n >= len(labels_np):
        return torch.arange(len(labels_np))
    classes, counts = np.unique(labels_np, return_counts=True)
    quotas = class_quotas(counts, n)
    keep = np.zeros(len(labels_np), dtype=bool)
    for label, quota in zip(classes, quotas):
        keep[np.flatnonzero(labels_np == label)[:quota]] = True
    return torch.from_numpy(np.flatnonzero(keep))
