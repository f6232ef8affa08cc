"""SGD is equivariant to permutations (the paper's Propositions 3 and 4): training from a
permuted initialisation on the same batches gives the permuted trained network.

Permutations only: a rescaled or softmax-shifted initialisation changes the gradients'
scale (and weight decay's pull), so SGD does not carry those symmetries along."""

import dataclasses

import pytest
import torch
from torch.nn import functional as F

from symbnn import api
from symbnn.data.core import ImageData
from symbnn.models import build_model
from symbnn.settings import Recipe
from symbnn.symmetry import unit_groups
from symbnn.symmetry.operators import apply_permutations
from symbnn.train.loop import fit_module

# momentum, Nesterov and weight decay included: each acts unit by unit, so they commute with
# permutations too
RECIPE = Recipe(epochs=2, batch_size=8, lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)


def images(side: int, channels: int = 1, n: int = 24) -> ImageData:
    g = torch.Generator().manual_seed(side)
    pixels = torch.randint(0, 256, (n, channels, side, side), generator=g, dtype=torch.uint8)
    stats = (0.5,) * channels, (0.25,) * channels
    return ImageData(pixels, torch.arange(n) % 10, 10, *stats, f"noise{side}")


def double_cross_entropy(model, x, y):
    return F.cross_entropy(model(x.double()), y)


def small_resnet():
    """A ResNet of BasicBlocks, one per stage (4.9M parameters instead of ResNet-18's 11M)."""
    from torchvision.models.resnet import BasicBlock, ResNet

    return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10)


# name -> (model builder, images: side, channels; epochs: a few steps of momentum each)
CASES = {
    "mlp": (lambda: build_model({"name": "mlp", "widths": [64, 12, 10, 10]}), (8, 1), 2),
    "optunet": (lambda: build_model({"name": "optunet"}), (28, 1), 2),
    # BatchNorm in training mode: batch statistics are per channel, so equivariant too
    "resnet": (small_resnet, (8, 3), 1),
}


@pytest.mark.parametrize("name", CASES)
def test_training_from_a_permuted_start_gives_the_permuted_result(name):
    build, (side, channels), epochs = CASES[name]
    data = images(side, channels, n=16 * epochs)
    recipe = dataclasses.replace(RECIPE, epochs=epochs)
    torch.manual_seed(0)
    start = build().double()
    sym = unit_groups(start)
    state = {k: v.clone() for k, v in start.state_dict().items()}
    moved, transform = api.random_symmetry(
        state, sym, seed=1, scale=False, shift=False, return_transform=True
    )
    assert any(not torch.equal(state[k], moved[k]) for k in state)  # the start did move

    def trained(initial):
        model = build().double()
        model.load_state_dict(initial)
        # float64 throughout, so that the two runs differ only by the order of sums
        fit_module(model, recipe, data, seed=7, loss_fn=double_cross_entropy)
        return {k: v.detach() for k, v in model.state_dict().items()}

    a, b = trained(state), trained(moved)
    assert any((a[k] - state[k]).abs().max() > 1e-3 for k in a if a[k].is_floating_point())
    expected = apply_permutations(a, sym, transform["perms"])
    for key in a:
        assert torch.allclose(b[key].double(), expected[key].double(), rtol=1e-9, atol=1e-11), key
