"""Many small MLPs trained at once on a small tabular set (the toy posterior, the marginals
and symmetrised VI's target runs), through the one batched trainer (`symbnn.train.batched`):
each network takes its initial weights and data order from its own seed
(`symbnn.train.seeding`), plain SGD at a constant learning rate.

The networks are ``symbnn.models.MLP`` stacked along a leading model axis: layer l's weight is
(K, n_l, n_{l-1}), its bias (K, n_l), named as in the module's state dict
(``layers.{l}.weight``), so the symmetry engine reads them directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from symbnn.data.core import TensorData
from symbnn.settings import Recipe
from symbnn.train.batched import train_batched
from symbnn.train.losses import per_network_loss
from symbnn.train.mlp_stacked import stacked_forward

State = dict[str, torch.Tensor]


def mlp_spec(widths: Sequence[int]) -> dict:
    return {"name": "mlp", "widths": [int(w) for w in widths]}


def train_stacked(
    widths: Sequence[int],
    inputs: torch.Tensor,
    targets: torch.Tensor,
    seeds: Sequence[int],
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    loss: str,
    dtype=torch.float32,
) -> State:
    """Train one MLP per seed with plain SGD (mini-batches in each seed's own order); returns
    the stacked final weights (CPU)."""
    if inputs.dim() != 2 or inputs.shape[1] != widths[0]:
        raise ValueError(f"inputs must be (n, {widths[0]}), got {tuple(inputs.shape)}")
    if loss != "cross_entropy" and widths[-1] != 1:
        raise ValueError(
            f"loss {loss!r} needs a scalar output (widths end in 1), got {list(widths)}"
        )
    recipe = Recipe(epochs=epochs, batch_size=batch_size, lr=lr, schedule="constant")
    params, _, _ = train_batched(
        mlp_spec(widths),
        recipe,
        TensorData(inputs, targets),
        [int(seed) for seed in seeds],
        loss=loss,
        dtype=dtype,
    )
    return {name: p.detach() for name, p in params.items()}


@torch.no_grad()
def dataset_loss(
    state: State, inputs: torch.Tensor, targets: torch.Tensor, loss: str
) -> torch.Tensor:
    """(K,) each network's mean loss over the whole set (float64)."""
    dtype = torch.float64
    state = {k: v.to(dtype) for k, v in state.items()}
    return per_network_loss(stacked_forward(state, inputs.to(dtype)), targets, loss)
