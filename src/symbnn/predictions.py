"""Predictions of every sample of a weight store, stored for the metrics step.

A predictions store is a Zarr group written atomically (like weight stores); its layout is
in `symbnn.store.predictions`.

One chunk per sample (or per block of rows for large test sets), written sample by sample,
so memory stays bounded by one sample's predictions whatever S is. float16 keeps three
significant digits of each probability, more than the metrics' reporting precision.

Integrity as for weight stores (`symbnn.store`, docs/stores.md): every chunk is written with a
crc32c checksum (attribute ``checksum: crc32c``) and the manifest and digest end the write.
Reading is `symbnn.store.predictions` (no torch; `open_predictions` and `is_predictions` are
importable from here too): opening checks the shapes against the attributes, that every chunk
file exists and the metadata against the manifest; reads verify checksums;
`Predictions.validate` reads every chunk and compares it with the manifest. Predictions stores
without a digest (written before format_version 2) are refused like weight stores.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
import zarr

from symbnn.data.core import ImageData
from symbnn.linearize import Linearized
from symbnn.models import build_model
from symbnn.progress import progress
from symbnn.settings import Methods
from symbnn.store import (
    ARRAY_CONFIG,
    CHECKSUM,
    CHECKSUM_CODECS,
    FORMAT_VERSION,
    Store,
    StoreError,
    open_store,
    seal,
    staged_folder,
    writing,
)
from symbnn.store.predictions import ARRAYS, FORMAT, is_predictions, open_predictions

# the reading side, imported from here by the workflow's scripts and the tests
__all__ = [
    "FORMAT_VERSION",
    "ModesBySeed",
    "is_predictions",
    "open_predictions",
    "predict_probabilities",
    "write_predictions",
]
CHUNK_BYTES = 8 * 2**20


@torch.no_grad()
def predict_probabilities(
    model: torch.nn.Module,
    data: ImageData,
    device: str,
    batch: int = Methods.default("predict_batch"),
    normalized_like: ImageData | None = None,
) -> torch.Tensor:
    """(N, C) float32 softmax probabilities of `model` (eval mode) on `data`, in batches;
    `model` may be a `symbnn.linearize.Linearized` network (the Laplace predictive). Images
    are normalised with the statistics of `normalized_like` (default: `data`'s own): an OOD
    set goes through the in-distribution set's normalisation, as the network saw it."""
    model.eval()
    normalize = (normalized_like or data).normalize
    out = []
    for start in range(0, len(data), batch):
        images = data.images[start : start + batch].to(device)
        out.append(torch.softmax(model(normalize(images)).float(), dim=1).cpu())
    return torch.cat(out)


class ModesBySeed:
    """The networks samples are linearised at: pool networks looked up by the seed recorded
    in each sample's ``mode_seed``, on `device`. Only the last one is kept: samples come
    grouped by mode, so each is loaded once."""

    def __init__(self, pool_path: str | os.PathLike, samples: Store, device: str) -> None:
        if "mode_seed" not in samples.info_names:
            raise StoreError(
                f"{samples.path}: a linearised predictive needs each sample's mode "
                "(info mode_seed), which this store does not record"
            )
        self.pool = open_store(pool_path)
        self.pool.check_architecture()
        if self.pool.architecture != samples.architecture:
            raise StoreError(
                f"{pool_path}: architecture {self.pool.architecture} is not the samples' "
                f"({samples.path}: {samples.architecture})"
            )
        seeds = self.pool.info("seed").tolist()
        self.row_of_seed = {int(seed): row for row, seed in enumerate(seeds)}
        self.mode_seed = samples.info("mode_seed").tolist()
        self.device = device
        self._seed: int | None = None
        self._state: dict[str, torch.Tensor] = {}

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        seed = int(self.mode_seed[index])
        if seed not in self.row_of_seed:
            raise StoreError(f"{self.pool.path}: no pool network has seed {seed} (sample {index})")
        if seed != self._seed:
            self._seed = seed
            self._state = _on(self.pool.state_dict(self.row_of_seed[seed]), self.device)
        return self._state


def _on(state: dict[str, torch.Tensor], device: str) -> dict[str, torch.Tensor]:
    return {name: t.to(device) for name, t in state.items()}


def _rows_per_chunk(n: int, c: int) -> int:
    return max(1, min(n, CHUNK_BYTES // max(1, 2 * c)))


def write_predictions(
    samples_path: str | os.PathLike,
    out_path: str | os.PathLike,
    test: ImageData,
    ood: ImageData,
    *,
    device: str = "cpu",
    batch: int = Methods.default("predict_batch"),
    linearize_at: str | os.PathLike | None = None,
) -> Path:
    """Predict every sample of the weight store at `samples_path` on `test` and `ood`: with
    the sampled network, or, given `linearize_at` (a pool store), with the network linearised
    at the sample's mode (the pool network whose seed the sample's ``mode_seed`` records)."""
    samples = open_store(samples_path)
    samples.check_architecture()
    out_path = Path(out_path)
    model = build_model(samples.architecture).to(device)
    modes = None if linearize_at is None else ModesBySeed(linearize_at, samples, device)
    s, num_classes = samples.n_samples, test.num_classes
    with staged_folder(out_path, overwrite=True) as tmp, writing(out_path):
        group = zarr.open_group(tmp, mode="w", zarr_format=3)

        def create(name, shape, dtype, chunks=None):
            return group.create_array(
                name,
                shape=shape,
                dtype=dtype,
                chunks=chunks or "auto",
                compressors=CHECKSUM_CODECS,
                config=ARRAY_CONFIG,
            )

        arrays = {}
        for name, data in (("test", test), ("ood", ood)):
            n = len(data)
            arrays[name] = create(
                name,
                (s, n, num_classes),
                "float16",
                (1, _rows_per_chunk(n, num_classes), num_classes),
            )
        accuracy = np.zeros(s, dtype=np.float32)
        for index in progress(range(s), desc="predict", unit="sample"):
            state = samples.state_dict(index)
            if modes is None:
                model.load_state_dict(state)
                network = model
            else:
                network = Linearized(model, modes[index], _on(state, device))
            for name, data in (("test", test), ("ood", ood)):
                probs = predict_probabilities(network, data, device, batch, normalized_like=test)
                if not torch.isfinite(probs).all():
                    raise StoreError(
                        f"{samples_path}: sample {index} predicts NaN or inf on the {name} set"
                    )
                arrays[name][index] = probs.to(torch.float16).numpy()
                if name == "test":
                    accuracy[index] = float((probs.argmax(1) == test.labels).double().mean())
        create("labels", (len(test),), "int64")[...] = test.labels.numpy()
        create("test_accuracy", (s,), "float32")[...] = accuracy
        group.attrs.update(
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "source": str(samples_path),
                "n_samples": s,
                "num_classes": num_classes,
                "checksum": CHECKSUM,
                "predictive": "sampled" if modes is None else "linearised",
                **{
                    key: samples.attrs[key]
                    for key in ("experiment", "method", "variant")
                    if key in samples.attrs
                },
            }
        )
        seal(tmp, [name for name in ARRAYS if (tmp / name / "zarr.json").exists()], out_path)
    return out_path
