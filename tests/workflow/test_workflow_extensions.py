"""The workflow as a benchmark harness: a method, a dataset and an architecture of the user's
own, all named by import path, run end to end in one run (training on the user's images, the
structure derived from the user's model, canonical form, min-mass, the methods' fits and draws,
MMD, metrics, alignment, Table 1, the report), plan their reruns from their settings and from
the dataset's content, and planning imports no torch. The method is docs/extending.md's
last-layer Gaussian, the datasets tests/user_datasets.py's, the model tests/user_models.py's
(all three on PYTHONPATH)."""

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import (
    NO_ANALYSES,
    REDRAWN,
    SNAKEMAKE,
    TINY_SAMPLING,
    tiny_experiment,
    workflow_config,
)
from conftest import run_snakemake as snakemake
from extending_docs import METHOD, doc_blocks, doc_files

from symbnn import trust
from symbnn.predictions import open_predictions
from symbnn.store import open_store

REPO = Path(__file__).resolve().parents[2]
LABEL = "Last-layer Gaussian"
# shaped like nothing symbnn ships (LeakyReLU, biases, a flattened feature map)
USER_MODEL = {
    "name": "user_models:SmallCNN",
    "options": {"channels": 3},
    "input_shape": [1, 28, 28],
}
USER_FILES = ("last_layer_gaussian.py", "user_datasets.py", "user_models.py")
pytestmark = pytest.mark.slow


def docs_method_entry():
    """The `methods` entry docs/extending.md shows for its last-layer Gaussian."""
    block = next(b for b in doc_blocks("yaml") if METHOD in b)
    return yaml.safe_load(block)


def extension_config():
    tiny = tiny_experiment(n_samples=4)
    tiny["data"] = {
        "train": "user_datasets:stripes",
        "ood": "user_datasets:noise",
        "ood_options": {"n": 50, "size": 28, "channels": 1},
    }
    tiny["mmd"] = {"de_members": 2, "pvalue": False, "seed": 0}
    tiny["alignment"] = {"points": 3, "splits": ["test"], "max_sweeps": 5}
    tiny["model"] = USER_MODEL
    # Deep Ensembles reads the pool of the user's model (the shipped methods' fits are
    # tests/workflow/test_workflow.py's; the user's model trains in the target's shards)
    tiny["methods"] = {**TINY_SAMPLING, "de": {}}
    tiny["methods"].update(docs_method_entry())
    return workflow_config({"tiny": tiny}, NO_ANALYSES)


def user_code_env(workdir):
    """The environment of a run whose config names code in `workdir` (on PYTHONPATH)."""
    path = os.pathsep.join(filter(None, [str(workdir), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("extensions")
    (workdir / "last_layer_gaussian.py").write_text(doc_files()["last_layer_gaussian.py"])
    for name in ("user_datasets.py", "user_models.py"):
        shutil.copy(REPO / "tests" / name, workdir / name)
    (workdir / "config.yaml").write_text(yaml.safe_dump(extension_config(), sort_keys=False))
    snakemake(workdir, env=user_code_env(workdir))
    trust.trust_model(USER_MODEL["name"])  # the stores name it: trusted here as in the jobs
    return workdir


def test_a_user_method_and_dataset_run_end_to_end(finished_run):
    results = finished_run / "results" / "tiny"
    target = open_store(results / "posterior" / "target.zarr")
    assert target.attrs["data"]["train"] == "user_datasets:stripes"
    assert target.validate() == []
    for variant in ("single", "multi"):
        folder = results / "methods" / "last_layer" / variant
        samples = open_store(folder / "samples.zarr")
        assert samples.validate() == [] and samples.state_names == target.state_names
        assert samples.attrs["method"] == "last_layer"
        assert samples.attrs["settings"] == {"scale": 0.02}
        assert list(samples.info("unit")) == [0, 0, 1, 1]
        predictions = open_predictions(folder / "predictions.zarr")
        # the user's test split (100 stripes, labels cycling) and OOD set (50 noise images)
        assert list(predictions.read("labels")[:12]) == [*range(10), 0, 1]
        assert predictions.read("test").shape == (4, 100, 10)
        assert predictions.read("ood").shape == (4, 50, 10)
        assert open_store(folder / "canonical.zarr").n_samples == 4
    fits = sorted(p.name for p in (results / "methods" / "last_layer" / "fits").iterdir())
    assert fits == ["000.safetensors", "001.safetensors"]
    table = pl.read_parquet(results / "report" / "table1.parquet")
    rows = table.filter(pl.col("method") == LABEL)
    assert rows["group"].to_list() == ["one mode", "multi mode"]
    assert rows.select("MMD", "NS MMD", "Acc", "NLL").null_count().sum_horizontal()[0] == 0
    # the shipped rows come first, in registry order; the user's after them
    assert table["method"].to_list()[-1] == LABEL and "Deep Ensembles" in table["method"]
    assert LABEL in (results / "report" / "table1.md").read_text()
    assert LABEL in pl.read_parquet(results / "report" / "table2.parquet")["method"].to_list()


def test_the_user_model_goes_through_every_stage(finished_run):
    """The user's architecture: trained, its structure derived for the canonical form and
    min-mass, its pool ensembled, aligned."""
    results = finished_run / "results" / "tiny"
    target = open_store(results / "posterior" / "target.zarr")
    assert target.attrs["architecture"] == USER_MODEL and target.validate() == []
    canonical = open_store(results / "canonical" / "target.zarr")
    assert canonical.n_samples == target.n_samples and canonical.validate() == []
    table = pl.read_parquet(results / "report" / "table1.parquet")
    assert set(table["method"]) == {"Deep Ensembles", LABEL} and table.height == 3
    assert table["Acc"].is_not_null().all()
    curves = pl.read_parquet(results / "alignment" / "curves.parquet")
    assert set(curves["alignment"]) == {"none", "weight_matching"}
    assert curves["loss"].is_finite().all()


def test_the_report_shows_the_user_method(finished_run):
    snakemake(finished_run, "--report", "report.html", env=user_code_env(finished_run))
    html = (finished_run / "report.html").read_text()
    table = finished_run / "results" / "tiny" / "report" / "table1.html"
    assert LABEL in table.read_text()
    assert base64.b64encode(table.read_bytes()).decode() in html


def dry_run_without_torch(workdir, *args):
    """The output of `snakemake -n` in `workdir`, asserting that the planning process never
    imported torch."""
    words = [*SNAKEMAKE[3:], "--directory", str(workdir), "--cores", "1", "-n", *args]
    probe = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('torch imported:', 'torch._C' in sys.modules, "
        "file=sys.stderr))\n"
        f"sys.argv = ['snakemake', *{words!r}]\n"
        "runpy.run_module('snakemake', run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=user_code_env(workdir)
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "torch imported: False" in output, output[-3000:]
    return output


def test_a_finished_run_has_nothing_to_do(finished_run):
    """Every job's params evaluated against what was recorded (the user method's settings
    read through its class, the dataset's fingerprint computed in a child process) match."""
    result = snakemake(finished_run, "-n", env=user_code_env(finished_run))
    assert "Nothing to be done" in result.stdout


def test_a_fresh_run_plans_every_job_without_torch(finished_run, tmp_path):
    """Planning from nothing sizes the jobs' resources too (the model's parameter count,
    counted in a child process) and evaluates every job's params, without torch in the
    planning process: the user's method and dataset by import path, with a shipped model (a
    model of the user's own is imported when the configuration is read, and imports torch)."""
    for name in USER_FILES:
        shutil.copy(finished_run / name, tmp_path / name)
    config = yaml.safe_load((finished_run / "config.yaml").read_text())
    config["experiments"]["tiny"]["model"] = tiny_experiment(n_samples=4)["model"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    output = dry_run_without_torch(tmp_path)
    assert "train_shard" in output and "mmd_method" in output, output[-3000:]


def planned_rules(finished_run, tmp_path, edit):
    """{rule: [outputs]} Snakemake plans to (re)create after `edit(workdir)`, on a copy."""
    workdir = tmp_path / "copy"
    shutil.copytree(finished_run, workdir, symlinks=True)
    edit(workdir)
    env = user_code_env(workdir)
    rows = [r.split("\t") for r in snakemake(workdir, "--summary", env=env).stdout.splitlines()]
    header = rows[0]
    rule, plan = header.index("rule"), header.index("plan")
    planned = {}
    for row in rows[1:]:
        if len(row) == len(header) and row[plan] == "update pending":
            planned.setdefault(row[rule], []).append(row[0])
    return planned


def _edit_config(change):
    def edit(workdir):
        config = yaml.safe_load((workdir / "config.yaml").read_text())
        change(config["experiments"]["tiny"])
        (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))

    return edit


def test_editing_the_user_methods_settings_reruns_only_its_draws(finished_run, tmp_path):
    planned = planned_rules(
        finished_run,
        tmp_path,
        _edit_config(lambda tiny: tiny["methods"]["last_layer"].update(scale=0.05)),
    )
    # scale is a sampling key: the fits stay, the samples and what follows them rerun
    assert set(planned) == REDRAWN, planned
    outputs = [path for name, paths in planned.items() if name != "method_tables" for path in paths]
    assert outputs and all("/last_layer/" in path for path in outputs), outputs


def test_a_changed_dataset_reruns_the_training_and_an_unchanged_one_nothing(finished_run, tmp_path):
    def same_content(workdir):
        (workdir / "data").mkdir(exist_ok=True)
        (workdir / "data" / "stripes_seed.txt").write_text("0")  # the seed it had

    assert planned_rules(finished_run, tmp_path / "same", same_content) == {}

    def new_content(workdir):
        (workdir / "data").mkdir(exist_ok=True)
        (workdir / "data" / "stripes_seed.txt").write_text("5")

    planned = planned_rules(finished_run, tmp_path / "new", new_content)
    assert {"train_shard", "train_pool_shard", "fit", "method_tables"} <= set(planned), planned


def test_symbnn_sample_runs_the_user_method(finished_run):
    """`symbnn sample` takes a method the experiment names by import path."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "symbnn.cli",
            "sample",
            "last_layer",
            "cli.zarr",
            "--experiment",
            "tiny",
            "--variant",
            "single",
            "--set",
            "scale=0.1",
            "--device",
            "cpu",
        ],
        cwd=finished_run,
        capture_output=True,
        text=True,
        env=user_code_env(finished_run),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    store = open_store(finished_run / "cli.zarr")
    assert store.n_samples == 4 and store.attrs["settings"] == {"scale": 0.1}
