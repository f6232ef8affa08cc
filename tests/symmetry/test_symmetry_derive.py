"""Symmetry structures derived from traced graphs (symbnn.symmetry.derive).

The hand-written structures of the shipped models are the oracle for the derivation; a zoo of
torchvision models checks what only a derivation can reach (bottlenecks, flattened feature
maps, depthwise convolutions, concatenations): a random element of the derived group keeps
the function, and the canonical form of a network and of its moved copy agree. Every network
runs in float64 and eval mode, BatchNorm statistics drawn at random, on 32 x 32 inputs.
"""

import functools
import math

import pytest
import torch
import torchvision
from symmetry_checks import random_module_state, relative_difference, small_vgg11_bn
from torch import nn

from symbnn import api
from symbnn.models import MLP, OptuNet, build_model, resnet18_cifar
from symbnn.symmetry import (
    count_symmetries,
    structure_differences,
    symmetry_of,
    total_symmetries,
    unit_groups,
)
from symbnn.symmetry.derive import default_input

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def log10_fact(k):
    return math.lgamma(k + 1) / math.log(10)


# ---------------------------------------------------------------- agreement with the oracle

SHIPPED = [
    {"name": "optunet"},
    {"name": "optunet", "groups": 1},
    {"name": "mlp", "widths": [784, 256, 256, 10]},
    {"name": "mlp", "widths": [7, 6, 5, 3], "bias": False},
    {"name": "mlp", "widths": [2, 2, 1]},
    {"name": "resnet18", "num_classes": 100},
]


@pytest.mark.parametrize("spec", SHIPPED, ids=str)
def test_derived_structure_equals_the_hand_written_one(spec):
    model = build_model(spec)
    derived = symmetry_of(model, default_input(model))
    assert structure_differences(derived, unit_groups(spec)) == []
    assert derived.limits == ()
    assert derived.is_plain


def test_derived_counts_match_appendix_d4():
    mlp = symmetry_of(MLP([784, 256, 256, 10]))
    assert total_symmetries(mlp)["log10_permutations"] == pytest.approx(2 * log10_fact(256))
    assert total_symmetries(mlp)["scaling_dof"] == 512

    optunet = symmetry_of(OptuNet())
    rows = {r["group"]: r for r in count_symmetries(optunet)}
    assert rows["conv1"]["log10_permutations"] == pytest.approx(math.log10(2))
    assert rows["conv2"]["log10_permutations"] == pytest.approx(2 * log10_fact(5))
    assert rows["fc1"]["log10_permutations"] == pytest.approx(math.log10(6))
    assert sum(r["scaling_dof"] for r in rows.values()) == 2 + 10 + 3

    res = count_symmetries(symmetry_of(resnet18_cifar(num_classes=100)))
    widths = (64, 128, 256, 512)
    # 20 BatchNorms absorb one scale per feature; 4 residual streams and 8 inner groups keep
    # one free output scale each; every stream and inner group permutes.
    assert sum(r["bn_scaling_dof"] for r in res) == 4800
    assert sum(r["scaling_dof"] - r["bn_scaling_dof"] for r in res) == 3 * sum(widths)
    assert sum(r["log10_permutations"] for r in res) == pytest.approx(
        3 * sum(log10_fact(w) for w in widths)
    )
    assert api.count_symmetries({"name": "resnet18", "num_classes": 100})["softmax_shift"]


# ---------------------------------------------------------------- the zoo


def _leaky_mlp():
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(12, 10),
        nn.LeakyReLU(0.1),
        nn.Linear(10, 8),
        nn.LeakyReLU(0.3),
        nn.Linear(8, 4),
    )


def _tv(name):
    return lambda: getattr(torchvision.models, name)(weights=None, num_classes=10)


IMAGE = (3, 32, 32)
ZOO = {
    "resnet18": (_tv("resnet18"), IMAGE),
    "resnet50": (_tv("resnet50"), IMAGE),
    "vgg11_bn": (small_vgg11_bn, IMAGE),  # classifier narrowed to 64 units: seconds, not 30 s
    "mobilenet_v2": (_tv("mobilenet_v2"), IMAGE),
    "densenet121": (_tv("densenet121"), IMAGE),
    "optunet": (OptuNet, (1, 28, 28)),
    "mlp": (lambda: MLP([20, 16, 12, 5]), (20,)),
    "resnet18_cifar": (lambda: resnet18_cifar(num_classes=10), IMAGE),
    "leaky_mlp": (_leaky_mlp, (3, 2, 2)),
}


@functools.cache
def zoo(name):
    """(model, structure, inputs, state, moved state) for one zoo model."""
    build, shape = ZOO[name]
    torch.manual_seed(0)
    model = build().double().eval()
    x = torch.randn(2, *shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    sym = symmetry_of(model, x)
    state = random_module_state(model, seed=2)
    moved = api.random_symmetry(state, sym, seed=3)
    return model, sym, x, state, moved


def run(model, state, x):
    model.load_state_dict(state)
    with torch.no_grad():
        return model(x)


@pytest.mark.parametrize("name", list(ZOO))
def test_a_random_group_element_keeps_the_function(name):
    model, sym, x, state, moved = zoo(name)
    y, z = run(model, state, x), run(model, moved, x)
    if sym.output_bias:
        y, z = y.log_softmax(-1), z.log_softmax(-1)
    assert relative_difference(y, z) < 1e-5
    # ... and is not the identity: every unit group and every scale group moved something.
    for g in sym.groups:
        assert any(not torch.equal(state[a.tensor], moved[a.tensor]) for a in g.axes), g.name


@pytest.mark.parametrize("name", list(ZOO))
def test_canonical_form_is_shared_by_a_network_and_its_moved_copy(name):
    model, sym, x, state, moved = zoo(name)
    first = api.canonicalize(state, sym)
    second = api.canonicalize(moved, sym)
    for t in sym.tensors:
        gap = torch.sub(first.state[t], second.state[t]).abs_().max()  # one temporary (VGG)
        assert float(gap / first.state[t].abs().max().clamp_min(1e-30)) < 1e-8, t
    y, z = run(model, state, x), run(model, first.state, x)
    assert relative_difference(y.log_softmax(-1), z.log_softmax(-1)) < 1e-5


def _scale_groups(sym, absorbed):
    return [s for s in sym.scale_groups if s.absorbed_by_bn == absorbed]


def test_what_the_zoo_structures_contain():
    # ResNet-50: bottleneck streams tie conv3 -> bn3 of every block to the projection.
    sym = zoo("resnet50")[1]
    assert len(sym.groups) == 4 + 16 * 2 + 1  # streams, two inner groups per block, the stem
    stream = next(g for g in sym.groups if g.key.tensor == "layer1.0.downsample.0.weight")
    rows = {a.tensor for a in stream.axes if a.role == "in"}
    assert rows == {"layer1.0.downsample.0.weight"} | {f"layer1.{b}.conv3.weight" for b in range(3)}
    assert sym.limits == () and sym.output_bias == "fc.bias" and sym.output_weight == "fc.weight"

    # VGG: the last conv's channels reach the classifier through a 7 x 7 flatten.
    sym = zoo("vgg11_bn")[1]
    flat = [a for g in sym.groups for a in g.axes if a.tensor == "classifier.0.weight"]
    assert {(a.axis, a.inner) for a in flat} == {(0, 1), (1, 49)}
    assert not sym.is_plain and sym.limits == ()
    assert (sym.output_weight, sym.output_bias) == ("classifier.6.weight", "classifier.6.bias")

    # MobileNetV2: ReLU6 stops scaling (every limit says so); depthwise convolutions couple
    # their input and output channels one block per channel; the linear bottlenecks scale.
    sym = zoo("mobilenet_v2")[1]
    assert sym.limits and all("ReLU6" in reason for _, reason in sym.limits)
    assert len(sym.couplings) == 17
    assert all(sym.group(c[0]).block_width == 1 for c in sym.couplings)
    free = _scale_groups(sym, absorbed=False)  # gamma of a projection BatchNorm, no ReLU6
    assert free and all(
        a.role == "bn_weight" and a.tensor.endswith(("conv.2.weight", "conv.3.weight"))
        for s in free
        for a in s.incoming
    )

    # DenseNet: every layer's new channels stay one group, read in slices by later layers.
    sym = zoo("densenet121")[1]
    layer1 = next(
        g for g in sym.groups if g.key.tensor == "features.denseblock1.denselayer1.conv2.weight"
    )
    readers = {a.tensor for a in layer1.axes if a.role == "out"}
    assert readers == {f"features.denseblock1.denselayer{k}.conv1.weight" for k in range(2, 7)} | {
        "features.transition1.conv.weight"
    }
    assert all(a.offset == 64 for a in layer1.axes if a.role == "out")
    assert len(sym.groups) == 1 + 2 * (6 + 12 + 24 + 16) + 3  # stem, 2 per layer, transitions
    assert sym.limits == ()
    # The classifier reads every group's slice: its plain view cuts the output weight's
    # columns, so the softmax step runs on the whole weight, in the model's layout.
    assert sym.output_weight == "classifier.weight" and sym.softmax_dof == 1024 + 1
    assert sym.plain.sym.output_weight is None and sym.plain.sym.output_bias == "classifier.bias"

    # LeakyReLU is positively homogeneous: both hidden layers scale freely.
    sym = zoo("leaky_mlp")[1]
    assert len(_scale_groups(sym, absorbed=False)) == 2 and sym.limits == ()


# ---------------------------------------------------------------- what the derivation refuses


class _Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 6), nn.Linear(6, 3)

    def forward(self, x):
        h = self.fc1(x)
        return self.fc2(h * torch.sigmoid(h))  # a product of two tensors


class _Aliased(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 6), nn.Linear(6, 3)
        self.alias = self.fc1  # one module, two state-dict names: only one name would move

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_what_cannot_be_proven_symmetric_is_left_out_and_reported():
    silu = nn.Sequential(nn.Linear(4, 6), nn.SiLU(), nn.Linear(6, 3))
    sym = symmetry_of(silu, torch.randn(2, 4))
    (group,) = sym.groups
    assert group.width == 6 and group.scales == ()  # permutations only
    assert sym.limits == (
        ("1", "SiLU is not positively homogeneous: no scaling symmetry through it"),
    )

    sym = symmetry_of(_Gated(), torch.randn(2, 4))
    assert sym.groups == () and sym.output_bias == "fc2.bias"
    assert sym.limits == (
        ("sigmoid", "sigmoid is not positively homogeneous: no scaling symmetry through it"),
        ("mul", "product of two tensors: not followed"),
    )

    norm = nn.Sequential(nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.ReLU(), nn.Conv2d(8, 4, 1))
    sym = symmetry_of(norm, torch.randn(2, 3, 8, 8))
    assert sym.groups == ()
    assert sym.limits == (("1", "unknown module type GroupNorm: treated as not symmetric"),)

    sigmoid_out = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3), nn.Sigmoid())
    sym = symmetry_of(sigmoid_out, torch.randn(2, 4))
    assert sym.output_bias is None and len(sym.groups) == 1

    # Averaging in zero padding does not commute with a common shift of the logits.
    x = torch.randn(2, 3, 6, 6)
    for pool, bias in ((nn.AvgPool2d(3, padding=1), None), (nn.AdaptiveAvgPool2d(2), "0.bias")):
        sym = symmetry_of(nn.Sequential(nn.Conv2d(3, 5, 3), pool, nn.Flatten()), x)
        # A convolution's W + 1 v^T shifts each position by its own v . h: not followed.
        assert sym.output_bias == bias and sym.output_weight is None

    # W + 1 v^T of a linear layer: a shift per sample, unless the layer has more axes.
    sym = symmetry_of(sigmoid_out[:3], torch.randn(2, 4))
    assert (sym.output_weight, sym.output_bias, sym.softmax_dof) == ("2.weight", "2.bias", 7)
    sym = symmetry_of(nn.Sequential(nn.Linear(4, 6, bias=False), nn.Dropout()), torch.randn(2, 4))
    assert (sym.output_weight, sym.output_bias, sym.softmax_dof) == ("0.weight", None, 4)
    sym = symmetry_of(nn.Sequential(nn.Linear(4, 6)), torch.randn(2, 5, 4))  # logits per token
    assert (sym.output_weight, sym.output_bias) == (None, "0.bias")

    sym = symmetry_of(_Aliased(), torch.randn(2, 4))
    assert sym.groups == () and "shared under several" in sym.limits[0][1]
