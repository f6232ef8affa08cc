"""Canonical form (docs/maths.md, section 2): same function, invariant to every symmetry
(permutations, scales and the softmax's whole additive group W_L + 1 v^T, b + c 1), records
what it did."""

import functools

import numpy as np
import pytest
import torch
from symmetry_checks import outputs, relative_difference

from symbnn.cli import main as cli_main
from symbnn.models import build_model
from symbnn.store import open_store, write_store
from symbnn.symmetry import (
    apply_permutations,
    apply_scales,
    canonicalize,
    random_output_shifts,
    random_permutations,
    random_scales,
    shift_output,
    unit_groups,
)
from symbnn.symmetry.canonical import SYMMETRY
from symbnn.symmetry.canonical_store import canonicalize_store
from symbnn.symmetry.testing import random_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CASES = {
    "mlp221": ({"name": "mlp", "widths": [2, 2, 1]}, (2,), 40),
    "mlp": ({"name": "mlp", "widths": [7, 6, 5, 3]}, (7,), 40),
    "optunet": ({"name": "optunet"}, (1, 28, 28), 12),
}
OPTIONS = [("unitnorm", "max"), ("unitnorm", "first"), ("unitstd", "max"), ("unitstd", "first")]
MORE = {"resnet18": ({"name": "resnet18", "num_classes": 10}, (3, 8, 8), 1)}


@functools.cache
def setup(name):
    spec, shape, n = {**CASES, **MORE}[name]
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return (
        spec,
        unit_groups(spec),
        random_state(spec, n, seed=2),
        x,
        build_model(spec).double().eval(),
    )


def random_symmetry(sym, state, seed, spread=1.0):
    """Each of the n networks moved by its own random permutation set, scale set and softmax
    shift (W_L + 1 v^T, b + c 1)."""
    n = next(iter(state.values())).shape[0]
    g = torch.Generator().manual_seed(seed)
    moved = apply_permutations(state, sym, random_permutations(sym, n, g))
    moved = apply_scales(moved, sym, random_scales(sym, n, g, spread=spread))
    if sym.softmax_dof:
        bias, weight = random_output_shifts(sym, n, g)
        moved = shift_output(moved, sym, bias, None if weight is None else 3 * weight)
    return moved


def assert_states_close(a, b, names, rtol=1e-9):
    for name in names:
        scale = a[name].abs().max().clamp_min(1e-30)
        assert float((a[name] - b[name]).abs().max() / scale) < rtol, name


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("scale,key", OPTIONS)
def test_canonical_form_keeps_the_function_and_removes_symmetries(name, scale, key):
    spec, sym, state, x, net = setup(name)
    result = canonicalize(state, sym, scale=scale, key=key)
    y, z = outputs(net, state, x), outputs(net, result.state, x)
    if sym.output_bias:
        y, z = y.log_softmax(-1), z.log_softmax(-1)
    assert relative_difference(y, z) < 1e-5
    for seed in (10, 11):
        again = canonicalize(random_symmetry(sym, state, seed), sym, scale=scale, key=key)
        assert_states_close(result.state, again.state, sym.tensors)


@pytest.mark.parametrize("name", list(CASES))
def test_recorded_permutations_and_scales_rebuild_the_canonical_state(name):
    spec, sym, state, x, net = setup(name)
    result = canonicalize(state, sym)
    rebuilt = apply_permutations(apply_scales(state, sym, result.scales), sym, result.perms)
    n = len(next(iter(state.values())))
    if sym.softmax_dof:
        rebuilt = shift_output(rebuilt, sym, result.softmax_shift, result.softmax_weight_shift)
        assert result.softmax_shift.shape == (n,)
        assert result.softmax_weight_shift.shape == (n, sym.shapes[sym.output_weight][1])
        # The convention: every output-weight column sums to 0, the biases sum to 1.
        ones = torch.ones(n, dtype=torch.float64)
        torch.testing.assert_close(result.state[sym.output_bias].sum(1), ones)
        columns = result.state[sym.output_weight].sum(1)
        assert float(columns.abs().max()) < 1e-15 * sym.shapes[sym.output_weight][0]
    else:
        assert result.softmax_shift is None and result.softmax_weight_shift is None
    assert_states_close(result.state, rebuilt, sym.tensors, rtol=1e-14)
    # A single state dict gives the first network's canonical form, without a sample axis.
    single = canonicalize({k: v[0] for k, v in state.items()}, sym)
    assert all(torch.equal(single.state[k], result.state[k][0]) for k in state)
    assert all(torch.equal(single.perms[k], result.perms[k][0]) for k in result.perms)
    # Canonical rows have unit norm and sorted keys, descending, by the default key: the
    # paper's, the first incoming weight.
    assert SYMMETRY.key == "first"
    for g in sym.groups:
        rows = result.state[g.key.tensor].reshape(*result.state[g.key.tensor].shape[:2], -1)
        torch.testing.assert_close(
            rows.norm(dim=2), torch.ones(rows.shape[:2], dtype=torch.float64)
        )
        keys = rows[:, :, 0].reshape(rows.shape[0], g.blocks, g.block_width)
        assert (keys[:, :, :-1] >= keys[:, :, 1:]).all()


def probabilities(net, sym, state, x):
    y = outputs(net, state, x)
    return y.softmax(-1) if sym.softmax_dof else y


@pytest.mark.parametrize("name", [*CASES, *MORE])
def test_each_step_keeps_the_function_and_the_form_ignores_the_whole_group(name):
    # A random element of the group (permutations, scales, W_L + 1 v^T, b + c 1) ...
    spec, sym, state, x, net = setup(name)
    moved = random_symmetry(sym, state, seed=12)
    if sym.softmax_dof:
        assert not torch.allclose(moved[sym.output_weight].sum(1), state[sym.output_weight].sum(1))
    # ... and each step of its canonical form (scale, sort, softmax) keep the probabilities,
    result = canonicalize(moved, sym)
    scaled = apply_scales(moved, sym, result.scales)
    sorted_ = apply_permutations(scaled, sym, result.perms)
    steps = [moved, scaled, sorted_]
    if sym.softmax_dof:
        steps.append(shift_output(sorted_, sym, result.softmax_shift, result.softmax_weight_shift))
        assert_states_close(steps[-1], result.state, sym.tensors, rtol=1e-14)
    y = probabilities(net, sym, state, x)
    for step in steps:
        assert relative_difference(y, probabilities(net, sym, step, x)) < 1e-10
    # ... and the canonical form is the network's own.
    assert_states_close(canonicalize(state, sym).state, result.state, sym.tensors, rtol=1e-10)


def test_resnet18_canonical_form():
    spec = {"name": "resnet18", "num_classes": 10}
    sym, net = unit_groups(spec), build_model(spec).double().eval()
    state = random_state(spec, 1, seed=3)
    x = torch.randn(3, 3, 8, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    moved = random_symmetry(sym, state, seed=5, spread=0.5)
    for scale, key in (("unitstd", "first"), ("unitnorm", "max")):
        a, b = (
            canonicalize(state, sym, scale=scale, key=key),
            canonicalize(moved, sym, scale=scale, key=key),
        )
        assert_states_close(a.state, b.state, sym.tensors)
    assert (
        relative_difference(
            outputs(net, state, x).log_softmax(-1), outputs(net, a.state, x).log_softmax(-1)
        )
        < 1e-5
    )
    # Each BatchNorm-absorbed conv scale and each BatchNorm output scale is normalised.
    assert {"layer3.0.conv1", "layer3.0", "layer3", "layer3.0.downsample.0"} <= set(a.scales)
    gammas = torch.cat(
        [a.state[f"layer{s}.{b}.bn1.weight"] for s in range(1, 5) for b in range(2)], dim=1
    )
    torch.testing.assert_close(gammas.abs(), torch.ones_like(gammas))
    assert torch.equal(
        a.state["layer1.0.bn1.num_batches_tracked"], state["layer1.0.bn1.num_batches_tracked"]
    )


def test_dead_units_and_nan_weights_are_reported():
    spec, sym, state, x, net = setup("mlp")
    dead = {k: v.clone() for k, v in state.items()}
    dead["layers.1.weight"][3, 2] = 0.0  # sample 3, hidden unit 2 of layer 1: no incoming weights
    with pytest.raises(ValueError, match=r"layers.1: unit\(s\) \[2\] of sample\(s\) \[3\].*dead"):
        canonicalize(dead, sym)
    kept = canonicalize(dead, sym, on_dead="keep")
    assert kept.scales["layers.1"][3, 2] == 1.0
    assert (
        relative_difference(
            outputs(net, dead, x).log_softmax(-1), outputs(net, kept.state, x).log_softmax(-1)
        )
        < 1e-5
    )
    broken = {k: v.clone() for k, v in state.items()}
    broken["layers.0.bias"][5, 1] = float("nan")
    with pytest.raises(ValueError, match=r"layers.0.bias holds NaN.*\[5\]"):
        canonicalize(broken, sym)
    with pytest.raises(ValueError, match="key must be"):
        canonicalize(state, sym, key="median")


def test_unitstd_needs_two_incoming_weights():
    spec = {"name": "mlp", "widths": [1, 3, 2]}
    sym = unit_groups(spec)
    with pytest.raises(ValueError, match="one incoming weight"):
        canonicalize(random_state(spec, 2), sym, scale="unitstd")


def test_canonicalize_store_and_cli(tmp_path):
    spec = {"name": "optunet"}
    sym = unit_groups(spec)
    state = {k: v.float() for k, v in random_state(spec, 7, seed=6).items()}
    src = write_store(
        tmp_path / "in.zarr",
        state,
        {"seed": np.arange(7)},
        {"architecture": spec, "experiment": "t"},
    )
    canonicalize_store(
        src.path, tmp_path / "out.zarr", key="first", block_bytes=3 * 1500
    )  # blocks of 3
    out = open_store(tmp_path / "out.zarr")
    assert out.attrs["kind"] == "canonical" and out.attrs["canonical"]["key"] == "first"
    assert out.attrs["canonical"]["softmax_weight_centred"]
    assert out.n_samples == 7 and out.state_names == src.state_names
    assert out.read("conv2.weight").dtype == np.float32
    assert np.array_equal(out.info("seed"), np.arange(7))
    direct = canonicalize(state, sym, key="first")
    for name in sym.tensors:
        np.testing.assert_allclose(out.read(name), direct.state[name].numpy(), rtol=1e-6, atol=1e-7)
    for g in sym.groups:
        perm = out.info(f"perm.{g.name}")
        assert perm.dtype == np.int64 and perm.shape == (7, g.width)
    assert out.info("scale.fc1").shape == (7, 3) and out.info("softmax_shift").shape == (7,)
    assert out.info("softmax_weight_shift").shape == (7, 3)  # fc2's rows: fc1's 3 units
    np.testing.assert_allclose(out.read("fc2.weight").sum(1), 0, atol=1e-6)

    assert (
        cli_main(["canonicalize", str(src.path), str(tmp_path / "cli.zarr"), "--scale", "unitstd"])
        == 0
    )
    assert open_store(tmp_path / "cli.zarr").attrs["canonical"]["scale"] == "unitstd"
    assert (
        cli_main(["canonicalize", str(src.path), str(tmp_path / "cli.zarr")]) != 0
    )  # exists already


def test_store_blocks_are_chunk_aligned_and_cover_every_sample(tmp_path):
    from symbnn.symmetry.store_blocks import iter_state_blocks

    values = (
        np.random.default_rng(0).normal(size=(70, 300, 400)).astype(np.float32)
    )  # 480 kB a sample
    store = write_store(
        tmp_path / "b.zarr", {"w": values, "v": values[:, 0, :2].copy()}, {"seed": np.arange(70)}
    )
    chunk = store.state_array("w").chunks[0]
    assert 5 < chunk < 70
    reads = []
    read = store.state_dicts
    store.state_dicts = lambda rows: (reads.append(rows), read(rows))[1]
    per_sample = 300 * 400 * 4 + 2 * 4
    blocks = list(
        iter_state_blocks(store, block_bytes=5 * per_sample, read_bytes=chunk * per_sample)
    )
    assert all(r.start % chunk == 0 for r in reads) and len(reads) == 2  # each chunk read once
    assert max(b.stop - b.start for b, _ in blocks) == 5
    assert np.array_equal(np.concatenate([s["w"].numpy() for _, s in blocks]), values)
    assert [b.start for b, _ in blocks] == sorted(b.start for b, _ in blocks)
