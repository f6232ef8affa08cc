"""What chunk checksums cost a whole workflow run: the default `make run` workflow, timed.

Runs Snakemake on the repository's Snakefile and config.yaml (or --configfile) in a fresh
folder, with every Python process of the run (Snakemake and each job) loading
`checksum_probe/sitecustomize.py`, which times symbnn's integrity work as it happens:

    encode     writing a chunk through the crc32c codec (checksum and the appended 4 bytes)
    decode     reading a chunk through it (inline check, or handing it to the worker thread)
    verify     checks on the worker thread (overlapped with Zarr's copying: an upper bound)
    crc direct checksums outside the codec (the banded writer of large arrays, validation)
    listing    opening a store: listing its chunk files to find a missing one
    digest     opening a store: its metadata against the manifest, the manifest's SHA-256
    manifest   the end of every store write: the manifest (every chunk's checksum) and digest

The sum over all processes, divided by the run's wall-clock time, bounds the share of the
run the checksums and chunk checks take: it counts every second of their work as if nothing
ran beside it (the jobs run two at a time, and worker-thread checks overlap reads).

    python benchmarks/workflow_checksums.py                  # the default workflow, 2 cores
    python benchmarks/workflow_checksums.py --cores 2 --keep /tmp/run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = Path(__file__).resolve().parent / "checksum_probe"
CATEGORIES = {
    "encode_s": "encode",
    "decode_s": "decode",
    "verify_s": "verify (worker thread)",
    "crc_direct_s": "crc direct",
    "listing_s": "listing",
    "digest_s": "digest check",
    "seal_s": "manifest write",
}
TARGET_SHARE = 0.10  # the issue's bound on the checksums' cost


def probe_environment(log: Path | None) -> dict[str, str]:
    """This process's environment with the probe on PYTHONPATH, writing to ``log`` (None: the
    probe is loaded but stays idle)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROBE), env.get("PYTHONPATH")]))
    if log is not None:
        env["SYMBNN_CHECKSUM_PROBE"] = str(log)
    return env


def run_workflow(workdir: Path, config: Path, cores: int, log: Path) -> float:
    """Seconds of wall-clock time of the workflow run in ``workdir``; the probe's lines go to
    ``log``. Raises with Snakemake's output if the run fails."""
    shutil.copy(config, workdir / "config.yaml")
    env = probe_environment(log)
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]
    command += ["--directory", str(workdir), "--cores", str(cores)]
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"workflow failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return seconds


def totals(log: Path) -> tuple[int, dict[str, float]]:
    """(processes that touched a store, summed seconds and bytes per category)."""
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    summed: dict[str, float] = {}
    for line in lines:
        for key in (*CATEGORIES, "bytes"):
            summed[key] = summed.get(key, 0.0) + line.get(key, 0.0)
    return len(lines), summed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", type=Path, default=ROOT / "config.yaml")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument(
        "--keep", type=Path, default=None, help="run in this (new) folder and keep it"
    )
    args = parser.parse_args()
    if args.keep:
        args.keep.mkdir(parents=True)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="workflow-checksums-"))
    try:
        log = workdir / "checksum-probe.jsonl"
        wall = run_workflow(workdir, args.configfile.resolve(), args.cores, log)
        processes, summed = totals(log)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    work = sum(summed.get(key, 0.0) for key in CATEGORIES)
    print(
        f"workflow: {args.configfile}, {args.cores} cores, {wall:.1f} s wall-clock; {processes} "
        f"processes opened stores, {summed.get('bytes', 0) / 1e6:.0f} MB checksummed"
    )
    print("\n| integrity work | seconds (all processes) | share of the run's wall-clock |")
    print("|---|---|---|")
    for key, label in CATEGORIES.items():
        seconds = summed.get(key, 0.0)
        print(f"| {label} | {seconds:.3f} | {100 * seconds / wall:.3f}% |")
    print(f"| total | {work:.3f} | {100 * work / wall:.3f}% |")
    verdict = "within" if work / wall < TARGET_SHARE else "OVER"
    print(f"\nat most {100 * work / wall:.2f}% of the run ({verdict} the {TARGET_SHARE:.0%} bound)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
