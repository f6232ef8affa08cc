"""The summary a run ends with (`make run`, `symbnn summary`), from hand-written result files
of the formats the workflow writes (results/<experiment>/report/, posterior/, benchmarks/)."""

import polars as pl

from symbnn.cli import main
from symbnn.report.run_summary import compact_table, summary_lines

TABLE1_PAPER = {
    "group": ["one mode", "one mode", "multi mode"],
    "method": ["MC Dropout", "SWAG", "SWAG"],
    "MMD median": ["5.0 / 1.8", "4.1 / 2.2", "2.0 / 1.0"],
    "Acc": ["97.1 / 98.0", "96.0 / 97.5", "98.2 / 98.6"],
    "ECE": ["1.2 / 0.9", "1.5 / -", "0.8 / 0.7"],
}
FINDINGS = {
    "finding": [
        "multi-mode MMD below single-mode",
        "multi-mode Acc above single-mode",
        "Deep Ensembles lowest MMD",
        "one-mode accuracy above its modes' by more than the target's spread",
    ],
    "status": ["claim", "claim", "observation (the paper's table is mixed)", "check"],
    "paper": ["4 of 4", "4 of 4", "1 of 2", "-"],
    "ours": [
        "1 hold, 0 within noise, 0 contradicted of 1",
        "0 hold, 0 within noise, 1 contradicted of 1",
        "0 hold, 1 within noise, 0 contradicted of 1",
        "1 of 2 rows",
    ],
    "verdict": ["holds", "contradicted", "within noise", "SWAG"],
    "test": ["two-sided Mann-Whitney U, level 0.05"] * 3 + ["-"],
    "cases": ["SWAG: holds", "SWAG: contradicted", "-", "SWAG: +2.00 points (beyond)"],
}


def finished(tmp_path):
    """A results folder of one experiment `tiny` and the analyses, as a run leaves it."""
    results = tmp_path / "results"
    tiny = results / "tiny"
    for folder in ("report", "posterior", "benchmarks/train_shard", "benchmarks/fit"):
        (tiny / folder).mkdir(parents=True)
    pl.DataFrame(TABLE1_PAPER).write_parquet(tiny / "report" / "table1_paper.parquet")
    pl.DataFrame(FINDINGS).write_parquet(tiny / "report" / "findings.parquet")
    pl.DataFrame(
        {"converged": [True, True, True], "test_accuracy": [0.93, 0.97, 0.95]}
    ).write_parquet(tiny / "posterior" / "converged.parquet")
    pl.DataFrame(
        {
            "run": ["1x", "2x"],
            "epochs": [12, 24],
            "networks": [2, 2],
            "median": [0.95, 0.951],
            "min": [0.94, 0.945],
            "median_gain": [0.001, 0.001],
            "at_plateau": [True, True],
        }
    ).write_parquet(tiny / "posterior" / "plateau.parquet")
    for tsv, seconds in (("train_shard/000", 60.0), ("train_shard/001", 90.0), ("fit/0", 30.0)):
        (tiny / "benchmarks" / f"{tsv}.tsv").write_text(f"s\th:m:s\n{seconds}\t0:01:00\n")
    (results / "analyses" / "benchmarks").mkdir(parents=True)
    (results / "analyses" / "benchmarks" / "toy.tsv").write_text("s\th:m:s\n120.0\t0:02:00\n")
    (results / "report.html").write_text("<html></html>")
    (results / "report.log").write_text("Adding ...\n")
    logs = tmp_path / ".snakemake" / "log"
    logs.mkdir(parents=True)
    for stamp in ("2026-01-01T100000.1", "2026-01-02T100000.1"):
        (logs / f"{stamp}.snakemake.log").write_text("Building DAG of jobs...\n")
    # the report's own, newer: not the run's
    (logs / "2026-01-03T100000.1.snakemake.log").write_text("Building DAG...\nCreating report...\n")
    return results


def test_the_summary_gives_each_answer_of_the_run(tmp_path):
    finished(tmp_path)
    lines = summary_lines(tmp_path / "results", width=100, workdir=tmp_path)
    text = "\n".join(lines)
    assert lines[0] == "tiny:"
    assert "test accuracy of the trained networks: median 0.950, min 0.930, max 0.970" in text
    assert "plateau check on 2 seeds" in text and "at its plateau" in text
    # Table 1 beside the paper's: a group named on its first row only, short headers
    table = [line.strip() for line in lines if "/ " in line and "Table" not in line]
    assert " ".join(table[0].split()) == "one mode MC Dropout 5.0 / 1.8 97.1 / 98.0 1.2 / 0.9"
    assert table[1].startswith("SWAG") and table[2].startswith("multi mode")
    header = next(line for line in lines if "method" in line)
    assert header.split() == ["group", "method", "MMD", "Acc", "ECE"]
    assert "findings: 3 of the paper's tested: 1 holds, 1 within noise, 1 contradicted" in text
    assert "contradicted: multi-mode Acc above single-mode (claim; ours: 0 hold" in text
    assert "one-mode accuracy above its modes' by more than the target's spread: SWAG" in text
    assert "job time: 3.0 min over 3 jobs" in text
    assert "analyses: job time 2.0 min over 1 jobs" in text
    assert f"report: {tmp_path / 'results' / 'report.html'} (its log: " in text
    assert (
        lines[-1]
        == "Snakemake's log of the last run: .snakemake/log/2026-01-02T100000.1.snakemake.log"
    )
    assert len(lines) < 20


def test_a_narrow_terminal_leaves_columns_out_and_says_so():
    lines, left_out = compact_table(pl.DataFrame(TABLE1_PAPER), width=40)
    assert left_out == ["Acc", "ECE"]
    assert all(len(line) <= 40 for line in lines)
    assert lines[0].split() == ["group", "method", "MMD"]


def test_symbnn_summary_prints_it_from_the_configured_results(tmp_path, monkeypatch, capsys):
    results = finished(tmp_path)
    (results / "other").mkdir()
    (results / "other" / "posterior").mkdir()
    (tmp_path / "config.yaml").write_text("run: [tiny]\nresults: results\n")
    monkeypatch.chdir(tmp_path)
    assert main(["summary"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiny:\n") and "other:" not in out  # config.yaml's experiments only
    assert "findings: 3 of the paper's tested" in out
    (tmp_path / "config.yaml").unlink()
    assert main(["summary", "results"]) == 0  # no configuration: every experiment there
    assert "other:" in capsys.readouterr().out


def test_symbnn_summary_names_a_missing_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["summary", "nowhere"]) == 1
    assert "summary: error: nowhere: no such results folder" in capsys.readouterr().err


def test_symbnn_summary_of_a_named_experiment(tmp_path, monkeypatch, capsys):
    """`--experiment NAME` (what `make smoke` asks for): that experiment only, whatever
    config.yaml's run says; one with no results there is an error naming it and those there."""
    results = finished(tmp_path)
    (results / "other" / "posterior").mkdir(parents=True)
    (tmp_path / "config.yaml").write_text("run: [tiny]\nresults: results\n")
    monkeypatch.chdir(tmp_path)
    assert main(["summary", "--experiment", "other"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("other:\n") and "tiny:" not in out
    assert main(["summary", "--experiment", "smoke"]) == 1
    err = capsys.readouterr().err
    assert "results: no results of experiment smoke (there: other, tiny)" in err, err
