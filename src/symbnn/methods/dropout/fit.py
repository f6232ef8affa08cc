"""MC Dropout (Gal & Ghahramani, 2016) as a sampler of plain weight vectors.

Maths. Inverted dropout with rate r on the input h (features j = 1..d) of a linear layer
y = W h + b keeps feature j with probability 1 - r and rescales the kept ones:

    y = W (m * h) / (1 - r) + b,    m_j ~ Bernoulli(1 - r) independently,

so E_m[y] = W h + b. Gal & Ghahramani read the network with dropout as a variational
approximation q(W) of the posterior whose draws are the masked weights

    W_m = W diag(m) / (1 - r),   i.e.   W_m[:, j] = W[:, j] * m_j / (1 - r)   (b unchanged),

which makes (W diag(m) / (1 - r)) h = W (m * h) / (1 - r): the plain model with W_m computes
exactly the dropout network for mask m, and E_q[W_m] = W. A sample here is one such W_m folded
into the trained weights, so every sample is an ordinary state dict of the experiment's model
(eval-mode forward, no dropout layer needed).

Setup of Laurent et al., "A Symmetry-Aware Exploration of Bayesian Neural Network
Posteriors" (ICLR 2024), appendix B.1: dropout with rate 0.2 on the last layer for OptuNet
(0.5 for ResNet-18), applied both in training and at test time. Dropout needs its own
training, so a mode's trained state is ignored: the network is trained from scratch from the
mode seed's initial weights (`build_seeded_model`) with the experiment's recipe and the
mode seed's data order, with inverted dropout on the inputs of the last `layers` nn.Linear
layers (their masks come from a generator seeded by the mode seed). The modes of a block
train together in the batched trainer where it has a hand-written pass for the model
(`train_with_dropout_batched`: each model's masks from its own generator, drawn as the loop
draws them), else one by one in the loop trainer with forward pre-hooks
(`train_with_dropout`, the reference). Sample masks come from a generator seeded by `seed`,
one sample after another, so the first k samples do not depend on `count`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from symbnn.methods.base import (
    Fitted,
    Mode,
    Problem,
    fits_in_batch,
    generator,
    retried,
    train_modes_until_converged,
)
from symbnn.settings import Dropout
from symbnn.train.batched import train_batched
from symbnn.train.evaluate import accuracy, unstack
from symbnn.train.loop import fit_module
from symbnn.train.seeding import build_seeded_model, check_seed
from symbnn.train.stepping import Masks

_TRAIN_STREAM = 0x64726F70  # "drop": tags the training-mask stream derived from the mode seed


def dropout_layers(model: nn.Module, layers: int) -> list[tuple[str, nn.Linear]]:
    """The last `layers` nn.Linear modules of `model` (registration order), with their names."""
    found = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    if layers > len(found):
        raise ValueError(
            f"dropout.layers must be <= {len(found)} (the nn.Linear layers of "
            f"{type(model).__name__}), got {layers}"
        )
    return found[len(found) - layers :]


def _scale(rate: float, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    # one rounded constant 1/(1-r): kept columns are multiplied by exactly this value
    return torch.tensor(1.0 / (1.0 - rate), dtype=dtype, device=device)


def add_training_dropout(
    modules: Sequence[nn.Module], rate: float, gen: torch.Generator
) -> list[torch.utils.hooks.RemovableHandle]:
    """Forward pre-hooks applying inverted dropout (rate `rate`, masks from `gen`, one per
    input element) to the input of each module, in train mode only. Returns the handles."""

    def hook(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        if not module.training or rate == 0.0:
            return None
        x = args[0]
        keep = torch.rand(x.shape, generator=gen, device=x.device, dtype=x.dtype) >= rate
        return (x * (keep.to(x.dtype) * _scale(rate, x.dtype, x.device)),) + tuple(args[1:])

    return [m.register_forward_pre_hook(hook) for m in modules]


def mask_generator(seed: int, device: torch.device | str) -> torch.Generator:
    """The training-mask stream of seed `seed` (independent of its init and order streams)."""
    entropy = np.random.SeedSequence([check_seed(seed), _TRAIN_STREAM])
    return generator(int(entropy.generate_state(1, dtype=np.uint64)[0]) >> 1, device)


def train_with_dropout(problem: Problem, seed: int, rate: float, layers: int) -> nn.Module:
    """Seed `seed`'s network trained with the experiment recipe and inverted dropout on the
    inputs of its last `layers` linear layers; returned hook-free, in eval mode (the loop
    trainer: the reference)."""
    model = build_seeded_model(problem.model_spec, seed)
    targets = [m for _, m in dropout_layers(model, layers)]
    model = model.to(problem.device)
    handles = add_training_dropout(targets, rate, mask_generator(seed, problem.device))
    try:
        fit_module(model, problem.recipe, problem.train, seed, problem.device)
    finally:
        for handle in handles:
            handle.remove()
    return model.eval()


def stacked_dropout(
    seeds: Sequence[int],
    rate: float,
    inputs: Sequence[tuple[str, int]],
    device: torch.device | str,
    dtype: torch.dtype = torch.float32,
) -> Masks:
    """The batched trainer's dropout factors (`symbnn.train.stepping.Masks`) for the models of
    `seeds`: per layer (name, in_features) of `inputs`, in forward order, each model's
    keep-mask of the step drawn from its seed's mask stream as `add_training_dropout` draws
    it, times 1/(1 - rate)."""
    gens = [mask_generator(seed, device) for seed in seeds]
    scale = _scale(rate, dtype, device)

    def draw(models: range, batch: int) -> dict[str, torch.Tensor]:
        keeps = [
            [
                torch.rand((batch, width), generator=gens[m], device=device, dtype=dtype) >= rate
                for _, width in inputs
            ]
            for m in models
        ]
        return {
            name: torch.stack([keep[l] for keep in keeps]).to(dtype) * scale
            for l, (name, _) in enumerate(inputs)
        }

    return draw


def train_with_dropout_batched(
    problem: Problem,
    seeds: Sequence[int],
    rate: float,
    layers: int,
    chunk: int | None = None,
    progress: bool = False,
) -> list[nn.Module]:
    """`train_with_dropout` for every seed in one batched run (the model needs a hand-written
    pass): the networks, in eval mode. Each seed's network is what it gets alone."""
    targets = dropout_layers(problem.build(), layers)
    masks = None
    if rate > 0:  # as the hooks, which draw nothing at rate 0
        masks = stacked_dropout(
            seeds, rate, [(n, m.in_features) for n, m in targets], problem.device
        )
    params, _, _ = train_batched(
        problem.model_spec,
        problem.recipe,
        problem.train,
        seeds,
        problem.device,
        progress,
        chunk,
        masks=masks,
        desc="fit dropout",
    )
    return [problem.build(unstack(params, k)).eval() for k in range(len(seeds))]


def draw_masks(
    in_features: Sequence[int], count: int, rate: float, gen: torch.Generator
) -> list[torch.Tensor]:
    """Keep-masks (count, in_features[l]) per layer l, bool; sample after sample, layer after
    layer, so that sample k does not depend on `count`."""
    per_sample = [[torch.rand(d, generator=gen) >= rate for d in in_features] for _ in range(count)]
    return [
        torch.stack([sample[l] for sample in per_sample])
        if count
        else torch.zeros(0, d, dtype=torch.bool)
        for l, d in enumerate(in_features)
    ]


@torch.no_grad()
def fold_masks(
    state: dict[str, torch.Tensor],
    weight_names: Sequence[str],
    masks: Sequence[torch.Tensor],
    rate: float,
) -> dict[str, torch.Tensor]:
    """Stacked samples from one state dict: W[:, j] * m_j / (1 - rate) for each named weight
    and each row of its mask (count, in_features); every other entry repeated unchanged."""
    count = masks[0].shape[0]
    out = {
        name: t.detach().cpu().unsqueeze(0).repeat(count, *([1] * t.ndim))
        for name, t in state.items()
    }
    for name, mask in zip(weight_names, masks):
        weight = state[name].detach().cpu()
        factor = mask.to(weight.dtype) * _scale(rate, weight.dtype, "cpu")  # 0 or exactly 1/(1-r)
        out[name] = weight.unsqueeze(0) * factor[:, None, :]
    return out


def sample_trained(
    model: nn.Module, count: int, rate: float, layers: int, seed: int
) -> dict[str, torch.Tensor]:
    """`count` MC-dropout samples of a trained network, folded into plain state dicts."""
    targets = dropout_layers(model, layers)
    masks = draw_masks([m.in_features for _, m in targets], count, rate, generator(seed))
    return fold_masks(model.state_dict(), [f"{name}.weight" for name, _ in targets], masks, rate)


def fit_modes(
    problem: Problem,
    modes: list[Mode],
    settings: Dropout,
    seeds: list[int],
    counts: list[int | None],
) -> list[Fitted]:
    """Train each mode's seed with dropout (the modes' states are ignored), retrying fresh
    seeds for the modes whose network (dropout off) misses the target's convergence
    threshold: their weights."""
    dropout_layers(problem.build(), settings.layers)  # validate before training
    rate, layers = settings.rate, settings.layers
    if fits_in_batch(problem):

        def train(seeds: list[int]) -> list[nn.Module]:
            return train_with_dropout_batched(problem, seeds, rate, layers, progress=True)
    else:

        def train(seeds: list[int]) -> list[nn.Module]:
            return [train_with_dropout(problem, s, rate, layers) for s in seeds]

    attempts: list[list[float]] = [[] for _ in modes]
    trained = train_modes_until_converged(
        "dropout",
        problem,
        [mode.seed for mode in modes],
        train,
        lambda m: accuracy(m, problem.test, problem.device),
        attempts,
    )
    return [
        {
            "state": {name: t.detach().cpu() for name, t in model.state_dict().items()},
            "train_seed": used,
            "test_accuracy": score,
            **retried(problem, tries),
        }
        for (model, used, score), tries in zip(trained, attempts, strict=True)
    ]


def sample(
    problem: Problem, fitted: Fitted, count: int, settings: Dropout, seed: int
) -> dict[str, torch.Tensor]:
    """`count` masks folded into the trained weights."""
    model = problem.build(fitted["state"]).eval()
    return sample_trained(model, count, settings.rate, settings.layers, seed)


__all__ = [
    "dropout_layers",
    "add_training_dropout",
    "mask_generator",
    "stacked_dropout",
    "train_with_dropout",
    "train_with_dropout_batched",
    "draw_masks",
    "fold_masks",
    "sample_trained",
]
