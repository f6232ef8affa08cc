"""`train_seeds`: the entry point the workflow calls to train K seeds of one recipe."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from symbnn.data.core import ImageData
from symbnn.progress import progress as progress_bar
from symbnn.settings import Recipe
from symbnn.train.batched import train_batched
from symbnn.train.evaluate import accuracy, unstack
from symbnn.train.loop import train_one
from symbnn.train.seeding import build_seeded_model, check_seed


@dataclass
class TrainResult:
    """K trained models: `state` maps each state-dict name to a stacked CPU tensor (K, *shape)
    (BatchNorm buffers included); `test_accuracy` and `train_loss` (mean over the last epoch's
    samples) are float64 arrays (K,); row k of everything belongs to `seeds[k]`."""

    state: dict[str, torch.Tensor]
    test_accuracy: np.ndarray
    train_loss: np.ndarray
    seeds: np.ndarray

    def __len__(self) -> int:
        return len(self.seeds)


def _check_seeds(seeds: Sequence[int]) -> list[int]:
    seeds = [check_seed(s) for s in seeds]
    if not seeds:
        raise ValueError("train_seeds needs at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError("train_seeds got repeated seeds; each seed must appear once")
    return seeds


def has_buffers(model_spec: dict[str, Any]) -> bool:
    """Whether the model keeps buffers (BatchNorm statistics): those train in the loop."""
    return any(True for _ in build_seeded_model(model_spec, 0).buffers())


def train_seeds(
    model_spec: dict[str, Any],
    recipe: Recipe,
    train: ImageData,
    test: ImageData,
    seeds: Sequence[int],
    *,
    device: torch.device | str = "cpu",
    batched: bool = True,
    progress: bool = False,
) -> TrainResult:
    """Train one model per seed with `recipe` on `train`; evaluate each on `test`.

    Seed s alone fixes the initial weights and the data order (and augmentation), through
    generators derived from s, so a seed's model does not depend on the other seeds trained
    with it or on anything that ran earlier in the process.

    batched=False trains the seeds one after another (`nn.Module` + `torch.optim.SGD`, the
    reference). batched=True steps all seeds together on stacked parameters (hand-written
    passes for OptuNet and MLPs, vmap for other small nets); models with buffers (BatchNorm, e.g.
    ResNet-18) always take the loop, whatever `batched` says. The two paths compute the same
    updates up to float summation order.
    """
    seeds = _check_seeds(seeds)
    if not isinstance(recipe, Recipe):
        raise TypeError(
            f"recipe must be a Recipe (symbnn.settings.Recipe), got {type(recipe).__name__}"
        )
    if batched and not has_buffers(model_spec):
        params, losses, template = train_batched(model_spec, recipe, train, seeds, device, progress)
        state = {name: tensor.detach().cpu() for name, tensor in params.items()}
        template = template.to(device)
        accs = []
        for k in range(len(seeds)):
            template.load_state_dict(unstack(params, k))
            accs.append(accuracy(template, test, device))
        return TrainResult(
            state,
            np.array(accs, dtype=np.float64),
            losses.cpu().numpy().astype(np.float64),
            np.array(seeds, dtype=np.int64),
        )

    states, accs, losses = [], [], []
    for seed in progress_bar(seeds, desc="train (loop)", unit="model", enabled=progress):
        model, loss = train_one(model_spec, recipe, train, seed, device)
        accs.append(accuracy(model, test, device))
        losses.append(loss)
        states.append({name: t.detach().cpu() for name, t in model.state_dict().items()})
        del model
    state = {name: torch.stack([s[name] for s in states]) for name in states[0]}
    return TrainResult(
        state,
        np.array(accs, dtype=np.float64),
        np.array(losses, dtype=np.float64),
        np.array(seeds, dtype=np.int64),
    )
