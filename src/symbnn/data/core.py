"""The in-memory form every dataset loader returns, and the error every bad dataset raises."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from symbnn.data.limits import stratified_indices


class DatasetError(ValueError):
    """A dataset file or folder that is missing parts, damaged or not what it should be; the
    message names the file (or the dataset and split) and the problem. A ValueError, so that
    the CLI and workflow jobs print it as one line (symbnn.runlog)."""


@dataclass
class ImageData:
    """Images as uint8 (N, C, H, W), labels as int64 (N,); normalisation is applied per batch
    by `normalize`, so the whole set stays compact in memory."""

    images: torch.Tensor
    labels: torch.Tensor
    num_classes: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    name: str = ""

    def __post_init__(self) -> None:
        self.check_layout(f"dataset {self.name!r}")

    def check_layout(self, where: str) -> None:
        """Images uint8 (N, C, H, W), labels int64 (N,), one mean and std per channel; else
        a DatasetError starting with ``where``."""
        for what in ("images", "labels"):
            if not isinstance(getattr(self, what), torch.Tensor):
                kind = type(getattr(self, what)).__name__
                raise DatasetError(f"{where}: {what} must be a torch.Tensor, got {kind}")
        if self.images.dtype != torch.uint8 or self.images.ndim != 4:
            raise DatasetError(
                f"{where}: images must be uint8 (N, C, H, W), got "
                f"{self.images.dtype} {tuple(self.images.shape)}"
            )
        if self.labels.dtype != torch.int64 or self.labels.shape != (self.images.shape[0],):
            raise DatasetError(
                f"{where}: labels must be int64 of shape ({self.images.shape[0]},), "
                f"got {self.labels.dtype} {tuple(self.labels.shape)}"
            )
        if len(self.mean) != self.images.shape[1] or len(self.std) != self.images.shape[1]:
            raise DatasetError(
                f"{where}: mean/std need one value per channel ({self.images.shape[1]})"
            )

    def __len__(self) -> int:
        return self.images.shape[0]

    def normalize(
        self, images_uint8: torch.Tensor, dtype: torch.dtype = torch.float32
    ) -> torch.Tensor:
        mean = torch.tensor(self.mean, dtype=dtype, device=images_uint8.device).view(1, -1, 1, 1)
        std = torch.tensor(self.std, dtype=dtype, device=images_uint8.device).view(1, -1, 1, 1)
        return (images_uint8.to(dtype) / 255.0 - mean) / std

    @property
    def targets(self) -> torch.Tensor:
        """What a network is trained to predict: the labels."""
        return self.labels

    def subset(self, indices: torch.Tensor | slice, name: str | None = None) -> ImageData:
        return ImageData(
            self.images[indices],
            self.labels[indices],
            self.num_classes,
            self.mean,
            self.std,
            name or self.name,
        )

    def limited(self, n: int) -> ImageData:
        """n images, every class in proportion (`symbnn.data.limits`): what train_limit and
        test_limit keep, and what a test or benchmark should take instead of the first n of a
        class-sorted set."""
        return self.subset(stratified_indices(self.labels, n))


@dataclass
class TensorData:
    """A small tabular set held as tensors: inputs (N, D) float, targets (N,) (class indices
    for classification, real values for regression)."""

    inputs: torch.Tensor
    targets: torch.Tensor
    name: str = ""

    def __post_init__(self) -> None:
        if self.inputs.ndim != 2 or self.targets.shape != (self.inputs.shape[0],):
            raise ValueError(
                f"dataset {self.name!r}: inputs must be (N, D) and targets (N,), got "
                f"{tuple(self.inputs.shape)} and {tuple(self.targets.shape)}"
            )

    def __len__(self) -> int:
        return self.inputs.shape[0]
