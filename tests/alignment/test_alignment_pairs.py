"""Barriers over pairs: converged pairs, variational fits and paths, and the workflow's
CIFAR-10 ResNet-20 experiment on tiny files in CIFAR-10's own format."""

import polars as pl
import pytest
import torch
import yaml
from conftest import plan_in_process, repo_config, run_snakemake, workflow_config
from fake_datasets import write_cifar10

from symbnn.alignment.interpolation import gaussian_curve, grid
from symbnn.alignment.matching import apply_permutations
from symbnn.alignment.pairs import (
    converged_pairs,
    fit_variational,
    load_fits,
    pair_rows,
    report_table,
    save_fit,
    variational_curves,
)
from symbnn.data import load_dataset
from symbnn.methods.base import Problem
from symbnn.settings import Alignment, Bnn, Recipe, config_from_mapping
from symbnn.symmetry.architectures import unit_groups

MLP = {"name": "mlp", "widths": [784, 16, 10]}


def test_pairs_are_consecutive_converged_networks():
    assert converged_pairs([0, 2, 3, 5, 7], 2, "store") == [(0, 2), (3, 5)]
    with pytest.raises(ValueError, match=r"store: alignment.pairs 3 needs 6 converged networks, 5"):
        converged_pairs([0, 2, 3, 5, 7], 3, "store")


@pytest.fixture(scope="module")
def digits_problem():
    train = load_dataset("digits", "train", "data").subset(slice(0, 4000, 8))
    test = load_dataset("digits", "test", "data").subset(slice(0, 1000, 5))
    recipe = Recipe(epochs=4, batch_size=32, lr=0.05, momentum=0.9, weight_decay=0.0)
    return Problem(MLP, recipe, train, "cpu", test, 0.0, 0)


@pytest.fixture(scope="module")
def fits(digits_problem):
    settings = Bnn(elbo_samples=1, rho_init=-5.0)
    return [fit_variational(digits_problem, seed, settings) for seed in (10, 11)]


def test_a_variational_fit_is_a_gaussian_per_parameter(fits, tmp_path):
    fit = fits[0]
    assert fit["seed"] == fit["train_seed"] == 10
    assert (
        set(fit["mean"])
        == set(fit["std"])
        == {
            "layers.0.weight",
            "layers.0.bias",
            "layers.1.weight",
            "layers.1.bias",
        }
    )
    for name, std in fit["std"].items():
        assert std.shape == fit["mean"][name].shape and (std > 0).all()
    save_fit(fit, tmp_path / "fit.safetensors")
    (loaded,) = load_fits([tmp_path / "fit.safetensors"])
    assert all(torch.equal(loaded["mean"][k], v) for k, v in fit["mean"].items())


def test_a_permuted_copy_has_a_barrier_only_until_aligned(fits, digits_problem):
    """B = A with its hidden units shuffled is the same posterior: the path between them
    as stored rises, the aligned path is flat (barrier 0 up to float error)."""
    a = fits[0]
    sym = unit_groups(MLP)
    gen = torch.Generator().manual_seed(1)
    perm = {group.name: torch.randperm(group.width, generator=gen) for group in sym.groups}
    b = {
        "mean": apply_permutations(a["mean"], sym, perm),
        "std": apply_permutations(a["std"], sym, perm),
    }
    sets = {"test": digits_problem.test}
    curves = variational_curves(MLP, [a, b], sets, Alignment(points=5, splits=("test",)), 4)
    rows = pair_rows(curves, "mean_field_vi")
    by_alignment = dict(zip(rows["alignment"], rows["loss_barrier"]))
    assert by_alignment["weight_matching"] == pytest.approx(0.0, abs=1e-9)
    assert by_alignment["none"] > 0.01
    # the aligned path is A's own posterior at every t
    flat = curves.filter(pl.col("alignment") == "weight_matching")["loss"]
    assert flat.max() - flat.min() < 1e-9
    direct = gaussian_curve(MLP, a["mean"], a["std"], a["mean"], a["std"], grid(5), sets, 4)
    assert flat.to_list() == pytest.approx(direct["loss"].to_list(), abs=1e-9)


def test_summary_over_pairs(fits, digits_problem):
    sets = {"test": digits_problem.test}
    curves = variational_curves(MLP, [*fits, *fits], sets, Alignment(points=3, splits=("test",)), 2)
    rows = pair_rows(curves, "mean_field_vi")
    assert rows.height == 4 and sorted(set(rows["pair"])) == [0, 1]
    table = report_table(rows)
    assert table["pairs"].to_list() == [2, 2]
    for row in table.iter_rows(named=True):
        barriers = rows.filter(pl.col("alignment") == row["alignment"])["loss_barrier"]
        assert row["loss_barrier_mean"] == pytest.approx(barriers.mean())
        assert row["loss_barrier_std"] == pytest.approx(barriers.std())
        assert row["loss_barrier_max"] == barriers.max()
    assert report_table(rows.filter(pl.col("pair") == 0)).height == 2  # one pair: its rows


def test_variational_paths_refuse_batchnorm_models(fits, digits_problem):
    with pytest.raises(ValueError, match="resnet18.*BatchNorm"):
        variational_curves({"name": "resnet18", "num_classes": 10}, fits, {}, Alignment(), 1)


def cifar10_resnet20(**changes):
    """The repository's cifar10-resnet20 experiment cut down to seconds on CPU."""
    experiment = repo_config()["experiments"]["cifar10-resnet20"]
    experiment["model"]["width"] = 2
    experiment["data"].update(train_limit=64, test_limit=32, ood="natural_patches")
    experiment["data"]["ood_options"] = {"n": 16, "size": 32, "channels": 3}
    experiment["recipe"].update(epochs=1, batch_size=32, milestones=[])
    experiment["posterior"].update(n_samples=4, shard_size=4, min_accuracy=0.0)
    experiment["compute"] = {"gpus": 0, "threads": 1, "mem_mb": 2000, "runtime_min": 30}
    experiment["alignment"].update(pairs=2, points=3, max_sweeps=5)
    experiment["alignment"]["variational"].update(pairs=1, samples=2)
    experiment["alignment"]["variational"]["bnn"].update(elbo_samples=1, recipe={"epochs": 1})
    experiment.update(changes)
    return experiment


@pytest.mark.slow
def test_the_cifar10_experiment_plans_its_pairs_as_gpu_jobs(tmp_path):
    config = repo_config()
    experiment = config_from_mapping(config, "config.yaml").experiments["cifar10-resnet20"]
    assert experiment.model.name == "resnet20_frn_silu" and experiment.data.train == "cifar10"
    assert experiment.alignment.pairs == experiment.alignment.variational.pairs == 10
    assert experiment.posterior.n_samples >= 2 * experiment.alignment.pairs
    config["run"] = ["cifar10-resnet20"]
    config["analyses"] = {name: False for name in config["analyses"]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    log = plan_in_process(tmp_path, "--dry-run").stdout
    counts = dict(
        line.split()[:2]
        for line in log.splitlines()
        if line.split()[:1] in (["train_shard"], ["variational_fit"], ["variational_barriers"])
    )
    assert counts == {"train_shard": "20", "variational_fit": "20", "variational_barriers": "1"}
    fit_lines = [line for line in log.splitlines() if "Fitting the mean-field VI posterior" in line]
    assert len(fit_lines) == 20 and all("GPUs: 1" in line for line in fit_lines)


@pytest.mark.slow
def test_cifar10_resnet20_barriers_run_end_to_end(tmp_path):
    write_cifar10(tmp_path / "data", n_train=64, n_test=32)
    config = workflow_config({"c10": cifar10_resnet20()}, data_root=str(tmp_path / "data"))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    targets = [
        "results/c10/report/alignment_barrier.md",
        "results/c10/report/variational_barriers.md",
        "results/c10/report/variational_interpolation.png",
    ]
    run_snakemake(tmp_path, *targets)
    results = tmp_path / "results" / "c10" / "alignment"
    sgd = pl.read_parquet(results / "pairs.parquet")
    assert sgd.height == 2 * 2 * 2  # pairs x alignments x splits
    assert sorted(set(zip(sgd["row_a"], sgd["row_b"]))) == [(0, 1), (2, 3)]
    vi = pl.read_parquet(results / "variational_pairs.parquet")
    assert vi.height == 1 * 2 * 2 and set(vi["kind"]) == {"mean_field_vi"}
    for table in (sgd, vi):
        assert table["loss_barrier"].is_finite().all() and (table["loss_barrier"] >= 0).all()
    fits = load_fits(sorted((results / "variational").glob("*.safetensors")))
    assert [f["seed"] for f in fits] == [2_000_000, 2_000_001]
    assert "conv1.weight" in fits[0]["std"] and "layer3.2.bn2.tau" in fits[0]["mean"]
