"""SGD on stacked parameters (K models in the leading axis), the update of `torch.optim.SGD`.

The operations are those of torch's single-tensor SGD (dampening 0, no maximise), in the same
order and with the same fused `add(..., alpha=...)` calls, so a stacked model and a module
trained by `torch.optim.SGD` see the same arithmetic. Every operation is elementwise, so
models in the stack never mix.
"""

from __future__ import annotations

import torch


class StackedSGD:
    def __init__(
        self,
        params: dict[str, torch.Tensor],
        momentum: float,
        nesterov: bool,
        weight_decay: float,
    ) -> None:
        if nesterov and momentum == 0:
            raise ValueError("Nesterov momentum needs momentum > 0")
        self.params = params
        self.momentum = momentum
        self.nesterov = nesterov
        self.weight_decay = weight_decay
        self.buffers: dict[str, torch.Tensor] = {}  # created on the first step, as torch does

    @torch.no_grad()
    def step(self, grads: dict[str, torch.Tensor], lr: float, scratch: bool = False) -> None:
        """One update with gradients `grads`; `scratch`: the gradients may be overwritten
        (the same arithmetic in place, without a fresh tensor per step)."""
        for name, param in self.params.items():
            grad = grads[name]
            if self.weight_decay != 0:
                grad = (
                    grad.add_(param, alpha=self.weight_decay)
                    if scratch
                    else grad.add(param, alpha=self.weight_decay)
                )
            if self.momentum != 0:
                buf = self.buffers.get(name)
                if buf is None:
                    buf = self.buffers[name] = grad.detach().clone()
                else:
                    buf.mul_(self.momentum).add_(grad, alpha=1.0)
                if self.nesterov:
                    grad = (
                        grad.add_(buf, alpha=self.momentum)
                        if scratch
                        else grad.add(buf, alpha=self.momentum)
                    )
                else:
                    grad = buf
            param.add_(grad, alpha=-lr)
