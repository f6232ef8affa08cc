"""The batched trainer's building blocks and guarantees: hand-written backward passes against
autograd (float64), aligned buffers, the flat parameter tensor, and a seed's weights bit for
bit the same alone, at any position of any stack, in any chunking and on 1 or 2 threads."""

from __future__ import annotations

import math

import pytest
import torch

from symbnn.data.core import ImageData, TensorData
from symbnn.settings import Recipe
from symbnn.train.batched import default_chunks, train_batched
from symbnn.train.flat import FlatStack
from symbnn.train.linear import is_aligned
from symbnn.train.losses import LOSSES, loss_and_grad, per_network_loss
from symbnn.train.mlp_stacked import MLPStacked, stacked_forward
from symbnn.train.seeding import build_seeded_model
from symbnn.train.stacked import VmapNet
from symbnn.train.toeplitz import ToeplitzIndex
from symbnn.train.workspace import ALIGN_BYTES, Workspace, gather_rows

pytestmark = pytest.mark.usefixtures("one_torch_thread")

OPTUNET = {"name": "optunet", "conv1_channels": 4, "conv2_channels": 12, "hidden": 10}


def stripes(n: int, seed: int, size: int = 28) -> ImageData:
    """Learnable images: the label is the orientation of noisy stripes."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 4, (n,), generator=g)
    angle = labels.double() * math.pi / 4
    y, x = torch.meshgrid(torch.arange(float(size)), torch.arange(float(size)), indexing="ij")
    along = x * torch.cos(angle)[:, None, None] + y * torch.sin(angle)[:, None, None]
    wave = torch.sin(along.double() * (2 * math.pi / 6))
    noise = torch.randn(n, 1, size, size, generator=g, dtype=torch.float64) * 0.3
    images = ((wave[:, None] + noise).clamp(-1, 1) * 127.5 + 127.5).to(torch.uint8)
    return ImageData(images, labels, 10, (0.5,), (0.25,), f"stripes-{seed}")


def tabular(n: int, features: int, loss: str, seed: int = 0) -> TensorData:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    if loss == "cross_entropy":
        y = torch.randint(0, 3, (n,), generator=g)
    elif loss == "bce":
        y = (x[:, 0] > 0).float()
    else:
        y = x.sum(1) + 0.1 * torch.randn(n, generator=g)
    return TensorData(x, y)


def _equal_rows(a: dict, b: dict, row_a: int, row_b: int) -> bool:
    return all(torch.equal(a[name][row_a], b[name][row_b]) for name in a)


# ---------------------------------------------------------------- building blocks


@pytest.mark.parametrize("loss", LOSSES)
def test_loss_and_grad_is_autograd(loss):
    g = torch.Generator().manual_seed(1)
    classes = 5 if loss == "cross_entropy" else 1
    outputs = torch.randn(3, 7, classes, generator=g, dtype=torch.float64, requires_grad=True)
    if loss == "cross_entropy":
        targets = torch.randint(0, classes, (3, 7), generator=g)
    elif loss == "bce":
        targets = torch.randint(0, 2, (3, 7), generator=g).double()
    else:
        targets = torch.randn(3, 7, generator=g, dtype=torch.float64)
    reference = per_network_loss(outputs, targets, loss)
    (expected,) = torch.autograd.grad(reference.sum(), [outputs])
    losses, grad = loss_and_grad(outputs.detach(), targets, loss)
    torch.testing.assert_close(losses, reference.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad, expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="unknown loss"):
        loss_and_grad(outputs.detach(), targets, "hinge")


def test_workspace_blocks_start_on_cache_lines_and_are_reused():
    ws = Workspace("cpu", torch.float32)
    for batch, shape in (((3,), (5, 7)), ((2, 3), (3,)), ((4,), (16, 4))):
        t = ws.get("x", batch, shape)
        assert t.shape == (*batch, *shape)
        for index in range(math.prod(batch)):
            block = t.reshape(-1, *shape)[index] if len(batch) == 1 else t.flatten(0, 1)[index]
            assert block.data_ptr() % ALIGN_BYTES == 0 and block.is_contiguous()
    again = ws.get("x", (4,), (16, 4))
    assert again.data_ptr() == t.data_ptr()  # reused, not reallocated
    assert is_aligned(ws.get("y", (3,), (5, 7))) and not is_aligned(torch.zeros(3, 5, 7)[:, 1:])


def test_flat_stack_views_and_round_trip():
    g = torch.Generator().manual_seed(0)
    stacked = {"w": torch.randn(4, 3, 5, generator=g), "b": torch.randn(4, 3, generator=g)}
    flat = FlatStack.of(stacked)
    assert flat.data.shape[0] == 4 and flat.data.shape[1] % 16 == 0
    for name, tensor in stacked.items():
        assert torch.equal(flat.views[name], tensor)
        assert flat.views[name].data_ptr() % ALIGN_BYTES == 0
        assert flat.views[name].stride(0) * 4 % ALIGN_BYTES == 0
    flat.views["w"][1].zero_()  # views write through to the flat tensor
    assert flat.data[1].count_nonzero() == 3
    back = flat.unflatten()
    assert back["w"].is_contiguous() and torch.equal(back["b"], stacked["b"])
    assert flat.zeros_like().data.abs().sum() == 0


def test_gather_rows_with_and_without_a_contiguous_buffer():
    table = torch.arange(60.0).view(10, 2, 3)
    idx = torch.tensor([[3, 1], [9, 0], [4, 4]])
    direct = gather_rows(table, idx, torch.empty(3, 2, 2, 3))
    ws = Workspace("cpu", torch.float32)
    padded = ws.get("p", (3,), (2, 2, 3))[:, :1]  # non-contiguous: the copying path
    assert torch.equal(direct, table[idx])
    assert torch.equal(gather_rows(table, idx[:, :1], padded), table[idx[:, :1]])


def test_toeplitz_kernel_grad_is_the_adjoint_of_expand():
    # <expand(w), G> == <w, kernel_grad(G)> for a 2 x 3 x 3 x 3 kernel at 2 x 2 positions
    index = ToeplitzIndex(
        2,
        3,
        3,
        [(0, 0), (0, 1), (1, 0), (1, 1)],
        (8, 48),
        lambda o, q, c, y, x: (q * 2 + o) * 48 + (c * 4 + y) * 4 + x,
    )
    g = torch.Generator().manual_seed(0)
    w = torch.randn(5, index.kernel_size, generator=g, dtype=torch.float64)
    grad = torch.randn(5, 8, 48, generator=g, dtype=torch.float64)
    t = index.expand(w, torch.empty(5, 8, 48, dtype=torch.float64))
    assert (t != 0).sum() == 5 * index.kernel_size * 4
    lhs = (t * grad).sum((1, 2))
    rhs = (w * index.kernel_grad(grad)).sum(1)
    torch.testing.assert_close(lhs, rhs, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="two kernel entries"):
        ToeplitzIndex(1, 1, 2, [(0, 0)], (1, 4), lambda o, q, c, y, x: 0 * y)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("loss, widths", [("cross_entropy", [6, 5, 3]), ("mse", [4, 7, 5, 1])])
def test_stacked_mlp_gradients_are_autograd(bias, loss, widths):
    spec = {"name": "mlp", "widths": widths, "bias": bias}
    data = tabular(30, widths[0], loss)
    models = [build_seeded_model(spec, s).double() for s in range(3)]
    state = {
        name: torch.stack([dict(m.named_parameters())[name].detach() for m in models])
        for name, _ in models[0].named_parameters()
    }
    params = FlatStack.of(state)
    grads = params.zeros_like()
    net = MLPStacked(models[0], data, "cpu", torch.float64)
    idx = torch.randint(0, 30, (3, 11), generator=torch.Generator().manual_seed(0))
    inputs = net.inputs(idx)
    logits = net.logits(params.views, inputs).clone()
    losses = net.loss_and_grads(params.views, inputs, data.targets[idx], loss, grads.views)
    torch.testing.assert_close(logits, stacked_forward(state, data.inputs.double()[idx]))
    for k, model in enumerate(models):
        x = data.inputs.double()[idx[k]]
        reference = per_network_loss(model(x)[None], data.targets[idx[k]][None], loss)[0]
        reference.backward()
        torch.testing.assert_close(losses[k], reference.detach(), rtol=1e-12, atol=1e-12)
        for name, p in model.named_parameters():
            torch.testing.assert_close(grads.views[name][k], p.grad, rtol=1e-10, atol=1e-12)
    assert ("layers.0.bias" in grads.views) == bias


def test_generic_path_matches_the_hand_written_one():
    data = stripes(40, 0)
    recipe = Recipe(epochs=1, batch_size=16, lr=0.04, momentum=0.9, weight_decay=2e-4)
    fast, fast_loss, _ = train_batched(OPTUNET, recipe, data, [0, 1, 2])
    generic, generic_loss, _ = train_batched(OPTUNET, recipe, data, [0, 1, 2], generic=True)
    for name in fast:
        torch.testing.assert_close(generic[name], fast[name], rtol=0, atol=1e-5, msg=name)
    torch.testing.assert_close(generic_loss, fast_loss, rtol=1e-5, atol=0)


def test_vmap_net_runs_on_two_threads():
    # functional_call swaps a module's parameters while it runs: each thread needs its own
    data = stripes(40, 0)
    recipe = Recipe(epochs=1, batch_size=16, lr=0.04)
    one, _, _ = train_batched(OPTUNET, recipe, data, [0, 1, 2, 3], generic=True, chunk=1)
    torch.set_num_threads(2)
    two, _, _ = train_batched(OPTUNET, recipe, data, [0, 1, 2, 3], generic=True, chunk=1)
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=0, atol=1e-6, msg=name)
    assert isinstance(VmapNet(build_seeded_model(OPTUNET, 0), data, "cpu"), VmapNet)


# ---------------------------------------------------------------- a seed alone or in any batch


def _check_alone_equals_batched(spec, recipe, data, seeds, positions, loss, chunks):
    together, losses, _ = train_batched(spec, recipe, data, seeds, loss=loss)
    for chunk in chunks:
        chunked, _, _ = train_batched(spec, recipe, data, seeds, loss=loss, chunk=chunk)
        for k in range(len(seeds)):
            assert _equal_rows(together, chunked, k, k), f"chunk {chunk}, position {k}"
    for k in positions:
        alone, alone_loss, _ = train_batched(spec, recipe, data, [seeds[k]], loss=loss)
        assert _equal_rows(together, alone, k, 0), f"seed {seeds[k]} at position {k}"
        assert torch.equal(losses[k], alone_loss[0])


@pytest.mark.parametrize("threads", [1, 2])
def test_optunet_seed_alone_or_among_32(threads):
    torch.set_num_threads(threads)
    data = stripes(40, 1)  # 40 = 16 + 16 + 8: a short last batch
    recipe = Recipe(epochs=2, batch_size=16, lr=0.05, momentum=0.9, weight_decay=2e-4)
    seeds = list(range(100, 132))
    positions = (0, 1, 2, 17, 31) if threads == 1 else (3, 30)
    _check_alone_equals_batched(OPTUNET, recipe, data, seeds, positions, "cross_entropy", [7])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "widths, loss, batch_size, bias",
    [
        ([2, 2, 1], "bce", 10, True),  # the toy posterior's networks
        ([10, 16, 16, 1], "mse", 32, True),  # the marginals'
        ([7, 3, 3], "cross_entropy", 9, True),  # odd sizes: unaligned unless padded
        ([5, 6, 1], "mse", 13, False),
    ],
)
def test_mlp_seed_alone_or_among_32(threads, widths, loss, batch_size, bias):
    torch.set_num_threads(threads)
    spec = {"name": "mlp", "widths": widths, "bias": bias}
    data = tabular(3 * batch_size + 5, widths[0], loss)
    recipe = Recipe(epochs=2, batch_size=batch_size, lr=0.05, schedule="constant")
    seeds = list(range(32))
    _check_alone_equals_batched(spec, recipe, data, seeds, (0, 1, 2, 31), loss, [3, 5])


def test_results_do_not_depend_on_the_thread_count():
    data = stripes(40, 2)
    recipe = Recipe(epochs=1, batch_size=16, lr=0.05, momentum=0.9)
    one, _, _ = train_batched(OPTUNET, recipe, data, list(range(6)))
    torch.set_num_threads(2)
    two, _, _ = train_batched(OPTUNET, recipe, data, list(range(6)))
    assert torch.get_num_threads() == 2  # restored after the workers
    for k in range(6):
        assert _equal_rows(one, two, k, k)


def test_default_chunks_hold_two_models_at_least():
    class Net:
        chunk_bytes = 100

        def bytes_per_model(self, batch_size):
            return 10 * batch_size  # the budget would give one model a chunk

    for k in (2, 3, 5, 7, 33):
        chunks = default_chunks(Net(), 64, k, "cpu")
        sizes = [part.stop - part.start for part in chunks]
        assert chunks[0].start == 0 and chunks[-1].stop == k and sum(sizes) == k
        assert min(sizes) >= 2 and max(sizes) - min(sizes) <= 1, (k, sizes)
    assert default_chunks(Net(), 64, 1, "cpu") == [slice(0, 1)]
    assert default_chunks(Net(), 64, 40, "cuda") == [slice(0, 40)]  # one chunk on a GPU
