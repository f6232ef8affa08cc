"""Engine steps on structures that slice tensors (torchvision's DenseNet-121: concatenations;
VGG11-bn: a 7 x 7 map flattened into a linear layer): the canonical form, min-mass, weight
matching and the canonical store take the plain view themselves, and return states in the
model's own layout. float64, eval mode, random BatchNorm statistics, 32 x 32 inputs."""

import functools

import numpy as np
import pytest
import torch
import torchvision
from symmetry_checks import random_module_state, relative_difference, small_vgg11_bn

from symbnn import api
from symbnn.alignment.matching import align_state, dense_state
from symbnn.store import open_store, write_store
from symbnn.symmetry import apply_scales, canonicalize, centre_softmax, random_scales, symmetry_of
from symbnn.symmetry.canonical_store import canonicalize_store
from symbnn.symmetry.minmass import min_mass, minmass_table

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BUILD = {
    "densenet121": lambda: torchvision.models.densenet121(weights=None, num_classes=10),
    "vgg11_bn": small_vgg11_bn,
}


@functools.cache
def case(name):
    torch.manual_seed(0)
    model = BUILD[name]().double().eval()
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    sym = symmetry_of(model, x)
    return model, sym, x, random_module_state(model, seed=2)


def probabilities(model, state, x):
    model.load_state_dict(state)
    with torch.no_grad():
        return model(x).softmax(-1)


def assert_close(a, b, names, rtol):
    for t in names:
        gap = torch.sub(a[t], b[t]).abs_().max()
        assert float(gap / a[t].abs().max().clamp_min(1e-30)) < rtol, t


@pytest.mark.parametrize("name", list(BUILD))
def test_canonical_form(name):
    model, sym, x, state = case(name)
    assert not sym.is_plain and sym.output_weight in sym.plain.source.shapes
    # A random element of the whole group: permutations, scales, W_L + 1 v^T, b + c 1.
    moved = api.random_symmetry(state, sym, seed=3)
    first, second = canonicalize(state, sym), canonicalize(moved, sym)
    assert first.state.keys() == state.keys()  # the model's own layout
    assert_close(first.state, second.state, sym.tensors, rtol=1e-9)
    y = probabilities(model, state, x)
    assert relative_difference(y, probabilities(model, first.state, x)) < 1e-9
    columns = first.state[sym.output_weight].sum(0)
    assert float(columns.abs().max()) < 1e-14 * len(columns)
    # The same as scaling and sorting on the plain view by hand, then the softmax step.
    view = sym.plain
    by_hand = canonicalize(view.split(state), view.sym, softmax_shift=False)
    by_hand, _, _ = centre_softmax(view.join(by_hand.state), sym)
    assert_close(first.state, by_hand, sym.tensors, rtol=1e-14)
    via_api = api.canonicalize(state, sym)
    assert all(torch.equal(via_api.state[t], first.state[t]) for t in sym.tensors)


@pytest.mark.parametrize("name", list(BUILD))
def test_min_mass(name):
    model, sym, x, state = case(name)
    result = min_mass(state, sym)
    assert bool(result.solver_converged) and float(result.residual) < 1e-9
    assert float(result.mass_after) < float(result.mass_before)
    assert result.state.keys() == state.keys()
    mass = sum(float((result.state[t] ** 2).sum()) for t in sym.mass_tensors)
    assert mass == pytest.approx(float(result.mass_after), rel=1e-12)
    y = probabilities(model, state, x)
    assert relative_difference(y, probabilities(model, result.state, x)) < 1e-9
    # Permutations and the scales min-mass optimises over (not the BatchNorm-absorbed ones,
    # which the mass is not invariant to) do not move the optimum.
    moved = api.random_symmetry(state, sym, seed=4, scale=False, shift=False)
    free = {k: v for k, v in random_scales(sym, 1).items() if not sym.scale_index[k].absorbed_by_bn}
    again = min_mass(apply_scales(moved, sym, {k: v[0] for k, v in free.items()}), sym)
    assert float(again.mass_after) == pytest.approx(float(result.mass_after), rel=1e-9)


@pytest.mark.parametrize("name", list(BUILD))
def test_weight_matching(name):
    model, sym, x, state = case(name)
    shuffled = api.random_symmetry(state, sym, seed=5, scale=False, shift=False)
    reference = dense_state(state, sym)  # prepared once, in the plain view
    aligned, result = align_state(reference, shuffled, sym, max_sweeps=3)
    assert result.objective_after > result.objective_before
    assert aligned.keys() == shuffled.keys()
    for t in sym.tensors:
        assert torch.equal(aligned[t], state[t]), t


def test_canonical_store_and_minmass_table(tmp_path):
    model, sym, x, state = case("vgg11_bn")
    other = api.random_symmetry(state, sym, seed=6, scale=False)
    stack = {k: torch.stack([v, other[k]]) for k, v in state.items()}
    src = write_store(
        tmp_path / "in.zarr",
        {k: v.float().numpy() if v.is_floating_point() else v.numpy() for k, v in stack.items()},
        {"seed": np.arange(2)},
        {"experiment": "t"},  # no architecture attribute: a model symbnn does not build
    )
    canonicalize_store(src.path, tmp_path / "out.zarr", sym=sym)
    out = open_store(tmp_path / "out.zarr")
    assert out.info("softmax_weight_shift").shape == (2, 64)
    for t in sym.tensors:  # both networks share one canonical form (float32 store)
        a, b = out.read(t)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * np.abs(a).max())
    table = minmass_table(src.path, sym=sym)
    assert table["solver_converged"].all() and "max_abs_after.classifier.0.weight" in table.columns
    direct = min_mass({k: v.float().double() for k, v in stack.items()}, sym, return_state=False)
    np.testing.assert_allclose(table["mass_after"].to_numpy(), direct.mass_after, rtol=1e-9)
