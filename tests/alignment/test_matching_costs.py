"""Weight matching's fast cost bookkeeping (float32 GEMMs, kept and corrected products, groups
skipped when nothing around them moved, gains checked against rounding) against the plain
algorithm: float64 coordinate descent that rebuilds every cost matrix at every step."""

import numpy as np
import pytest
import torch
from scipy.optimize import linear_sum_assignment

from symbnn.alignment import align_state, weight_matching
from symbnn.alignment.matching import _matched_axes, _Problem, _Term, dense_state
from symbnn.models import build_model
from symbnn.symmetry import apply_permutations, random_permutations, unit_groups
from symbnn.symmetry.structure import topological_group_order
from symbnn.symmetry.testing import random_state


def reference_matching(sym, a, b, max_sweeps=100):
    """The plain algorithm (module docstring of symbnn.alignment.matching), in float64."""
    plain = sym.plain.sym
    assert all(g.blocks == 1 for g in plain.groups) and not plain.couplings
    big_a = {k: v.double() for k, v in dense_state(a, sym).items()}
    big_b = {k: v.double() for k, v in dense_state(b, sym).items()}
    axes = _matched_axes(plain)
    perms = {g.name: torch.arange(g.width) for g in plain.groups}

    def permuted(name, skip):
        t = big_b[name]
        for axis, group in axes[name]:
            if group != skip:
                t = t.index_select(axis, perms[group])
        return t

    current = float(sum((big_a[n] * permuted(n, None)).sum() for n in axes))
    for _ in range(max_sweeps):
        changed = False
        for g in topological_group_order(plain):
            cost = torch.zeros(g.width, g.width, dtype=torch.float64)
            for name, owned in axes.items():
                for axis, owner in owned:
                    if owner == g.name:
                        left = big_a[name].movedim(axis, 0).reshape(g.width, -1)
                        right = permuted(name, g.name).movedim(axis, 0).reshape(g.width, -1)
                        cost += left @ right.T
            cost = cost.numpy()
            _, new = linear_sum_assignment(cost, maximize=True)
            rows = np.arange(g.width)
            gain = cost[rows, new].sum() - cost[rows, perms[g.name].numpy()].sum()
            if gain > 1e-12 * max(1.0, abs(current)):
                perms[g.name], current, changed = torch.from_numpy(new), current + gain, True
        if not changed:
            break
    return perms


def _single(spec, seed, dtype):
    return {k: v[0] for k, v in random_state(spec, 1, seed=seed, dtype=dtype).items()}


def _related_pair(spec, dtype, seed=0, noise=0.7):
    """A and B = a permuted A plus noise: a matching problem with a clear but imperfect
    answer, like two trained networks."""
    sym = unit_groups(spec)
    a = _single(spec, seed, dtype)
    g = torch.Generator().manual_seed(seed + 1)
    perms = {k: v[0] for k, v in random_permutations(sym, 1, g).items()}
    b = apply_permutations(a, sym, perms)
    b = {
        k: v + noise * v.std() * torch.randn(v.shape, generator=g, dtype=v.dtype)
        for k, v in b.items()
    }
    return sym, a, b


SPECS = {
    "mlp": {"name": "mlp", "widths": [20, 48, 32, 5]},
    "resnet20": {"name": "resnet20_frn_silu", "num_classes": 5, "width": 4},
}


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("noise", [0.3, 3.0])
def test_float64_matching_takes_the_plain_algorithms_steps(name, noise, one_torch_thread):
    sym, a, b = _related_pair(SPECS[name], torch.float64, noise=noise)
    want = reference_matching(sym, a, b)
    got = weight_matching(sym, [(a, b)])
    assert got.converged
    for group in want:
        assert torch.equal(got.perms[group], want[group]), group


@pytest.mark.parametrize("name", list(SPECS))
@pytest.mark.parametrize("seed", range(3))
def test_float32_matching_is_no_worse_than_the_plain_algorithm(name, seed, one_torch_thread):
    sym, a, b = _related_pair(SPECS[name], torch.float32, seed=seed, noise=1.0)
    want = reference_matching(sym, a, b)
    aligned, got = align_state(a, b, sym)
    plain = apply_permutations(b, sym, want)

    def distance(other):
        return sum(float((a[k].double() - other[k].double()).square().sum()) for k in a)

    assert got.converged and got.objective_after > got.objective_before
    assert distance(aligned) <= distance(plain) * (1 + 1e-7)


@pytest.mark.parametrize("max_sweeps", [1, 100])
def test_aligned_resnet_computes_the_same_function(max_sweeps, one_torch_thread):
    spec = {"name": "resnet18", "num_classes": 5}
    a, b = _single(spec, 0, torch.float32), _single(spec, 1, torch.float32)  # random BatchNorm
    aligned, result = align_state(a, b, unit_groups(spec), max_sweeps)
    assert result.objective_after > result.objective_before
    x = torch.randn(4, 3, 16, 16, generator=torch.Generator().manual_seed(2))
    model_b, permuted = build_model(spec).eval(), build_model(spec).eval()
    model_b.load_state_dict(b)
    permuted.load_state_dict(aligned)
    with torch.no_grad():
        y, y_aligned = model_b(x), permuted(x)
    assert float((y_aligned - y).abs().max()) <= 1e-5 * float(y.abs().max())


def test_kept_products_are_corrected_exactly():
    """A product corrected over the slices of the units that moved equals one rebuilt."""
    g = torch.Generator().manual_seed(3)
    a, b = (
        torch.randn(6, 9, 3, generator=g, dtype=torch.float64),
        torch.randn(6, 9, 3, generator=g, dtype=torch.float64),
    )
    term, fresh = _Term(a, b, ((1, "in"),)), _Term(a, b, ((1, "in"),))
    perm = torch.randperm(9, generator=g)
    term.part({"in": perm})
    swapped = perm.clone()
    swapped[[2, 7]] = swapped[[7, 2]]  # two units move: a correction, not a rebuild
    corrected = term.part({"in": swapped}).clone()
    torch.testing.assert_close(corrected, fresh.part({"in": swapped}), rtol=0, atol=1e-12)
    # a permutation moving most units is rebuilt
    reversed_ = swapped.flip(0)
    torch.testing.assert_close(
        term.part({"in": reversed_}), fresh.part({"in": reversed_}), rtol=0, atol=1e-12
    )


def test_gains_on_rounding_noise_are_checked_exactly():
    """A swap whose float32 gain is within the rounding bound is summed again in float64."""
    spec = SPECS["mlp"]
    sym, a, _ = _related_pair(spec, torch.float32)
    problem = _Problem(sym.plain.sym, [(a, a)])
    perms = {g.name: torch.arange(g.width) for g in sym.groups}
    group = sym.groups[0]
    cost = problem.cost(group, perms)
    new = perms[group.name].clone()
    new[[0, 1]] = new[[1, 0]]
    exact = problem.gain(group, perms, new, cost)
    # B = A: the identity is the optimum; swapping units 0 and 1 loses sum_t |a_0 - a_1|^2
    terms = problem.terms[group.name]
    loss = sum(float((t.a[0].double() - t.a[1].double()).square().sum()) for t in terms)
    assert exact == pytest.approx(-loss, rel=1e-9)
    rows = torch.tensor([0, 1])
    bound = sum(t.error_bound(rows, new[rows], rows, len(terms)) for t in terms)
    noisy = cost.copy()
    noisy[0, 1] += loss + bound / 4  # reads as a small gain, within the rounding bound
    assert problem.gain(group, perms, new, noisy) == pytest.approx(-loss, rel=1e-9)
    noisy[0, 1] += 10 * bound  # well above it: taken from the matrix
    assert problem.gain(group, perms, new, noisy) == pytest.approx(10.25 * bound, abs=bound)
