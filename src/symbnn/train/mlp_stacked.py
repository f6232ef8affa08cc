"""K stacked MLPs (`symbnn.models.MLP`, ReLU between layers, with or without biases) as batched
matrix products, forward and backward by hand (`symbnn.train.linear`): the batched trainer's
formulation for MLPs, on images (flattened) or tabular inputs.

Parameters are named as in the module's state dict (``layers.{l}.weight`` of shape
(K, n_l, n_{l-1}), ``layers.{l}.bias`` (K, n_l)), so stacked states feed the symmetry engine
directly.
"""

from __future__ import annotations

import torch
from torch import nn

from symbnn.data.core import ImageData, TensorData
from symbnn.models.mlp import MLP
from symbnn.train import linear
from symbnn.train.losses import loss_and_grad
from symbnn.train.workspace import PerThread, gather_rows


def supports(model: nn.Module) -> bool:
    return type(model) is MLP


def n_layers(state: dict[str, torch.Tensor]) -> int:
    return sum(1 for name in state if name.endswith(".weight"))


def stacked_forward(state: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Outputs (K, B, n_out) of K stacked MLPs; ``x`` is (K, B, n_in) (each network its own
    batch) or (B, n_in) (one batch for all)."""
    depth = n_layers(state)
    h = x
    for l in range(depth):
        w, b = state[f"layers.{l}.weight"], state.get(f"layers.{l}.bias")
        pattern = "kbi,koi->kbo" if h.dim() == 3 else "bi,koi->kbo"
        h = torch.einsum(pattern, h, w)
        if b is not None:
            h = h + b[:, None, :]
        if l < depth - 1:
            h = torch.relu(h)
    return h


class MLPStacked:
    """The batched trainer's interface (`inputs`, `loss_and_grads`, `bytes_per_model`) and a
    plain forward (`logits`) for K stacked MLPs."""

    # a model's arithmetic does not depend on the other models of its chunk (of two or more)
    exact = True

    def __init__(
        self,
        model: MLP,
        data: ImageData | TensorData,
        device: torch.device | str,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if not supports(model):
            raise ValueError("MLPStacked needs a symbnn MLP")
        if isinstance(data, ImageData):  # normalised once: a batch is then one gather
            table = data.normalize(data.images.to(device), dtype).flatten(1)
        else:
            table = data.inputs.to(device, dtype)
        if table.shape[1] != model.widths[0]:
            raise ValueError(
                f"the MLP takes {model.widths[0]} inputs, the data has {table.shape[1]}"
            )
        self.table = table.contiguous()
        self.widths = list(model.widths)
        self.bias = model.layers[0].bias is not None
        self.device, self.dtype = torch.device(device), dtype
        self.workspace = PerThread(device, dtype)

    def bytes_per_model(self, batch_size: int) -> int:
        """Size of one model's step intermediates (inputs, activations and their gradients)."""
        return self.table.element_size() * batch_size * (self.widths[0] + 2 * sum(self.widths))

    def inputs(self, idx: torch.Tensor, augment_generators=None) -> torch.Tensor:
        """(K, B) sample indices -> (K, B, n_in) inputs, in a reused buffer of this thread."""
        if augment_generators is not None:
            raise ValueError("MLPStacked reads a precomputed input table and cannot augment")
        k, b = idx.shape
        return gather_rows(
            self.table, idx, self.workspace().get("inputs", (k,), (b, self.widths[0]))
        )

    def _layer(self, params: dict[str, torch.Tensor], l: int, part: str) -> torch.Tensor | None:
        return params.get(f"layers.{l}.{part}")

    def _activations(
        self, params: dict[str, torch.Tensor], x: torch.Tensor, masks: dict | None = None
    ) -> list:
        """Each layer's input, the masked one where `masks` names the layer, and the output."""
        ws, depth = self.workspace(), len(self.widths) - 1
        masks = masks or {}
        hs = [x]
        for l in range(depth):
            if f"layers.{l}" in masks:
                # in place: the masked input is what the layer's backward reads (and, as its
                # factors are 0 or positive, the ReLU's backward before it, see loss_and_grads)
                hs[-1].mul_(masks[f"layers.{l}"])
            h = linear.forward(
                hs[-1],
                self._layer(params, l, "weight"),
                self._layer(params, l, "bias"),
                ws,
                f"z{l}",
            )
            if l < depth - 1:
                h.clamp_min_(0)
            hs.append(h)
        return hs

    def logits(self, params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return self._activations(params, x)[-1]

    def loss_and_grads(
        self,
        params: dict[str, torch.Tensor],
        x: torch.Tensor,
        targets: torch.Tensor,
        loss: str,
        grads: dict[str, torch.Tensor],
        masks: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Each model's mean loss on its batch (K,); the gradients go into `grads`. `masks`:
        per layer ("layers.{l}") the factors (K, B, in_features) its input is multiplied by
        (dropout; the input batch `x` is masked in place)."""
        masks = masks or {}
        unknown = set(masks) - {f"layers.{l}" for l in range(len(self.widths) - 1)}
        if unknown:
            raise ValueError(f"the MLP has no linear layer {sorted(unknown)} to mask")
        hs = self._activations(params, x, masks)
        losses, d = loss_and_grad(hs[-1], targets, loss)
        for l in reversed(range(len(hs) - 1)):
            d = linear.backward(
                d,
                hs[l],
                self._layer(params, l, "weight"),
                grads[f"layers.{l}.weight"],
                grads.get(f"layers.{l}.bias"),
                self.workspace(),
                f"z{l}",
                input_grad=l > 0,
            )
            if l > 0:
                if f"layers.{l}" in masks:
                    d.mul_(masks[f"layers.{l}"])
                # hs[l] = relu(.) (times a factor >= 0) >= 0: its sign is the ReLU's derivative
                # (where the factor is 0, so is the gradient)
                d.mul_(hs[l].sign())
        return losses
