"""The workflow end to end on a tiny configuration, as `snakemake` subprocesses."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from conftest import NO_ANALYSES, TINY_ANALYSES, tiny_experiment, workflow_config

from symbnn.predictions import open_predictions
from symbnn.store import open_store

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
pytestmark = pytest.mark.slow


# Every method, cut down to seconds: 2 samples per variant, 2 modes, a pool of 2 networks.
TINY_METHODS = {
    "n_samples": 2,
    "modes": 2,
    "pool": 2,
    "first_seed": 1000,
    "dropout": {"rate": 0.2},
    "bnn": {"elbo_samples": 1},
    "sghmc": {"burn_in_epochs": 0, "thinning_steps": 2},
    "swag": {"epochs": 1, "snapshots": 2, "rank": 1},
    "laplace": {"prior_precision": 1.0},
    "de": {},
}


def tiny_config(methods=True):
    """Every rule of the workflow at toy size; with methods=False only the target posterior."""
    tiny = tiny_experiment(n_samples=4)
    tiny["mmd"] = {"de_members": 2, "pvalue": False, "seed": 0}
    if not methods:
        return workflow_config({"tiny": tiny})
    tiny["methods"] = TINY_METHODS
    tiny["alignment"] = {"points": 3, "splits": ["test"], "max_sweeps": 5}
    return workflow_config({"tiny": tiny}, TINY_ANALYSES)


def snakemake(workdir, *args, check=True):
    result = subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), "--cores", "2", *args],
        capture_output=True,
        text=True,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
        )
    return result


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("wf")
    (workdir / "config.yaml").write_text(yaml.safe_dump(tiny_config()))
    snakemake(workdir)
    return workdir


def test_workflow_builds_the_posterior_and_report(finished_run):
    results = finished_run / "results" / "tiny"
    store = open_store(results / "posterior" / "target.zarr")
    assert store.n_samples == 4
    assert list(store.info("seed")) == [0, 1, 2, 3]
    assert store.attrs["experiment"] == "tiny" and store.attrs["architecture"]["name"] == "optunet"
    assert store.validate() == []  # checksummed: fully verified, nothing to note
    summary = pl.read_parquet(results / "mmd" / "deep_ensembles" / "summary.parquet")
    assert summary["n_target"][0] == 2 and summary["n_members"][0] == 2
    assert (
        summary["mmd"][0] >= -1
        and summary["ns_mmd"][0] >= -1
        and summary["mmd"][0] != summary["ns_mmd"][0]
    )
    for name in (
        "posterior_training.csv",
        "posterior_training.md",
        "posterior_store.md",
        "posterior_samples.csv",
    ):
        assert (results / "report" / name).stat().st_size > 0
    assert "| n_samples" in (results / "report" / "posterior_training.md").read_text().replace(
        " n_samples", "| n_samples"
    )
    for shard in ("000", "001"):
        assert (results / "logs" / "train_shard" / f"{shard}.log").exists()
        assert (results / "benchmarks" / "train_shard" / f"{shard}.tsv").exists()


def test_shard_stores_agree_with_the_gathered_store(finished_run):
    results = finished_run / "results" / "tiny" / "posterior"
    target = open_store(results / "target.zarr")
    shards = [open_store(results / "shards" / f"{s}.zarr") for s in ("000", "001")]
    for name in target.state_names:
        assert np.array_equal(target.read(name), np.concatenate([s.read(name) for s in shards]))


def test_rerun_has_nothing_to_do(finished_run):
    result = snakemake(finished_run, "--dry-run")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_rerunning_one_shard_keeps_the_others(finished_run, tmp_path):
    workdir = tmp_path / "copy"
    shutil.copytree(finished_run, workdir, symlinks=True)
    shard_dir = workdir / "results" / "tiny" / "posterior" / "shards"
    before = open_store(shard_dir / "000.zarr").read("conv1.weight")
    snakemake(
        workdir,
        "--forcerun",
        "train_shard",
        "--allowed-rules",
        "train_shard",
        str(shard_dir.relative_to(workdir) / "001.zarr"),
    )
    assert np.array_equal(open_store(shard_dir / "000.zarr").read("conv1.weight"), before)
    # Same seeds, same weights: the retrained shard is identical.
    again = open_store(shard_dir / "001.zarr").read("conv1.weight")
    assert np.array_equal(
        again,
        open_store(finished_run / "results/tiny/posterior/shards/001.zarr").read("conv1.weight"),
    )


def test_every_method_samples_predicts_and_is_tabulated(finished_run):
    results = finished_run / "results" / "tiny"
    pairs = [
        (m, v) for m in ("dropout", "bnn", "sghmc", "swag", "laplace") for v in ("single", "multi")
    ]
    pairs.append(("de", "multi"))
    target = open_store(results / "posterior" / "target.zarr")
    for method, variant in pairs:
        folder = results / "methods" / method / variant
        samples = open_store(folder / "samples.zarr")
        samples.validate()
        # single-mode: all n_samples (2) at each of the 2 modes; multi-mode: 2 split over them
        expected = 4 if variant == "single" else 2
        assert samples.n_samples == expected and samples.state_names == target.state_names
        assert samples.attrs["method"] == method and samples.attrs["variant"] == variant
        assert sorted(set(samples.info("mode_index"))) == [0, 1], (method, variant)
        predictions = open_predictions(folder / "predictions.zarr")
        assert predictions.read("test").shape == (expected, 200, 10)
        assert predictions.read("ood").shape == (expected, 50, 10)
        mmd = pl.read_parquet(results / "mmd" / method / variant / "summary.parquet")
        metrics = pl.read_parquet(results / "metrics" / method / f"{variant}.parquet")
        per_mode = 2 if variant == "single" else 1  # one single-mode posterior per mode
        assert mmd.height == per_mode and metrics.height == per_mode
    # one fit per mode (or one block of members), shared by both variants
    for method in ("dropout", "bnn", "sghmc", "swag", "laplace"):
        assert sorted(p.name for p in (results / "methods" / method / "fits").iterdir()) == [
            "000.pt",
            "001.pt",
        ]
    table1 = pl.read_parquet(results / "report" / "table1.parquet")
    assert table1.height == len(pairs)
    assert table1.columns[:15] == [
        "group",
        "method",
        "modes",
        "MMD",
        "NS MMD",
        "Acc",
        "ECE",
        "Brier",
        "NLL",
        "AUPR",
        "FPR95",
        "IDMI",
        "OODMI",
        "MMD rej",
        "NS MMD rej",
    ]
    one = table1.filter(pl.col("group") == "one mode")
    assert one.height == 5 and (one["modes"] == 2).all() and one["MMD sd"].null_count() == 0
    assert table1.select(table1.columns[:13]).null_count().sum_horizontal()[0] == 0
    assert "\\toprule" in (results / "report" / "table1.tex").read_text()
    assert " ± " in (results / "report" / "table1.md").read_text()
    assert pl.read_parquet(results / "report" / "table2.parquet").height == len(pairs)
    paper = (results / "report" / "table1_paper.md").read_text()
    assert "16.7" in paper  # the paper's one-mode SGHMC MMD beside ours


def test_report_holds_every_table_and_figure(finished_run):
    import base64

    snakemake(finished_run, "--report", "report.html")
    html = (finished_run / "report.html").read_text()
    results = finished_run / "results"
    tiny = (
        "posterior_training.html",
        "minmass.png",
        "mmd_deep_ensembles.html",
        "collapse.png",
        "collapse.html",
        "table1.html",
        "table1_paper.html",
        "table2.html",
        "findings.html",
        "permutation_frequency.png",
        "permutation_frequency_summary.html",
        "alignment_barrier.html",
        "alignment_interpolation.png",
    )
    shared = (
        "toy_posterior.png",
        "toy_summary.html",
        "marginals.png",
        "marginals_summary.html",
        "symmetrised_vi.html",
        "variational_alignment.html",
        "variational_alignment.png",
    )
    for path in [results / "tiny" / "report" / n for n in tiny] + [
        results / "analyses" / "report" / n for n in shared
    ]:
        assert base64.b64encode(path.read_bytes()).decode() in html, path.name
    for caption in ("Table 1 of the paper for experiment tiny", "Functional collapse in tiny"):
        assert caption in html


def planned_outputs(workdir):
    """(rule, output) of every output Snakemake plans to (re)create, from `--summary`."""
    rows = [line.split("\t") for line in snakemake(workdir, "--summary").stdout.splitlines()]
    header = rows[0]
    rule, plan = header.index("rule"), header.index("plan")
    return {
        (row[rule], row[0])
        for row in rows[1:]
        if len(row) == len(header) and row[plan] == "update pending"
    }


def _set(*path_and_value):
    """A config edit: set the key at `path` (under the experiment `tiny`) to `value`."""
    *path, value = path_and_value

    def edit(config):
        node = config["experiments"]["tiny"]
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return edit


def _reversed_keys(value):
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    return value


def _reorder_every_mapping(config):
    reordered = _reversed_keys(config)
    config.clear()
    config.update(reordered)


TRAINING = {"train_shard", "train_pool_shard", "gather_posterior", "gather_pool"}
# config edit -> the rules it must plan (None: anything but `forbidden`), the rules it must
# not plan, and a word every planned method-specific output contains
RERUNS = {
    "download": (lambda c: c.update(download=True), set(), set(), None),
    "device": (lambda c: c.update(device="cpu"), set(), set(), None),
    "data_root": (lambda c: c.update(data_root="/elsewhere"), set(), set(), None),
    "key order": (_reorder_every_mapping, set(), set(), None),
    "compute": (_set("compute", "threads", 2), set(), set(), None),
    "min_accuracy": (
        _set("posterior", "min_accuracy", 0.05),
        None,
        TRAINING,
        None,
    ),
    "swag scale (sampling only)": (
        _set("methods", "swag", "scale", 0.2),
        {"sample", "canonicalize_samples", "predict", "metrics", "mmd_method", "method_tables"},
        {"fit"},
        "/swag/",
    ),
    "laplace predictive (predictions only)": (
        _set("methods", "laplace", "predictive", "sampled"),
        {"predict", "metrics", "method_tables"},
        {"fit", "sample", "canonicalize_samples", "mmd_method"},
        "/laplace/",
    ),
    "dropout rate": (
        _set("methods", "dropout", "rate", 0.3),
        {
            "fit",
            "sample",
            "canonicalize_samples",
            "predict",
            "metrics",
            "mmd_method",
            "method_tables",
        },
        TRAINING,
        "/dropout/",
    ),
    "symmetry key": (
        _set("symmetry", "key", "max"),
        {
            "canonicalize",
            "canonicalize_samples",
            "mmd_deep_ensembles",
            "mmd_method",
            "method_tables",
        },
        {"fit", "sample", "predict"} | TRAINING,
        None,
    ),
    "metrics bins": (_set("metrics", "bins", 10), {"metrics", "method_tables"}, set(), None),
    "recipe lr": (_set("recipe", "lr", 0.05), None, set(), None),
}


def _plan(finished_run, tmp_path, edit):
    workdir = tmp_path / "copy"
    shutil.copytree(finished_run, workdir, symlinks=True)
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    edit(config)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return planned_outputs(workdir)


@pytest.mark.parametrize("name", RERUNS)
def test_config_edits_rerun_exactly_what_they_change(finished_run, tmp_path, name):
    edit, expected, forbidden, word = RERUNS[name]
    planned = _plan(finished_run, tmp_path, edit)
    rules = {rule for rule, _ in planned}
    if expected is not None:
        assert rules == expected, f"{name}: planned {sorted(rules)}"
    assert not rules & forbidden, f"{name}: planned {sorted(rules & forbidden)}"
    if word:
        per_method = [path for rule, path in planned if rule != "method_tables"]
        assert per_method and all(word in path for path in per_method), per_method
    if name == "min_accuracy":
        assert {"convergence", "pool_convergence", "posterior_tables"} <= rules
    if name == "recipe lr":
        assert rules >= TRAINING


def test_bad_config_stops_before_any_job(tmp_path):
    config = tiny_config()
    config["experiments"]["tiny"]["recipe"]["learning_rate"] = 0.1
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(tmp_path, check=False)
    assert result.returncode != 0
    assert "learning_rate" in result.stdout + result.stderr
    assert not (tmp_path / "results").exists()


def test_lint_is_clean():
    result = subprocess.run(
        [*SNAKEMAKE, "--directory", str(REPO), "--lint"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr


def test_killed_run_leaves_no_half_written_store_and_resumes(tmp_path):
    import os
    import signal
    import time

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
    snakemake(tmp_path)  # the default profile sets rerun-incomplete
    store = open_store(tmp_path / "results" / "tiny" / "posterior" / "target.zarr")
    store.validate()
    assert store.n_samples == 4


def test_a_model_named_by_import_path_runs_end_to_end(tmp_path):
    """A user's own architecture (tests/user_models.py, importable through PYTHONPATH) goes
    through every stage: training, canonical form, min-mass, MMD, methods, alignment, report."""
    import os

    shutil.copy(REPO / "tests" / "user_models.py", tmp_path / "user_models.py")
    config = tiny_config()
    config["analyses"] = NO_ANALYSES
    spec = {"name": "user_models:SmallCNN", "options": {"channels": 3}, "input_shape": [1, 28, 28]}
    config["experiments"]["tiny"]["model"] = spec
    # two methods keep it short: SWAG trains the model further, Deep Ensembles reads the pool
    keep = ("n_samples", "modes", "pool", "first_seed", "swag", "de")
    config["experiments"]["tiny"]["methods"] = {k: TINY_METHODS[k] for k in keep}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = subprocess.run(
        [*SNAKEMAKE, "--directory", str(tmp_path), "--cores", "2"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    results = tmp_path / "results" / "tiny"
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


def test_documented_result_commands_run(finished_run):
    """The README's commands that read a finished run (store info, the tables, the report),
    on this run's results; tests/test_docs_commands.py runs every other documented command."""
    from test_docs_commands import result_commands, run_result_command

    snakemake(finished_run, "--report", "results/report.html")  # what `make run` ends with
    commands = result_commands()
    assert commands
    for command in commands:
        run_result_command(command, finished_run, "tiny")


def test_report_renders_in_a_headless_browser(finished_run, tmp_path):
    """The report in a real headless Chromium (tests/chromium.py): its first page says what
    was run and what came out, categories in pipeline order, every entry labelled and
    rendered, tables sortable; no console error, no request leaving the machine. The
    screenshots are left in this test's temporary folder."""
    from chromium import Browser, check_report, chromium_or_skip

    executable = chromium_or_skip()
    report = finished_run / "results" / "report.html"
    if not report.exists():
        snakemake(finished_run, "--report", "results/report.html")
    browser = Browser(executable, tmp_path / "profile")
    try:
        seen = check_report(browser, report, tmp_path)
    finally:
        browser.close()
    print(f"report screenshots: {tmp_path}")
    text = seen["text"]
    assert (
        text.index("What was run") < text.index("Headline results") < text.index("Findings, tiny")
    )
    assert "Table 1, tiny" in text and "seeds 0..3" in text
    names = sorted(seen["categories"])  # the report's menu lists them sorted
    assert [name.split()[0] for name in names] == [str(i) for i in range(1, len(names) + 1)]
    assert len(seen["entries"]) >= 20 and len(list(tmp_path.glob("*.png"))) > len(names)
