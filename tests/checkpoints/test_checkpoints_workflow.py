"""The workflow's `posterior: {source: checkpoints}`: a target posterior and a pool imported
from a format-true bundle of released OptuNets, then the stages that need no training."""

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
import yaml
from conftest import (
    plan_in_process,
    run_snakemake,
    tiny_experiment,
    workflow_config,
)

from symbnn.checkpoints.bundles import as_released, write_bundle
from symbnn.models import OptuNet
from symbnn.settings import config_from_mapping
from symbnn.settings.checkpoints import ReleasedSetting
from symbnn.store import open_store

REPO = Path(__file__).resolve().parents[2]
N_RELEASED, N_TARGET, N_POOL = 32, 24, 8


def released_experiment(path="bundles"):
    experiment = tiny_experiment(n_samples=N_TARGET, shard_size=N_TARGET)
    experiment["model"] = {"name": "optunet"}
    experiment["posterior"].update(
        source="checkpoints",
        checkpoints={"path": path, "setting": "mnist-optunet", "pool": True},
    )
    experiment["mmd"] = {"de_members": 4, "pvalue": True, "seed": 0}
    experiment["methods"] = {"n_samples": 2, "modes": 2, "pool": N_POOL, "de": {}}
    return experiment


def test_released_settings_are_the_releases():
    from typing import get_args

    from symbnn.checkpoints import RELEASES

    assert get_args(ReleasedSetting) == tuple(RELEASES)


def test_the_settings_check_a_released_posterior():
    base = workflow_config({"released": released_experiment()})
    config_from_mapping(base)
    wrong_model = workflow_config(
        {"released": {**released_experiment(), "model": {"name": "resnet18"}}}
    )
    with pytest.raises(
        ValueError, match=r"experiments\.released\.model: the released mnist-optunet"
    ):
        config_from_mapping(wrong_model)
    no_section = released_experiment()
    del no_section["posterior"]["checkpoints"]
    with pytest.raises(ValueError, match=r"posterior\.checkpoints: missing"):
        config_from_mapping(workflow_config({"released": no_section}))
    stray = released_experiment()
    stray["posterior"]["source"] = "train"
    with pytest.raises(ValueError, match=r"posterior\.checkpoints: only read when source is"):
        config_from_mapping(workflow_config({"released": stray}))


@pytest.mark.slow
def test_an_imported_posterior_runs_the_stages_that_need_no_training(tmp_path):
    torch.manual_seed(0)
    nets = [(f"model_{i}", as_released(OptuNet().state_dict())) for i in range(N_RELEASED)]
    write_bundle(tmp_path / "bundles" / f"mnist-optunet-0-{N_RELEASED - 1}.tgz", nets)
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump(workflow_config({"released": released_experiment()}))
    )
    results = tmp_path / "results" / "released"
    targets = [
        "report/posterior_training.md",
        "canonical/target.zarr",
        "report/minmass_summary.md",
        "report/mmd_deep_ensembles.md",
        "modes/pool.zarr",
        "report/posterior_marginals.md",
    ]
    paths = [f"results/released/{t}" for t in targets]
    result = run_snakemake(tmp_path, *paths)
    log = result.stdout + result.stderr
    assert "train_shard" not in log and "gather_posterior" not in log
    target = open_store(results / "posterior" / "target.zarr")
    assert target.validate() == []
    assert target.info("seed").tolist() == list(range(N_TARGET))
    assert target.attrs["source"]["setting"] == "mnist-optunet"
    assert np.array_equal(
        target.read("conv2.weight", 5), nets[5][1]["conv2.weight"].astype(np.float32)
    )
    accuracy = target.info("test_accuracy")
    assert accuracy.shape == (N_TARGET,) and ((accuracy >= 0) & (accuracy <= 1)).all()
    pool = open_store(results / "modes" / "pool.zarr")
    assert pool.info("seed").tolist() == list(range(N_TARGET, N_RELEASED))
    assert open_store(results / "canonical" / "target.zarr").n_samples == N_TARGET
    mmd = (results / "report" / "mmd_deep_ensembles.md").read_text()
    assert "deep_ensembles" in mmd
    marginals = pl.read_parquet(results / "marginals" / "ks_tests.parquet")
    assert set(marginals["stage"].unique()) == {"stored", "canonical"}
    masses = pl.read_parquet(results / "minmass" / "masses.parquet")
    assert masses.height == N_TARGET
    again = plan_in_process(tmp_path, "--dry-run", *paths, check=False)
    assert "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.slow
def test_a_missing_bundle_is_a_missing_input_not_a_training_run(tmp_path):
    config = workflow_config({"released": released_experiment(path="nowhere/bundles")})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = plan_in_process(tmp_path, "--dry-run", check=False)
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert "Missing input files for rule import_target" in log and "nowhere/bundles" in log
    assert "train_shard" not in log
