"""Many small MLPs trained at once on a small tabular set (the toy posterior and the marginals).

The networks are ``symbnn.models.MLP`` (ReLU between layers) stacked along a leading model
axis: layer l's weight is (K, n_l, n_{l-1}), its bias (K, n_l), named as in the module's
state dict (``layers.{l}.weight``), so the symmetry engine reads them directly. Each network
takes its initial weights and its data order from its own seed (`symbnn.train.seeding`),
exactly as `train_reference` (one `nn.Module` and `torch.optim.SGD` per seed) does; only
the arithmetic is batched (einsum over the model axis), and `StackedSGD` is torch's update.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.nn import functional as F

from symbnn.train.batches import batch_bounds, epoch_orders
from symbnn.train.seeding import build_seeded_model, seed_generator
from symbnn.train.sgd import StackedSGD

LOSSES = ("bce", "mse")

State = dict[str, torch.Tensor]


def mlp_spec(widths: Sequence[int]) -> dict:
    return {"name": "mlp", "widths": [int(w) for w in widths]}


def seeded_states(widths: Sequence[int], seeds: Sequence[int], dtype=torch.float32) -> State:
    """The initial weights of each seed's MLP, stacked (name -> (K, *shape))."""
    if len(seeds) == 0:
        raise ValueError("need at least one seed")
    spec = mlp_spec(widths)
    states = [build_seeded_model(spec, int(seed)).state_dict() for seed in seeds]
    return {name: torch.stack([s[name] for s in states]).to(dtype) for name in states[0]}


def n_layers(state: State) -> int:
    return sum(1 for name in state if name.endswith(".weight"))


def stacked_forward(state: State, x: torch.Tensor) -> torch.Tensor:
    """Outputs (K, B, n_out) of K stacked MLPs; ``x`` is (K, B, n_in) (each network its own
    batch) or (B, n_in) (one batch for all)."""
    depth = n_layers(state)
    h = x
    for l in range(depth):
        w, b = state[f"layers.{l}.weight"], state[f"layers.{l}.bias"]
        pattern = "kbi,koi->kbo" if h.dim() == 3 else "bi,koi->kbo"
        h = torch.einsum(pattern, h, w) + b[:, None, :]
        if l < depth - 1:
            h = torch.relu(h)
    return h


def per_network_loss(outputs: torch.Tensor, targets: torch.Tensor, loss: str) -> torch.Tensor:
    """(K,) mean loss of each network; ``outputs`` (K, B, 1), ``targets`` (K, B) or (B,)."""
    outputs = outputs[..., 0]
    targets = targets.expand_as(outputs).to(outputs.dtype)
    if loss == "bce":
        return F.binary_cross_entropy_with_logits(outputs, targets, reduction="none").mean(1)
    if loss == "mse":
        return (outputs - targets).square().mean(1)
    raise ValueError(f"unknown loss {loss!r} (known: {', '.join(LOSSES)})")


def _check(inputs: torch.Tensor, targets: torch.Tensor, widths: Sequence[int], loss: str) -> None:
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r} (known: {', '.join(LOSSES)})")
    if inputs.dim() != 2 or inputs.shape[1] != widths[0]:
        raise ValueError(f"inputs must be (n, {widths[0]}), got {tuple(inputs.shape)}")
    if targets.shape != (inputs.shape[0],):
        raise ValueError(f"targets must be ({inputs.shape[0]},), got {tuple(targets.shape)}")
    if widths[-1] != 1:
        raise ValueError(f"a scalar output is expected (widths end in 1), got {list(widths)}")


def train_stacked(
    widths: Sequence[int],
    inputs: torch.Tensor,
    targets: torch.Tensor,
    seeds: Sequence[int],
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    loss: str = "bce",
    dtype=torch.float32,
) -> State:
    """Train one MLP per seed with plain SGD (mini-batches in each seed's own order); returns
    the stacked final weights (CPU)."""
    _check(inputs, targets, widths, loss)
    params = seeded_states(widths, seeds, dtype)
    x, y = inputs.to(dtype), targets.to(dtype)
    orders_from = [seed_generator(int(seed), "order") for seed in seeds]
    optimizer = StackedSGD(params)
    for _ in range(epochs):
        orders = epoch_orders(len(x), orders_from)
        for start, stop in batch_bounds(len(x), batch_size):
            idx = orders[:, start:stop]
            leaf = {name: p.detach().requires_grad_() for name, p in params.items()}
            losses = per_network_loss(stacked_forward(leaf, x[idx]), y[idx], loss)
            # networks are independent: d(sum of losses)/d(network k) = d(loss k)/d(network k)
            grads = dict(zip(leaf, torch.autograd.grad(losses.sum(), list(leaf.values()))))
            optimizer.step(grads, lr)
    return params


def train_reference(
    widths: Sequence[int],
    inputs: torch.Tensor,
    targets: torch.Tensor,
    seed: int,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    loss: str = "bce",
    dtype=torch.float32,
) -> State:
    """One seed with an `nn.Module` and `torch.optim.SGD`: the check on `train_stacked`."""
    _check(inputs, targets, widths, loss)
    model = build_seeded_model(mlp_spec(widths), int(seed)).to(dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = inputs.to(dtype), targets.to(dtype)
    order_from = seed_generator(int(seed), "order")
    for _ in range(epochs):
        order = epoch_orders(len(x), [order_from])[0]
        for start, stop in batch_bounds(len(x), batch_size):
            idx = order[start:stop]
            out = model(x[idx])[:, 0]
            value = (
                F.binary_cross_entropy_with_logits(out, y[idx])
                if loss == "bce"
                else (out - y[idx]).square().mean()
            )
            optimizer.zero_grad(set_to_none=True)
            value.backward()
            optimizer.step()
    return {name: t.detach().clone() for name, t in model.state_dict().items()}


@torch.no_grad()
def dataset_loss(
    state: State, inputs: torch.Tensor, targets: torch.Tensor, loss: str
) -> torch.Tensor:
    """(K,) each network's mean loss over the whole set (float64)."""
    dtype = torch.float64
    state = {k: v.to(dtype) for k, v in state.items()}
    return per_network_loss(stacked_forward(state, inputs.to(dtype)), targets.to(dtype), loss)
