"""What every posterior approximation shares: the problem it samples for, the trained modes
it starts from, and the two steps every method has.

A method module defines ``fit(problem, mode, settings, seed, count) -> Fitted`` (what it
learns at one mode: tensors that `torch.save` can store) and ``draw(problem, fitted, count,
settings, seed)`` returning ``count`` samples stacked as a state dict name -> (count,
*shape). The workflow runs the fits as one job per block of modes and the draws as one job
per variant, so a setting used only when drawing (``SAMPLING_KEYS`` of a method's settings
section, e.g. SWAG's scale) redraws the samples without refitting. A method whose samples come
out of its fit (a Markov chain, Deep Ensembles) draws them in ``fit`` and ``draw`` returns
them (`symbnn.methods.registry.SAMPLES_AT_FIT`). Every sample is a plain state dict of the
experiment's model, so samples live in the same store layout as the target posterior.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from symbnn.data.core import ImageData
from symbnn.models import build_model
from symbnn.settings import Recipe


@dataclass
class Problem:
    """The experiment a method samples for: model, the target recipe, the training data."""

    model_spec: dict[str, Any]
    recipe: Recipe
    train: ImageData
    device: str = "cpu"

    def build(self, state: dict[str, torch.Tensor] | None = None) -> nn.Module:
        """A fresh model on `device`, loaded with `state` when given."""
        with torch.random.fork_rng(devices=[]):  # construction must not disturb the global RNG
            model = build_model(self.model_spec)
        if state is not None:
            model.load_state_dict(state)
        return model.to(self.device)


@dataclass
class Mode:
    """A trained network a method starts from: its training seed and its weights."""

    seed: int
    state: dict[str, torch.Tensor]


# what `fit` returns and `draw` reads back: tensors (and plain values) by name
Fitted = dict[str, Any]


def split_counts(n_samples: int, n_modes: int) -> list[int]:
    """Samples per mode: as equal as possible, the first modes taking the remainder."""
    if n_modes < 1 or n_samples < n_modes:
        raise ValueError(
            f"cannot split {n_samples} samples among {n_modes} modes "
            "(need at least one sample per mode)"
        )
    base, extra = divmod(n_samples, n_modes)
    return [base + (k < extra) for k in range(n_modes)]


def concat_states(blocks: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {name: torch.cat([b[name] for b in blocks]) for name in blocks[0]}


def check_count(method: str, count: Any) -> int:
    """The number of samples a method is asked for: a positive integer."""
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
        raise ValueError(f"{method}: count must be a positive integer, got {count!r}")
    return int(count)


def fitted_samples(method: str, fitted: Fitted, count: int) -> dict[str, torch.Tensor]:
    """The samples a method drew in its fit, checked to be `count`."""
    samples = fitted["samples"]
    got = {len(t) for t in samples.values()}
    if got != {count}:
        raise ValueError(f"{method}: the fit drew {sorted(got)} samples, {count} are asked for")
    return samples


def last_linear(model: nn.Module) -> tuple[str, nn.Linear]:
    """The classifier: the last `nn.Linear` the model registers (OptuNet fc2, MLP's last layer,
    ResNet-18 fc), with its qualified name."""
    found = [
        (name, module) for name, module in model.named_modules() if isinstance(module, nn.Linear)
    ]
    if not found:
        raise ValueError(f"{type(model).__name__} has no nn.Linear layer")
    return found[-1]


def generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    return torch.Generator(device=device).manual_seed(int(seed))
