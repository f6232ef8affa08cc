"""Predictions of every sample of a weight store, stored for the metrics step.

A predictions store is a Zarr group written atomically (like weight stores):

    <store>/zarr.json      attrs: format, experiment, method, variant, n_samples, num_classes
    <store>/test           float16 (S, N, C) softmax probabilities on the in-distribution test set
    <store>/ood            float16 (S, M, C) the same on the out-of-distribution set
    <store>/labels         int64 (N,) test labels
    <store>/test_accuracy  float32 (S,) each sample's own top-1 accuracy

One chunk per sample (or per block of rows for large test sets), written sample by sample,
so memory stays bounded by one sample's predictions whatever S is. float16 keeps three
significant digits of each probability, more than the metrics' reporting precision.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import zarr

from symbnn.data.core import ImageData
from symbnn.models import build_model
from symbnn.progress import progress
from symbnn.store import StoreError, open_store, staged_folder

FORMAT = "symbnn-predictions"
CHUNK_BYTES = 8 * 2**20


@torch.no_grad()
def predict_probabilities(
    model: torch.nn.Module,
    data: ImageData,
    device: str,
    batch: int = 1000,
    normalized_like: ImageData | None = None,
) -> torch.Tensor:
    """(N, C) float32 softmax probabilities of `model` (eval mode) on `data`, in batches.
    Images are normalised with the statistics of `normalized_like` (default: `data`'s own):
    an OOD set goes through the in-distribution set's normalisation, as the network saw it."""
    model.eval()
    normalize = (normalized_like or data).normalize
    out = []
    for start in range(0, len(data), batch):
        images = data.images[start : start + batch].to(device)
        out.append(torch.softmax(model(normalize(images)).float(), dim=1).cpu())
    return torch.cat(out)


def _rows_per_chunk(n: int, c: int) -> int:
    return max(1, min(n, CHUNK_BYTES // max(1, 2 * c)))


def write_predictions(
    samples_path: str | os.PathLike,
    out_path: str | os.PathLike,
    test: ImageData,
    ood: ImageData,
    *,
    device: str = "cpu",
    batch: int = 1000,
) -> Path:
    """Predict every sample of the weight store at `samples_path` on `test` and `ood`."""
    samples = open_store(samples_path)
    out_path = Path(out_path)
    model = build_model(samples.architecture).to(device)
    s, num_classes = samples.n_samples, test.num_classes
    with staged_folder(out_path, overwrite=True) as tmp:
        group = zarr.open_group(tmp, mode="w", zarr_format=3)
        arrays = {}
        for name, data in (("test", test), ("ood", ood)):
            n = len(data)
            arrays[name] = group.create_array(
                name,
                shape=(s, n, num_classes),
                dtype="float16",
                compressors=None,
                chunks=(1, _rows_per_chunk(n, num_classes), num_classes),
            )
        accuracy = np.zeros(s, dtype=np.float32)
        for index in progress(range(s), desc="predict", unit="sample"):
            model.load_state_dict(samples.state_dict(index))
            for name, data in (("test", test), ("ood", ood)):
                probs = predict_probabilities(model, data, device, batch, normalized_like=test)
                if not torch.isfinite(probs).all():
                    raise StoreError(
                        f"{samples_path}: sample {index} predicts NaN or inf on the {name} set"
                    )
                arrays[name][index] = probs.to(torch.float16).numpy()
                if name == "test":
                    accuracy[index] = float((probs.argmax(1) == test.labels).double().mean())
        group.create_array("labels", shape=(len(test),), dtype="int64", compressors=None)[...] = (
            test.labels.numpy()
        )
        group.create_array("test_accuracy", shape=(s,), dtype="float32", compressors=None)[...] = (
            accuracy
        )
        group.attrs.update(
            {
                "format": FORMAT,
                "source": str(samples_path),
                "n_samples": s,
                "num_classes": num_classes,
                **{
                    key: samples.attrs[key]
                    for key in ("experiment", "method", "variant")
                    if key in samples.attrs
                },
            }
        )
    return out_path


@dataclass
class Predictions:
    """A predictions store opened for reading (arrays are read lazily)."""

    path: Path
    group: zarr.Group

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self.group.attrs)

    @property
    def n_samples(self) -> int:
        return int(self.group.attrs["n_samples"])

    def read(self, name: str, rows: Any = slice(None)) -> np.ndarray:
        if name not in ("test", "ood", "labels", "test_accuracy"):
            raise KeyError(f"{self.path}: no predictions array {name!r}")
        try:
            return np.asarray(self.group[name][rows])
        except Exception as exc:
            raise StoreError(f"{self.path}: cannot read {name} (corrupted chunk?): {exc}") from exc

    def validate(self) -> None:
        """Read every chunk, sample by sample; raise StoreError naming the array and sample
        when one is unreadable, has the wrong shape, or holds NaN/inf or rows not summing to 1."""
        for name in ("test", "ood"):
            array = self.group.get(name)
            if array is None or array.ndim != 3 or array.shape[0] != self.n_samples:
                raise StoreError(
                    f"{self.path}: {name} must have shape ({self.n_samples}, N, C), "
                    f"got {None if array is None else array.shape}"
                )
            for index in range(self.n_samples):
                probs = self.read(name, index).astype(np.float32)
                if not np.isfinite(probs).all():
                    raise StoreError(f"{self.path}: {name}[{index}] holds NaN or inf")
                if probs.size and np.abs(probs.sum(-1) - 1).max() > 1e-2:  # float16 storage
                    raise StoreError(f"{self.path}: {name}[{index}] has rows that do not sum to 1")
        for name in ("labels", "test_accuracy"):
            if name in self.group:
                self.read(name)


def is_predictions(path: str | os.PathLike) -> bool:
    """Whether the Zarr group at `path` says it is a predictions store (not a weight store)."""
    try:
        meta = json.loads((Path(path) / "zarr.json").read_text())
    except (OSError, ValueError):
        return False
    return meta.get("attributes", {}).get("format") == FORMAT


def validate_any(path: str | os.PathLike) -> None:
    """Read every chunk of a weight store or a predictions store, whichever `path` is."""
    if is_predictions(path):
        open_predictions(path).validate()
    else:
        open_store(path).validate(check_values=True)


def open_predictions(path: str | os.PathLike) -> Predictions:
    path = Path(path)
    try:
        group = zarr.open_group(path, mode="r", zarr_format=3)
    except Exception as exc:
        raise StoreError(f"{path}: not a predictions store ({exc})") from exc
    if group.attrs.get("format") != FORMAT:
        raise StoreError(f"{path}: not a predictions store (format {group.attrs.get('format')!r})")
    return Predictions(path, group)
