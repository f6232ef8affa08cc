"""Whole workflow runs of their own (a killed run, a user's architecture) and the checks that
stop a run before any job (bad config, lint), as `snakemake` subprocesses. Apart from
tests/workflow/test_workflow.py so that the two halves can run side by side (make test: -n 2)."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import NO_ANALYSES, SNAKEMAKE, TINY_METHODS
from conftest import run_snakemake as snakemake
from conftest import tiny_workflow_config as tiny_config

from symbnn import trust
from symbnn.store import open_store

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_bad_config_stops_before_any_job(tmp_path):
    config = tiny_config()
    config["experiments"]["tiny"]["recipe"]["learning_rate"] = 0.1
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, check=False)
    assert result.returncode != 0
    assert "learning_rate" in result.stdout + result.stderr
    assert not (tmp_path / "results").exists()


def test_lint_is_clean(tmp_path):
    # in a folder of its own: the checkout's results (of any age) are not what is linted
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    result = subprocess.run(
        [*SNAKEMAKE, "--directory", str(tmp_path), "--lint"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr


def test_killed_run_leaves_no_half_written_store_and_resumes(tmp_path):
    config = tiny_config(methods=False)
    config["experiments"]["tiny"]["recipe"]["epochs"] = 2
    config["experiments"]["tiny"]["data"]["train_limit"] = 1000
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    process = subprocess.Popen(
        [*SNAKEMAKE, "--directory", str(tmp_path), "--cores", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    logs = tmp_path / "results" / "tiny" / "logs" / "train_shard"
    deadline = time.time() + 120
    while not (logs.exists() and any(logs.iterdir())) and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # let the job get into training
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    shards = tmp_path / "results" / "tiny" / "posterior" / "shards"
    for shard in ("000", "001"):
        path = shards / f"{shard}.zarr"
        if path.exists():  # a shard that finished before the kill must be complete
            open_store(path).validate()
    assert not (tmp_path / "results" / "tiny" / "posterior" / "target.zarr").exists()
    snakemake(tmp_path, "--unlock")  # a SIGKILL leaves Snakemake's lock behind
    # the default profile sets rerun-incomplete; the stages after the store are not the point
    snakemake(tmp_path, "results/tiny/posterior/target.zarr")
    store = open_store(tmp_path / "results" / "tiny" / "posterior" / "target.zarr")
    store.validate()
    assert store.n_samples == 4


def test_a_model_named_by_import_path_runs_end_to_end(tmp_path):
    """A user's own architecture (tests/user_models.py, importable through PYTHONPATH) goes
    through every stage: training, canonical form, min-mass, MMD, methods, alignment, report."""
    shutil.copy(REPO / "tests" / "user_models.py", tmp_path / "user_models.py")
    config = tiny_config()
    config["analyses"] = NO_ANALYSES
    spec = {"name": "user_models:SmallCNN", "options": {"channels": 3}, "input_shape": [1, 28, 28]}
    config["experiments"]["tiny"]["model"] = spec
    # two methods keep it short: SWAG trains the model further, Deep Ensembles reads the pool
    keep = ("n_samples", "modes", "pool", "first_seed", "swag", "de")
    config["experiments"]["tiny"]["methods"] = {k: TINY_METHODS[k] for k in keep}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    snakemake(tmp_path, env={**os.environ, "PYTHONPATH": path})
    results = tmp_path / "results" / "tiny"
    trust.trust_model(spec["name"])  # the stores name it: here as in the run's jobs
    target = open_store(results / "posterior" / "target.zarr")
    assert target.attrs["architecture"] == spec and target.validate() == []
    canonical = open_store(results / "canonical" / "target.zarr")
    assert canonical.n_samples == target.n_samples and canonical.validate() == []
    table = pl.read_csv(results / "report" / "table1.csv")
    # SWAG in two variants, Deep Ensembles multi-mode only; every accuracy measured
    assert table.height == 3 and table["Acc"].is_not_null().all()
    curves = pl.read_parquet(results / "alignment" / "curves.parquet")
    assert set(curves["alignment"]) == {"none", "weight_matching"}
    assert curves["loss"].is_finite().all()
