"""An experiment's target posterior (or pool) imported from released networks, as the
workflow's `posterior: {source: checkpoints}` asks: the networks from the settings' release
index on, each one's accuracy measured on the experiment's test split (what trained stores
record, so convergence flags and the training report work unchanged)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from symbnn.checkpoints.download import download_bundles
from symbnn.checkpoints.importer import import_checkpoints
from symbnn.data.experiment import load_in_distribution
from symbnn.models import OptuNet, build_model
from symbnn.settings import Data
from symbnn.settings.checkpoints import Checkpoints
from symbnn.store import Store
from symbnn.train.evaluate import accuracy, unstack


def import_posterior(
    out: str | os.PathLike,
    experiment: str,
    checkpoints: Checkpoints,
    count: int,
    data: Data,
    *,
    offset: int = 0,
    kind: str = "posterior",
    data_root: str | os.PathLike = "data",
    download_data: bool = False,
    device: str = "cpu",
) -> Store:
    """Import ``count`` networks from release index ``checkpoints.first + offset`` into
    ``out``; with ``checkpoints.evaluate``, info/test_accuracy on ``data``'s test split."""
    first = checkpoints.first + offset
    source = checkpoints.path
    if checkpoints.download:
        source = download_bundles(checkpoints.setting, checkpoints.path, first, count)
    annotate = None
    if checkpoints.evaluate:
        _, test = load_in_distribution(data, data_root, download_data)
        annotate = _accuracies_on(test, device)
    return import_checkpoints(
        source,
        out,
        checkpoints.setting,
        first=first,
        count=count,
        dtype=checkpoints.dtype,
        experiment=experiment,
        kind=kind,
        annotate=annotate,
        attrs={"data": data.to_dict()},
    )


def _accuracies_on(test, device: str):
    model = None

    def annotate(architecture: dict[str, Any], state: dict[str, np.ndarray]):
        nonlocal model
        if model is None:  # one architecture per import: built once, not once per batch
            model = build_model(architecture).to(device)
        stacked = {name: torch.from_numpy(v) for name, v in state.items()}
        if type(model) is OptuNet:
            accuracies = stacked_accuracies(model, stacked, test, device)
        else:
            accuracies = looped_accuracies(model, stacked, test, device)
        return {"test_accuracy": accuracies.astype(np.float32)}

    return annotate


def looped_accuracies(model, stacked: dict[str, torch.Tensor], test, device: str) -> np.ndarray:
    """Each network's accuracy, one network at a time through the module itself."""
    n = len(next(iter(stacked.values())))
    out = np.empty(n)
    for row in range(n):
        model.load_state_dict(unstack(stacked, row))
        out[row] = accuracy(model, test, device)
    return out


def stacked_accuracies(
    model, stacked: dict[str, torch.Tensor], test, device: str, images: int = 100
) -> np.ndarray:
    """Each OptuNet's accuracy, every network of the stack in one set of convolutions: the K
    networks' conv1 filters act as one conv of K * c1 channels, their grouped conv2 as one of
    K * groups groups, then the linear layers per network (the forward of
    `symbnn.models.OptuNet`, tested equal). ``images`` per pass bound the memory."""
    from torch.nn import functional as F

    p = {name: t.to(device=device, dtype=torch.float32) for name, t in stacked.items()}
    k = len(p["conv1.weight"])
    c1, c2 = model.conv1.out_channels, model.conv2.out_channels
    groups, pool = model.conv2.groups, model.pool_size
    conv1 = p["conv1.weight"].reshape(k * c1, *p["conv1.weight"].shape[2:])
    conv2 = p["conv2.weight"].reshape(k * c2, *p["conv2.weight"].shape[2:])
    correct = torch.zeros(k, dtype=torch.int64, device=device)
    with torch.no_grad():
        for start in range(0, len(test), images):
            x = test.normalize(test.images[start : start + images].to(device))
            # max-pooling commutes with ReLU: pool first, rectify a ninth of the values
            h = F.relu(F.max_pool2d(F.conv2d(x, conv1), pool, pool))
            h = F.relu(F.conv2d(h, conv2, groups=k * groups)).mean(dim=(2, 3))  # (B, K * c2)
            h = h.view(len(x), k, c2).transpose(0, 1)  # (K, B, c2)
            h = F.relu(torch.baddbmm(p["fc1.bias"][:, None], h, p["fc1.weight"].transpose(1, 2)))
            logits = torch.baddbmm(p["fc2.bias"][:, None], h, p["fc2.weight"].transpose(1, 2))
            labels = test.labels[start : start + images].to(device)
            correct += (logits.argmax(-1) == labels).sum(1)
    return (correct.double() / len(test)).cpu().numpy()
