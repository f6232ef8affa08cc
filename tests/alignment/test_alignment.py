import numpy as np
import polars as pl
import pytest
import torch

from symbnn.alignment import align_gaussian, align_state, weight_matching
from symbnn.alignment.interpolation import (
    barrier_table,
    gaussian_curve,
    grid,
    loss_barrier,
    network_curve,
)
from symbnn.cli import main
from symbnn.data.core import ImageData
from symbnn.store import open_store
from symbnn.symmetry import (
    apply_permutations,
    invert_permutations,
    random_permutations,
    unit_groups,
)
from symbnn.symmetry.testing import random_state

ARCHITECTURES = {
    "mlp": ({"name": "mlp", "widths": [6, 16, 12, 3]}, (1, 6, 1, 1)),
    "optunet": ({"name": "optunet"}, (1, 28, 28)),
    "resnet18": ({"name": "resnet18", "num_classes": 5}, (3, 8, 8)),
}


def _random_images(shape, n, classes, seed=0):
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, *shape), generator=g, dtype=torch.uint8)
    return ImageData(
        images,
        torch.randint(0, classes, (n,), generator=g),
        classes,
        (0.5,) * shape[0],
        (0.25,) * shape[0],
    )


def _single(spec, seed):
    return {k: v[0] for k, v in random_state(spec, 1, seed=seed, dtype=torch.float32).items()}


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_aligning_a_permuted_copy_recovers_the_permutation(name, one_torch_thread):
    spec, shape = ARCHITECTURES[name]
    if name == "mlp":
        shape = (1, 1, 6)  # MLP flattens: any image shape with 6 pixels
    sym = unit_groups(spec)
    a = _single(spec, seed=1)
    perms = {
        k: v[0] for k, v in random_permutations(sym, 1, torch.Generator().manual_seed(7)).items()
    }
    b = apply_permutations(a, sym, perms)
    aligned, result = align_state(a, b, sym)
    assert result.converged
    for g in sym.groups:  # the permutation found undoes the one applied
        assert torch.equal(result.perms[g.name], invert_permutations({"p": perms[g.name]})["p"]), (
            g.name
        )
    for k in a:
        assert torch.equal(aligned[k], a[k]), k
    # the objective reached is <A, A> over the tensors that drive the match, its maximum
    # (Cauchy-Schwarz); BatchNorm running statistics and untouched tensors (output bias) are out
    from symbnn.alignment.matching import _matched_axes

    norm = sum(float((a[k].double() ** 2).sum()) for k in _matched_axes(sym))
    assert not any(k.endswith(("running_mean", "running_var")) for k in _matched_axes(sym))
    assert result.objective_after == pytest.approx(norm, rel=1e-9)
    # zero barrier after alignment (a constant loss along the path, eval mode, no BatchNorm
    # reset); without alignment the path leaves the network's function
    data = {"test": _random_images(shape, 64, spec.get("num_classes", 10) if name != "mlp" else 3)}
    losses = {}
    for label, other in (("none", b), ("aligned", aligned)):
        losses[label] = np.array(
            network_curve(spec, a, other, grid(5), data, reset_bn=False)["loss"].to_list()
        )
    assert loss_barrier(grid(5), losses["aligned"])["barrier"] == pytest.approx(0.0, abs=1e-6)
    assert np.ptp(losses["aligned"]) < 1e-6
    assert np.ptp(losses["none"]) > 1e-4


MLP_MODEL = {"name": "mlp", "widths": [784, 32, 32, 10]}


def _trained_mlp(seed):
    from symbnn.data import load_dataset
    from symbnn.settings import Recipe
    from symbnn.train.loop import train_one

    train = load_dataset("digits", "train", "data").subset(
        torch.arange(0, 4000, 4)
    )  # the set is sorted by class
    recipe = Recipe(epochs=4, batch_size=32, lr=0.05, momentum=0.9)
    model, _ = train_one(MLP_MODEL, recipe, train, seed)
    return {k: v.detach() for k, v in model.state_dict().items()}, train


def test_alignment_lowers_the_barrier_between_independently_trained_mlps(one_torch_thread):
    from symbnn.data import load_dataset

    spec = MLP_MODEL
    test = load_dataset("digits", "test", "data").subset(torch.arange(0, 1000, 2))
    for seeds in ((0, 1), (2, 3)):
        (a, _), (b, _) = _trained_mlp(seeds[0]), _trained_mlp(seeds[1])
        aligned, result = align_state(a, b, unit_groups(spec))
        assert result.objective_after > result.objective_before
        barriers = {}
        for label, other in (("none", b), ("aligned", aligned)):
            curve = network_curve(spec, a, other, grid(11), {"test": test})
            barriers[label] = loss_barrier(curve["t"].to_list(), curve["loss"].to_list())["barrier"]
        assert barriers["none"] > 0.2, (seeds, barriers)
        assert barriers["aligned"] < 0.5 * barriers["none"], (seeds, barriers)


def test_gaussian_alignment_moves_means_and_stds_together(one_torch_thread):
    spec = {"name": "mlp", "widths": [3, 8, 5, 2]}
    sym = unit_groups(spec)
    mean_a = _single(spec, 2)
    g = torch.Generator().manual_seed(3)
    std_a = {k: 0.05 + 0.1 * torch.rand(v.shape, generator=g) for k, v in mean_a.items()}
    perms = {
        k: v[0] for k, v in random_permutations(sym, 1, torch.Generator().manual_seed(9)).items()
    }
    mean_b, std_b = apply_permutations(mean_a, sym, perms), apply_permutations(std_a, sym, perms)
    for use_std in (True, False):
        m, s, result = align_gaussian(mean_a, std_a, mean_b, std_b, sym, use_std=use_std)
        assert all(torch.equal(m[k], mean_a[k]) and torch.equal(s[k], std_a[k]) for k in mean_a)
    # the std channel counts: identical means, stds that only a permutation tells apart
    flat = {k: torch.zeros_like(v) for k, v in mean_a.items()}
    _, s, _ = align_gaussian(flat, std_a, flat, std_b, sym)
    assert all(torch.equal(s[k], std_a[k]) for k in std_a)
    x = (torch.randn(50, 3, generator=g), torch.randint(0, 2, (50,), generator=g))
    curve = gaussian_curve(spec, mean_a, std_a, m, s, grid(3), {"test": x}, samples=4)
    assert loss_barrier(curve["t"].to_list(), curve["loss"].to_list())["barrier"] == pytest.approx(
        0, abs=1e-9
    )
    assert set(curve.columns) == {"t", "split", "loss", "accuracy", "nll"}


def test_optunet_block_permutations_are_found_through_the_coupling(one_torch_thread):
    spec = {"name": "optunet"}
    sym = unit_groups(spec)
    a = _single(spec, 4)
    for seed in range(4):  # several draws: both block orders of the grouped conv occur
        perms = {
            k: v[0]
            for k, v in random_permutations(sym, 1, torch.Generator().manual_seed(seed)).items()
        }
        result = weight_matching(sym, [(a, apply_permutations(a, sym, perms))])
        assert all(torch.equal(result.perms[k], perms[k].argsort()) for k in perms)


def test_loss_barrier_definitions():
    t = [0.0, 0.5, 1.0]
    out = loss_barrier(t, [1.0, 3.0, 2.0])
    assert out["barrier"] == pytest.approx(3.0 - 1.5) and out["t_max"] == 0.5
    assert out["barrier_midpoint"] == pytest.approx(3.0 - 1.5)
    assert loss_barrier(t, [1.0, 1.2, 3.0])["barrier"] == pytest.approx(0.0)  # below the chord
    assert loss_barrier(t, [1.0, 1.2, 3.0])["barrier_midpoint"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="endpoints"):
        loss_barrier([0.0, 0.5], [1.0, 2.0])
    table = barrier_table(
        pl.DataFrame(
            {
                "alignment": ["x"] * 3,
                "split": ["test"] * 3,
                "t": t,
                "loss": [1.0, 3.0, 2.0],
                "accuracy": [0.9, 0.5, 0.8],
            }
        )
    )
    assert table["barrier"][0] == pytest.approx(1.5) and table["accuracy_min"][0] == 0.5


def test_weight_matching_rejects_stacks_and_empty_input():
    spec = {"name": "mlp", "widths": [3, 4, 2]}
    sym = unit_groups(spec)
    stack = random_state(spec, 2)
    with pytest.raises(ValueError, match="one network at a time"):
        weight_matching(sym, [(stack, stack)])
    with pytest.raises(ValueError, match="at least one"):
        weight_matching(sym, [])


def test_cli_align_writes_an_aligned_store(optunet_store, tmp_path, capsys, one_torch_thread):
    a, state = optunet_store("a.zarr", n=2)
    sym = unit_groups({"name": "optunet"})
    perms = random_permutations(sym, 3, torch.Generator().manual_seed(1))
    reference = {k: v[0] for k, v in state.items()}
    b_state = apply_permutations({k: v[[0, 0, 0]] for k, v in state.items()}, sym, perms)
    b, _ = optunet_store("b.zarr", n=3)
    from symbnn.store import write_store

    b = write_store(tmp_path / "bp.zarr", b_state, {n: b.info(n) for n in b.info_names}, b.attrs)
    out = tmp_path / "aligned.zarr"
    assert main(["align", str(a.path), str(b.path), str(out)]) == 0
    assert "3 samples aligned to row 0 of A" in capsys.readouterr().out
    aligned = open_store(out)
    assert aligned.attrs["kind"] == "aligned" and aligned.n_samples == 3
    for i in range(3):
        row = aligned.state_dict(i)
        assert all(torch.equal(row[k], reference[k]) for k in reference)
    assert np.array_equal(aligned.info("align_perm.conv2"), perms["conv2"].argsort(1).numpy())
    assert np.array_equal(aligned.info("seed"), b.info("seed"))
    assert main(["align", str(a.path), str(b.path), str(out)]) == 1  # refuses to overwrite
    assert "refusing to overwrite" in capsys.readouterr().err
    assert (
        main(["align", str(a.path), str(b.path), str(tmp_path / "x.zarr"), "--reference", "5"]) == 1
    )
    assert "row 5 is out of range" in capsys.readouterr().err


def test_cli_barrier_prints_both_alignments(optunet_store, tmp_path, capsys, one_torch_thread):
    import json

    a, state = optunet_store(
        "a.zarr",
        n=2,
        attrs={"data": {"train": "digits", "ood": "natural_patches", "test_limit": 200}},
    )
    curves = tmp_path / "curves.csv"
    assert (
        main(
            [
                "barrier",
                str(a.path),
                str(a.path),
                "--row-b",
                "1",
                "--points",
                "5",
                "--split",
                "test",
                "--json",
                "--curves",
                str(curves),
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    assert {r["alignment"] for r in rows} == {"none", "weight_matching"}
    assert all(r["split"] == "test" and r["barrier"] >= 0 for r in rows)
    assert pl.read_csv(curves).height == 2 * 5
    # same network on both sides: nothing to align, zero barrier
    assert main(["barrier", str(a.path), str(a.path), "--points", "3", "--split", "test"]) == 0
    assert "| weight_matching | test  | 0.0" in capsys.readouterr().out
    b, _ = optunet_store("nodata.zarr", n=1, attrs={"data": None})
    assert main(["barrier", str(b.path), str(a.path)]) == 1
    assert "attribute 'data'" in capsys.readouterr().err
