"""OptuNet for K stacked models as a few batched matmuls (and, on a CPU, a fused conv1 pass),
forward and backward written out by hand: the fast path of the batched trainer. Same function
and gradients as `symbnn.models.OptuNet` up to float summation order (tested against autograd
in float64).

Why by hand: the network is so small that per-op overhead, autograd's bookkeeping and fresh
temporaries cost more than the arithmetic; the hand-written pass is a fixed list of ~40 ops
per chunk of models, all writing into reused buffers (`symbnn.train.workspace`).

- conv1 + max-pool on a CPU: `symbnn.train.conv_pool`'s fused pass, one call per model on its
  batch stored batch-last (a gather of the normalised images and a transposing copy); it
  returns the pooled maps batch-last, (C1, Hp, Wp, B), and conv2 reads them through a strided
  view. About three times faster than the matmuls below for the default OptuNet on one core.
- conv1 + max-pool elsewhere (a GPU; geometries too large to generate): every pooling
  window's input patch (pool + k1 - 1 pixels square, all channels) is cut once for the whole
  normalised training set, so a batch is one row gather. For each row of the pooling window,
  a matmul with a Toeplitz matrix T (`symbnn.train.toeplitz`; the same T for every row, conv1
  being shift invariant) takes the k1 patch rows it reads to its conv1 outputs; the results
  are laid out (position, channel) x windows so that the max over positions is a reduction
  over an outer axis (`symbnn.train.pooling`), whose backward is a mask of the first maxima
  times the gradient. Of the tilings measured, this one wastes the fewest multiplications by
  zeros for matmul shapes that stay efficient (T is 12 x 24 with 16 non-zeros a row for the
  default, against 36 x 36 for the whole window and 108 x 96 for full image rows). conv1's
  input needs no gradient: its backward is one matmul per pooling-window row for the
  kernel's gradient.
- conv2 (grouped) is a row-Toeplitz matmul per (model, group) on windows of k2 pooled rows,
  copied out of the pooled maps; its input gradient goes back through the same windows.
- global average pooling is a mean; the two linear layers are `symbnn.train.linear`.
"""

from __future__ import annotations

import torch
from torch import nn

from symbnn.data.core import ImageData
from symbnn.models.optunet import OptuNet
from symbnn.train import conv_pool, linear
from symbnn.train.losses import loss_and_grad
from symbnn.train.pooling import descending, max_pool, max_pool_backward
from symbnn.train.toeplitz import ToeplitzIndex
from symbnn.train.workspace import PerThread, Workspace, gather_rows

# the conv1 patch table is materialised (a batch is then one row gather) when it fits in this
# many bytes, and read through an overlapping strided view of the images otherwise
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
    """The batched trainer's interface (`inputs`, `loss_and_grads`, `bytes_per_model`) and a
    plain forward (`logits`) for K stacked OptuNets."""

    # a model's arithmetic does not depend on the other models of its chunk (of two or more)
    exact = True
    # intermediates per chunk on a CPU: chunks that stay in a core's caches ran fastest with
    # the Toeplitz route (K = 32, batch 64, one thread: chunks of 4 to 6 models about 10%
    # faster than 2 or 3 and a third faster than 16); with the fused pass (a third of the
    # bytes a model) chunks of 8 to 16 models ran alike and chunks of 2 a quarter slower
    chunk_bytes = 6 << 20

    def __init__(
        self,
        model: OptuNet,
        train: ImageData,
        device: torch.device | str,
        dtype: torch.dtype = torch.float32,
        fused: bool | None = None,
    ) -> None:
        """`fused`: conv1 and the pool by `symbnn.train.conv_pool` (CPU only) instead of the
        Toeplitz matmuls; by default on a CPU wherever the geometry allows it."""
        if not supports(model):
            raise ValueError(
                "OptuNetStacked needs an OptuNet with plain (stride 1, no padding, no bias) convolutions"
            )
        n, c, h, w = train.images.shape
        if model.conv1.in_channels != c:
            raise ValueError(
                f"OptuNet expects {model.conv1.in_channels} input channels, the data has {c}"
            )
        k1, k2, p = model.conv1.kernel_size[0], model.conv2.kernel_size[0], model.pool_size
        c1, c2, g = model.conv1.out_channels, model.conv2.out_channels, model.conv2.groups
        hp, wp = (h - k1 + 1) // p, (w - k1 + 1) // p  # pooled map (floor mode)
        if min(hp, wp) < k2:
            raise ValueError(f"images of {h}x{w} are too small for this OptuNet")
        s = p + k1 - 1  # side of a pooling window's input patch
        self.c1, self.c2, self.groups, self.k2, self.hp, self.wp = c1, c2, g, k2, hp, wp
        self.rows2, self.cols2 = hp - k2 + 1, wp - k2 + 1
        self.positions = p * p
        self.features1 = s * c * s  # a patch: (row, channel, column)
        self.row_features = c * s  # one patch row
        self.pool = p
        self.features2 = (c1 // g) * k2 * wp
        self.columns2 = (c2 // g) * self.cols2
        self.device, self.dtype = torch.device(device), dtype
        geometry_fits = conv_pool.fits(c, k1, p)
        if fused is None:
            fused = self.device.type == "cpu" and geometry_fits
        elif fused and (self.device.type != "cpu" or not geometry_fits):
            raise ValueError(
                f"the fused conv1 pass runs on a CPU for small geometries, not on {device} with "
                f"{c} channels, kernel {k1}, pool {p}"
            )
        self.fused = fused
        self.image_shape = (c, h, w)

        # conv2 per group: T2[(ci, i, x), (o, x2)] over k2 pooled rows (channels of the group)
        columns2, cols2 = self.columns2, self.cols2
        self.toeplitz2 = ToeplitzIndex(
            c2 // g,
            c1 // g,
            k2,
            [(0, x2) for x2 in range(cols2)],
            (self.features2, columns2),
            place=lambda o, q, ci, y, x: ((ci * k2 + y) * wp + x) * columns2 + o * cols2 + q,
        ).to(device)
        c2g = c2 // g
        mean = torch.zeros(self.rows2, c2g, self.cols2, c2g, dtype=dtype)
        for o in range(c2g):
            mean[:, o, :, o] = 1.0 / (self.rows2 * self.cols2)
        self._mean = mean.view(-1, c2g).to(device)

        images = train.normalize(train.images.to(device), dtype).contiguous()
        self.workspace = PerThread(device, dtype)
        if fused:
            self.kernels = conv_pool.kernels(c, k1, p)
            self.table = images.view(n, -1)
        else:
            self._matmul_route(images, k1)

    def _matmul_route(self, images: torch.Tensor, k1: int) -> None:
        """conv1's Toeplitz index and the table of every pooling window's input patch."""
        n, c, h, w = images.shape
        c1, p, hp, wp, device = self.c1, self.pool, self.hp, self.wp, self.device
        s = p + k1 - 1  # side of a pooling window's input patch
        self.weights = descending(self.positions, self.dtype, device)  # for the max-pool
        # conv1, transposed, for one row of the pooling window: T1t[(dx, o), (y, ci, x)] over
        # the k1 patch rows it reads
        features_t1 = k1 * c * s
        self.toeplitz1 = ToeplitzIndex(
            c1,
            c,
            k1,
            [(0, dx) for dx in range(p)],
            (p * c1, features_t1),
            place=lambda o, q, ci, y, x: (q * c1 + o) * features_t1 + (y * c + ci) * s + x,
        ).to(device)
        # patches[n, yp, xp, y, ci, x] = image[n, ci, yp * p + y, xp * p + x]
        patches = images.as_strided((n, hp, wp, s, c, s), (c * h * w, p * w, p, w, h * w, 1))
        if patches.numel() * patches.element_size() <= TABLE_BYTES_LIMIT:
            patches = patches.contiguous()
        self.patches = patches

    def bytes_per_model(self, batch_size: int) -> int:
        """Size of one model's conv1 patches and outputs for one step (the big intermediates)."""
        if self.fused:  # its images, pooled maps and their gradient
            maps = self.c1 * self.hp * self.wp
            return self.table.element_size() * batch_size * (self.table.shape[1] + 2 * maps)
        windows = batch_size * self.hp * self.wp
        per_window = self.features1 + self.positions * self.c1
        return self.patches.element_size() * windows * per_window

    def inputs(
        self, idx: torch.Tensor, augment_generators: list[torch.Generator] | None = None
    ) -> torch.Tensor:
        """(K, B) sample indices -> each model's batch, in a reused buffer of this thread
        (valid until its next call): fused, its images batch-last (K, C * H * W, B); else its
        conv1 patches (K, B * Hp * Wp, features)."""
        if augment_generators is not None:
            raise ValueError("OptuNetStacked reads precomputed patches and cannot augment")
        k, b = idx.shape
        if self.fused:
            # rows first (one gather), then batch-last (one transposing copy): half the time
            # of writing each image's pixels straight to their batch-last places
            ws, features = self.workspace(), self.table.shape[1]
            rows = gather_rows(self.table, idx, ws.get("image_rows", (k,), (b, features)))
            return ws.get("images", (k,), (features, b)).copy_(rows.transpose(1, 2))
        rows = b * self.hp * self.wp
        out = self.workspace().get("patches", (k,), (rows, self.features1))
        return gather_rows(self.patches, idx, out)

    def logits(self, params: dict[str, torch.Tensor], patches: torch.Tensor) -> torch.Tensor:
        """(K, B, classes) outputs."""
        return self._forward(params, patches)[0]

    def loss_and_grads(
        self,
        params: dict[str, torch.Tensor],
        patches: torch.Tensor,
        targets: torch.Tensor,
        loss: str,
        grads: dict[str, torch.Tensor],
        masks: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Each model's mean loss on its batch (K,); the gradients go into `grads`. `masks`:
        per linear layer ("fc1", "fc2") the factors (K, B, in_features) its input is
        multiplied by (dropout)."""
        masks = masks or {}
        unknown = set(masks) - {"fc1", "fc2"}
        if unknown:
            raise ValueError(f"OptuNet has no linear layer {sorted(unknown)} to mask")
        logits, saved = self._forward(params, patches, masks)
        losses, d_logits = loss_and_grad(logits, targets, loss)
        self._backward(params, patches, saved, d_logits, grads, masks)
        return losses

    def _batch_size(self, inputs: torch.Tensor) -> int:
        return inputs.shape[2] if self.fused else inputs.shape[1] // (self.hp * self.wp)

    def _forward(self, params: dict[str, torch.Tensor], inputs: torch.Tensor, masks=None):
        ws, g = self.workspace(), self.groups
        k, b = inputs.shape[0], self._batch_size(inputs)
        c2g = self.c2 // g
        if self.fused:
            conv1 = self._conv1_fused(params, inputs, ws)
        else:
            conv1 = self._conv1_matmuls(params, inputs, ws)
        pooled = conv1[0]

        # conv2 on windows of k2 pooled rows, per (model, group): (K*G, B*rows2, features2)
        win2 = ws.get("win2", (k, g), (b * self.rows2, self.features2))
        self._window_view(win2, b).copy_(self._windows_of(pooled, b))
        t2 = ws.get("t2", (k, g), self.toeplitz2.shape)
        self.toeplitz2.expand(params["conv2.weight"].reshape(k * g, -1), t2.flatten(0, 1))
        z2 = ws.get("z2", (k, g), (b * self.rows2, self.columns2))
        torch.bmm(win2.flatten(0, 1), t2.flatten(0, 1), out=z2.flatten(0, 1))
        z2.clamp_min_(0)
        # global average pool as a matmul per (model, group): (B, rows2 * C2/G * cols2) @ mean
        per_group = ws.get("hidden", (k, g), (b, c2g))
        torch.bmm(z2.view(k * g, b, -1), self._mean_matrix(k, ws), out=per_group.flatten(0, 1))
        hidden = per_group.permute(0, 2, 1, 3).reshape(k, b, self.c2)
        masks = masks or {}
        if "fc1" in masks:  # in place: the masked input is what fc1's backward reads
            hidden.mul_(masks["fc1"])

        h1 = linear.forward(hidden, params["fc1.weight"], params["fc1.bias"], ws, "fc1")
        h1.clamp_min_(0)
        if "fc2" in masks:
            # in place: a factor is 0 or positive, so the ReLU's backward read from the masked
            # output passes what it would from h1 (where they differ the gradient is 0)
            h1.mul_(masks["fc2"])
        logits = linear.forward(h1, params["fc2.weight"], params["fc2.bias"], ws, "fc2")
        return logits, (conv1, win2, t2, z2, hidden, h1)

    def _conv1_fused(self, params, images: torch.Tensor, ws: Workspace):
        """relu(max-pool(conv1)) per model by the fused pass: (pooled (K, C1, Hp, Wp, B),
        each window's first maximum (same shape, int8))."""
        k, b = images.shape[0], images.shape[2]
        shape = (self.c1, self.hp, self.wp, b)
        pooled = ws.get("pooled", (k,), shape)
        first = ws.get("first", (k,), shape, torch.int8)
        weight = params["conv1.weight"].detach().reshape(k, self.c1, -1)
        self._per_model(self.kernels[0], images, weight, pooled, first)
        return pooled, first

    def _per_model(self, kernel, images: torch.Tensor, *arrays: torch.Tensor) -> None:
        """kernel(images[m] as (C, H, W, B), *(array[m] for array in arrays)) for each model m
        of the chunk (numpy views of the buffers: the kernels write into them)."""
        b = images.shape[2]
        for m in range(images.shape[0]):
            kernel(images[m].view(*self.image_shape, b).numpy(), *(a[m].numpy() for a in arrays))

    def _conv1_matmuls(self, params, patches: torch.Tensor, ws: Workspace):
        """relu(max-pool(conv1)) by Toeplitz matmuls: (pooled (K, 1, C1 * B * Hp * Wp), the
        rank of each window's first maximum, the conv1 outputs' buffer for the backward)."""
        k, rows1 = patches.shape[0], patches.shape[1]
        windows = self.c1 * rows1
        # conv1 at every position of every pooling window: (K, positions * C1, windows)
        t1 = ws.get("t1", (k,), self.toeplitz1.shape)
        self.toeplitz1.expand(params["conv1.weight"].reshape(k, -1), t1)
        z1 = ws.get("z1", (k,), (self.positions * self.c1, rows1))
        for dy in range(self.pool):
            torch.bmm(t1, self._patch_rows(patches, dy).transpose(1, 2), out=self._z_rows(z1, dy))
        pooled = ws.get("pooled", (k,), (1, windows))  # (K, 1, C1 * B * Hp * Wp)
        rank = ws.get("rank", (k,), (1, windows))
        max_pool(z1.view(k, self.positions, windows), self.weights, pooled, rank)
        pooled.clamp_min_(0)  # relu(max) == max(relu): the pool and the ReLU commute
        return pooled, rank, z1

    def _backward(self, params, inputs, saved, d_logits, grads, masks) -> None:
        conv1, win2, t2, z2, hidden, h1 = saved
        pooled = conv1[0]
        ws, g = self.workspace(), self.groups
        k, b = d_logits.shape[:2]
        c2g = self.c2 // g

        d_h1 = _fc_backward(d_logits, h1, params, grads, ws, "fc2")
        if "fc2" in masks:
            d_h1.mul_(masks["fc2"])
        _relu_backward(d_h1, h1)
        d_hidden = _fc_backward(d_h1, hidden, params, grads, ws, "fc1")
        if "fc1" in masks:
            d_hidden.mul_(masks["fc1"])

        # through the mean and the ReLU of conv2
        d_per_group = ws.get("d_hidden", (k, g), (b, c2g))
        d_per_group.copy_(d_hidden.view(k, b, g, c2g).transpose(1, 2))
        d_z2 = ws.get("d_z2", (k, g), z2.shape[2:])
        mean_t = self._mean_matrix(k, ws).transpose(1, 2)
        torch.bmm(d_per_group.flatten(0, 1), mean_t, out=d_z2.view(k * g, b, -1))
        _relu_backward(d_z2, z2)
        d_t2 = ws.get("d_t2", (k, g), self.toeplitz2.shape)
        torch.bmm(win2.flatten(0, 1).transpose(1, 2), d_z2.flatten(0, 1), out=d_t2.flatten(0, 1))
        grads["conv2.weight"].copy_(
            self.toeplitz2.kernel_grad(d_t2.flatten(0, 1)).view(grads["conv2.weight"].shape)
        )
        d_win2 = win2  # its windows are no longer needed: reuse the buffer (fewer cache misses)
        torch.bmm(d_z2.flatten(0, 1), t2.flatten(0, 1).transpose(1, 2), out=d_win2.flatten(0, 1))

        # windows back onto the pooled maps (overlapping rows add up). The windows are first
        # put in the maps' axis order (one copy): adding contiguous slabs then costs half as
        # much as adding permuted views
        c1g, rows2, wp = self.c1 // g, self.rows2, self.wp
        d_pooled = ws.get("d_pooled", (k,), pooled.shape[1:])
        d_pooled.zero_()
        maps = self._maps_view(d_pooled, b, raw=True)
        if self.fused:  # (K, G, C1/G, k2, rows2, Wp, B), added along the maps' axis 3 (Hp)
            axes, window, row_axis = (0, 1, 4, 5, 3, 6, 2), (rows2, wp, b), 3
        else:  # (K, G, C1/G, k2, B, rows2, Wp), added along axis 4
            axes, window, row_axis = (0, 1, 4, 5, 2, 3, 6), (b, rows2, wp), 4
        windows = ws.get("d_windows", (k, g), (c1g, self.k2, *window))
        windows.copy_(self._window_view(d_win2, b).permute(*axes))
        for i in range(self.k2):
            maps.narrow(row_axis, i, rows2).add_(windows[:, :, :, i])
        if self.fused:
            self._conv1_fused_backward(inputs, d_pooled, conv1, grads)
        else:
            self._conv1_matmuls_backward(inputs, d_pooled, conv1, grads, ws)

    def _conv1_fused_backward(self, images, d_pooled, conv1, grads) -> None:
        """conv1's weight gradient through the ReLU and the pool (the fused pass)."""
        pooled, first = conv1
        d_weight = grads["conv1.weight"].view(images.shape[0], self.c1, -1)
        self._per_model(self.kernels[1], images, d_pooled, pooled, first, d_weight)

    def _conv1_matmuls_backward(self, patches, d_pooled, conv1, grads, ws) -> None:
        """conv1's weight gradient through the ReLU and the pool (the Toeplitz matmuls)."""
        pooled, rank, z1 = conv1
        k = patches.shape[0]
        _relu_backward(d_pooled, pooled)
        # max-pool: the gradient goes to each window's first maximum (into z1's buffer)
        d_z1 = z1.view(k, self.positions, -1)
        max_pool_backward(d_pooled, rank, self.weights, d_z1)
        d_t1 = ws.get("d_t1", (k, self.pool), self.toeplitz1.shape)
        for dy in range(self.pool):
            torch.bmm(self._z_rows(z1, dy), self._patch_rows(patches, dy), out=d_t1[:, dy])
        grads["conv1.weight"].copy_(
            self.toeplitz1.kernel_grad(d_t1.sum(1)).view(grads["conv1.weight"].shape)
        )

    def _patch_rows(self, patches: torch.Tensor, dy: int) -> torch.Tensor:
        """(K, windows, k1 * C * side): the patch rows that row dy of the pooling window reads."""
        start = dy * self.row_features
        return patches[:, :, start : start + self.toeplitz1.shape[1]]

    def _z_rows(self, z1: torch.Tensor, dy: int) -> torch.Tensor:
        """(K, pool * C1, windows): conv1 outputs at row dy of the pooling windows."""
        rows = self.toeplitz1.shape[0]
        return z1[:, dy * rows : (dy + 1) * rows]

    def _mean_matrix(self, k: int, ws: Workspace) -> torch.Tensor:
        """(K * G, rows2 * C2/G * cols2, C2/G): a (model, group)'s conv2 outputs, one sample's
        per row, times this matrix are the means over the output map."""
        return ws.constant("mean", (k * self.groups,), self._mean)

    def _maps_view(self, pooled: torch.Tensor, b: int, raw: bool = False) -> torch.Tensor:
        """Pooled maps as (K, G, C1/G, B, Hp, Wp); `raw`: in their memory order instead,
        (K, G, C1/G, Hp, Wp, B) fused and (K, G, C1/G, B, Hp, Wp) otherwise."""
        g, hp, wp = self.groups, self.hp, self.wp
        c1g, k = self.c1 // g, pooled.shape[0]
        if not self.fused:
            return pooled.view(k, g, c1g, b, hp, wp)
        maps = pooled.view(k, g, c1g, hp, wp, b)
        return maps if raw else maps.permute(0, 1, 2, 5, 3, 4)

    def _windows_of(self, pooled: torch.Tensor, b: int) -> torch.Tensor:
        """Overlapping view of the pooled maps as conv2 windows (K, G, B, rows2, C1/G, k2, Wp):
        [k, g, b, y2, ci, i, x] = map[k, g * C1/G + ci, b, y2 + i, x]."""
        maps = self._maps_view(pooled, b)
        s = maps.stride()
        shape = (*maps.shape[:2], b, self.rows2, maps.shape[2], self.k2, self.wp)
        strides = (s[0], s[1], s[3], s[4], s[2], s[4], s[5])
        return maps.as_strided(shape, strides, maps.storage_offset())

    def _window_view(self, win2: torch.Tensor, b: int) -> torch.Tensor:
        """(K, G, B * rows2, features2) windows as (K, G, B, rows2, C1/G, k2, Wp)."""
        k, g = win2.shape[:2]
        return win2.view(k, g, b, self.rows2, self.c1 // g, self.k2, self.wp)


def _fc_backward(d_out, x, params, grads, ws: Workspace, layer: str) -> torch.Tensor:
    return linear.backward(
        d_out,
        x,
        params[f"{layer}.weight"],
        grads[f"{layer}.weight"],
        grads[f"{layer}.bias"],
        ws,
        layer,
    )


def _relu_backward(grad: torch.Tensor, output: torch.Tensor) -> None:
    """grad *= (output > 0), in place: the ReLU's backward from its output."""
    torch.ops.aten.threshold_backward.grad_input(grad, output, 0, grad_input=grad)
