"""What a finished run found, in a few terminal lines: per experiment, Table 1 beside the
paper's (compact, fitted to the terminal's width), the findings' verdict counts and every
contradicted claim, the target networks' accuracy and the plateau check, and the job time;
then where the report and the logs are. `make run` ends with it and `symbnn summary` prints
it again; it reads only the files the workflow wrote (results/<experiment>/report/,
posterior/, benchmarks/), so it matches them."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from symbnn.report.front_page import duration, job_time, training_lines
from symbnn.report.verdicts import CONTRADICTED, OUTCOMES

ANALYSES = "analyses"  # the experiment-independent analyses' folder under the results
GAP = "  "  # between the columns of the compact Table 1


def experiments_in(results: Path) -> list[str]:
    """The experiments with results under `results` (folders with a posterior or a report),
    in name order; the analyses' folder is not one."""
    if not results.is_dir():
        return []
    return sorted(
        folder.name
        for folder in results.iterdir()
        if folder.is_dir()
        and folder.name != ANALYSES
        and any((folder / part).is_dir() for part in ("posterior", "report"))
    )


def _short_header(column: str) -> str:
    return column.removesuffix(" median").removesuffix(" mean")


def compact_table(frame: pl.DataFrame, width: int) -> tuple[list[str], list[str]]:
    """`frame` (strings) as aligned text lines no wider than `width`, a group's name shown on
    its first row only; columns that do not fit are left out, right to left. Returns (lines,
    the headers left out)."""
    text = frame.select(pl.all().cast(pl.String).fill_null("-"))
    if "group" in text.columns:
        first = text["group"].ne_missing(text["group"].shift(1))
        text = text.with_columns(pl.when(first).then(pl.col("group")).otherwise(pl.lit("")))
    headers = [_short_header(c) for c in text.columns]
    widths = [max([len(h), *(len(v) for v in text[c])]) for h, c in zip(headers, text.columns)]
    kept = len(headers)
    while kept > 2 and sum(widths[:kept]) + len(GAP) * (kept - 1) > width:
        kept -= 1

    def row(cells: list[str]) -> str:
        return GAP.join(cell.ljust(w) for cell, w in zip(cells[:kept], widths)).rstrip()

    lines = [row(headers)] + [row(list(values)) for values in text.iter_rows()]
    return lines, headers[kept:]


def findings_lines(findings: pl.DataFrame) -> list[str]:
    """The verdicts' counts over the paper's findings, then each contradicted one (with our
    figures), and the check of accuracy gained by further training when it flags rows."""
    judged = findings.filter(pl.col("verdict").is_in(OUTCOMES))
    counts = {outcome: (judged["verdict"] == outcome).sum() for outcome in OUTCOMES}
    lines = [
        f"findings: {judged.height} of the paper's tested: "
        + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES)
    ]
    for row in judged.filter(pl.col("verdict") == CONTRADICTED).iter_rows(named=True):
        lines.append(f"  contradicted: {row['finding']} ({row['status']}; ours: {row['ours']})")
    for row in findings.filter(~pl.col("verdict").is_in(OUTCOMES)).iter_rows(named=True):
        if row["verdict"] != "none":
            lines.append(f"  {row['finding']}: {row['verdict']}")
    return lines


def experiment_lines(name: str, folder: Path, width: int) -> list[str]:
    report = folder / "report"
    lines = [f"{name}:"]
    lines += [f"  {line}" for line in training_lines(folder / "posterior")]
    beside = report / "table1_paper.parquet"
    if beside.is_file():
        table, left_out = compact_table(pl.read_parquet(beside), width - 4)
        lines.append(f"  Table 1, ours / the paper's (units: {report / 'table1_paper.md'}):")
        lines += [f"    {line}" for line in table]
        if left_out:
            lines.append(f"    (and {', '.join(left_out)}: wider than the terminal)")
    if (report / "findings.parquet").is_file():
        lines += [
            f"  {line}" for line in findings_lines(pl.read_parquet(report / "findings.parquet"))
        ]
    jobs, seconds = job_time(folder)
    if jobs:
        lines.append(f"  job time: {duration(seconds)} over {jobs} jobs")
    return lines


def newest_snakemake_log(workdir: Path) -> Path | None:
    """Snakemake's log of the newest run (`snakemake --report` writes one too: skipped)."""
    for log in sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"), reverse=True):
        with log.open(errors="replace") as handle:
            head = [line for _, line in zip(range(5), handle)]
        if not any(line.startswith("Creating report") for line in head):
            return log
    return None


def summary_lines(
    results: Path,
    experiments: list[str] | None = None,
    width: int = 100,
    report: Path | None = None,
    workdir: Path = Path("."),
) -> list[str]:
    """The run's summary: each experiment (default: every one under `results`), the analyses'
    job time, the report and the logs."""
    lines = []
    for name in experiments if experiments is not None else experiments_in(results):
        if (results / name).is_dir():
            lines += experiment_lines(name, results / name, width)
    jobs, seconds = job_time(results / ANALYSES)
    if jobs:
        lines.append(f"analyses: job time {duration(seconds)} over {jobs} jobs")
    report = report or results / "report.html"
    if report.is_file():
        log = report.with_suffix(".log")
        lines.append(f"report: {report}" + (f" (its log: {log})" if log.is_file() else ""))
    log = newest_snakemake_log(workdir)
    if log is not None:
        lines.append(f"Snakemake's log of the last run: {log.relative_to(workdir)}")
    return lines
