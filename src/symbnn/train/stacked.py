"""Forward passes of K stacked copies of one architecture, each on its own batch.

A stacked net turns per-model sample indices (K, B) into inputs (`inputs`) and stacked
parameters (name -> (K, *shape)) plus those inputs into logits (K, B, classes) (`forward`).
`VmapNet` does this for any buffer-free module with `torch.func.vmap` over `functional_call`;
`symbnn.train.optunet_stacked` has a faster, OptuNet-only formulation.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from symbnn.data.core import ImageData
from symbnn.train.batches import augment_crop_flip
from symbnn.train.losses import per_network_loss

VMAP_GRAD = True


class VmapNet:
    """Generic stacked forward: vmap over the model axis of parameters and inputs."""

    def __init__(
        self, model: nn.Module, train: ImageData, device: torch.device | str, augment: str = "none"
    ) -> None:
        if any(True for _ in model.buffers()):
            raise ValueError(
                "VmapNet needs a module without buffers (BatchNorm statistics are per-model state)"
            )
        # a parameter-free skeleton on the meta device: functional_call supplies the weights
        self.skeleton = copy.deepcopy(model).to("meta")
        self.data = train
        self.augment = augment
        self.images = train.images.to(device)
        # normalised once: the per-batch gather then costs one index, not a conversion
        self.table = None if augment != "none" else train.normalize(self.images)

        def one_model(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
            return torch.func.functional_call(self.skeleton, params, (x,))

        self._forward = torch.func.vmap(one_model)
        self._grad_fns: dict[str, object] = {}

    def bytes_per_model(self, batch_size: int) -> int:
        """Rough size of one model's step intermediates (inputs and a few activations)."""
        return 4 * batch_size * self.images[0].numel() * 4

    def inputs(
        self, idx: torch.Tensor, augment_generators: list[torch.Generator] | None = None
    ) -> torch.Tensor:
        if self.augment == "none":
            return self.table[idx]
        crops = [
            augment_crop_flip(self.images[i], g, self.augment)
            for i, g in zip(idx, augment_generators)
        ]
        return self.data.normalize(torch.stack(crops))

    def logits(self, params: dict[str, torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
        return self._forward(params, inputs)

    def _grad_fn(self, loss: str):
        """vmap over models of the gradient of one model's loss (torch.func: no leaves, no
        graph over the whole stack)."""
        if loss not in self._grad_fns:

            def one_loss(params, x, y):
                out = torch.func.functional_call(self.skeleton, params, (x,))
                return per_network_loss(out.unsqueeze(0), y.unsqueeze(0), loss)[0]

            self._grad_fns[loss] = torch.func.vmap(torch.func.grad_and_value(one_loss))
        return self._grad_fns[loss]

    def loss_and_grads(
        self,
        params: dict[str, torch.Tensor],
        inputs: torch.Tensor,
        targets: torch.Tensor,
        loss: str,
        grads: dict[str, torch.Tensor],
    ) -> torch.Tensor:
        """Each model's mean loss on its batch (K,); the gradients go into `grads`."""
        if VMAP_GRAD:
            found, losses = self._grad_fn(loss)(params, inputs, targets)
            for name, grad in found.items():
                grads[name].copy_(grad)
            return losses
        leaf = {name: p.detach().requires_grad_() for name, p in params.items()}
        losses = per_network_loss(self._forward(leaf, inputs), targets, loss)
        # models are independent: d(sum of losses)/d(model k) = d(loss k)/d(model k)
        for name, grad in zip(leaf, torch.autograd.grad(losses.sum(), list(leaf.values()))):
            grads[name].copy_(grad)
        return losses.detach()
