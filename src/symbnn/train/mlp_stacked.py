"""K stacked MLPs (`symbnn.models.MLP`, ReLU between layers) as batched matrix products: the
batched trainer's formulation for MLPs, on images (flattened) or tabular inputs.

Parameters are named as in the module's state dict (``layers.{l}.weight`` of shape
(K, n_l, n_{l-1}), ``layers.{l}.bias`` (K, n_l)), so stacked states feed the symmetry engine
directly.
"""

from __future__ import annotations

import torch
from torch import nn

from symbnn.data.core import ImageData, TensorData
from symbnn.models.mlp import MLP


def supports(model: nn.Module) -> bool:
    return type(model) is MLP and all(layer.bias is not None for layer in model.layers)


def n_layers(state: dict[str, torch.Tensor]) -> int:
    return sum(1 for name in state if name.endswith(".weight"))


def stacked_forward(state: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
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


class MLPStacked:
    """The batched trainer's interface (inputs, forward, bytes_per_model) for MLPs."""

    def __init__(
        self,
        model: MLP,
        data: ImageData | TensorData,
        device: torch.device | str,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if not supports(model):
            raise ValueError("MLPStacked needs a symbnn MLP with biases")
        if isinstance(data, ImageData):  # normalised once: a batch is then one gather
            table = data.normalize(data.images.to(device), dtype).flatten(1)
        else:
            table = data.inputs.to(device, dtype)
        if table.shape[1] != model.widths[0]:
            raise ValueError(
                f"the MLP takes {model.widths[0]} inputs, the data has {table.shape[1]}"
            )
        self.table = table
        self.widest = max(model.widths)

    def bytes_per_model(self, batch_size: int) -> int:
        """Rough size of one model's step intermediates (inputs and activations)."""
        return 4 * batch_size * (self.table.shape[1] + 4 * self.widest)

    def inputs(self, idx: torch.Tensor, augment_generators=None) -> torch.Tensor:
        return self.table[idx]

    def forward(self, params: dict[str, torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
        return stacked_forward(params, inputs)
