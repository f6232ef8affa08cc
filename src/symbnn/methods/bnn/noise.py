"""The BNN's reparameterisation-noise stream, which the one-by-one trainer (`fit`) and the
batched one (`stacked`) both draw from: it sits below both, so neither imports the other
for it."""

from __future__ import annotations

import numpy as np
import torch

from symbnn.methods.base import generator
from symbnn.train.seeding import check_seed

_TRAIN_STREAM = 0x626E6E  # "bnn": tags the training-noise stream derived from the mode seed


def noise_generator(seed: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The training-noise stream of mode seed `seed` (independent of its init/order streams)."""
    entropy = np.random.SeedSequence([check_seed(seed), _TRAIN_STREAM])
    return generator(int(entropy.generate_state(1, dtype=np.uint64)[0]) >> 1, device)
