"""ResNet-20 with filter response normalisation and SiLU (the released cifar10-resnet20-frn-silu
networks): permutation symmetries only, and every symmetry stage handles that."""

import numpy as np
import pytest
import torch
from symmetry_checks import outputs, relative_difference
from torch.nn import functional as F

from symbnn.alignment.matching import align_state
from symbnn.checkpoints import import_checkpoints
from symbnn.checkpoints.bundles import as_released, write_bundle
from symbnn.models import build_model
from symbnn.store import write_store
from symbnn.symmetry import canonicalize, unit_groups
from symbnn.symmetry.canonical_store import canonicalize_store
from symbnn.symmetry.counting import total_symmetries
from symbnn.symmetry.minmass import NOTHING_TO_RESCALE, min_mass, minmass_table
from symbnn.symmetry.operators import apply_permutations, random_permutations
from symbnn.symmetry.testing import random_state

RESNET20 = {"name": "resnet20_frn_silu", "num_classes": 10}


@pytest.fixture(scope="module")
def sym():
    return unit_groups(RESNET20)


@pytest.fixture(scope="module")
def states():
    """Two random networks (FRN tau, beta, gamma drawn at random too), float64."""
    state = random_state(RESNET20, 2, seed=0)
    g = torch.Generator().manual_seed(1)
    for name, t in state.items():
        if name.endswith((".tau", ".beta", ".gamma")):
            state[name] = t + 0.3 * torch.randn(t.shape, generator=g, dtype=t.dtype)
    return state


def images():
    return torch.rand(4, 3, 32, 32, generator=torch.Generator().manual_seed(2), dtype=torch.float64)


def test_structure_has_permutations_and_no_scales(sym):
    # three residual streams (16, 32, 64 channels) and the inner channels of nine blocks
    assert sorted(g.width for g in sym.groups) == [16] * 4 + [32] * 4 + [64] * 4
    assert sym.scale_groups == ()
    assert total_symmetries(sym)["scaling_dof"] == 0
    assert total_symmetries(sym)["log10_permutations"] > 500
    reasons = " ".join(reason for _, reason in sym.limits)
    assert "silu is not positively homogeneous" in reasons
    assert "filter response normalisation fixes each channel's scale" in reasons
    frn = [a for g in sym.groups for a in g.axes if a.tensor == "layer2.0.bn1.gamma"]
    assert len(frn) == 1 and frn[0].axis == 1


def test_permutations_keep_the_function(sym, states):
    perms = random_permutations(sym, 2, torch.Generator().manual_seed(3))
    moved = apply_permutations(states, sym, perms)
    assert (
        relative_difference(outputs(RESNET20, states, images()), outputs(RESNET20, moved, images()))
        < 1e-12
    )
    assert not torch.equal(moved["layer3.1.conv1.weight"], states["layer3.1.conv1.weight"])


def test_canonical_form_is_permutation_invariant_and_keeps_the_predictions(sym, states):
    perms = random_permutations(sym, 2, torch.Generator().manual_seed(4))
    moved = apply_permutations(states, sym, perms)
    a = canonicalize(states, sym, scale="unitnorm", key="first")
    b = canonicalize(moved, sym, scale="unitnorm", key="first")
    for name in a.state:
        torch.testing.assert_close(a.state[name], b.state[name], rtol=0, atol=1e-12)
    # nothing is rescaled; only the softmax's additive freedom moves the logits
    assert all(torch.equal(s, torch.ones_like(s)) for s in a.scales.values())
    before = F.softmax(outputs(RESNET20, states, images()), dim=-1)
    after = F.softmax(outputs(RESNET20, a.state, images()), dim=-1)
    assert relative_difference(before, after) < 1e-12


def test_min_mass_has_nothing_to_rescale_and_says_so(sym, states, tmp_path):
    result = min_mass(states, sym)
    assert result.scales == {} and result.status == [NOTHING_TO_RESCALE] * 2
    assert torch.equal(result.mass_after, result.mass_before)
    assert result.solver_converged.all()
    for name in states:
        assert torch.equal(result.state[name], states[name])
    store = write_store(
        tmp_path / "r20.zarr",
        {k: v.float() for k, v in states.items()},
        attrs={"architecture": RESNET20},
    )
    table = minmass_table(store.path)
    assert table["scaling_dof"].to_list() == [0, 0]
    assert (table["mass_after"] == table["mass_before"]).all()
    assert (table["log_scale_max"] == 0).all()
    canonicalize_store(store.path, tmp_path / "canonical.zarr")


def test_alignment_undoes_a_permutation(sym, states):
    one = {k: v[0] for k, v in states.items()}
    perms = random_permutations(sym, 1, torch.Generator().manual_seed(5))
    moved = apply_permutations(one, sym, {k: v[0] for k, v in perms.items()})
    aligned, _ = align_state(one, moved, sym)
    for name in one:
        torch.testing.assert_close(aligned[name], one[name], rtol=0, atol=0)


def test_torch_uncertainty_resnet20_frn_silu_imports_with_the_same_logits(tmp_path):
    pytest.importorskip("torch_uncertainty", reason="TorchUncertainty is not installed")
    from torch_uncertainty.layers.filter_response_norm import FilterResponseNorm2d
    from torch_uncertainty.models.classification.resnet import resnet

    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        model = resnet(
            in_channels=3,
            num_classes=10,
            arch=20,
            style="cifar",
            normalization_layer=FilterResponseNorm2d,
            activation_fn=F.silu,
        ).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.1 * torch.randn_like(p))
        models.append(model)
    nets = [(f"net{i}", as_released(m.state_dict())) for i, m in enumerate(models)]
    bundle = write_bundle(tmp_path / "cifar10-resnet20-frn-silu-0-1.tgz", nets, compresslevel=1)
    store = import_checkpoints(bundle, tmp_path / "out.zarr", "cifar10-resnet20-frn-silu")
    assert store.attrs["architecture"] == RESNET20
    x = torch.rand(3, 3, 32, 32)
    for row, model in enumerate(models):
        model.load_state_dict(
            {k: torch.as_tensor(v.astype(np.float32)) for k, v in nets[row][1].items()}
        )
        ours = build_model(RESNET20).eval()
        ours.load_state_dict(store.state_dict(row))
        with torch.no_grad():
            torch.testing.assert_close(ours(x), model(x), rtol=1e-5, atol=1e-5)
