"""What every posterior approximation shares: the problem it samples for, the trained modes
it starts from, and the stacked weight samples it returns.

A method samples one mode at a time (`sample_mode(problem, mode, count, settings, seed)`
returning `count` state dicts stacked as name -> (count, *shape)); `run_method` splits the S
samples among the modes and stacks the result. Every sample is a plain state dict of the
experiment's model, so samples live in the same store layout as the target posterior.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from symbnn.data.core import ImageData
from symbnn.models import build_model
from symbnn.train.recipe import Recipe


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


@dataclass
class MethodSamples:
    """S samples: `state` maps each state-dict name to (S, *shape) CPU tensors; row s came
    from mode `mode_index[s]` (seed `mode_seed[s]`); `info` holds further per-sample arrays."""

    state: dict[str, torch.Tensor]
    mode_index: np.ndarray
    mode_seed: np.ndarray
    info: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.mode_index)


SampleMode = Callable[[Problem, Mode, int, dict[str, Any], int], dict[str, torch.Tensor]]


def split_counts(n_samples: int, n_modes: int) -> list[int]:
    """Samples per mode: as equal as possible, the first modes taking the remainder."""
    if n_modes < 1 or n_samples < n_modes:
        raise ValueError(
            f"cannot split {n_samples} samples among {n_modes} modes "
            "(need at least one sample per mode)"
        )
    base, extra = divmod(n_samples, n_modes)
    return [base + (k < extra) for k in range(n_modes)]


def stack_states(states: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Stack state dicts (same names and shapes) into name -> (len(states), *shape), on the CPU."""
    return {name: torch.stack([s[name].detach().cpu() for s in states]) for name in states[0]}


def concat_states(blocks: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {name: torch.cat([b[name] for b in blocks]) for name in blocks[0]}


def run_method(
    sample_mode: SampleMode,
    problem: Problem,
    modes: Sequence[Mode],
    n_samples: int,
    settings: dict[str, Any],
    seed: int,
) -> MethodSamples:
    """Apply `sample_mode` to each mode with its share of the n_samples; mode k draws from
    seed `seed + k`, so adding modes never changes the samples of the first ones."""
    counts = split_counts(n_samples, len(modes))
    blocks, mode_index, mode_seed = [], [], []
    for k, (mode, count) in enumerate(zip(modes, counts)):
        block = sample_mode(problem, mode, count, settings, seed + k)
        got = {len(t) for t in block.values()}
        if got != {count}:
            raise RuntimeError(
                f"sampler returned {sorted(got)} samples for mode {k}, expected {count}"
            )
        blocks.append(block)
        mode_index += [k] * count
        mode_seed += [mode.seed] * count
    return MethodSamples(
        concat_states(blocks),
        np.asarray(mode_index, dtype=np.int64),
        np.asarray(mode_seed, dtype=np.int64),
    )


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
