"""K stacked copies of one architecture, each on its own batch: the generic formulation.

A stacked net turns per-model sample indices (K, B) into inputs (`inputs`), stacked
parameters (name -> (K, *shape)) plus those inputs into logits (K, B, classes) (`logits`), and
into each model's loss with its gradients (`loss_and_grads`). `VmapNet` does this for any
buffer-free module with `torch.func.vmap` over `functional_call` and autograd;
`symbnn.train.optunet_stacked` and `symbnn.train.mlp_stacked` have faster hand-written passes
for OptuNet and MLPs.
"""

from __future__ import annotations

import copy
import threading

import torch
from torch import nn

from symbnn.data.core import ImageData
from symbnn.train.batches import augment_crop_flip
from symbnn.train.losses import per_network_loss


class VmapNet:
    """Generic stacked forward: vmap over the model axis of parameters and inputs."""

    def __init__(
        self, model: nn.Module, train: ImageData, device: torch.device | str, augment: str = "none"
    ) -> None:
        if any(True for _ in model.buffers()):
            raise ValueError(
                "VmapNet needs a module without buffers (BatchNorm statistics are per-model state)"
            )
        # a parameter-free skeleton on the meta device: functional_call supplies the weights.
        # functional_call swaps a module's parameters while it runs, so each thread has its
        # own copy (chunks of models may run on several threads at once)
        self._model = copy.deepcopy(model).to("meta")
        self._local = threading.local()
        self.data = train
        self.augment = augment
        self.images = train.images.to(device)
        # normalised once: the per-batch gather then costs one index, not a conversion
        self.table = None if augment != "none" else train.normalize(self.images)

    def _skeleton(self) -> nn.Module:
        if not hasattr(self._local, "skeleton"):
            self._local.skeleton = copy.deepcopy(self._model)
        return self._local.skeleton

    def _forward(self, params: dict[str, torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
        skeleton = self._skeleton()

        def one_model(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
            return torch.func.functional_call(skeleton, params, (x,))

        return torch.func.vmap(one_model)(params, inputs)

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

    def loss_and_grads(
        self,
        params: dict[str, torch.Tensor],
        inputs: torch.Tensor,
        targets: torch.Tensor,
        loss: str,
        grads: dict[str, torch.Tensor],
    ) -> torch.Tensor:
        """Each model's mean loss on its batch (K,); the gradients go into `grads`. (Autograd
        over the sum of the losses: measured a little faster here than torch.func's vmap of
        per-model gradients.)"""
        leaf = {name: p.detach().requires_grad_() for name, p in params.items()}
        losses = per_network_loss(self._forward(leaf, inputs), targets, loss)
        # models are independent: d(sum of losses)/d(model k) = d(loss k)/d(model k)
        for name, grad in zip(leaf, torch.autograd.grad(losses.sum(), list(leaf.values()))):
            grads[name].copy_(grad)
        return losses.detach()
