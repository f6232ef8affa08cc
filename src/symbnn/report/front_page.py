"""The first page of the HTML report: what was run (experiments, networks, methods, seeds,
versions, job time) and the headline results (Table 1 beside the paper's, the findings),
then the workflow's description. Built from the results on disk when `snakemake --report`
reads the Snakefile, so it needs no rule of its own and always matches the results."""

from __future__ import annotations

import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from symbnn.methods.registry import configured_methods

PAGE = Path(".snakemake") / "symbnn-front-page.rst"
# Snakemake's report centres its content vertically, which puts the top of a page taller
# than the window out of reach: start this page (the one holding the description) at the top.
# It also sets the description in a 512-px column beside the rule graph, where Table 1 needs
# scrolling sideways: the text takes the page's width and the graph follows it (the menu's
# "Workflow" shows the graph on its own too). Only this page carries the style.
TOP_ALIGNED = (
    "<style>div.grow.justify-center.overflow-auto:has(.prose){align-items:flex-start}"
    "div.grow.flex.gap-3:has(.prose){flex-direction:column}"
    "div.prose.max-w-lg:has(.document){max-width:none;width:100%}</style>"
)


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def job_time(folder: Path) -> tuple[int, float]:
    """(jobs, seconds) summed over the benchmark files (one per job) under `folder`."""
    jobs, seconds = 0, 0.0
    for tsv in folder.rglob("benchmarks/**/*.tsv"):
        rows = tsv.read_text().splitlines()
        if len(rows) > 1:
            jobs += 1
            seconds += float(rows[1].split("\t")[0])
    return jobs, seconds


def duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _raw_html(fragment: str) -> list[str]:
    return ["", ".. raw:: html", "", *("   " + line for line in fragment.splitlines()), ""]


def experiment_lines(name: str, experiment: Any, results: Path, parameters: int | None) -> list:
    posterior, methods = experiment.posterior, experiment.methods
    first = posterior.first_seed
    model = experiment.model.name + (f", {parameters:,} parameters" if parameters else "")
    lines = [
        f"- **{name}**: {experiment.description}",
        "",  # reStructuredText: a nested list is set off by blank lines
        f"  - target posterior: {posterior.n_samples} networks ({model}), seeds "
        f"{first}..{first + posterior.n_samples - 1}",
    ]
    lines += _acceptance_lines(posterior, results / name / "posterior")
    if methods is not None:
        lines.append(
            f"  - methods: {', '.join(configured_methods(methods))}; {methods.n_samples} samples "
            f"per variant, one-mode at each of {methods.modes} modes, {methods.replicates} "
            f"multi-mode replicate(s) of {methods.window} modes each; the modes are the first "
            f"kept networks of a pool of {methods.pool} (seeds {methods.first_seed}.."
            f"{methods.first_seed + methods.pool - 1})"
        )
    jobs, seconds = job_time(results / name)
    if jobs:
        lines.append(f"  - {jobs} jobs, {duration(seconds)} of job time (sum of their run times)")
    return [*lines, ""]


def _acceptance_lines(posterior: Any, folder: Path) -> list[str]:
    """How well the target trained, which networks the acceptance rule dropped and why, and
    the plateau check, as far as they are computed."""
    flags = folder / "converged.parquet"
    if not flags.is_file():
        return []
    import polars as pl  # only under --report: every Snakemake start imports this module

    table = pl.read_parquet(flags)
    rule = f"test accuracy >= {posterior.min_accuracy}"
    if posterior.max_below_median is not None:
        rule += f" and at most {posterior.max_below_median} below the median"
    dropped = table.filter(~pl.col("converged"))
    why = ", ".join(
        f"{r['len']} {r['reason']}" for r in dropped.group_by("reason").len().rows(named=True)
    )
    lines = [
        f"acceptance rule: {rule}; {table.height - dropped.height} of {table.height} kept, "
        f"{dropped.height} dropped{f' ({why})' if why else ''}"
    ]
    return [f"  - {line}" for line in lines + training_lines(folder)]


def training_lines(folder: Path) -> list[str]:
    """The target networks' test accuracy and the plateau check of the training recipe, from
    an experiment's posterior folder, as far as they are computed."""
    import polars as pl

    flags, plateau = folder / "converged.parquet", folder / "plateau.parquet"
    lines = []
    if flags.is_file():
        accuracy = pl.read_parquet(flags)["test_accuracy"].drop_nans().drop_nulls()
        if accuracy.len():
            lines.append(
                f"test accuracy of the trained networks: median {accuracy.median():.3f}, "
                f"min {accuracy.min():.3f}, max {accuracy.max():.3f}"
            )
    if plateau.is_file():
        check = pl.read_parquet(plateau)
        runs = "; ".join(
            f"{r['run']} ({r['epochs']} epochs): median {r['median']:.3f}, min {r['min']:.3f}"
            for r in check.iter_rows(named=True)
        )
        verdict = "at its plateau" if check["at_plateau"][0] else "NOT at its plateau"
        lines.append(
            f"plateau check on {check['networks'][0]} seeds: {runs}; doubling the epochs "
            f"moved the median by {check['median_gain'][0] * 100:+.1f} points: {verdict}"
        )
    return lines


def headline(name: str, results: Path) -> list[str]:
    """Table 1 beside the paper's and the findings of experiment `name`, where computed."""
    # imported here, as only `snakemake --report` needs them: every Snakemake start imports
    # this module
    import polars as pl

    # local: keeps polars out of importing symbnn.report.front_page
    from symbnn.report.method_tables import with_units

    # local: keeps polars out of importing symbnn.report.front_page
    from symbnn.report.tables import table_fragment

    report = results / name / "report"
    lines = []
    if (report / "table1_paper.parquet").is_file():
        beside = with_units(pl.read_parquet(report / "table1_paper.parquet"), "ours / paper")
        lines += ["", f"**Table 1, {name}** (ours / the paper's; bold: best of ours):"]
        lines += _raw_html(table_fragment(beside))
    if (report / "findings.parquet").is_file():
        lines += ["", f"**Findings, {name}** (the paper's claims tested on our Table 1):", ""]
        for row in pl.read_parquet(report / "findings.parquet").iter_rows(named=True):
            lines.append(
                f"- {row['finding']} ({row['status']}; paper {row['paper']}): **{row['verdict']}**"
                f" (ours: {row['ours']}; {row['test']})"
            )
    return lines


def front_page(settings: Any, description: str, parameters: Any = None) -> str:
    """The page's reStructuredText (no Jinja markup: Snakemake renders it with Jinja);
    `parameters(name)` gives the parameter count of an experiment's network."""
    results = Path(settings.results)
    lines = ["symbnn report", "=============", *_raw_html(TOP_ALIGNED), "What was run"]
    lines += ["------------", ""]
    for name in settings.run:
        lines += experiment_lines(
            name, settings.experiments[name], results, parameters(name) if parameters else None
        )
    jobs, seconds = job_time(results / "analyses")
    if jobs:
        lines.append(
            f"- **analyses** (toy posterior, marginals, related work): {jobs} jobs, "
            f"{duration(seconds)} of job time"
        )
    lines += [
        "- versions: "
        + ", ".join(
            f"{package} {_version(package)}" for package in ("symbnn", "torch", "snakemake")
        )
        + f", Python {platform.python_version()}",
        "",
        "Headline results",
        "----------------",
    ]
    headlines = [line for name in settings.run for line in headline(name, results)]
    lines += headlines or ["", "No experiment of this run has Table 1 yet."]
    lines += ["", "The workflow", "------------", "", description.strip(), ""]
    text = "\n".join(lines) + "\n"
    # Snakemake renders the page with Jinja: no text of ours may read as Jinja markup
    return text.replace("{{", "{ {").replace("{%", "{ %").replace("{#", "{ #")


def building_report(argv: list[str]) -> bool:
    """Whether `argv` asks Snakemake for its report, as `--report FILE` or `--report=FILE`."""
    return any(arg == "--report" or arg.startswith("--report=") for arg in argv)


def report_text(settings: Any, default: str, basedir: str, parameters=None) -> str:
    """The `report:` page of the Snakefile: `default` (relative to the Snakefile) unless
    `snakemake --report` is running, then the front page, written under .snakemake/."""
    if not building_report(sys.argv):
        return default
    description = (Path(basedir) / default).read_text()
    PAGE.parent.mkdir(exist_ok=True)
    PAGE.write_text(front_page(settings, description, parameters))
    return str(PAGE.resolve())
