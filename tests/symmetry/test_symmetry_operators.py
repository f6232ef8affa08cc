"""Symmetry operators preserve the network function (docs/maths.md, section 1), on every shipped model."""

import functools

import pytest
import torch
from symmetry_checks import outputs, relative_difference

from symbnn.models import build_model
from symbnn.symmetry import (
    apply_permutations,
    apply_scales,
    centre_softmax,
    check_permutations,
    identity_permutations,
    invert_permutations,
    random_output_shifts,
    random_permutations,
    random_scales,
    shift_output,
    shift_softmax,
    unit_groups,
)
from symbnn.symmetry.testing import random_state

# (spec, input shape of one example, networks per draw): ResNet-18 in float64 on 8x8 inputs.

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CASES = {
    "mlp221": ({"name": "mlp", "widths": [2, 2, 1]}, (2,), 16),
    "mlp": ({"name": "mlp", "widths": [7, 6, 5, 3]}, (7,), 16),
    "optunet": ({"name": "optunet"}, (1, 28, 28), 8),
    "resnet18": ({"name": "resnet18", "num_classes": 10}, (3, 8, 8), 2),
}
TOL = 1e-5


@functools.cache
def model(name):
    return build_model(CASES[name][0]).double().eval()


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    spec, shape, n = CASES[request.param]
    sym = unit_groups(spec)
    state = random_state(spec, n, seed=1)
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    net = model(request.param)
    return net, sym, state, x, outputs(net, state, x)


def test_permutations_preserve_the_function(case):
    net, sym, state, x, y = case
    g = torch.Generator().manual_seed(3)
    perms = random_permutations(sym, y.shape[0], g)
    moved = apply_permutations(state, sym, perms)
    assert relative_difference(y, outputs(net, moved, x)) < TOL
    # The draw is not the identity (else the test proves nothing) except for 1-unit-per-block groups.
    changed = [name for name in sym.tensors if not torch.equal(moved[name], state[name])]
    assert changed
    back = apply_permutations(moved, sym, invert_permutations(perms))
    assert all(torch.equal(back[k], state[k]) for k in state)


def test_scales_preserve_the_function(case):
    net, sym, state, x, y = case
    g = torch.Generator().manual_seed(4)
    scales = random_scales(sym, y.shape[0], g, spread=1.5)
    moved = apply_scales(state, sym, scales)
    assert relative_difference(y, outputs(net, moved, x)) < TOL
    back = apply_scales(moved, sym, {k: 1 / v for k, v in scales.items()})
    for k in sym.tensors:
        torch.testing.assert_close(back[k], state[k], rtol=1e-12, atol=1e-12)
    # Buffers no symmetry moves are passed through untouched.
    for k in state:
        if k not in sym.tensors:
            assert torch.equal(moved[k], state[k])


def test_combined_symmetries_on_a_single_state_dict(case):
    net, sym, state, x, y = case
    g = torch.Generator().manual_seed(5)
    perms = {k: v[0] for k, v in random_permutations(sym, 1, g).items()}
    scales = {k: v[0] for k, v in random_scales(sym, 1, g).items()}
    single = {k: v[0] for k, v in state.items()}
    moved = apply_scales(apply_permutations(single, sym, perms), sym, scales)
    assert all(moved[k].shape == single[k].shape for k in single)
    assert relative_difference(y[:1], outputs(net, {k: v[None] for k, v in moved.items()}, x)) < TOL
    stacked = apply_scales(
        apply_permutations(
            {k: v[:1] for k, v in state.items()}, sym, {k: v[None] for k, v in perms.items()}
        ),
        sym,
        {k: v[None] for k, v in scales.items()},
    )
    assert all(torch.equal(stacked[k][0], moved[k]) for k in single)


def test_softmax_shift_preserves_probabilities(case):
    net, sym, state, x, y = case
    if sym.output_bias is None:
        assert (
            sym.shapes[sym.mass_tensors[-1]][0] == 1
        )  # a single output is not a softmax: no shift offered
        with pytest.raises(ValueError, match="no softmax"):
            shift_softmax(state, sym)
        return
    shifted, shift = shift_softmax(state, sym, total=1.0)
    assert shift.shape == (y.shape[0],)
    torch.testing.assert_close(
        shifted[sym.output_bias].sum(dim=1), torch.ones(y.shape[0], dtype=torch.float64)
    )
    z = outputs(net, shifted, x)
    assert relative_difference(y.log_softmax(-1), z.log_softmax(-1)) < TOL


def test_the_softmax_group_preserves_probabilities_and_centring_removes_it(case):
    # W_L + 1 v^T moves every logit by v . h, b + c 1 by c: the softmax does not see either.
    net, sym, state, x, y = case
    n = y.shape[0]
    if not sym.softmax_dof:
        assert sym.output_weight is None and sym.output_bias is None
        with pytest.raises(ValueError, match="no softmax"):
            centre_softmax(state, sym)
        return
    rows = sym.shapes[sym.output_weight][1]
    assert sym.softmax_dof == rows + 1  # n_{L-1} + 1 dimensions
    bias, weight = random_output_shifts(sym, n, torch.Generator().manual_seed(6))
    assert bias.shape == (n,) and weight.shape == (n, rows)
    moved = shift_output(state, sym, bias, 10 * weight)
    z = outputs(net, moved, x)
    assert relative_difference(y.softmax(-1), z.softmax(-1)) < 1e-10
    assert relative_difference(y, z) > 1e-2  # the logits did move
    centred, c, v = centre_softmax(moved, sym, total=2.0)
    assert c.shape == (n,) and v.shape == (n, rows)
    assert float(centred[sym.output_weight].sum(1).abs().max()) < 1e-13
    torch.testing.assert_close(centred[sym.output_bias].sum(1), torch.full((n,), 2.0).double())
    assert relative_difference(y.softmax(-1), outputs(net, centred, x).softmax(-1)) < 1e-10
    # The recorded shifts rebuild the centred state; the original centres to the same state.
    rebuilt = shift_output(moved, sym, c, v)
    again, _, _ = centre_softmax(state, sym, total=2.0)
    for name in (sym.output_weight, sym.output_bias):
        torch.testing.assert_close(rebuilt[name], centred[name], rtol=0, atol=1e-14)
        torch.testing.assert_close(again[name], centred[name], rtol=0, atol=1e-13)
    # One network: no sample axis in or out.
    single = {k: t[0] for k, t in moved.items()}
    one, c1, v1 = centre_softmax(single, sym, total=2.0)
    assert c1.dim() == 0 and v1.shape == (rows,)
    assert torch.equal(one[sym.output_weight], centred[sym.output_weight][0])
    assert torch.equal(
        shift_output(single, sym, 0.5)[sym.output_bias], single[sym.output_bias] + 0.5
    )


def test_batchnorm_scales_are_exact_over_a_wide_range():
    spec, shape, _ = CASES["resnet18"]
    sym, net = unit_groups(spec), model("resnet18")
    state = random_state(spec, 1, seed=7)
    x = torch.randn(2, *shape, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    # Scales from 1e-4 to 1e4: running_var + eps is scaled, so eps never breaks the symmetry.
    g = torch.Generator().manual_seed(9)
    scales = {
        k: 10 ** (8 * torch.rand(v.shape, generator=g, dtype=torch.float64) - 4)
        for k, v in random_scales(sym, 1).items()
    }
    moved = apply_scales(state, sym, scales)
    assert relative_difference(outputs(net, state, x), outputs(net, moved, x)) < 1e-9


def test_grouped_conv_blocks_move_together_or_not_at_all():
    spec, shape, _ = CASES["optunet"]
    sym, net = unit_groups(spec), model("optunet")
    state = random_state(spec, 1, seed=10)
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    y = outputs(net, state, x)
    perms = identity_permutations(sym, 1)
    # Swapping conv1's two channels together with conv2's two blocks is a symmetry ...
    swap = {
        **perms,
        "conv1": torch.tensor([[1, 0]]),
        "conv2": torch.tensor([[5, 6, 7, 8, 9, 0, 1, 2, 3, 4]]),
    }
    assert relative_difference(y, outputs(net, apply_permutations(state, sym, swap), x)) < TOL
    # ... swapping conv1's channels alone is not, nor is moving a conv2 channel to the other
    # block (the paper's D.4.2 count of 10! output permutations overcounts).
    for bad in (
        {**perms, "conv1": torch.tensor([[1, 0]])},
        {**perms, "conv2": torch.tensor([[5, 1, 2, 3, 4, 0, 6, 7, 8, 9]])},
    ):
        with pytest.raises(ValueError):
            check_permutations(sym, bad)
        moved = apply_permutations(state, sym, bad, check=False)
        assert relative_difference(y, outputs(net, moved, x)) > 1e-3
    with pytest.raises(ValueError, match="not a permutation"):
        apply_permutations(state, sym, {**perms, "fc1": torch.tensor([[0, 0, 1]])})
