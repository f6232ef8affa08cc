"""How long the README's first command takes: `make run` in a fresh clone of this checkout's
HEAD (the install, then the default workflow with its report), timed in two parts, with the
job time of each rule summed from Snakemake's benchmark files.

    python benchmarks/make_run.py                # writes the block `make-run`
    python benchmarks/make_run.py --no-write --keep /tmp/clone
    python benchmarks/make_run.py --hmc-in CLONE # `make run-hmc` in a clone that ran make run

The budget is 15 minutes for both parts on 2 idle cores; run it on an otherwise idle machine.
The install reuses pip's cache where this machine has one (a machine without it downloads
the wheels once more).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl
from machine import ROOT, Conditions, LoadGate, add_gate_arguments, publish, run_make, written
from paper_size import job_times

from symbnn.docblocks import current_commit

BLOCK, SCRIPT = "make-run", "benchmarks/make_run.py"
HMC_BLOCK = "make-run-hmc"  # --hmc-in: `make run-hmc` alone, in a clone that ran `make run`
BUDGET_MINUTES = 15
HMC_BUDGET_MINUTES = 20  # `make run-hmc` beyond `make run` (issue 43's budget)
INTRO = (
    "The `make-run` block times the README's first command in a fresh clone: `make install` "
    "(the virtualenv) and then `make run` (the default workflow, its report and dvc.lock), "
    "and lists the rules with the most job time (summed over their jobs; with 2 cores the "
    "workflow's wall time is about half the total). Rerun it with "
    "`python benchmarks/make_run.py`."
)
HMC_INTRO = (
    "The `make-run-hmc` block times `make run-hmc` alone, in a fresh clone where `make run` "
    "had finished (for example the one benchmarks/terminal_lines.py --keep leaves), and lists "
    "the jobs it added. Rerun it with `python benchmarks/make_run.py --hmc-in CLONE`."
)


def timed(clone: Path, target: str) -> float:
    seconds, done = run_make(clone, target)
    if done.returncode != 0:
        raise SystemExit(f"make {target} failed in {clone}:\n{done.stdout[-3000:]}{done.stderr}")
    return seconds


def rule_times(results: Path) -> pl.DataFrame:
    """Per rule: jobs and summed job seconds, over every experiment's and the analyses'
    benchmark files."""
    frames = [job_times(folder) for folder in results.iterdir() if (folder / "benchmarks").is_dir()]
    jobs = pl.concat([f for f in frames if f.height])
    return (
        jobs.group_by("rule")
        .agg(pl.len().alias("jobs"), pl.col("s").sum().alias("seconds"))
        .sort("seconds", descending=True)
    )


def added_jobs(before: pl.DataFrame, after: pl.DataFrame) -> pl.DataFrame:
    """Per rule: the jobs and job seconds `after` has beyond `before` (what a later target ran)."""
    joined = after.join(before, on="rule", how="left", suffix="_before").fill_null(0)
    return (
        joined.select(
            "rule",
            (pl.col("jobs") - pl.col("jobs_before")).alias("jobs"),
            (pl.col("seconds") - pl.col("seconds_before")).alias("seconds"),
        )
        .filter(pl.col("jobs") > 0)
        .sort("seconds", descending=True)
    )


def rule_rows(rules: pl.DataFrame, top: int) -> list[str]:
    lines = ["| rule | jobs | job seconds |", "|---|---:|---:|"]
    for rule, jobs, seconds in rules.head(top).iter_rows():
        lines.append(f"| `{rule}` | {jobs} | {seconds:.0f} |")
    return lines


def hmc_rows(seconds: float, rules: pl.DataFrame, top: int) -> list[str]:
    verdict = "within" if seconds <= HMC_BUDGET_MINUTES * 60 else "OVER"
    return [
        f"Then `make run-hmc` on the finished run (the HMC reference and its comparisons, "
        f"reusing the run's target, pool and methods): {seconds / 60:.1f} minutes wall "
        f"({verdict} its {HMC_BUDGET_MINUTES}-minute budget); its job time by rule "
        f"({rules['jobs'].sum()} jobs, {rules['seconds'].sum():.0f} s in all):",
        "",
        *rule_rows(rules, top),
    ]


def table(install: float, workflow: float, rules: pl.DataFrame, top: int) -> str:
    total = install + workflow
    verdict = "within" if total <= BUDGET_MINUTES * 60 else "OVER"
    lines = [
        "| part | minutes (wall) |",
        "|---|---:|",
        f"| `make install` (fresh virtualenv) | {install / 60:.1f} |",
        f"| `make run` (workflow, report, dvc.lock) | {workflow / 60:.1f} |",
        f"| both: the README's first command | {total / 60:.1f} ({verdict} the "
        f"{BUDGET_MINUTES}-minute budget) |",
        "",
        f"Job time by rule ({rules['jobs'].sum()} jobs, {rules['seconds'].sum():.0f} s in all; "
        f"the {top} largest):",
        "",
        *rule_rows(rules, top),
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="clone here and keep it (default: a temp dir)")
    parser.add_argument("--top", type=int, default=12, help="rules listed")
    parser.add_argument(
        "--hmc-in", type=Path, help="only time `make run-hmc` in this clone, where make run ended"
    )
    parser.add_argument("--no-write", action="store_true", help="print only")
    add_gate_arguments(parser)
    args = parser.parse_args()
    if args.hmc_in:
        return hmc_alone(args)
    clone = args.keep or Path(tempfile.mkdtemp(prefix="symbnn-make-run-")) / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    try:
        gate = LoadGate(args.settle)
        conditions = Conditions()
        install = timed(clone, "install")
        workflow = timed(clone, "run")
        body = table(install, workflow, rule_times(clone / "results"), args.top)
        body += "\n\n" + conditions.line()
    finally:
        if args.keep is None:
            shutil.rmtree(clone.parent, ignore_errors=True)
    print(body)
    if not args.no_write:
        return written(lambda: publish(BLOCK, SCRIPT, INTRO, body, gate, args.allow_load))
    return 0


def hmc_alone(args: argparse.Namespace) -> int:
    """`make run-hmc` timed in a clone whose `make run` has finished: the block make-run-hmc."""
    clone = args.hmc_in.resolve()
    gate = LoadGate(args.settle)
    conditions = Conditions()
    before = rule_times(clone / "results")
    hmc = timed(clone, "run-hmc")
    rows = hmc_rows(hmc, added_jobs(before, rule_times(clone / "results")), args.top)
    body = "\n".join(
        [f"In a clone of commit {current_commit(clone)}.", *rows, "", conditions.line()]
    )
    print(body)
    if not args.no_write:
        return written(lambda: publish(HMC_BLOCK, SCRIPT, HMC_INTRO, body, gate, args.allow_load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
