"""The public API (symbnn.api) on modules, state dicts with specs, stacks, and structures that
slice tensors (a concatenation and a flattened map), against the engine it wraps."""

import re
from pathlib import Path

import pytest
import torch
from symmetry_checks import outputs, random_module_state, relative_difference
from torch import nn
from torch.nn import functional as F

from symbnn import api
from symbnn.models import build_model
from symbnn.symmetry import canonicalize, structure_differences, total_symmetries, unit_groups
from symbnn.symmetry.minmass import min_mass
from symbnn.symmetry.testing import random_state

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DOCS = Path(__file__).resolve().parents[1] / "docs" / "api.md"


class TinyDense(nn.Module):
    """A dense block in miniature: a concatenation read by BatchNorm, and a 7 x 2 x 2 map
    flattened into the classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.bn0 = nn.BatchNorm2d(4)
        self.grow = nn.Conv2d(4, 3, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(7)
        self.head = nn.Linear(7 * 2 * 2, 5)

    def forward(self, x):
        h = torch.relu(self.bn0(self.stem(x)))
        h = torch.cat([h, self.grow(h)], 1)
        h = F.adaptive_avg_pool2d(torch.relu(self.bn1(h)), 2)
        return self.head(h.flatten(1))


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    model = TinyDense().double().eval()
    model.load_state_dict(random_module_state(model, seed=1))
    x = torch.randn(3, 3, 6, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    return model, api.symmetry_of(model, x), x


def run(model, state, x):
    model.load_state_dict(state)
    with torch.no_grad():
        return model(x).log_softmax(-1)


def test_docs_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.DOTALL)
    assert blocks
    for code in blocks:
        exec(compile(code, str(DOCS), "exec"), {})
    assert "unit groups" in capsys.readouterr().out


def test_the_tiny_structure_slices_and_flattens(tiny):
    model, sym, _ = tiny
    assert not sym.is_plain and sym.limits == ()
    stem, grow = sym.group("stem"), sym.group("grow")
    head = {g.name: a for g in sym.groups for a in g.axes if a.tensor == "head.weight"}
    assert (head["stem"].offset, head["stem"].inner) == (0, 4)
    assert (head["grow"].offset, head["grow"].inner) == (16, 4)
    assert {a.offset for a in grow.axes if a.tensor.startswith("bn1.")} == {4}
    # bn0's output scale reaches both grow's columns and bn1's statistics.
    (shared,) = [s for s in stem.scales if s.name == "bn0"]
    assert {a.role for a in shared.axes} == {"bn_weight", "bn_bias", "out", "bn_mean", "bn_var"}
    assert sym.plain.sym.is_plain


def test_symmetry_of_accepts_modules_specs_and_structures():
    spec = {"name": "optunet"}
    sym = api.symmetry_of(spec)
    assert sym.architecture == spec
    assert structure_differences(sym, unit_groups(spec)) == []
    assert api.symmetry_of(sym) is sym
    with pytest.raises(TypeError):
        api.symmetry_of("optunet")
    with pytest.raises(ValueError, match="does not say which network"):
        api.canonicalize(build_model(spec).state_dict())


def test_random_symmetry_moves_each_network_of_a_stack(tiny):
    spec = {"name": "optunet"}
    state = random_state(spec, 3, seed=4)
    moved, transform = api.random_symmetry(state, spec, seed=5, return_transform=True)
    assert transform["perms"]["conv2"].shape == (3, 10) and transform["shift"].shape == (3,)
    assert transform["weight_shift"].shape == (3, 3)  # fc2's rows: fc1's 3 units
    x = torch.randn(4, 1, 28, 28, dtype=torch.float64)
    y, z = outputs(spec, state, x).log_softmax(-1), outputs(spec, moved, x).log_softmax(-1)
    assert relative_difference(y, z) < 1e-9
    assert not torch.equal(moved["fc1.weight"][0], moved["fc1.weight"][1])

    model, sym, x = tiny
    state = model.state_dict()
    alone = api.random_symmetry(model, sym, seed=6, scale=False, shift=False)
    assert torch.equal(alone["head.bias"], state["head.bias"])  # no shift asked for
    torch.testing.assert_close(alone["head.weight"].sum(1), state["head.weight"].sum(1))  # no v
    assert alone._metadata == state._metadata  # module versions, for load_state_dict
    assert relative_difference(run(model, state, x), run(model, alone, x)) < 1e-12


def test_canonical_form_of_a_sliced_structure(tiny):
    model, sym, x = tiny
    state = {k: v.clone() for k, v in model.state_dict().items()}
    first = api.canonicalize(state, sym)
    second = api.canonicalize(api.random_symmetry(state, sym, seed=7), sym)
    assert first.state.keys() == state.keys()
    for t in sym.tensors:
        assert torch.allclose(first.state[t], second.state[t], rtol=1e-9, atol=1e-12), t
    assert relative_difference(run(model, state, x), run(model, first.state, x)) < 1e-9
    # The engine takes the plain view itself: the API adds nothing but the state's metadata.
    engine = canonicalize(state, sym)
    assert all(torch.equal(engine.state[t], first.state[t]) for t in sym.tensors)
    assert float(first.state["head.weight"].sum(0).abs().max()) < 1e-15
    assert first.softmax_weight_shift.shape == (28,)


def test_canonical_form_of_a_stack_matches_the_engine():
    spec = {"name": "optunet"}
    state = random_state(spec, 4, seed=8)
    ours = api.canonicalize(state, spec, key="first")
    engine = canonicalize(state, unit_groups(spec), key="first")
    for name in engine.state:
        assert torch.allclose(ours.state[name], engine.state[name], rtol=1e-10, atol=1e-14)


def test_min_mass_matches_the_engine_and_keeps_the_function(tiny):
    spec = {"name": "mlp", "widths": [6, 5, 4, 3]}
    state = random_state(spec, 3, seed=9)
    ours, engine = api.min_mass(state, spec), min_mass(state, unit_groups(spec))
    assert torch.allclose(ours.mass_after, engine.mass_after, rtol=1e-9)

    model, sym, x = tiny
    state = {k: v.clone() for k, v in model.state_dict().items()}
    result = api.min_mass(model, sym)
    assert float(result.mass_after) < float(result.mass_before) and bool(result.solver_converged)
    assert {k: v.shape for k, v in result.state.items()} == {k: v.shape for k, v in state.items()}
    assert relative_difference(run(model, state, x), run(model, result.state, x)) < 1e-9
    # The min-mass network is a fixed point: its own min-mass moves nothing.
    again = api.min_mass(result.state, sym)
    assert float(again.mass_after) == pytest.approx(float(result.mass_after), rel=1e-9)


def test_align_undoes_a_permutation(tiny):
    model, sym, _ = tiny
    state = {k: v.clone() for k, v in model.state_dict().items()}
    shuffled = api.random_symmetry(state, sym, seed=10, scale=False, shift=False)
    assert not torch.equal(shuffled["bn1.weight"], state["bn1.weight"])
    aligned, result = api.align(model, shuffled, sym)
    assert result.converged and result.objective_after > result.objective_before
    for t in sym.tensors:
        assert torch.equal(aligned[t], state[t]), t


def test_count_symmetries(tiny):
    _, sym, _ = tiny
    counts = api.count_symmetries(sym)
    assert counts["softmax_shift"] and len(counts["groups"]) == 2
    assert counts["softmax_dof"] == 7 * 2 * 2 + 1  # head.weight's columns and head.bias
    assert counts["log10_permutations"] == pytest.approx(
        total_symmetries(sym)["log10_permutations"]
    )
    # stem: conv (absorbed by bn0), bn0 (shared), bn1[0:4]; grow: conv (absorbed), bn1[4:7]
    assert counts["scaling_dof"] == 4 * 3 + 3 * 2
    assert counts["bn_scaling_dof"] == 4 + 3


def test_plain_view_round_trip(tiny):
    model, sym, _ = tiny
    view = sym.plain
    single = model.state_dict()
    stacked = {k: torch.stack([v, v + 1]) for k, v in single.items()}
    for state in (single, stacked):
        split = view.split(state)
        assert "head.weight" not in split and "head.weight[16:28]" in split
        assert split["head.weight[16:28]"].shape[-2:] == (3, 4)
        back = view.join(split)
        assert back.keys() == state.keys()
        assert all(torch.equal(back[k], state[k]) for k in state)
