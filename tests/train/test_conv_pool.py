"""The fused conv1 + ReLU + max-pool pass (`symbnn.train.conv_pool`) against torch's layers and
autograd: the same maxima (the first in window order among equal values), the same kernel
gradient, NaN kept, and geometries outside its limits refused."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from symbnn.train import conv_pool

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(images, weight, pool, d_pooled=None):
    """The fused pass on (B, C, H, W) images: pooled maps (B, C1, Hp, Wp) and, given their
    gradient, the kernel's gradient (C1, C, k, k)."""
    b, c, h, w = images.shape
    c1, k = weight.shape[0], weight.shape[-1]
    hp, wp = (h - k + 1) // pool, (w - k + 1) // pool
    forward, backward = conv_pool.kernels(c, k, pool)
    batch_last = images.permute(1, 2, 3, 0).contiguous()
    pooled = torch.empty(c1, hp, wp, b, dtype=images.dtype)
    first = torch.empty(c1, hp, wp, b, dtype=torch.int8)
    flat = weight.reshape(c1, -1).contiguous()
    forward(batch_last.numpy(), flat.numpy(), pooled.numpy(), first.numpy())
    d_weight = None
    if d_pooled is not None:
        d_flat = torch.empty_like(flat)
        grad = d_pooled.permute(1, 2, 3, 0).contiguous()
        backward(batch_last.numpy(), grad.numpy(), pooled.numpy(), first.numpy(), d_flat.numpy())
        d_weight = d_flat.view(weight.shape)
    return pooled.permute(3, 0, 1, 2), d_weight


@pytest.mark.parametrize(
    "channels, kernel, pool, size, batch",
    [(1, 4, 3, 28, 19), (3, 3, 2, 13, 40), (2, 1, 4, 9, 7)],
)
def test_fused_pass_is_the_layers_function_and_gradient(channels, kernel, pool, size, batch):
    # float64, integer-valued images and kernels: every product and sum is exact, so the
    # comparison is exact, and equal values within a window are frequent (ties)
    g = torch.Generator().manual_seed(0)
    images = torch.randint(0, 3, (batch, channels, size, size), generator=g).double()
    weight = torch.randint(-1, 2, (5, channels, kernel, kernel), generator=g).double()
    weight[0] = -1  # never positive: the ReLU's zero side
    weight[1] = 1
    reference_weight = weight.clone().requires_grad_()
    reference = F.max_pool2d(F.relu(F.conv2d(images, reference_weight)), pool)
    assert reference.eq(0).any() and reference.gt(0).any()  # both sides of the ReLU
    d_pooled = torch.randint(-3, 4, reference.shape, generator=g).double()
    reference.backward(d_pooled)
    pooled, d_weight = _run(images, weight, pool, d_pooled)
    assert torch.equal(pooled, reference.detach())
    assert torch.equal(d_weight, reference_weight.grad)


def test_fused_pass_in_float32_matches_within_rounding():
    g = torch.Generator().manual_seed(1)
    images = torch.randn(64, 1, 28, 28, generator=g)
    weight = torch.randn(4, 1, 4, 4, generator=g)
    reference_weight = weight.clone().requires_grad_()
    reference = F.max_pool2d(F.relu(F.conv2d(images, reference_weight)), 3)
    d_pooled = torch.randn(reference.shape, generator=g)
    reference.backward(d_pooled)
    pooled, d_weight = _run(images, weight, 3, d_pooled)
    torch.testing.assert_close(pooled, reference.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(d_weight, reference_weight.grad, rtol=1e-4, atol=1e-4)


def test_a_nan_reaches_the_pooled_map():
    images = torch.ones(2, 1, 6, 6, dtype=torch.float64)
    images[1, 0, 4, 4] = float("nan")
    weight = torch.ones(1, 1, 1, 1, dtype=torch.float64)
    pooled, _ = _run(images, weight, 3)
    reference = F.max_pool2d(F.relu(F.conv2d(images, weight)), 3)
    assert torch.equal(pooled.isnan(), reference.isnan())
    assert pooled[1, 0, 1, 1].isnan() and pooled.isnan().sum() == 1


def test_large_geometries_are_refused():
    assert conv_pool.fits(1, 4, 3)
    assert not conv_pool.fits(3, 7, 4)  # 3 * 49 * 16 products: the matmul route
    with pytest.raises(ValueError, match="no fused conv1 pass for 3 channels, kernel 7, pool 4"):
        conv_pool.kernels(3, 7, 4)


def test_generated_source_is_cached_checked_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMBNN_CACHE_DIR", str(tmp_path))
    source = conv_pool.forward_source(1, 1, 1)
    path = conv_pool._kernel_file("forward", source)
    assert path.parent == tmp_path / conv_pool.KERNEL_DIR and path.read_text() == source
    path.write_text("import os\nos.system('false')\n")  # another text under the same name
    assert conv_pool._kernel_file("forward", source) == path
    assert path.read_text() == source


def test_an_unwritable_cache_compiles_from_the_string(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SYMBNN_CACHE_DIR", str(blocker / "below"))
    source = conv_pool.forward_source(1, 1, 1)
    assert conv_pool._kernel_file("forward", source) is None
    forward = conv_pool._compile(source, "forward", {"contract"})
    images = torch.tensor([[[[1.0, -2.0], [3.0, 4.0]]]]).permute(1, 2, 3, 0).contiguous()
    pooled = torch.empty(1, 2, 2, 1)
    first = torch.empty(1, 2, 2, 1, dtype=torch.int8)
    forward(images.numpy(), torch.tensor([[2.0]]).numpy(), pooled.numpy(), first.numpy())
    assert pooled.flatten().tolist() == [2.0, 0.0, 6.0, 8.0]
