"""The analyses' rules end to end on a shrunk configuration, as a `snakemake` subprocess."""

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import TINY_ANALYSES, tiny_experiment, workflow_config

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
pytestmark = pytest.mark.slow

TARGETS = [
    "results/analyses/report/toy_posterior.png",
    "results/analyses/report/toy_summary.md",
    "results/analyses/report/marginals.png",
    "results/analyses/report/marginals_summary.md",
    "results/tiny/report/permutation_frequency.png",
    "results/tiny/report/permutation_frequency_summary.md",
]


def config(analyses):
    return workflow_config({"tiny": tiny_experiment(n_samples=2)}, analyses)


def snakemake(workdir, *args):
    result = subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), "--cores", "2", *args],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
        )
    return result.stdout + result.stderr


def test_analyses_rules_build_their_figures_and_tables(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config(TINY_ANALYSES)))
    snakemake(tmp_path, *TARGETS)
    for target in TARGETS:
        assert (tmp_path / target).stat().st_size > 0, target

    weights = pl.read_parquet(tmp_path / "results/analyses/toy/output_weights.parquet")
    summary = (tmp_path / "results/analyses/report/toy_summary.md").read_text()
    assert "networks trained" in summary and "| 200" in summary
    assert 0 < weights.height <= 200 and (weights["train_loss"] <= 0.3).all()

    tau = pl.read_parquet(tmp_path / "results/tiny/analyses/permutation_frequency.parquet")
    assert set(tau["run"].to_list()) == {0, 1} and set(tau["key"].to_list()) == {"max", "first"}
    assert tau["tau"].is_between(-1, 1).all()
    perms = pl.read_parquet(tmp_path / "results/tiny/analyses/sorting_permutations.parquet")
    assert (
        perms.height == tau.height + 2 * 2 * 3
    )  # one snapshot more than pairs per run, key and group

    ks = pl.read_parquet(tmp_path / "results/analyses/marginals/ks_tests.parquet")
    assert set(ks["stage"].to_list()) == {"trained", "scaled", "canonical"}
    assert ks["pvalue"].is_between(0, 1).all()
    for log in (
        "analyses/logs/toy_posterior.log",
        "analyses/logs/marginals.log",
        "tiny/logs/permutation_frequency.log",
    ):
        assert (tmp_path / "results" / log).exists(), log

    snakemake(tmp_path, "--report", "report.html", *TARGETS)
    html = (tmp_path / "report.html").read_text()
    assert "7 Further analyses" in html and "toy posterior" in html
    assert "Frequency of weight permutations" in html


def test_rule_all_asks_for_the_analyses(tmp_path):
    # (an analysis set to false drops out of the plan: tests/test_analyses.py checks symbnn.analyses.plan)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config(TINY_ANALYSES)))
    planned = snakemake(tmp_path, "--dry-run")
    for target in TARGETS:
        assert target in planned, target
