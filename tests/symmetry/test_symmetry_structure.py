"""The symmetry structures of the shipped models, and symmetry counting (paper D.4)."""

import math

import pytest

from symbnn.models import build_model
from symbnn.symmetry import (
    Axis,
    ScaleGroup,
    Symmetry,
    UnitGroup,
    count_symmetries,
    total_symmetries,
    unit_groups,
)

ARCHITECTURES = [
    {"name": "mlp", "widths": [2, 2, 1]},
    {"name": "mlp", "widths": [784, 256, 256, 10]},
    {"name": "optunet"},
    {"name": "resnet18", "num_classes": 100},
]


def log10_fact(k):
    return math.lgamma(k + 1) / math.log(10)


def _last_layer(spec):
    return {
        "mlp": lambda: f"layers.{len(spec.get('widths', [])) - 2}.",
        "optunet": lambda: "fc2.",
        "resnet18": lambda: "fc.",
    }[spec["name"]]()


@pytest.mark.parametrize("spec", ARCHITECTURES, ids=lambda s: s["name"] + str(s.get("widths", "")))
def test_every_parameter_and_statistic_moves_with_its_units(spec):
    sym = unit_groups(spec)
    state = build_model(spec).state_dict()
    covered = {(a.tensor, a.axis) for g in sym.groups for a in g.axes}
    for name, t in state.items():
        if name.endswith("num_batches_tracked"):
            assert name not in sym.tensors  # never touched
            continue
        # Output axes are tied to units everywhere but in the last layer ...
        assert ((name, 0) in covered) != name.startswith(_last_layer(spec)), name
        # ... and input axes everywhere but in the first layer (the network input).
        if t.dim() >= 2:
            assert ((name, 1) in covered) != name.startswith(("conv1.", "layers.0.")), name


def test_resnet_residual_streams_tie_channels():
    sym = unit_groups({"name": "resnet18", "num_classes": 100})
    stream = sym.group("layer1")
    rows = {a.tensor for a in stream.axes if a.role == "in"}
    assert rows == {"conv1.weight", "layer1.0.conv2.weight", "layer1.1.conv2.weight"}
    cols = {a.tensor for a in stream.axes if a.role == "out"}
    assert cols == {
        "layer1.0.conv1.weight",
        "layer1.1.conv1.weight",
        "layer2.0.conv1.weight",
        "layer2.0.downsample.0.weight",
    }
    stage2 = sym.group("layer2")
    assert stage2.key.tensor == "layer2.0.downsample.0.weight"
    assert "layer2.0.downsample.1.running_var" in {a.tensor for a in stage2.axes}
    # One shared output scale for the stream, one BatchNorm-absorbed scale per producing conv.
    assert [s.absorbed_by_bn for s in stream.scales] == [True, True, True, False]
    assert [s.name for s in stream.scales][-1] == "layer1"
    assert len(sym.groups) == 4 + 8


def test_counts_match_appendix_d4():
    mlp = total_symmetries(unit_groups({"name": "mlp", "widths": [784, 256, 256, 10]}))
    assert mlp["log10_permutations"] == pytest.approx(2 * log10_fact(256))
    assert mlp["scaling_dof"] == 512

    rows = {r["group"]: r for r in count_symmetries(unit_groups({"name": "optunet"}))}
    # conv1's two channels feed a 2-group conv: one block each, movable only as a block swap.
    assert rows["conv1"]["log10_permutations"] == pytest.approx(math.log10(2))
    assert rows["conv2"]["log10_permutations"] == pytest.approx(2 * log10_fact(5))
    assert rows["fc1"]["log10_permutations"] == pytest.approx(math.log10(6))
    assert sum(r["scaling_dof"] for r in rows.values()) == 2 + 10 + 3

    res = count_symmetries(unit_groups({"name": "resnet18", "num_classes": 100}))
    widths = {r["group"]: r["width"] for r in res}
    assert widths["layer4"] == 512 and widths["layer3.1"] == 256
    # BatchNorm adds one sDoF per feature (D.4.3): 20 BatchNorms, 4800 features; residual
    # streams share one output scale: 4 streams + 8 inner groups.
    assert sum(r["bn_scaling_dof"] for r in res) == 4800
    assert sum(r["scaling_dof"] - r["bn_scaling_dof"] for r in res) == 64 + 128 + 256 + 512 + 2 * (
        64 + 128 + 256 + 512
    )
    assert sum(r["log10_permutations"] for r in res) == pytest.approx(
        3 * sum(log10_fact(w) for w in (64, 128, 256, 512))
    )


def test_the_softmax_freedom_is_counted_and_checked():
    # W_L + 1 v^T and b + c 1: n_{L-1} + 1 dimensions (the paper counts only the bias).
    for spec, dof in (
        ({"name": "mlp", "widths": [784, 256, 256, 10]}, 257),
        ({"name": "mlp", "widths": [7, 6, 5, 3], "bias": False}, 5),
        ({"name": "mlp", "widths": [2, 2, 1]}, 0),
        ({"name": "optunet"}, 3 + 1),
        ({"name": "resnet18", "num_classes": 100}, 512 + 1),
    ):
        sym = unit_groups(spec)
        assert sym.softmax_dof == dof and total_symmetries(sym)["softmax_dof"] == dof
        assert (sym.output_weight is not None) == (dof > 0)
        if sym.output_weight:
            assert sym.output_weight in sym.tensors and sym.output_weight in sym.mass_tensors
    shapes = {"a.weight": (4, 3), "b.weight": (2, 4), "b.bias": (2,), "c.bias": (3,)}
    key = Axis("a.weight", 0, "in")
    group = UnitGroup("a", 4, (key, Axis("b.weight", 1, "out")), (), key)
    Symmetry({"name": "x"}, (group,), shapes, output_bias="b.bias", output_weight="b.weight")
    for bad, match in (
        ({"output_weight": "z.weight"}, "not in the state dict"),
        ({"output_weight": "b.bias"}, "not a softmax layer"),
        ({"output_weight": "a.weight"}, "rows belong to group a"),
        ({"output_weight": "b.weight", "output_bias": "c.bias"}, "disagree"),
    ):
        with pytest.raises(ValueError, match=match):
            Symmetry({"name": "x"}, (group,), shapes, **bad)


def test_inconsistent_descriptions_are_rejected():
    shapes = {"a.weight": (4, 3), "b.weight": (2, 4)}
    key = Axis("a.weight", 0, "in")
    good = UnitGroup(
        "a",
        4,
        (key, Axis("b.weight", 1, "out")),
        (ScaleGroup("a", (key, Axis("b.weight", 1, "out"))),),
        key,
    )
    Symmetry({"name": "x"}, (good,), shapes)
    wrong_width = UnitGroup("a", 5, good.axes, good.scales, key)
    with pytest.raises(ValueError, match="size 4, expected 5"):
        Symmetry({"name": "x"}, (wrong_width,), shapes)
    with pytest.raises(ValueError, match="unknown role"):
        Axis("a.weight", 0, "sideways")
    no_incoming = UnitGroup(
        "a", 4, good.axes, (ScaleGroup("a", (Axis("b.weight", 1, "out"),)),), key
    )
    with pytest.raises(ValueError, match="no incoming"):
        Symmetry({"name": "x"}, (no_incoming,), shapes)
