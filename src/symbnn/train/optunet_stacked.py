"""OptuNet for K stacked models as a few large batched matmuls: the fast path of the batched
trainer. Same function as `symbnn.models.OptuNet`, up to float summation order.

Why: the network is so small that per-image convolution overhead dominates on a CPU, in a
loop over models as under vmap (which turns the convolutions into grouped ones). Here:

- conv1 is a row-Toeplitz matmul (`symbnn.train.toeplitz`). Its input needs no gradient, so
  the windows (k1 input rows, for every output row the max-pool reads) of the whole
  normalised training set are cut once, and a batch is one row gather: no unfold per step.
  T's columns are ordered (column within the pool window, channel, pooled column), so the
  pool windows come out as one axis of the matmul's output. T is mostly zeros (16 of 108
  entries per column for the default), yet full-width rows measured faster than narrower
  tiles down to plain im2col ((B*576 x 16) @ (16 x 2)), whose skinny matmul wastes the BLAS.
- max-pool + ReLU is `symbnn.train.pooling.pool_relu` (max-pool's tie-breaking).
- conv2 (grouped) is a row-Toeplitz matmul per (model, group) on the pooled maps, whose
  windows are an unfold along rows; global average pooling is a mean.
- the two linear layers are broadcast products and sums (see `_linear`).

Gradients come from autograd through these ops.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from symbnn.data.core import ImageData
from symbnn.models.optunet import OptuNet
from symbnn.train.pooling import pool_relu
from symbnn.train.toeplitz import ToeplitzIndex

# the conv1 window table is materialised (a batch is then a memcpy-like gather) when it fits
# in this many bytes, and read through an overlapping strided view of the images otherwise
TABLE_BYTES_LIMIT = 1 << 30


def supports(model: nn.Module) -> bool:
    """Whether `model` is an OptuNet with the layer settings this formulation assumes."""
    if type(model) is not OptuNet:
        return False
    convs = (model.conv1, model.conv2)
    return model.conv1.groups == 1 and all(
        conv.stride == (1, 1)
        and conv.padding == (0, 0)
        and conv.dilation == (1, 1)
        and conv.bias is None
        and conv.padding_mode == "zeros"
        and conv.kernel_size[0] == conv.kernel_size[1]
        for conv in convs
    )


class OptuNetStacked:
    def __init__(self, model: OptuNet, train: ImageData, device: torch.device | str) -> None:
        if not supports(model):
            raise ValueError(
                "OptuNetStacked needs an OptuNet with plain (stride 1, no padding, no bias) convolutions"
            )
        n, c, h, w = train.images.shape
        if model.conv1.in_channels != c:
            raise ValueError(
                f"OptuNet expects {model.conv1.in_channels} input channels, the data has {c}"
            )
        k1, k2 = model.conv1.kernel_size[0], model.conv2.kernel_size[0]
        c1, c2, g, p = (
            model.conv1.out_channels,
            model.conv2.out_channels,
            model.conv2.groups,
            model.pool_size,
        )
        hp, wp = (h - k1 + 1) // p, (w - k1 + 1) // p  # pooled map (floor mode)
        if min(hp, wp) < k2:
            raise ValueError(f"images of {h}x{w} are too small for this OptuNet")
        self.shape = dict(c1=c1, c2=c2, groups=g, pool=p, hp=hp, wp=wp, k2=k2)
        span = wp * p + k1 - 1  # input columns of a conv1 window
        self.toeplitz1 = ToeplitzIndex(
            c1,
            c,
            k1,
            span,
            wp * p,
            feature_of=lambda ci, i, j: (ci * k1 + i) * span + j,
            column_of=lambda o, x: ((x % p) * c1 + o) * wp + x // p,
        ).to(device)
        c1g, self.rows2, self.cols2 = c1 // g, hp - k2 + 1, wp - k2 + 1
        self.toeplitz2 = ToeplitzIndex(
            c2 // g,
            c1g,
            k2,
            wp,
            self.cols2,
            feature_of=lambda ci, i, j: (i * wp + j) * c1g + ci,  # channels-last pooled rows
            column_of=lambda o, x: o * self.cols2 + x,
        ).to(device)

        table = train.normalize(train.images.to(device)).contiguous()
        # windows[n, y, c, i, j] = x[n, c, y + i, j] for the hp * p rows the pool reads
        windows = table.as_strided((n, hp * p, c, k1, span), (c * h * w, w, h * w, w, 1))
        if windows.numel() * windows.element_size() <= TABLE_BYTES_LIMIT:
            windows = windows.contiguous()
        self.windows = windows

    def bytes_per_model(self, batch_size: int) -> int:
        """Size of one model's conv1 windows and outputs for one step (the big intermediates)."""
        per_sample = (
            self.windows[0].numel() + self.shape["hp"] * self.shape["pool"] * self.toeplitz1.columns
        )
        return 4 * batch_size * per_sample

    def inputs(
        self, idx: torch.Tensor, augment_generators: list[torch.Generator] | None = None
    ) -> torch.Tensor:
        """(K, B) sample indices -> (K, B * rows, features) conv1 windows."""
        if augment_generators is not None:
            raise ValueError("OptuNetStacked reads precomputed windows and cannot augment")
        k, b = idx.shape
        rows = b * self.windows.shape[1]
        if self.windows.is_contiguous():
            flat = self.windows.view(self.windows.shape[0], -1)
            return flat.index_select(0, idx.reshape(-1)).view(k, rows, self.toeplitz1.features)
        return self.windows[idx].reshape(k, rows, self.toeplitz1.features)

    def forward(self, params: dict[str, torch.Tensor], windows: torch.Tensor) -> torch.Tensor:
        s = self.shape
        k, p, g, hp, wp = windows.shape[0], s["pool"], s["groups"], s["hp"], s["wp"]
        b = windows.shape[1] // (hp * p)
        c1g, c2g = s["c1"] // g, s["c2"] // g

        # conv1: rows (b, pooled row, row in window), columns (column in window, channel, pooled column)
        t1 = self.toeplitz1.expand(params["conv1.weight"].reshape(k, -1))
        z = torch.bmm(windows, t1).view(k, b, hp, p * p, s["c1"] * wp)
        a1 = pool_relu(z, dim=3)  # (K, B, Hp, C1 * Wp)
        # per group, channels last: (K, G, B, Hp, Wp, C1g)
        a1 = a1.view(k, b, hp, g, c1g, wp).permute(0, 3, 1, 2, 5, 4)

        # conv2 on windows of k2 pooled rows: (K*G, B*rows2, k2*Wp*C1g)
        win2 = (
            a1.unfold(3, s["k2"], 1).permute(0, 1, 2, 3, 6, 4, 5).reshape(k * g, b * self.rows2, -1)
        )
        t2 = self.toeplitz2.expand(params["conv2.weight"].reshape(k * g, -1))
        z2 = F.relu(torch.bmm(win2, t2)).view(k, g, b, self.rows2, c2g, self.cols2)
        hidden = z2.mean(dim=(3, 5)).permute(0, 2, 1, 3).reshape(k, b, s["c2"])

        hidden = F.relu(_linear(hidden, params["fc1.weight"], params["fc1.bias"]))
        return _linear(hidden, params["fc2.weight"], params["fc2.bias"])


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Stacked linear layer (K, B, I) -> (K, B, O) as a broadcast product and a sum, not a bmm:
    MKL's batched gemm rounds some small shapes (e.g. the (3 x B) @ (B x 10) of fc2's weight
    gradient) differently at even and odd positions of the batch, which would make a model's
    result depend on the models stacked with it."""
    return (x.unsqueeze(2) * weight.unsqueeze(1)).sum(-1) + bias.unsqueeze(1)
