"""How the workflow's cost grows with the posterior: the `paper-size` experiment of config.yaml
(the paper's counts on the default's data and recipe: 100 samples per method, 10 modes,
Deep Ensembles of 100) run whole at several sizes of its target posterior, each in a results
folder of its own, on this machine's cores.

    python benchmarks/paper_size.py                         # 64, 256 and 1000 target networks
    python benchmarks/paper_size.py --sizes 64 256 --no-write

For every size it reports the wall time of the run and the largest resident memory of any job,
and per stage (a rule, or a group of rules, summed over its jobs from Snakemake's benchmark
files) the job time; then each stage's scaling exponent in n (the slope of log time against
log n over the sizes) beside the exponent its maths implies. The table goes into
docs/benchmarks.md (block "paper-size")."""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import yaml
from machine import calibration

from symbnn.docblocks import write_block

REPO = Path(__file__).resolve().parents[1]
BLOCK, DOC, SCRIPT = "paper-size", "docs/benchmarks.md", "benchmarks/paper_size.py"
EXPERIMENT = "paper-size"
# stage -> (rules whose jobs it sums, the exponent in the target's size n its maths implies)
STAGES = {
    "train target": (
        ("train_shard", "gather_posterior", "convergence"),
        "1: each network trains alone",
    ),
    "plateau check": (("train_plateau", "plateau"), "0: a fixed number of seeds"),
    "canonical form": (("canonicalize",), "1: per network"),
    "min-mass": (("minmass", "minmass_report"), "1: per network"),
    "predict target": (("predict_target",), "1: per network"),
    "Deep Ensembles check": (("mmd_deep_ensembles",), "2: pooled distances, (n + m)^2"),
    "pool and methods": (
        (
            "train_pool_shard",
            "gather_pool",
            "pool_convergence",
            "fit",
            "sample",
            "predict",
            "canonicalize_samples",
            "metrics",
        ),
        "0: independent of the target",
    ),
    "MMD of the methods": (("mmd_method",), "2: pooled distances with the target, (n + m)^2"),
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


def run_size(n: int, cores: int, root: Path) -> tuple[float, Path]:
    """Run the experiment with n target networks; (wall seconds, results folder)."""
    results = root / f"n{n}"
    override = root / f"n{n}.yaml"
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    experiment = config["experiments"][EXPERIMENT]
    experiment["posterior"]["n_samples"] = n
    experiment["posterior"]["shard_size"] = min(250, n)
    config.update(
        run=[EXPERIMENT],
        results=str(results),
        analyses={name: False for name in config["analyses"]},
    )
    override.write_text(yaml.safe_dump(config))
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
            "--directory", str(REPO), "--configfile", str(override), "--cores", str(cores)]  # fmt: skip
    start = time.perf_counter()
    with open(root / f"n{n}.log", "w") as log:  # Snakemake's own output, one file per size
        subprocess.run(argv, check=True, stdout=log, stderr=subprocess.STDOUT)
    return time.perf_counter() - start, results / EXPERIMENT


def job_times(folder: Path) -> pl.DataFrame:
    """One row per job: its rule (the benchmark file's first folder) and Snakemake's figures."""
    rows = []
    for tsv in (folder / "benchmarks").rglob("*.tsv"):
        rule = tsv.relative_to(folder / "benchmarks").parts[0].removesuffix(".tsv")
        frame = pl.read_csv(tsv, separator="\t")
        rows.append(
            {"rule": rule, "s": float(frame["s"][0]), "max_rss": float(frame["max_rss"][0])}
        )
    return pl.DataFrame(rows)


def stage_times(jobs: pl.DataFrame) -> dict[str, float]:
    return {
        stage: float(jobs.filter(pl.col("rule").is_in(rules))["s"].sum())
        for stage, (rules, _) in STAGES.items()
    }


def exponent(sizes: list[int], times: list[float]) -> float:
    """Least-squares slope of log time against log n (nan with fewer than two sizes)."""
    if len(sizes) < 2 or min(times) <= 0:
        return math.nan
    return float(np.polyfit(np.log(sizes), np.log(times), 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1000])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--dir", default="results-paper-size", help="results root")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    root = (REPO / args.dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    load, calib = os.getloadavg()[0], calibration()
    walls, stages, peaks = [], [], []
    for n in args.sizes:
        wall, folder = run_size(n, args.cores, root)
        jobs = job_times(folder)
        walls.append(wall)
        stages.append(stage_times(jobs))
        peaks.append(float(jobs["max_rss"].max()))
        print(f"n = {n}: {wall:.0f} s wall", flush=True)
    header = " | ".join(f"n = {n}" for n in args.sizes)
    lines = [
        f"The `{EXPERIMENT}` experiment on {args.cores} cores, job time per stage (seconds, "
        "summed over the stage's jobs), run whole at each size of the target posterior.",
        "",
        f"| stage | {header} | exponent in n (fitted) | exponent its maths implies |",
        "| --- | " + " | ".join("---" for _ in args.sizes) + " | --- | --- |",
    ]
    for stage, (_, implied) in STAGES.items():
        times = [s[stage] for s in stages]
        cells = " | ".join(f"{t:.0f}" for t in times)
        lines.append(f"| {stage} | {cells} | {exponent(args.sizes, times):.2f} | {implied} |")
    lines.append(
        "| **whole run, wall clock** | "
        + " | ".join(f"**{w / 60:.1f} min**" for w in walls)
        + f" | {exponent(args.sizes, walls):.2f} | |"
    )
    lines.append(
        "| largest job's peak memory (MB) | " + " | ".join(f"{p:.0f}" for p in peaks) + " | | |"
    )
    lines += [
        "",
        f"Load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; "
        f"calibration (10^7 Python additions) {calib:.2f} s.",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        write_block(REPO / DOC, BLOCK, SCRIPT, text)


if __name__ == "__main__":
    main()
