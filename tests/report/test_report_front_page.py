"""The report's first page: what was run and the headline results, from the results on disk."""

import polars as pl
from conftest import tiny_experiment, workflow_config

from symbnn.report.front_page import building_report, front_page
from symbnn.settings import config_from_mapping


def test_first_page_says_what_ran_and_what_came_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    experiment = tiny_experiment(n_samples=4)
    settings = config_from_mapping(workflow_config({"tiny": experiment}))
    report = tmp_path / settings.results / "tiny" / "report"
    report.mkdir(parents=True)
    (report.parent / "posterior").mkdir()
    pl.DataFrame(
        {
            "converged": [True, True, False, True],
            "test_accuracy": [0.93, 0.92, 0.41, 0.95],
            "reason": ["kept", "kept", "below min_accuracy", "kept"],
        }
    ).write_parquet(report.parent / "posterior" / "converged.parquet")
    pl.DataFrame(
        {
            "run": ["1x", "2x"],
            "epochs": [24, 48],
            "networks": [2, 2],
            "median": [0.925, 0.93],
            "min": [0.92, 0.925],
            "median_gain": [0.005, 0.005],
            "at_plateau": [True, True],
        }
    ).write_parquet(report.parent / "posterior" / "plateau.parquet")
    pl.DataFrame(
        {
            "group": ["one mode", "multi mode"],
            "method": ["SWAG", "SWAG"],
            "MMD": ["5.0 / 1.8", "2.0 / 1.0"],
        }
    ).write_parquet(report / "table1_paper.parquet")
    pl.DataFrame(
        {
            "finding": ["multi-mode MMD below single-mode"],
            "status": ["claim"],
            "paper": ["4 of 4"],
            "ours": ["1 hold, 0 within noise, 0 contradicted of 1"],
            "verdict": ["holds"],
            "test": ["two-sided Mann-Whitney U, level 0.05"],
            "cases": ["SWAG: holds; multi 2.0 vs one 5.0"],
        }
    ).write_parquet(report / "findings.parquet")
    bench = report.parent / "benchmarks" / "train_shard"
    bench.mkdir(parents=True)
    for shard, seconds in (("000", 90.0), ("001", 30.0)):
        (bench / f"{shard}.tsv").write_text(f"s\th:m:s\n{seconds}\t0:01:30\n")

    page = front_page(settings, "The workflow's own description.", lambda name: 904)
    assert page.index("What was run") < page.index("Headline results") < page.index("The workflow")
    assert "seeds 0..3" in page and "optunet, 904 parameters" in page
    assert "3 of 4 kept, 1 dropped (1 below min_accuracy)" in page
    assert "median 0.925, min 0.410" in page
    assert "moved the median by +0.5 points: at its plateau" in page
    assert "2 jobs, 2.0 min of job time" in page
    assert "MMD (x100, ours / paper) &darr;" in page  # units and direction in the header
    assert "<td class='best' title='best in column'><b>2.0 / 1.0</b></td>" in page
    assert "multi-mode MMD below single-mode (claim; paper 4 of 4): **holds**" in page
    assert "Mann-Whitney" in page
    assert "symbnn 0.1" in page and "torch" in page and "The workflow's own description." in page
    assert "{{" not in page and "<script" not in page


def test_the_report_is_recognized_in_either_spelling():
    assert building_report(["snakemake", "--report", "r.html"])
    assert building_report(["snakemake", "--report=r.html"])
    assert not building_report(["snakemake", "--report-stylesheet", "s.css", "-n"])
