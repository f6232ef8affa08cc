"""The workflow end to end on config.yaml's smoke experiment, run by `make smoke` (and the tiny
analyses by `snakemake`), as subprocesses; a killed run resumed on a terminal writes the same
bytes as the uninterrupted one."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from conftest import REDRAWN, SNAKEMAKE, plan_in_process, smoke_workflow_config, user_shell_env
from conftest import run_snakemake as snakemake
from console import (
    COLUMNS,
    ESCAPE,
    GOAL,
    Screen,
    lines_left,
    plugin_environment,
    run_in_terminal,
    wrapped,
)
from documented_commands import result_commands, run_result_command

from symbnn.methods import registry
from symbnn.predictions import open_predictions
from symbnn.store import open_store
from symbnn.treefile import outline

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


# what `make smoke` needs of a checkout besides config.yaml (linked into the test's folder)
CHECKOUT = (
    "Snakefile",
    "rules",
    "workflow_scripts",
    "report",
    "profiles",
    "envs",
    "Makefile",
    "dvc.mk",
)


# `make smoke` with this session's Python (no virtualenv of its own to install), 2 cores
MAKE_SMOKE = ["make", "--no-print-directory", "smoke", f"BIN={Path(sys.executable).parent}"]
MAKE_SMOKE += ["STAMP=", "CORES=2"]
SMOKE_TERMINAL = {}  # what the smoke run left on its terminal, by folder


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """The smoke run: `make smoke` (config.yaml's smoke experiment, its report and summary) in
    a folder holding the workflow, with this session's Python and no virtualenv of its own, on
    a pseudo-terminal (as a user starts it; what it leaves there is checked below); then a
    plain run adds the tiny analyses (conftest.TINY_ANALYSES), which `make smoke` leaves out,
    so that `snakemake` there has nothing left to do."""
    workdir = tmp_path_factory.mktemp("wf")
    for name in CHECKOUT:
        (workdir / name).symlink_to(REPO / name)
    (workdir / "config.yaml").write_text(yaml.safe_dump(smoke_workflow_config(), sort_keys=False))
    env = {**user_shell_env(), **plugin_environment()}
    status, raw = run_in_terminal(MAKE_SMOKE, workdir, env, timeout=1800)
    assert status == 0, ESCAPE.sub("", raw)[-5000:]
    # the summary as `symbnn summary` prints it again, before later runs add their own logs
    summary = subprocess.run(
        [Path(sys.executable).parent / "symbnn", "summary", "--experiment", "smoke"]
        + ["--report", "results/smoke/report.html"],
        cwd=workdir,
        env={**env, "COLUMNS": str(COLUMNS)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    SMOKE_TERMINAL[workdir] = (lines_left(raw), raw, summary)
    assert (workdir / "results" / "smoke" / "report.html").stat().st_size > 0
    assert not (workdir / "results" / "analyses").exists()  # make smoke runs no analysis
    # what make smoke built is up to date for a plain run: only the analyses are left to do
    analyses = re.findall(r"^rule (\w+):", (REPO / "rules" / "analyses.smk").read_text(), re.M)
    left = {rule for rule, _ in planned_outputs(workdir)}
    assert left and left <= set(analyses), sorted(left - set(analyses))
    snakemake(workdir)
    return workdir


def test_the_smoke_run_leaves_few_lines_ending_with_its_summary(finished_run):
    """What `make smoke` left on its terminal, as a terminal emulator shows it
    (benchmarks/terminal.py: pyte; the live view redraws in place): fewer than GOAL lines,
    the live view gone, a quiet report step (its messages in its log), and the summary last
    (Table 1, the report's and the log's paths), as `symbnn summary` prints it again
    afterwards, wrapped at the terminal's width. The whole `make run` of a fresh clone is
    measured by benchmarks/terminal_lines.py (docs/benchmarks.md, block terminal-lines)."""
    left, raw, summary = SMOKE_TERMINAL[finished_run]
    text = "\n".join(left)
    assert any(re.match(r"\d+ of \d+ jobs done in ", line) for line in left), text
    assert not any("jobs done, " in line for line in left), text  # the live view went away
    assert "smoke:" in summary and any("Table 1" in line for line in summary), summary
    report = "report: results/smoke/report.html (its log: results/smoke/report.log)"
    assert report in summary, summary
    expected = wrapped(summary)
    assert left[-len(expected) :] == expected, text
    assert left[-1].startswith("Snakemake's log of the last run: "), text
    assert len(left) < GOAL, text
    assert "Adding" not in raw and "Loading script code" not in raw  # the report is quiet
    assert (finished_run / "results" / "smoke" / "report.log").stat().st_size > 0


def test_workflow_builds_the_posterior_and_report(finished_run):
    results = finished_run / "results" / "smoke"
    store = open_store(results / "posterior" / "target.zarr")
    assert store.n_samples == 4
    assert list(store.info("seed")) == [0, 1, 2, 3]
    # the tiny recipe must train networks that learned: chance is 0.1 on the ten digits
    converged = pl.read_parquet(results / "posterior" / "converged.parquet")
    assert np.median(converged["test_accuracy"].to_numpy()) >= 0.5, converged
    assert np.median(store.info("test_accuracy")) >= 0.5
    assert store.attrs["experiment"] == "smoke" and store.attrs["architecture"]["name"] == "optunet"
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
    plateau = pl.read_parquet(results / "posterior" / "plateau.parquet")
    assert plateau["run"].to_list() == ["1x", "2x"] and plateau["networks"].to_list() == [2, 2]
    assert plateau["epochs"][1] == 2 * plateau["epochs"][0]
    flags = pl.read_parquet(results / "posterior" / "converged.parquet")
    assert set(flags["reason"]) <= {"kept", "below min_accuracy"}
    for shard in ("000", "001"):
        assert (results / "logs" / "train_shard" / f"{shard}.log").exists()
        assert (results / "benchmarks" / "train_shard" / f"{shard}.tsv").exists()


def test_shard_stores_agree_with_the_gathered_store(finished_run):
    results = finished_run / "results" / "smoke" / "posterior"
    target = open_store(results / "target.zarr")
    shards = [open_store(results / "shards" / f"{s}.zarr") for s in ("000", "001")]
    for name in target.state_names:
        assert np.array_equal(target.read(name), np.concatenate([s.read(name) for s in shards]))


def test_rerun_has_nothing_to_do(finished_run):
    result = plan_in_process(finished_run, "--dry-run")
    assert "Nothing to be done" in result.stdout + result.stderr


def test_rerunning_one_shard_keeps_the_others(finished_run, tmp_path):
    workdir = tmp_path / "copy"
    shutil.copytree(finished_run, workdir, symlinks=True)
    shard_dir = workdir / "results" / "smoke" / "posterior" / "shards"
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
        open_store(finished_run / "results/smoke/posterior/shards/001.zarr").read("conv1.weight"),
    )


def result_files(workdir):
    """The files of a run's results, but each job's log and timing (logs/, benchmarks/) and
    Snakemake's empty timestamp files: what must come out the same bytes in every run."""
    return sorted(
        path.relative_to(workdir)
        for path in (workdir / "results").rglob("*")
        if path.is_file()
        and path.name != ".snakemake_timestamp"
        and not {"logs", "benchmarks"} & set(path.relative_to(workdir).parts)
    )


def test_killed_run_resumes_on_a_terminal_to_the_same_bytes(finished_run, tmp_path):
    """A SIGKILL in the middle of training leaves no half-written store; the rerun resumes,
    started on a terminal as `make run` starts it: the repository's profile shows its live
    view (jobs done / total, running, elapsed) and ends in few lines. Every file the resumed
    run writes has the bytes of the same file of the uninterrupted run (finished_run: the
    same configuration, run by other processes), so DVC sees no change."""
    shutil.copy(finished_run / "config.yaml", tmp_path / "config.yaml")
    process = subprocess.Popen(
        [*SNAKEMAKE, "--directory", str(tmp_path), "--cores", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    logs = tmp_path / "results" / "smoke" / "logs" / "train_shard"
    deadline = time.time() + 120
    while not (logs.exists() and any(logs.iterdir())) and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # let the job get into training
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    shards = tmp_path / "results" / "smoke" / "posterior" / "shards"
    for shard in ("000", "001"):
        path = shards / f"{shard}.zarr"
        if path.exists():  # a shard that finished before the kill must be complete
            open_store(path).validate()
    assert not (tmp_path / "results" / "smoke" / "posterior" / "target.zarr").exists()
    snakemake(tmp_path, "--unlock")  # a SIGKILL leaves Snakemake's lock behind
    # the default profile sets rerun-incomplete; the stages after the store are not the point
    target = "results/smoke/posterior/target.zarr"
    argv = [*SNAKEMAKE, "--directory", str(tmp_path), "--cores", "2", target]
    status, raw = run_in_terminal(argv, REPO, plugin_environment())
    assert status == 0, raw[-5000:]
    text = ESCAPE.sub("", raw)
    assert re.search(r"\d+/\d+ jobs done, \d+ running, elapsed", text), text[-3000:]
    screen = Screen(120)
    screen.feed(raw)
    lines = screen.shown()
    assert re.match(r"\d+ of \d+ jobs done in ", lines[-1]), lines[-10:]
    assert len(lines) < 100, "\n".join(lines)
    store = open_store(tmp_path / target)
    store.validate()
    assert store.n_samples == 4
    resumed = result_files(tmp_path)
    for store in (target, "results/smoke/posterior/shards/001.zarr"):
        assert Path(store, "zarr.json") in resumed, resumed
    differ = [
        path
        for path in resumed
        if (tmp_path / path).read_bytes() != (finished_run / path).read_bytes()
    ]
    assert not differ, (
        f"{len(differ)} of {len(resumed)} files differ from the uninterrupted run: {differ[:10]}"
    )


def test_every_method_samples_predicts_and_is_tabulated(finished_run):
    """Every registered method (the smoke experiment turns each on): its samples, predictions,
    MMD and metrics per unit, one fit per mode, its rows of Tables 1 and 2."""
    results = finished_run / "results" / "smoke"
    pairs = [(m, v) for m in registry.METHOD_NAMES for v in registry.variants(m)]
    target = open_store(results / "posterior" / "target.zarr")
    for method, variant in pairs:
        folder = results / "methods" / method / variant
        samples = open_store(folder / "samples.zarr")
        samples.validate()
        # one-mode: all n_samples (2) at each of the 2 modes; multi-mode: 2 replicates of 2
        # samples, each from its own mode (Deep Ensembles: its own 2 pool networks)
        assert samples.n_samples == 4 and samples.state_names == target.state_names
        assert samples.attrs["method"] == method and samples.attrs["variant"] == variant
        assert list(samples.info("unit")) == [0, 0, 1, 1], (method, variant)
        modes = [0, 1, 2, 3] if registry.descriptor(method).members else [0, 0, 1, 1]
        assert list(samples.info("mode_index")) == modes, (method, variant)
        predictions = open_predictions(folder / "predictions.zarr")
        assert predictions.read("test").shape[0] == 4
        assert predictions.read("ood").shape == (4, 50, 10)
        mmd = pl.read_parquet(results / "mmd" / method / variant / "summary.parquet")
        metrics = pl.read_parquet(results / "metrics" / method / f"{variant}.parquet")
        # one posterior per unit: per mode (one-mode), per replicate (multi-mode)
        assert mmd["unit"].to_list() == [0, 1] and metrics["unit"].to_list() == [0, 1]
        assert metrics["mode_accuracy"].null_count() == 0
    # one fit per mode, shared by both variants; one block of both modes for the methods
    # that fit them in one batched run (the tiny OptuNet has a hand-written pass), one of
    # all members for Deep Ensembles
    for method in [m for m in registry.METHOD_NAMES if not registry.descriptor(m).members]:
        fits = sorted((results / "methods" / method / "fits").iterdir())
        if registry.descriptor(method).batched_fit:
            assert [p.name for p in fits] == ["000.safetensors"], method
            assert len(outline(fits[0])["fits"]) == 2, method
        else:
            assert [p.name for p in fits] == ["000.safetensors", "001.safetensors"], method
    table1 = pl.read_parquet(results / "report" / "table1.parquet")
    assert table1.height == len(pairs)
    assert table1.columns[:15] == [
        "group",
        "method",
        "units",
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
    assert (table1["units"] == 2).all() and table1["MMD sd"].null_count() == 0
    assert table1["Modes acc"].null_count() == 0
    assert table1.select(table1.columns[:13]).null_count().sum_horizontal()[0] == 0
    assert "\\toprule" in (results / "report" / "table1.tex").read_text()
    assert " ± " in (results / "report" / "table1.md").read_text()
    assert pl.read_parquet(results / "report" / "table2.parquet").height == len(pairs)
    paper = (results / "report" / "table1_paper.md").read_text()
    assert "16.7" in paper  # the paper's one-mode SGHMC MMD beside ours


ANALYSES_OUTPUTS = [
    "analyses/report/toy_posterior.png",
    "analyses/report/toy_summary.md",
    "analyses/report/marginals.png",
    "analyses/report/marginals_summary.md",
    "smoke/report/permutation_frequency.png",
    "smoke/report/permutation_frequency_summary.md",
    "smoke/report/posterior_marginals.png",
    "smoke/report/posterior_marginals.md",
]


def test_analyses_build_their_figures_and_tables(finished_run):
    """The paper's further analyses (rules/analyses.smk), asked for by rule all."""
    results = finished_run / "results"
    for output in ANALYSES_OUTPUTS:
        assert (results / output).stat().st_size > 0, output

    weights = pl.read_parquet(results / "analyses/toy/output_weights.parquet")
    summary = (results / "analyses/report/toy_summary.md").read_text()
    assert "networks trained" in summary and "| 200" in summary
    assert 0 < weights.height <= 200 and (weights["train_loss"] <= 0.3).all()

    tau = pl.read_parquet(results / "smoke/analyses/permutation_frequency.parquet")
    assert set(tau["run"].to_list()) == {0, 1} and set(tau["key"].to_list()) == {"max", "first"}
    assert tau["tau"].is_between(-1, 1).all()
    perms = pl.read_parquet(results / "smoke/analyses/sorting_permutations.parquet")
    # one snapshot more than pairs per run, key and group
    assert perms.height == tau.height + 2 * 2 * 3

    ks = pl.read_parquet(results / "analyses/marginals/ks_tests.parquet")
    assert set(ks["stage"].to_list()) == {"trained", "scaled", "canonical"}
    assert ks["pvalue"].is_between(0, 1).all()

    pairs = pl.read_parquet(results / "analyses/barrier_statistics/pairs.parquet")
    assert pairs.height == 2 * 2 * 2 * 2  # kinds x pairs x alignments x splits
    assert (pairs["loss_barrier"] >= 0).all() and (pairs["accuracy_barrier"] >= 0).all()
    assert "weight_matching" in (results / "analyses/report/barrier_statistics.md").read_text()

    # symmetrised VI by width: per width a reference row and 2 families x 2 seeds
    fits = pl.read_parquet(results / "analyses/symmetrised_vi_widths/runs.parquet")
    assert fits.height == 2 * (1 + 2 * 2) and set(fits["width"]) == {3, 6}
    vi = fits.filter(pl.col("family") != "reference")
    assert (vi["elbo"] - vi["log_group_order"] - vi["elbo_fit"]).abs().max() < 1e-6
    assert (vi["overlap_hi"] >= vi["overlap_lo"]).all() and vi["ns_mmd"].is_finite().all()
    assert "symmetrised" in (results / "analyses/report/symmetrised_vi_widths.md").read_text()
    assert (results / "analyses/report/symmetrised_vi_widths_gaps.md").stat().st_size > 0
    for log in (
        "analyses/logs/toy_posterior.log",
        "analyses/logs/marginals.log",
        "analyses/logs/barrier_statistics.log",
        "analyses/logs/symmetrised_vi_widths.log",
        "smoke/logs/permutation_frequency.log",
    ):
        assert (results / log).exists(), log


def test_symmetry_counts_and_the_optunet_marginals(finished_run):
    """Paper D.4 and D.1 (the counts table, the tiny OptuNet's modes measured on its 4
    canonical networks) and the OptuNet panel of Figure 9, as the run wrote them."""
    report = finished_run / "results" / "smoke" / "report"
    table = pl.read_csv(report / "symmetry_counts.csv")
    own = table.row(0, named=True)  # the measured architecture first
    # credited to every experiment of config.yaml with the smoke experiment's network
    experiments = yaml.safe_load((finished_run / "config.yaml").read_text())["experiments"]
    model = experiments["smoke"]["model"]
    sharing = [
        f"experiment {name}" for name in sorted(experiments) if experiments[name]["model"] == model
    ]
    assert own["used by"] == ", ".join(sharing) and own["networks measured"] == 4
    assert own["log10 |G|, paper's rule"] > own["log10 |G|"] == own["log10 modes if Dirac (D.1)"]
    architectures = " ".join(table["architecture"])
    assert "resnet20_frn_silu" in architectures and "stem=imagenet" in architectures
    modes = pl.read_parquet(finished_run / "results/smoke/symmetry/mode_counts.parquet")
    assert modes["row"].to_list() == [0, 1, 2, 3]
    ks = pl.read_parquet(finished_run / "results/smoke/marginals/ks_tests.parquet")
    assert set(ks["stage"]) == {"stored", "canonical"}
    assert set(ks["group"]) == {"conv1", "conv2", "fc1"}


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
        "symmetry_counts.html",
        "posterior_marginals.png",
        "posterior_marginals.html",
    )
    shared = (
        "toy_posterior.png",
        "toy_summary.html",
        "marginals.png",
        "marginals_summary.html",
        "symmetrised_vi.html",
        "variational_alignment.html",
        "variational_alignment.png",
        "barrier_statistics.html",
        "symmetrised_vi_widths.html",
        "symmetrised_vi_widths_gaps.html",
    )
    for path in [results / "smoke" / "report" / n for n in tiny] + [
        results / "analyses" / "report" / n for n in shared
    ]:
        assert base64.b64encode(path.read_bytes()).decode() in html, path.name
    assert "System Message" not in html  # no docutils complaint under a caption
    for caption in (
        "Table 1 of the paper for experiment smoke",
        "Functional collapse in smoke",
        "7 Further analyses",
        "Frequency of weight permutations",
    ):
        assert caption in html


def planned_outputs(workdir):
    """(rule, output) of every output Snakemake plans to (re)create, from `--summary`."""
    rows = [line.split("\t") for line in plan_in_process(workdir, "--summary").stdout.splitlines()]
    header = rows[0]
    rule, plan = header.index("rule"), header.index("plan")
    return {
        (row[rule], row[0])
        for row in rows[1:]
        if len(row) == len(header) and row[plan] == "update pending"
    }


def _set(*path_and_value):
    """A config edit: set the key at `path` (under the experiment `smoke`) to `value`."""
    *path, value = path_and_value

    def edit(config):
        node = config["experiments"]["smoke"]
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
    # every network is kept before and after (accuracies about 0.6): the convergence tables
    # and what reports the rule rerun, no fit (MC Dropout's and the BNN's own networks passed
    # 0.05 at their first attempt), nothing that reads only the kept networks; the
    # permutation frequency reads the threshold (it drops its own runs below it)
    "min_accuracy, same networks kept": (
        _set("posterior", "min_accuracy", 0.05),
        {"convergence", "pool_convergence", "posterior_tables", "permutation_frequency"},
        TRAINING | {"fit", "sample", "mmd_method", "metrics", "method_tables", "accuracies"},
        None,
    ),
    "marginals plot_units (figure only)": (
        lambda c: c["analyses"]["marginals"].update(plot_units=2),
        {"marginals_figure"},
        {"marginals"},
        None,
    ),
    "swag scale (sampling only)": (
        _set("methods", "swag", "scale", 0.2),
        REDRAWN,
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
            "posterior_marginals",
            "symmetry_counts",
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
    if name == "recipe lr":
        assert rules >= TRAINING


def why(workdir, *args):
    """`symbnn why` run in ``workdir``: its lines."""
    command = [sys.executable, "-m", "symbnn.cli", "why", "--snakefile", str(REPO / "Snakefile")]
    result = subprocess.run(
        [*command, *args], cwd=workdir, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_why_an_up_to_date_run_has_nothing_to_run(finished_run):
    assert why(finished_run) == ["nothing to run: every output is up to date"]


def test_why_names_the_jobs_of_a_rerun_table_edit_and_the_setting(finished_run, tmp_path):
    """`symbnn why` after the table's "dropout rate" edit and one removed output: one line per
    job the table expects, each naming the setting old -> new or the input rebuilt first, and
    "missing output" for the removed file."""
    edit, expected, _, word = RERUNS["dropout rate"]
    workdir = tmp_path / "copy"
    shutil.copytree(finished_run, workdir, symlinks=True)
    config = yaml.safe_load((workdir / "config.yaml").read_text())
    edit(config)
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (workdir / "results" / "smoke" / "report" / "symmetry_counts.md").unlink()

    *lines, count = why(workdir)
    assert count == f"{len(lines)} job(s) to run"
    by_rule = {}
    for line in lines:
        rule, _, rest = line.partition(" ")
        by_rule.setdefault(rule, []).append(rest)
    assert set(by_rule) == expected | {"symmetry_counts"}, lines
    (counts,) = by_rule["symmetry_counts"]
    assert counts.endswith(": missing output results/smoke/report/symmetry_counts.md"), counts
    for rule, rests in by_rule.items():
        if rule not in ("method_tables", "symmetry_counts"):
            # this method's jobs only, every one
            assert all(word in rest.partition(":")[0] for rest in rests), rests
            assert "/laplace/" not in " ".join(rests)
    # the jobs whose params hold the rate name it, old -> new; what reads their outputs says so
    for rule in ("fit", "sample"):
        assert all("settings.rate 0.2 -> 0.3" in rest for rest in by_rule[rule]), by_rule[rule]
    assert all(
        "input rebuilt first: results/smoke/methods/dropout/" in rest
        for rest in by_rule["predict"] + by_rule["metrics"]
    )


def test_an_acceptance_rule_changing_one_mode_refits_that_mode_only(finished_run, tmp_path):
    """A threshold between the accuracies of the first two pool networks: a mode whose pool
    network changes is refitted by every method (with the block of modes its fit job holds:
    both modes for the methods that fit them in one batched run); MC Dropout and the BNN,
    which retry seeds until their own network passes the threshold, refit a block only where
    the new threshold keeps another attempt of one of its modes (their fit files record each
    attempt's accuracy)."""
    results = finished_run / "results" / "smoke"
    pool = pl.read_parquet(results / "modes" / "converged.parquet")
    accuracy = pool["test_accuracy"].to_list()
    assert accuracy[0] != accuracy[1], accuracy
    threshold = (accuracy[0] + accuracy[1]) / 2
    kept = [row for row, a in enumerate(accuracy) if a >= threshold]
    changed = {k for k in (0, 1) if k >= len(kept) or kept[k] != k}
    assert changed  # the lower of the two is dropped
    expected = set()
    for method in ("dropout", "bnn", "sghmc", "swag", "laplace"):
        blocks = [[0, 1]] if registry.descriptor(method).batched_fit else [[0], [1]]
        for block, modes in enumerate(blocks):
            fit = f"results/smoke/methods/{method}/fits/{block:03d}.safetensors"
            refit = bool(changed & set(modes))
            if method in ("dropout", "bnn") and not refit:
                tried = [f["attempts"] for f in outline(finished_run / fit)["fits"]]
                # a kept attempt fails the new threshold
                refit = any(attempts[-1] < threshold for attempts in tried)
            if refit:
                expected.add(fit)
    expected.add("results/smoke/methods/de/fits/000.safetensors")  # its members are modes 0..3
    planned = _plan(finished_run, tmp_path, _set("posterior", "min_accuracy", threshold))
    fits = {path for rule, path in planned if rule == "fit"}
    assert fits == expected, (threshold, accuracy, sorted(fits))
    assert not {rule for rule, _ in planned} & TRAINING


def test_documented_result_commands_run(finished_run):
    """The README's commands that read a finished run (store info, the tables, the report),
    on this run's results; tests/repository/test_docs_commands.py runs every other documented command."""
    snakemake(finished_run, "--report", "results/report.html")  # what `make run` ends with
    commands = result_commands()
    assert commands
    for command in commands:
        run_result_command(command, finished_run, "smoke")


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
        text.index("What was run") < text.index("Headline results") < text.index("Findings, smoke")
    )
    assert "Table 1, smoke" in text and "seeds 0..3" in text
    names = sorted(seen["categories"])  # the report's menu lists them sorted
    assert [name.split()[0] for name in names] == [str(i) for i in range(1, len(names) + 1)]
    assert len(seen["entries"]) >= 20 and len(list(tmp_path.glob("*.png"))) > len(names)


def test_make_screenshots_pictures_the_report_at_1400_px(finished_run, tmp_path):
    """`make screenshots` (symbnn.report.screenshots): the first page and Table 1, 1,400 px
    wide, as the README shows them; and at that width Table 1 on the first page needs no
    scrolling sideways (before, it sat in a 512-px column beside the rule graph)."""
    import struct
    import subprocess
    import sys

    from chromium import Browser, chromium_or_skip

    chromium_or_skip()
    report = finished_run / "results" / "report.html"
    if not report.exists():
        snakemake(finished_run, "--report", "results/report.html")
    result = subprocess.run(
        [sys.executable, "-m", "symbnn.report.screenshots", str(report), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    for name in ("report_front_page.png", "report_table1.png"):
        header = (tmp_path / name).read_bytes()[:24]
        width, height = struct.unpack(">II", header[16:24])  # the PNG's IHDR
        assert header[:8] == b"\x89PNG\r\n\x1a\n" and width == 1400 and height >= 600, name
    browser = Browser(chromium_or_skip(), tmp_path / "profile")
    try:
        browser.open(report.resolve().as_uri())
        box = browser.evaluate(
            "(() => { const t = document.querySelector('table.symbnn').parentElement;"
            " return [t.scrollWidth, t.clientWidth]; })()"
        )
    finally:
        browser.close()
    assert box[0] <= box[1], f"Table 1 scrolls sideways: {box}"
