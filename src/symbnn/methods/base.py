"""What every posterior approximation shares: the problem it samples for, the trained modes
it starts from, and helpers for its two steps.

A method's implementation (`symbnn.methods.interface.Method`) defines ``fit(problem, mode,
settings, seed, count) -> Fitted`` (what it learns at one mode: tensors, numbers and strings
in dicts and lists, which `symbnn.treefile` stores) and ``sample(problem, fitted, count,
settings, seed)`` returning ``count`` samples stacked as a state dict name -> (count,
*shape). The workflow runs the fits as one job per block of modes and the draws as one job
per variant, so a setting used only when drawing (its descriptor's ``sampling_keys``, e.g.
SWAG's scale) redraws the samples without refitting. A method whose samples come out of its
fit (a Markov chain, Deep Ensembles) draws them in ``fit`` and ``sample`` returns them (its
descriptor's ``samples_at_fit``). Every sample is a plain state dict of the experiment's
model, so samples live in the same store layout as the target posterior.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from symbnn.data.core import ImageData
from symbnn.models import build_model
from symbnn.settings import Recipe
from symbnn.train.batched import hand_written


@dataclass
class Problem:
    """The experiment a method samples for: model, the target recipe, the training data; and
    the test data with the target's convergence threshold, for the methods that train their
    own network from scratch (their network must converge as the target's do)."""

    model_spec: dict[str, Any]
    recipe: Recipe
    train: ImageData
    device: str = "cpu"
    test: ImageData | None = None
    min_accuracy: float = 0.0
    retries: int = 0

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


# what `fit` returns and `sample` reads back: tensors (and plain values) by name
Fitted = dict[str, Any]


_RETRY_TAG = 0x7265  # "re": separates retry seeds from every other derived seed


def retry_seed(seed: int, attempt: int) -> int:
    """The training seed of retry `attempt` (0: the mode's own seed), a function of both."""
    if attempt == 0:
        return int(seed)
    state = np.random.SeedSequence([int(seed), int(attempt), _RETRY_TAG]).generate_state(1)
    return int(state[0])


def data_order_seed(mode_seed: int, seed: int, tag: int) -> int:
    """The `seed_batches` seed of a fit from a mode (SWAG, an SGHMC chain): a deterministic
    function of (mode seed, seed); `tag` keeps each method's seeds apart from the others'."""
    state = np.random.SeedSequence([int(mode_seed), int(seed), tag]).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(1))


def train_until_converged(
    method: str,
    problem: Problem,
    seed: int,
    train: Callable[[int], Any],
    accuracy: Callable[[Any], float],
    record: list[float] | None = None,
) -> tuple[Any, int, float]:
    """``train(seed')`` for seed' = the mode's seed, then fresh derived seeds, until the
    trained object's test ``accuracy`` reaches the target's threshold (at most
    ``problem.retries`` retries); returns (trained, seed used, accuracy). Raises when no
    attempt converges; without test data, the first attempt is kept unchecked. Each attempt's
    accuracy is appended to `record` (the workflow tells from them whether another threshold
    would keep another attempt: `symbnn.acceptance.retry_threshold`)."""
    records = None if record is None else [record]
    return train_modes_until_converged(
        method, problem, [seed], lambda seeds: [train(seeds[0])], accuracy, records
    )[0]


def train_modes_until_converged(
    method: str,
    problem: Problem,
    seeds: Sequence[int],
    train: Callable[[list[int]], list[Any]],
    accuracy: Callable[[Any], float],
    records: Sequence[list[float]] | None = None,
) -> list[tuple[Any, int, float]]:
    """`train_until_converged` for several modes at once: ``train(seeds')`` trains one object
    per seed (in one batched run), and each retry round trains again only the modes whose
    object missed the threshold, each from its own next derived seed, so that a mode's
    result is the one it gets alone. Returns (trained, seed used, accuracy) per mode; each
    mode's attempts' accuracies are appended to its list in `records`."""
    results: list[tuple[Any, int, float] | None] = [None] * len(seeds)
    tried: list[list[str]] = [[] for _ in seeds]
    pending = list(range(len(seeds)))
    for attempt in range(problem.retries + 1):
        used = [retry_seed(seeds[i], attempt) for i in pending]
        trained = train(used)
        missed = []
        for i, seed_used, one in zip(pending, used, trained, strict=True):
            if problem.test is None:
                results[i] = (one, seed_used, float("nan"))
                continue
            score = accuracy(one)
            tried[i].append(f"{seed_used}: {score:.3f}")
            if records is not None:
                records[i].append(float(score))
            if score >= problem.min_accuracy:
                results[i] = (one, seed_used, score)
            else:
                missed.append(i)
        pending = missed
        if not pending:
            return results
    first = pending[0]
    others = f" (and from {len(pending) - 1} more mode seeds)" if len(pending) > 1 else ""
    raise RuntimeError(
        f"{method}: no training from mode seed {seeds[first]}{others} reached test accuracy "
        f"{problem.min_accuracy} in {problem.retries + 1} attempts (seed: accuracy "
        f"{', '.join(tried[first])}); raise methods.retries or check the method's settings"
    )


def fits_in_batch(problem: Problem, recipe: Recipe | None = None) -> bool:
    """Whether a method fits `problem`'s modes in one batched run: the batched trainer has a
    hand-written pass for the model, and `recipe` (default the problem's) no augmentation.
    Else each mode is fitted by the loop trainer, one after another."""
    return hand_written(problem.build(), problem.train, (recipe or problem.recipe).augment)


def stacked_states(modes: Sequence[Mode], names: Sequence[str]) -> dict[str, torch.Tensor]:
    """The modes' tensors `names`, stacked: name -> (len(modes), *shape)."""
    return {name: torch.stack([mode.state[name] for mode in modes]) for name in names}


def retried(problem: Problem, attempts: list[float]) -> dict[str, Any]:
    """What a fit that retried seeds keeps of its retries: each attempt's accuracy and the
    threshold it had to reach (`symbnn.acceptance.retry_threshold` reads them back)."""
    return {"attempts": list(attempts), "threshold": float(problem.min_accuracy)}


def concat_states(blocks: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {name: torch.cat([b[name] for b in blocks]) for name in blocks[0]}


def check_count(method: str, count: Any) -> int:
    """The number of samples a method is asked for: a positive integer."""
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
        raise ValueError(f"{method}: count must be a positive integer, got {count!r}")
    return int(count)


def fitted_samples(method: str, fitted: Fitted, count: int) -> dict[str, torch.Tensor]:
    """The first `count` samples a method drew in its fit (its draws are prefix-stable)."""
    samples = fitted["samples"]
    got = sorted({len(t) for t in samples.values()})
    if len(got) != 1 or got[0] < count:
        raise ValueError(f"{method}: the fit drew {got} samples, {count} are asked for")
    return {name: t[:count] for name, t in samples.items()}


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
