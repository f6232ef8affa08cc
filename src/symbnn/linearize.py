"""The network linearised in its weights around a point: the Laplace approximation's predictive.

For weights theta near a mode theta*, the first-order expansion of the network function

    f_lin(x; theta) = f(x; theta*) + J(x) (theta - theta*),   J(x) = d f(x; theta) / d theta at theta*,

is the model under which the Laplace approximation (with a generalised Gauss-Newton
curvature) is a Gaussian posterior, and under which its marginal likelihood tunes the prior
precision (Immer et al., "Improving predictions of Bayesian neural nets via local
linearization", AISTATS 2021; laplace-torch's default ``pred_type="glm"``). Predicting with
the raw network at a Laplace sample instead leaves the Gauss-Newton model: directions of low
training curvature get large variances that the linear model ignores on the training data but
the nonlinear network does not, and the predictive degrades well below the mode's own
accuracy. Softmax of f_lin at each sample is the Monte-Carlo form of that predictive.

J (theta - theta*) is one forward-mode Jacobian-vector product (`torch.func.jvp`), about the
cost of two forward passes; no Jacobian is ever formed. Buffers (BatchNorm statistics) are
taken from the mode: the linearisation is in the parameters only.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn
from torch.func import functional_call, jvp


def split_state(
    model: nn.Module, state: Mapping[str, torch.Tensor]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """(parameters, buffers) of a state dict, by the model's own parameter names."""
    names = {name for name, _ in model.named_parameters()}
    missing = names - set(state)
    if missing:
        raise KeyError(f"state dict lacks the parameters {sorted(missing)}")
    params = {name: state[name] for name in names}
    buffers = {name: value for name, value in state.items() if name not in names}
    return params, buffers


class Linearized(nn.Module):
    """`model` linearised at the state dict `mode`, evaluated at the state dict `sample`:
    calling it on a batch gives f(x; mode) + J(x) (sample - mode). The split into parameters
    and buffers and the direction sample - mode are computed here once, not per batch.
    `model` gives the architecture (its own weights are not used); state dicts live on the
    inputs' device and the buffers come from `mode`."""

    def __init__(
        self,
        model: nn.Module,
        mode: Mapping[str, torch.Tensor],
        sample: Mapping[str, torch.Tensor],
    ) -> None:
        super().__init__()
        self.model = model
        self.at, self.mode_buffers = split_state(model, mode)
        theta, _ = split_state(model, sample)
        self.direction = {name: theta[name] - self.at[name] for name in self.at}

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        def network(params: dict[str, torch.Tensor]) -> torch.Tensor:
            return functional_call(self.model, {**self.mode_buffers, **params}, (inputs,))

        logits, change = jvp(network, (self.at,), (self.direction,))
        return logits + change
