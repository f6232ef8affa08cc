"""Per-seed data order and augmentation, drawn from each seed's own generators.

Every epoch visits the whole training set in a fresh random order; the last batch is the
remainder (no sample is dropped, as `DataLoader(shuffle=True)` does). All seeds share the
batch sizes of every step, which is what lets the batched trainer step K models at once.
"""

from __future__ import annotations

import torch


def batch_bounds(n: int, batch_size: int) -> list[tuple[int, int]]:
    """(start, stop) of each step's slice of an epoch's order."""
    return [(start, min(start + batch_size, n)) for start in range(0, n, batch_size)]


def epoch_orders(n: int, generators: list[torch.Generator]) -> torch.Tensor:
    """(K, n) int64: one random permutation of range(n) per generator (one draw each)."""
    return torch.stack([torch.randperm(n, generator=g) for g in generators])


def augment_crop_flip(
    images: torch.Tensor, generator: torch.Generator, kind: str = "crop_flip", padding: int = 4
) -> torch.Tensor:
    """Random crop of the zero-padded image back to its size (torchvision's
    RandomCrop(size, padding)), then for kind "crop_flip" a horizontal flip with probability
    1/2 (RandomHorizontalFlip), on uint8 images. `images` is (B, C, H, W) on any device; the
    draws are made on the CPU."""
    if kind not in ("crop", "crop_flip"):
        raise ValueError(f"unknown augmentation {kind!r} (known: crop, crop_flip)")
    b, _, h, w = images.shape
    offsets = torch.randint(0, 2 * padding + 1, (2, b), generator=generator)
    flips = torch.rand(b, generator=generator) < 0.5  # drawn for "crop" too: both crop alike
    if kind == "crop":
        flips[:] = False
    padded = torch.nn.functional.pad(images, (padding, padding, padding, padding))
    rows = offsets[0, :, None] + torch.arange(h)  # (B, H) source rows in the padded image
    cols = offsets[1, :, None] + torch.arange(w)
    cols = torch.where(flips[:, None], cols.flip(1), cols)
    rows, cols = rows.to(images.device), cols.to(images.device)
    batch = torch.arange(b, device=images.device)[:, None, None]
    # advanced indexing picks (b, :, rows[b, i], cols[b, j]); the channel axis ends up last
    out = padded.permute(0, 2, 3, 1)[batch, rows[:, :, None], cols[:, None, :]]
    return out.permute(0, 3, 1, 2).contiguous()
