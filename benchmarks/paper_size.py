"""How the workflow's cost grows with the posterior: the `paper-size` experiment of config.yaml
(the paper's counts on the default's data and recipe: 100 samples per method, 10 modes,
Deep Ensembles of 100) run at several sizes of its target posterior, each in a results
folder of its own, on this machine's cores.

    python benchmarks/paper_size.py                         # 1000, then 256 and 64 target networks
    python benchmarks/paper_size.py --sizes 64 256 --no-write

The largest size runs whole, from nothing: its wall time is the experiment's. The pool and the
methods (their fits, samples, predictions, canonical forms and metrics) do not read the target
posterior, so a smaller size starts from a copy of their outputs in the largest size's folder
and Snakemake runs only what depends on the target (`--whole-each` runs every size from
nothing instead). For every size it reports the wall time of the run and the largest resident
memory of any job, and per stage (a rule, or a group of rules, summed over its jobs from
Snakemake's benchmark files) the job time; then each stage's scaling exponent in n (the slope
of log time against log n over the sizes) beside the exponent its maths implies. The table
goes into docs/benchmarks.md (block "paper-size").

A size run to its end leaves a record (n<N>.json under the results root: wall time, load
and calibration); a rerun takes the record and reruns only the sizes without one. Where the
experiment's Deep Ensembles members would leave fewer than two target networks (n = 64
against 100 members), the check sets half of the target aside instead, and the table says
so."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import yaml
from machine import LoadGate, add_gate_arguments, calibration, write_gated, written

from symbnn.atomic import atomic_write

REPO = Path(__file__).resolve().parents[1]
BLOCK, DOC, SCRIPT = "paper-size", "docs/benchmarks.md", "benchmarks/paper_size.py"
EXPERIMENT = "paper-size"
# stage -> (rules whose jobs it sums, the exponent in the target's size n its maths implies).
# A job's rule is named by its benchmark file (rules/*.smk): see `rule_of`.
STAGES = {
    "train target": (
        ("train_shard", "gather_posterior", "convergence", "accuracies of the target"),
        "1: each network trains alone",
    ),
    "plateau check": (("train_plateau", "plateau"), "0: a fixed number of seeds"),
    "canonical form": (("canonicalize",), "1: per network"),
    "min-mass": (("minmass", "minmass_report"), "1: per network"),
    "predict target": (("predict_target",), "1: per network"),
    "Deep Ensembles check": (
        ("mmd_deep_ensembles",),
        "2 for the pooled distances and kernels, (n + m)^2; 0 for the permutation test (the "
        "members' pair sums)",
    ),
    "pool and methods": (
        (
            "train_pool_shard",
            "gather_pool",
            "pool_convergence",
            "accuracies of the pool",
            "fit",
            "sample",
            "predict",
            "canonicalize_samples",
            "metrics",
        ),
        "0: independent of the target",
    ),
    "MMD of the methods": (
        ("mmd_method",),
        "2 for the pooled distances and kernels with the target, (n + m)^2; 0 for the "
        "permutation tests (the samples' pair sums)",
    ),
    "tables and figures": (
        (
            "method_tables",
            "posterior_tables",
            "symmetry_counts",
            "functional_collapse",
            "posterior_marginals",
        ),
        "0 to 1",
    ),
}
NAMED_RULES = frozenset(rule for rules, _ in STAGES.values() for rule in rules)
# What the pool and the methods write (results/<experiment>/...): a smaller size starts from
# the largest size's copy of these, so that only what reads the target runs again. Their logs
# and benchmark files: folders (logs/NAME/, benchmarks/NAME/) and single files (NAME.log, .tsv).
INDEPENDENT_FOLDERS = ("modes", "methods", "metrics")
RECORD_FOLDERS = (
    "train_pool_shard",
    "accuracies/modes",
    "fit",
    "sample",
    "predict",
    "canonicalize",  # the samples' canonical forms (the target's is canonicalize.tsv)
    "metrics",
)
RECORD_FILES = ("gather_pool", "pool_convergence")


def rule_of(benchmark: Path) -> str:
    """The rule of a job from its benchmark file's path under benchmarks/ (rules/*.smk name
    two rules' files after their folder: the samples' canonical forms and the methods' MMDs)."""
    parts = benchmark.parts
    rule = parts[0].removesuffix(".tsv")
    if len(parts) > 1 and rule in ("canonicalize", "mmd"):
        return {"canonicalize": "canonicalize_samples", "mmd": "mmd_method"}[rule]
    if rule == "accuracies":
        return "accuracies of the pool" if parts[1] == "modes" else "accuracies of the target"
    return rule


def repository_config() -> dict:
    """config.yaml as a dict (a fresh copy: callers change it)."""
    return yaml.safe_load((REPO / "config.yaml").read_text())


def seed_from(largest: Path, results: Path) -> None:
    """Copy the outputs, logs and benchmark files of the pool and the methods from the
    largest size's experiment folder (modification times kept: Snakemake sees them as up to
    date, and reruns what reads the target)."""
    for name in INDEPENDENT_FOLDERS:
        shutil.copytree(largest / name, results / name, dirs_exist_ok=True)
    for kind, suffix in (("benchmarks", ".tsv"), ("logs", ".log")):
        (results / kind).mkdir(parents=True, exist_ok=True)
        for name in RECORD_FOLDERS:
            shutil.copytree(largest / kind / name, results / kind / name, dirs_exist_ok=True)
        for name in RECORD_FILES:
            shutil.copy2(largest / kind / f"{name}{suffix}", results / kind / f"{name}{suffix}")


def run_size(n: int, cores: int, root: Path, seed: Path | None) -> tuple[float, Path, int | None]:
    """Run the experiment with n target networks (starting from `seed`'s pool and methods
    when given); (wall seconds, the experiment's results folder, the Deep Ensembles check's
    members)."""
    results = root / f"n{n}"
    override = root / f"n{n}.yaml"
    config = repository_config()
    experiment = config["experiments"][EXPERIMENT]
    experiment["posterior"]["n_samples"] = n
    experiment["posterior"]["shard_size"] = min(250, n)
    # the Deep Ensembles check sets members aside from the target: half of a target too
    # small to leave two networks beside them
    members = experiment["mmd"]["de_members"]
    if members is not None and members > n - 2:
        members = experiment["mmd"]["de_members"] = n // 2
    config.update(
        run=[EXPERIMENT],
        results=str(results),
        analyses={name: False for name in config["analyses"]},
    )
    override.write_text(yaml.safe_dump(config))
    if seed is not None and not (results / EXPERIMENT).exists():
        seed_from(seed, results / EXPERIMENT)
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(REPO), "--configfile", str(override), "--cores", str(cores)]  # fmt: skip
    start = time.perf_counter()
    with open(root / f"n{n}.log", "w") as log:  # Snakemake's own output, one file per size
        subprocess.run(argv, check=True, stdout=log, stderr=subprocess.STDOUT)
    return time.perf_counter() - start, results / EXPERIMENT, members


def job_times(folder: Path) -> pl.DataFrame:
    """One row per job: its rule and Snakemake's figures."""
    rows = []
    for tsv in (folder / "benchmarks").rglob("*.tsv"):
        frame = pl.read_csv(tsv, separator="\t")
        rows.append(
            {
                "rule": rule_of(tsv.relative_to(folder / "benchmarks")),
                "s": float(frame["s"][0]),
                "max_rss": float(frame["max_rss"][0]),
            }
        )
    return pl.DataFrame(rows)


def stage_times(jobs: pl.DataFrame) -> dict[str, float]:
    """Job seconds per stage; rules no stage names are summed as "other" (none is dropped)."""
    times = {
        stage: float(jobs.filter(pl.col("rule").is_in(rules))["s"].sum())
        for stage, (rules, _) in STAGES.items()
    }
    times["other"] = float(jobs.filter(~pl.col("rule").is_in(sorted(NAMED_RULES)))["s"].sum())
    return times


def exponent(sizes: list[int], times: list[float]) -> float:
    """Least-squares slope of log time against log n (nan with fewer than two sizes)."""
    if len(sizes) < 2 or min(times) <= 0:
        return math.nan
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1000])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--dir", default="results-paper-size", help="results root")
    parser.add_argument(
        "--whole-each", action="store_true", help="run every size from nothing (no copy)"
    )
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    add_gate_arguments(parser)
    args = parser.parse_args()
    gate = LoadGate(args.settle)
    root = (REPO / args.dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    sizes = sorted(args.sizes, reverse=True)  # the largest whole, first
    runs, stages, peaks, others = {}, {}, {}, {}
    seed, status = None, 0
    for n in sizes:
        record = root / f"n{n}.json"  # a size run to its end is not run again
        if record.exists():
            runs[n] = json.loads(record.read_text())
            folder = root / f"n{n}" / EXPERIMENT
        else:
            load, calib = os.getloadavg()[0], calibration()
            wall, folder, members = run_size(n, args.cores, root, seed)
            runs[n] = {"wall": wall, "load_start": load, "load_end": os.getloadavg()[0],
                       "calibration": calib, "de_members": members}  # fmt: skip
            atomic_write(record, lambda tmp, n=n: tmp.write_text(json.dumps(runs[n])))
        jobs = job_times(folder)
        stages[n] = stage_times(jobs)
        peaks[n] = float(jobs["max_rss"].max())
        others[n] = sorted(set(jobs["rule"]) - NAMED_RULES)
        print(f"n = {n}: {runs[n]['wall']:.0f} s wall", flush=True)
        if seed is None and not args.whole_each:
            seed = folder
        # after every size: an hour-long run that stops early still leaves its table
        text = render(runs, stages, peaks, others, args)
        print(text, flush=True)
        if not args.no_write:  # refused: the other sizes still run, their table printed
            status = written(
                lambda text=text: write_gated(
                    REPO / DOC, BLOCK, SCRIPT, text, gate, args.allow_load
                )
            )
    return status


def render(runs, stages, peaks, others, args) -> str:
    """The markdown table of the runs done (size -> figures), smallest size first."""
    sizes = sorted(runs)
    largest = max(sizes)
    header = " | ".join(f"n = {n}" for n in sizes)
    lines = [
        f"The `{EXPERIMENT}` experiment on {args.cores} cores, job time per stage (seconds, "
        "summed over the stage's jobs) at each size of the target posterior.",
        "",
        f"| stage | {header} | exponent in n (fitted) | exponent its maths implies |",
        "| --- | " + " | ".join("---" for _ in sizes) + " | --- | --- |",
    ]
    for stage, implied in [*((k, v[1]) for k, v in STAGES.items()), ("other", "")]:
        times = [stages[n][stage] for n in sizes]
        shared = stage == "pool and methods" and not args.whole_each
        cells = " | ".join(
            f"{t:.0f}" + (" (copied)" if shared and n != largest else "")
            for n, t in zip(sizes, times)
        )
        slope = math.nan if shared else exponent(sizes, times)
        fitted = "-" if math.isnan(slope) else f"{slope:.2f}"
        label = stage if stage != "other" else f"other ({', '.join(others[largest]) or 'none'})"
        lines.append(f"| {label} | {cells} | {fitted} | {implied} |")
    lines.append(
        "| **run, wall clock** | "
        + " | ".join(f"**{runs[n]['wall'] / 60:.1f} min**" for n in sizes)
        + " | | |"
    )
    lines.append(
        "| largest job's peak memory (MB) | "
        + " | ".join(f"{peaks[n]:.0f}" for n in sizes)
        + " | | |"
    )
    note = (
        f"The n = {largest} run is the whole experiment, from nothing. "
        if args.whole_each
        else f"The n = {largest} run is the whole experiment, from nothing; each smaller size "
        f'starts from a copy of its pool and methods (they do not read the target: "copied" '
        f"repeats their n = {largest} job time), so its wall clock is what depends on the target. "
    )
    machine = "; ".join(
        f"n = {n}: load average {_figure(runs[n].get('load_start'))} at the start, "
        f"{_figure(runs[n].get('load_end'))} at the end, calibration (10^7 Python additions) "
        f"{_figure(runs[n].get('calibration'))} s"
        for n in sizes
    )
    members = repository_config()["experiments"][EXPERIMENT]["mmd"].get("de_members")
    fewer = [
        f"The Deep Ensembles check sets {runs[n]['de_members']} networks aside at n = {n} (the "
        "experiment's count would leave fewer than 2 beside them)"
        for n in sizes
        if runs[n].get("de_members") not in (None, members)
    ]
    lines += ["", note + machine + "." + (" " + "; ".join(fewer) + "." if fewer else "")]
    return "\n".join(lines)


def _figure(value) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    sys.exit(main())
