"""The paper's further analyses: toy posterior, permutation frequency, marginals."""

import numpy as np
import polars as pl
import pytest
import torch
from scipy.stats import kendalltau
from symmetry_checks import outputs
from torch.nn import functional as F

from symbnn.analyses import marginals as mg
from symbnn.analyses import permutation_frequency as pf
from symbnn.analyses import toy
from symbnn.analyses.stacked_mlp import (
    dataset_loss,
    mlp_spec,
    train_stacked,
)
from symbnn.settings import Marginals, PermutationFrequency, Recipe, Toy, config_from_mapping
from symbnn.symmetry import apply_permutations, unit_groups
from symbnn.symmetry.testing import random_state
from symbnn.train.batches import batch_bounds, epoch_orders
from symbnn.train.mlp_stacked import stacked_forward
from symbnn.train.seeding import build_seeded_model, seed_generator

# ---------------------------------------------------------------- Kendall's tau


def test_tau_of_identical_permutations_is_one_and_of_reversed_minus_one():
    p = torch.randperm(12, generator=torch.Generator().manual_seed(0))
    assert float(pf.kendall_tau(p, p)) == 1.0
    assert float(pf.kendall_tau(torch.arange(12), torch.arange(12).flip(0))) == -1.0
    assert float(pf.kendall_tau(p, 11 - p)) == -1.0  # every pair in the opposite order


@pytest.mark.parametrize("n", [2, 3, 7, 40])
def test_tau_matches_scipy_on_random_permutations(n):
    g = torch.Generator().manual_seed(n)
    a = torch.stack([torch.randperm(n, generator=g) for _ in range(20)])
    b = torch.stack([torch.randperm(n, generator=g) for _ in range(20)])
    ours = pf.kendall_tau(a, b)  # batched over rows
    assert ours.shape == (20,)
    reference = [kendalltau(x.numpy(), y.numpy()).statistic for x, y in zip(a, b)]
    np.testing.assert_allclose(ours.numpy(), reference, atol=1e-12)


def test_tau_rejects_mismatched_shapes_and_is_nan_for_single_units():
    with pytest.raises(ValueError, match="shapes differ"):
        pf.kendall_tau(torch.arange(3), torch.arange(4))
    assert torch.isnan(pf.kendall_tau(torch.arange(1), torch.arange(1)))


def test_consecutive_tau_compares_unit_rankings():
    # sorted positions of 5 units; step 2 swaps the units in positions 0 and 1 (adjacent ranks)
    p0 = torch.tensor([3, 1, 4, 0, 2])
    p1 = p0[[1, 0, 2, 3, 4]]
    tau = pf.consecutive_tau(torch.stack([p0, p0, p1]))
    assert tau[0] == 1.0
    assert tau[1] == pytest.approx(1 - 2 / 10)  # one discordant pair out of 10
    r0, r1 = pf.ranks(p0), pf.ranks(p1)
    assert torch.equal(r0[p0], torch.arange(5))  # rank of the unit in position i is i
    assert tau[1] == pytest.approx(kendalltau(r0.numpy(), r1.numpy()).statistic)


def test_permutation_taus_see_a_swap_of_units_and_nothing_else(one_torch_thread):
    spec = mlp_spec([6, 5, 4, 3])
    state = random_state(spec, 1, seed=3)
    sym = unit_groups(spec)
    swap = {"layers.0": torch.tensor([[1, 0, 2, 3, 4]])}
    swapped = apply_permutations(state, sym, swap)
    series = {k: torch.cat([state[k], state[k], swapped[k]]) for k in state}
    taus = {
        k: pf.consecutive_tau(p).numpy() for k, p in pf.sorting_permutations(series, sym).items()
    }
    assert set(taus) == {(key, g) for key in pf.KEYS for g in ("layers.0", "layers.1")}
    for key in pf.KEYS:
        assert taus[(key, "layers.0")][0] == 1.0 and taus[(key, "layers.0")][1] < 1.0
        np.testing.assert_array_equal(taus[(key, "layers.1")], [1.0, 1.0])


def test_consecutive_tau_in_blocks_equals_tau_in_one_go(monkeypatch):
    g = torch.Generator().manual_seed(5)
    perms = torch.stack([torch.randperm(9, generator=g) for _ in range(11)])
    r = pf.ranks(perms)
    whole = pf.kendall_tau(r[:-1], r[1:])
    monkeypatch.setattr(pf, "TAU_BLOCK", 3 * 81)  # 3 snapshot pairs a block, the last one short
    torch.testing.assert_close(pf.consecutive_tau(perms), whole, rtol=0, atol=0)
    assert pf.consecutive_tau(perms[:1]).shape == (0,)


# ---------------------------------------------------------------- permutation frequency


def test_frequency_settings_shorten_the_recipe():
    base = Recipe(epochs=12, batch_size=64, lr=0.04, milestones=(2, 6, 9), gamma=0.5)
    shortened = pf.analysis_recipe(PermutationFrequency(epochs=4), base)
    assert shortened.milestones == (2,) and shortened.epochs == 4
    recipe = pf.analysis_recipe(PermutationFrequency(epochs=4, milestones=(1, 3)), base)
    assert recipe.milestones == (1, 3)
    assert pf.analysis_recipe(PermutationFrequency(), base) == base
    assert pf.milestone_steps(recipe, 130) == [3, 9]  # 3 steps per epoch (64 + 64 + 2)


def test_run_frequency_on_a_few_steps_of_optunet(one_torch_thread):
    from symbnn.data import load_dataset
    from symbnn.settings import Recipe

    train = load_dataset("digits", "train", "data").limited(128)
    recipe = Recipe(epochs=2, batch_size=32, lr=0.04, momentum=0.9, milestones=(1,), gamma=0.5)
    settings = PermutationFrequency(runs=2, every_k_steps=3)
    table, perms = pf.run_frequency({"name": "optunet"}, recipe, train, settings)
    # 8 steps: snapshots at 0, 3, 6 and the last step 8 -> 3 consecutive pairs per run, key, group
    assert table.height == 2 * 2 * 3 * 3
    assert sorted(set(table["step"].to_list())) == [3, 6, 8]
    assert set(table["group"].to_list()) == {"conv1", "conv2", "fc1"}
    assert table["tau"].is_between(-1, 1).all()
    assert table.filter(table["step"] == 8)["lr"].to_list() == [0.02] * 12
    curve = pf.mean_tau(table)
    assert curve.height == 2 * 3
    counts = pf.summary(table, pf.milestone_steps(recipe, len(train)))
    assert counts.height == 6 and (counts["pairs"] == 6).all()
    # the permutations behind the taus: 4 snapshots per run, key and group, each a permutation
    assert perms.height == 2 * 2 * 3 * 4
    fc1 = perms.filter(perms["group"] == "fc1")["perm"].to_list()
    assert all(sorted(p) == [0, 1, 2] for p in fc1)
    run0 = perms.filter(
        (perms["run"] == 0) & (perms["key"] == "max") & (perms["group"] == "conv2")
    ).sort("step")
    expected = pf.consecutive_tau(torch.tensor(run0["perm"].to_list())).numpy()
    got = table.filter(
        (table["run"] == 0) & (table["key"] == "max") & (table["group"] == "conv2")
    ).sort("step")
    np.testing.assert_array_equal(got["tau"].to_numpy(), expected)
    # the same seed retrains to the same snapshots
    again, _ = pf.run_frequency({"name": "optunet"}, recipe, train, settings)
    assert again.equals(table)


def test_snapshots_canonicalized_in_chunks_give_the_same_permutations(
    one_torch_thread, monkeypatch
):
    from symbnn.data import load_dataset

    train = load_dataset("digits", "train", "data").limited(96)
    recipe = Recipe(epochs=2, batch_size=16, lr=0.1, momentum=0.9)
    spec, sym = {"name": "optunet"}, unit_groups({"name": "optunet"})
    whole, steps, _, _ = pf.run_permutations(spec, recipe, train, 0, 2, sym)
    monkeypatch.setattr(pf, "CHUNK_BYTES", 1)  # one snapshot per chunk
    chunked, chunked_steps, _, _ = pf.run_permutations(spec, recipe, train, 0, 2, sym)
    np.testing.assert_array_equal(chunked_steps, steps)
    assert steps.tolist() == [0, 2, 4, 6, 8, 10, 12]
    assert whole.keys() == chunked.keys()
    for k in whole:
        assert whole[k].shape == (7, sym.group(k[1]).width) and torch.equal(chunked[k], whole[k])
    # some unit moved in 12 steps at lr 0.1, so the comparison is not between constants
    assert any((p != p[:1]).any() for p in whole.values())


RESNET = {"name": "resnet18", "num_classes": 3}
RESNET_GROUPS = {f"layer{s}{b}" for s in range(1, 5) for b in ("", ".0", ".1")}


def tiny_images(n, seed=0):
    """n random 3 x 8 x 8 images of 3 classes: enough for a few ResNet-18 steps."""
    from symbnn.data.core import ImageData

    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 3, 8, 8), dtype=torch.uint8, generator=g)
    return ImageData(images, torch.arange(n) % 3, 3, (0.5,) * 3, (0.25,) * 3, "noise")


def test_run_frequency_on_a_few_steps_of_resnet18(one_torch_thread, monkeypatch, tmp_path):
    train = tiny_images(12)
    recipe = Recipe(epochs=1, batch_size=4, lr=0.1, momentum=0.9)
    settings = PermutationFrequency(runs=1, every_k_steps=1)
    snapshot = sum(
        t.numel() * t.element_size() for t in build_seeded_model(RESNET, 0).state_dict().values()
    )
    monkeypatch.setattr(pf, "CHUNK_BYTES", 2 * snapshot)  # 4 snapshots in 2 chunks
    table, perms = pf.run_frequency(RESNET, recipe, train, settings, test=train, min_accuracy=0.0)
    # 3 steps: snapshots 0..3, 3 consecutive pairs per key and unit group
    assert set(table["group"].to_list()) == RESNET_GROUPS
    assert table.height == 2 * 12 * 3 and sorted(set(table["step"].to_list())) == [1, 2, 3]
    assert table["tau"].is_finite().all() and table["tau"].is_between(-1, 1).all()
    assert perms.height == 2 * 12 * 4
    widths = {"layer1": 64, "layer2": 128, "layer3": 256, "layer4": 512}
    for row in perms.filter(pl.col("key") == "first").iter_rows(named=True):
        assert sorted(row["perm"]) == list(range(widths[pf.stage_of(row["group"])]))
    # the curve: the mean over all 12 groups, and per stage over its stream and two blocks
    curve = pf.mean_tau(table)
    assert curve.height == 2 * 3
    stages = [f"mean_tau_layer{s}" for s in range(1, 5)]
    assert curve.columns[-4:] == stages
    step = table.filter((pl.col("key") == "max") & (pl.col("step") == 2))
    row = curve.filter((pl.col("key") == "max") & (pl.col("step") == 2)).row(0, named=True)
    assert row["mean_tau"] == pytest.approx(step["tau"].mean())
    layer3 = step.filter(pl.col("group").str.starts_with("layer3"))["tau"]
    assert layer3.len() == 3 and row["mean_tau_layer3"] == pytest.approx(layer3.mean())
    assert pf.summary(table, []).height == 2 * 12
    pf.frequency_figure(curve, [], tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0


def test_tau_is_exactly_one_while_the_weights_do_not_move(one_torch_thread):
    """At learning rate 0 no weight moves, though BatchNorm's running statistics do: no unit
    changes place."""
    recipe = Recipe(epochs=1, batch_size=4, lr=0.1)
    object.__setattr__(recipe, "lr", 0.0)  # not a valid setting: forced to freeze the weights
    sym = unit_groups(RESNET)
    perms, steps, _, model = pf.run_permutations(RESNET, recipe, tiny_images(8), 0, 1, sym)
    assert steps.tolist() == [0, 1, 2]
    initial = build_seeded_model(RESNET, 0)
    assert torch.equal(model.layer2[0].conv1.weight, initial.layer2[0].conv1.weight)
    assert not torch.equal(model.bn1.running_mean, initial.bn1.running_mean)
    assert {group for _, group in perms} == RESNET_GROUPS
    for p in perms.values():
        np.testing.assert_array_equal(pf.consecutive_tau(p).numpy(), [1.0, 1.0])


def test_stages_are_read_from_resnet_group_names_only():
    assert [pf.stage_of(g) for g in ("layer1", "layer2.0", "layer4.1")] == [
        "layer1",
        "layer2",
        "layer4",
    ]
    assert [pf.stage_of(g) for g in ("layers.0", "conv1", "fc1")] == [None, None, None]


# ---------------------------------------------------------------- stacked MLP trainer


@pytest.fixture(scope="module")
def toy_problem():
    return toy.toy_data(50, ((-2.0, -2.0), (2.0, 2.0)), seed=1)


def test_toy_data_is_separable_balanced_and_seeded(toy_problem):
    x, y = toy_problem
    assert x.shape == (100, 2) and int(y.sum()) == 50
    side = x.double() @ torch.tensor([4.0, 4.0], dtype=torch.float64)
    assert bool((side[y == 1] > 0).all()) and bool((side[y == 0] < 0).all())
    x2, _ = toy.toy_data(50, ((-2.0, -2.0), (2.0, 2.0)), seed=1)
    assert torch.equal(x, x2)
    with pytest.raises(ValueError, match="must differ"):
        toy.toy_data(5, ((1.0, 1.0), (1.0, 1.0)), seed=0)


def test_stacked_forward_matches_the_mlp_module():
    spec = mlp_spec([3, 4, 5, 1])
    state = random_state(spec, 4, seed=2)
    x = torch.randn(7, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(
        stacked_forward(state, x), outputs(spec, state, x), rtol=1e-12, atol=1e-12
    )


def seeded_states(widths, seeds, dtype=torch.float32):
    """The initial weights of each seed's MLP, stacked (name -> (K, *shape))."""
    states = [build_seeded_model(mlp_spec(widths), int(seed)).state_dict() for seed in seeds]
    return {name: torch.stack([s[name] for s in states]).to(dtype) for name in states[0]}


def train_reference(widths, inputs, targets, seed, *, epochs, batch_size, lr, loss, dtype):
    """One seed with an `nn.Module` and `torch.optim.SGD`: the oracle of the batched trainer
    on tabular data (same seeded initial weights and data order)."""
    model = build_seeded_model(mlp_spec(widths), int(seed)).to(dtype)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x = inputs.to(dtype)
    y = targets if loss == "cross_entropy" else targets.to(dtype)
    order_from = seed_generator(int(seed), "order")
    for _ in range(epochs):
        order = epoch_orders(len(x), [order_from])[0]
        for start, stop in batch_bounds(len(x), batch_size):
            idx = order[start:stop]
            out = model(x[idx])
            if loss == "cross_entropy":
                value = F.cross_entropy(out, y[idx])
            elif loss == "bce":
                value = F.binary_cross_entropy_with_logits(out[:, 0], y[idx])
            else:
                value = (out[:, 0] - y[idx]).square().mean()
            optimizer.zero_grad(set_to_none=True)
            value.backward()
            optimizer.step()
    return {name: t.detach().clone() for name, t in model.state_dict().items()}


@pytest.mark.parametrize(
    "loss, lr, widths",
    [("bce", 0.5, [2, 3, 1]), ("mse", 0.02, [2, 3, 1]), ("cross_entropy", 0.3, [2, 3, 2])],
)
def test_batched_trainer_agrees_with_the_one_network_loop(
    toy_problem, loss, lr, widths, one_torch_thread
):
    x, y = toy_problem
    y = y.long() if loss == "cross_entropy" else y
    seeds = [4, 9, 17]
    stacked = train_stacked(
        widths, x, y, seeds, epochs=2, batch_size=10, lr=lr, loss=loss, dtype=torch.float64
    )
    for k, seed in enumerate(seeds):
        alone = train_reference(
            widths, x, y, seed, epochs=2, batch_size=10, lr=lr, loss=loss, dtype=torch.float64
        )
        assert torch.isfinite(alone["layers.0.weight"]).all()
        initial = seeded_states(widths, [seed], torch.float64)["layers.0.weight"][0]
        assert not torch.equal(alone["layers.0.weight"], initial)
        for name, tensor in alone.items():
            torch.testing.assert_close(stacked[name][k], tensor, rtol=1e-10, atol=1e-12)


def test_toy_training_is_reproducible_per_seed(toy_problem, one_torch_thread):
    x, y = toy_problem
    settings = Toy(n_networks=6, first_seed=10, epochs=2)
    first, second = toy.train_toy(settings, x, y), toy.train_toy(settings, x, y)
    for name in first:
        assert torch.equal(first[name], second[name])
    # a seed's network does not depend on the seeds trained with it
    alone = toy.train_toy(Toy(n_networks=1, first_seed=13, epochs=2), x, y)
    for name in first:
        torch.testing.assert_close(alone[name][0], first[name][3], rtol=1e-6, atol=1e-6)
    # and different seeds give different networks
    assert not torch.equal(first["layers.0.weight"][0], first["layers.0.weight"][1])
    assert seeded_states([2, 2, 1], [10])["layers.0.weight"].shape == (1, 2, 2)


# ---------------------------------------------------------------- toy posterior


@pytest.fixture(scope="module")
def trained_toy(toy_problem):
    x, y = toy_problem
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    state = toy.train_toy(Toy(n_networks=64, epochs=3), x, y)
    torch.set_num_threads(before)
    return state


def test_every_symmetry_form_computes_the_same_function(trained_toy):
    forms = toy.symmetry_forms(trained_toy, norm=3.0)
    assert set(forms) == set(toy.STAGES)
    x = toy.check_inputs(300, seed=5)
    for stage, form in forms.items():
        assert form["layers.0.weight"].dtype == torch.float64
        gaps = toy.function_gaps(forms["trained"], form, x)
        assert gaps.shape == (64,) and float(gaps.max()) < 1e-5, stage
    # the forms do transform: rows of norm 3, output weights sorted, canonical order by max key
    rows = forms["scaled"]["layers.0.weight"].norm(dim=2)
    torch.testing.assert_close(rows, torch.full_like(rows, 3.0))
    w = forms["sorted_output"]["layers.1.weight"][:, 0, :]
    assert bool((w[:, 0] >= w[:, 1]).all())
    assert not torch.allclose(
        forms["scaled"]["layers.1.weight"], forms["trained"]["layers.1.weight"].double()
    )
    keys = forms["canonical"]["layers.0.weight"].max(dim=2).values
    assert bool((keys[:, 0] >= keys[:, 1]).all())


def test_function_gaps_catch_a_wrong_transform(trained_toy):
    forms = toy.symmetry_forms(trained_toy, norm=3.0)
    broken = dict(forms["scaled"])
    broken["layers.1.weight"] = broken["layers.1.weight"].flip(
        -1
    )  # outgoing weights without incoming rows
    gaps = toy.function_gaps(forms["trained"], broken, toy.check_inputs(100))
    assert float(gaps.max()) > 1e-3


def test_inliers_remove_exactly_the_high_loss_networks():
    losses = np.array([0.01, 0.5, 0.1, np.nan, 0.099, np.inf, 0.2])
    kept = toy.inliers(losses, 0.1)
    np.testing.assert_array_equal(kept, [True, False, True, False, True, False, False])
    state = {"w": torch.arange(7.0)}
    assert toy.select(state, kept)["w"].tolist() == [0.0, 2.0, 4.0]


def test_run_toy_drops_the_networks_above_the_threshold_and_checks_functions(one_torch_thread):
    settings = Toy(n_networks=40, epochs=1, n_per_class=30, max_loss=1.0, check_inputs=64)
    probe = toy.run_toy(settings)
    threshold = float(np.median(probe.losses))
    result = toy.run_toy(
        Toy(n_networks=40, epochs=1, n_per_class=30, max_loss=threshold, check_inputs=64)
    )
    np.testing.assert_array_equal(result.kept, probe.losses <= threshold)
    assert 0 < (~result.kept).sum() < 40
    assert result.forms["trained"]["layers.0.weight"].shape[0] == int(result.kept.sum())
    # the kept networks are the ones whose recomputed loss is low
    x, y = result.inputs, result.labels
    np.testing.assert_allclose(
        dataset_loss(result.forms["trained"], x, y, "bce").numpy(),
        result.losses[result.kept],
        rtol=1e-12,
    )
    assert max(result.gaps.values()) < settings.tolerance
    table = toy.weights_table(result)
    assert table.height == int(result.kept.sum()) and "canonical_w2" in table.columns
    summary = toy.summary_table(result, Toy(max_loss=threshold))
    assert summary.columns == ["quantity", "value"] and summary.height == 8
    with pytest.raises(ValueError, match="every network is an outlier"):
        toy.run_toy(Toy(n_networks=4, epochs=1, n_per_class=10, max_loss=1e-12))


def test_toy_figure_is_written(trained_toy, tmp_path, toy_problem):
    x, y = toy_problem
    forms = toy.symmetry_forms(trained_toy, norm=3.0)
    result = toy.ToyPosterior(x, y, np.arange(64), np.zeros(64), np.ones(64, bool), forms, {})
    toy.toy_figure(result, tmp_path / "toy.png", bins=20)
    assert (tmp_path / "toy.png").stat().st_size > 10_000


# ---------------------------------------------------------------- marginals


def exchangeable_state(n=400, seed=0, shift_unit0=0.0):
    """An MLP 3-4-5-1 "posterior" whose units are exchangeable: every weight i.i.d. N(0, 1),
    optionally with unit 0 of the first layer shifted."""
    g = torch.Generator().manual_seed(seed)
    state = {
        name: torch.randn(n, *shape, generator=g, dtype=torch.float64)
        for name, shape in (
            ("layers.0.weight", (4, 3)),
            ("layers.0.bias", (4,)),
            ("layers.1.weight", (5, 4)),
            ("layers.1.bias", (5,)),
            ("layers.2.weight", (1, 5)),
            ("layers.2.bias", (1,)),
        )
    }
    state["layers.0.weight"][:, 0, :] += shift_unit0
    return state


def test_unit_samples_take_rows_of_hidden_layers_and_columns_of_the_output_layer():
    state = exchangeable_state(n=6)
    samples = mg.unit_samples(state)
    assert samples["layers.0.weight"].shape == (4, 3, 6)
    assert samples["layers.2.weight"].shape == (5, 1, 6)
    assert samples["layers.2.weight"][3, 0, 2] == state["layers.2.weight"][2, 0, 3]
    assert samples["layers.1.weight"][1, 2, 5] == state["layers.1.weight"][5, 1, 2]


def test_ks_table_has_one_row_per_unit_pair_and_coordinate_with_sane_p_values():
    tests = mg.ks_tests({"trained": exchangeable_state()})
    # layer 0: C(4,2)=6 pairs x 3 coordinates; layer 1: C(5,2)=10 x 4; output: C(5,2)=10 x 1
    assert tests.height == 18 + 40 + 10
    assert tests["pvalue"].is_between(0, 1).all() and tests["statistic"].is_between(0, 1).all()
    assert (tests["n"] == 400).all()
    summary = mg.ks_summary(tests, 0.05)
    # same distribution: p-values spread over [0, 1], few rejections
    assert summary.height == 3
    assert (summary["median_p"] > 0.2).all()
    assert (summary["rejected_at_0.05"] < 0.25).all()


def test_ks_tests_reject_a_shifted_unit():
    tests = mg.ks_tests({"trained": exchangeable_state(shift_unit0=1.0)})
    layer0 = tests.filter(tests["layer"] == "layers.0.weight")
    with_unit0 = layer0.filter(layer0["unit_a"] == 0)
    assert (with_unit0["pvalue"] < 1e-6).all()
    assert (layer0.filter(layer0["unit_a"] > 0)["pvalue"] > 1e-4).all()


def test_canonical_sorting_makes_exchangeable_units_differ():
    state = exchangeable_state()
    stages = mg.symmetry_stages(state, (3, 4, 5, 1))
    summary = mg.ks_summary(mg.ks_tests(stages), 0.05)
    trained = summary.filter(summary["stage"] == "trained")
    canonical = summary.filter(summary["stage"] == "canonical")
    # hidden rows are sorted by their own largest weight; the output columns (outgoing weights,
    # independent of the incoming ones in this synthetic posterior) may stay exchangeable
    hidden = ["layers.0.weight", "layers.1.weight"]
    before = trained.filter(trained["layer"].is_in(hidden))["rejected_at_0.05"].to_numpy()
    after = canonical.filter(canonical["layer"].is_in(hidden))["rejected_at_0.05"].to_numpy()
    assert (after > 0.5).all() and (before < 0.25).all()
    assert summary["stage"].to_list()[:3] == ["trained"] * 3


def test_run_marginals_end_to_end_small(one_torch_thread, tmp_path):
    settings = Marginals(n_networks=12, hidden=(3,), epochs=2)
    result = mg.run_marginals(settings)
    assert result.summary.height == 3 * 2  # three stages, two weight tensors
    assert result.losses.shape == (12,) and np.isfinite(result.losses).all()
    x = torch.randn(5, 10, dtype=torch.float64)
    for stage in mg.STAGES:
        torch.testing.assert_close(
            stacked_forward(result.stages[stage], x),
            stacked_forward(result.stages["trained"], x),
            rtol=1e-9,
            atol=1e-9,
        )
    mg.marginals_figure(result, tmp_path / "m.png", units=2)
    assert (tmp_path / "m.png").exists()


# ---------------------------------------------------------------- which analyses a run builds


def test_plan_lists_the_targets_and_skips_analyses_set_to_false():
    from symbnn.analyses import plan

    experiments = {
        name: {
            "data": {"train": "digits", "ood": "natural_patches"},
            "model": model,
            "recipe": {"epochs": 1, "batch_size": 8, "lr": 0.1},
            "posterior": {"n_samples": 2, "shard_size": 2},
        }
        for name, model in (("a", {"name": "optunet"}), ("b", {"name": "resnet18"}))
    }
    config = config_from_mapping({"run": ["a", "b"], "experiments": experiments})
    targets = plan.targets(config)  # no analyses block: every analysis with its defaults
    assert "results/analyses/report/toy_posterior.png" in targets
    assert "results/analyses/report/marginals_summary.md" in targets
    assert "results/analyses/report/symmetrised_vi.md" in targets
    assert "results/analyses/report/barrier_statistics.md" in targets
    assert "results/analyses/report/symmetrised_vi_widths.md" in targets
    assert "results/a/report/permutation_frequency.png" in targets
    assert not any(t.startswith("results/b/") for t in targets)  # ResNet-18 is not retrained here
    off = config_from_mapping(
        {
            "run": ["a", "b"],
            "experiments": experiments,
            "analyses": {
                "toy": False,
                "permutation_frequency": False,
                "symmetrised_vi": False,
                "symmetrised_vi_widths": False,
                "barrier_statistics": False,
                "marginals": {"epochs": 3},
            },
        }
    )
    assert plan.targets(off) == [
        "results/analyses/report/marginals.png",
        "results/analyses/report/marginals_summary.md",
        # Figure 9 on the OptuNet experiment's own target posterior too
        "results/a/report/posterior_marginals.png",
        "results/a/report/posterior_marginals.md",
    ]
    assert off.analyses.marginals.epochs == 3 and not off.analyses.enabled("toy")


def test_resnet18_gets_figure_4_only_where_its_experiment_has_gpus():
    from symbnn.analyses import plan

    def experiment(model, gpus):
        return {
            "data": {"train": "cifar100", "ood": "svhn"},
            "model": model,
            "recipe": {"epochs": 10, "batch_size": 128, "lr": 0.1},
            "posterior": {"n_samples": 2, "shard_size": 1},
            "compute": {"gpus": gpus, "threads": 8, "mem_mb": 16000, "runtime_min": 240},
        }

    resnet = {"name": "resnet18", "num_classes": 100}
    experiments = {
        "gpu": experiment(resnet, 1),
        "cpu": experiment(resnet, 0),
        "small": experiment({"name": "optunet"}, 1),
    }
    config = config_from_mapping({"run": ["cpu", "gpu", "small"], "experiments": experiments})
    assert config.analyses.permutation_frequency_experiments(config.run, config.experiments) == [
        "gpu",
        "small",
    ]
    targets = plan.targets(config)
    assert "results/gpu/report/permutation_frequency.png" in targets
    assert not any(t.startswith("results/cpu/") for t in targets)
    # the ResNet-18 job is the experiment's training job, once per run (4 by default)
    assert plan.permutation_frequency_resources(config, "gpu") == {
        "threads": 8,
        "mem_mb": 16000,
        "runtime": 4 * 240,
        "gpu": 1,
        "cpus_per_gpu": 8,
    }
    assert plan.permutation_frequency_resources(config, "small") == {
        "threads": 1,
        "mem_mb": 2000,
        "runtime": 60,
        "gpu": 1,
        "cpus_per_gpu": 1,
    }
    shorter = config_from_mapping(
        {
            "run": ["gpu"],
            "experiments": experiments,
            "analyses": {"permutation_frequency": {"runs": 2, "epochs": 5}},
        }
    )
    assert plan.permutation_frequency_resources(shorter, "gpu")["runtime"] == 2 * 240 // 2
    off = config_from_mapping(
        {"run": ["gpu"], "experiments": experiments, "analyses": {"permutation_frequency": False}}
    )
    assert off.analyses.permutation_frequency_experiments(off.run, off.experiments) == []
