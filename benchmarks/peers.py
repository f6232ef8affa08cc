"""symbnn side by side with the libraries a researcher would otherwise install (issues 21, 42).

One run, the same inputs on both sides of every row, one markdown table. Every job runs at
each thread count (--threads, default 1 and 2), symbnn and the peer on the same count (numba's
and torch's, `peer_measure.at_threads`); a symbnn path that picks its own count says so in its
row. Each row gives the wall and the process CPU seconds over the timed region, the ratios of
both to symbnn's, the rise of resident memory, whether the peer computes the same thing, and
the quality figure of the job. The jobs (one module each):

- alignment (`peer_alignment`): weight matching against rebasin on trained MLP and OptuNet
  pairs and a ResNet-18 with random weights;
- metrics (`peer_metrics`): the uncertainty metrics against torch-uncertainty's metric
  classes, at the default experiment's size, on the SWAG row's predictions and at the paper's,
  with the streaming pass (one numpy add.reduce over the same inputs) as the physical limit;
- swag, dropout (`peer_methods`): against torch-uncertainty's SWAG and mc_dropout wrappers;
- bnn (`peer_bnn`): Bayes by backprop against BLiTZ, bayesian-torch and posteriors' diagonal VI;
- sghmc, laplace (`peer_posteriors`): SGHMC per effective sample and the diagonal Laplace
  against posteriors.

A peer that cannot be imported is a row saying so, with the reason. The peers are the
optional extra `peers` (pyproject.toml), installed beside the pinned torch without touching it
(--no-deps, with the dependencies the extra lists; torch-uncertainty and lightning come with
the test extra too):

    .venv/bin/pip install --no-deps $(.venv/bin/python benchmarks/peers.py --requirements)
    .venv/bin/python benchmarks/peers.py            # all jobs, written to docs/benchmarks.md
    .venv/bin/python benchmarks/peers.py --jobs alignment metrics --repeats 7 --json peers.json
    .venv/bin/python benchmarks/peers.py --tiny --no-write --settle 0   # every path in seconds

The table goes into docs/benchmarks.md as the generated block "peers" when every job ran
(--write: also for a subset; --no-write: print only), through the load gate of
`benchmarks/machine.py` (--allow-load writes it marked as measured under load). Alignment and
metrics run --repeats times as alternating pairs (symbnn, then the peer, then the peer, then
symbnn, ...) after one untimed run each: times are medians and the ratio is the median of the
pairs' ratios, which moves far less with the load of a shared machine than either time.
Training jobs run once (the BNNs after an untimed warm-up on one batch). Peak memory is the
rise of this process's resident memory over its level when the job starts, in its last run
(the kernel's high-water mark, reset per job through /proc/self/clear_refs; "-" where that is
not available): memory an earlier job freed and the allocator kept is not counted again.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from machine import Conditions, LoadGate, add_gate_arguments, publish, written
from peer_alignment import CASES, rows_alignment
from peer_bnn import rows_bnn
from peer_context import FULL, ROOT, TINY, Context
from peer_measure import Row, at_threads, table
from peer_methods import rows_dropout, rows_swag
from peer_metrics import rows_metrics, synthetic_predictions
from peer_posteriors import rows_laplace, rows_sghmc

JOBS = ("alignment", "metrics", "swag", "dropout", "bnn", "sghmc", "laplace")
DOC_INTRO = (
    "The `peers` block compares symbnn with the libraries a researcher would otherwise use, "
    "on the same inputs in one run, at 1 and 2 threads with both sides on the same count: "
    "weight matching against rebasin, the uncertainty metrics against torch-uncertainty's "
    "metric classes and against one streaming pass over the same inputs (the physical "
    "limit), SWAG and MC Dropout against torch-uncertainty's wrappers, the variational BNN "
    "against BLiTZ, bayesian-torch and posteriors' diagonal VI, SGHMC (per effective sample of "
    "the test log-likelihood) and the diagonal Laplace against posteriors. Each row gives wall "
    "and CPU seconds and both as ratios to symbnn's (where both sides are cheap, the median "
    "over alternating pairs), whether the peer computes the same thing, and the job's quality "
    "(accuracy and NLL of the ensemble). A verdict cites the wall-time ratio with the CPU-time "
    'ratio beside it and says "slower" where a goal is missed. Rerun it with `python '
    "benchmarks/peers.py` on a quiet machine (the peers are the `peers` extra; `--help` for "
    "the options)."
)


def _metrics_jobs(ctx: Context, swag_probs) -> list[tuple[str, Callable[[int], list[Row]]]]:
    """The metrics cases: synthetic at the sizes' (members, inputs), and the SWAG row's."""
    cases = []
    for k, n in ctx.sizes.metrics:
        data = synthetic_predictions(k, n)
        label = f"({k}, {n}, 10), OOD ({k}, {n}, 10), synthetic"
        cases.append((label, data))
    if swag_probs is not None:
        probs, probs_out = swag_probs
        label = f"the SWAG row's {len(probs)} members: {tuple(probs.shape)}, OOD alike"
        cases.insert(1, (label, (probs, ctx.test.labels, probs_out)))
    return [
        (label, lambda t, d=data, c=label: rows_metrics(ctx, d[0], d[1], d[2], c, t))
        for label, data in cases
    ]


def run_jobs(ctx: Context, jobs: list[str], threads: list[int]) -> list[Row]:
    """Every job at every thread count, in JOBS order (SWAG before the metrics, whose second
    case is its predictions; its rows after theirs)."""

    def each_count(job: Callable[[int], list[Row]]) -> list[Row]:
        rows = []
        for n in threads:
            start = time.perf_counter()
            with at_threads(n):
                found = job(n)
            rows += found
            took = time.perf_counter() - start
            count = f"{n} thread{'s' * (n > 1)}"
            print(f"{found[0].job} at {count}: {took:.0f} s", file=sys.stderr, flush=True)
        return rows

    rows: list[Row] = []
    if "alignment" in jobs:
        for case in CASES:
            rows += each_count(lambda n, case=case: rows_alignment(ctx, case, n))
    swag_probs: list = []

    def swag(n: int) -> list[Row]:
        found, probs = rows_swag(ctx, n)
        swag_probs.append(probs)
        return found

    swag_rows = each_count(swag) if "swag" in jobs else []
    if "metrics" in jobs:
        for _, job in _metrics_jobs(ctx, swag_probs[0] if swag_probs else None):
            rows += each_count(job)
    rows += swag_rows
    for name, job in (
        ("dropout", rows_dropout),
        ("bnn", rows_bnn),
        ("sghmc", rows_sghmc),
        ("laplace", rows_laplace),
    ):
        if name in jobs:
            rows += each_count(lambda n, job=job: job(ctx, n))
    return rows


def peer_requirements() -> list[str]:
    """The `peers` extra of pyproject.toml: the peers and the dependencies they need."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]["peers"]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--requirements",
        action="store_true",
        help="print the peers extra's requirements (for pip install --no-deps) and stop",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="runs (pairs) of the cheap jobs; medians"
    )
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[n for n in (1, 2) if n <= (os.cpu_count() or 1)],
        help="thread counts every job runs at (default 1 and 2)",
    )
    parser.add_argument(
        "--bnn-epochs", type=int, default=None, help="the BNNs' budget (default: the recipe's)"
    )
    parser.add_argument(
        "--blitz-own-init",
        action="store_true",
        help="BLiTZ's means start at its own N(0, 0.1^2), not at symbnn's initial weights",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="every job at a tiny size (a check, not a benchmark)"
    )
    parser.add_argument("--jobs", nargs="+", choices=JOBS, default=JOBS, help="jobs to run")
    parser.add_argument("--json", default=None, help="also write the rows here")
    write = parser.add_mutually_exclusive_group()
    write.add_argument(
        "--write",
        action="store_true",
        help="write the table into docs/benchmarks.md even when only some jobs ran",
    )
    write.add_argument("--no-write", action="store_true", help="print only")
    add_gate_arguments(parser)
    args = parser.parse_args(argv)
    if min(args.threads) < 1:
        parser.error("--threads must be positive")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.requirements:
        print("\n".join(peer_requirements()))
        return 0
    gate = LoadGate(args.settle)
    wall, conditions = time.perf_counter(), Conditions()
    sizes = TINY if args.tiny else FULL
    if args.bnn_epochs:
        sizes = dataclasses.replace(sizes, bnn_epochs=args.bnn_epochs)
    ctx = Context(sizes, args.repeats, args.blitz_own_init)
    rows = run_jobs(ctx, list(args.jobs), args.threads)
    text = (
        f"{table(rows)}\n\nMachine: {conditions.line()}. Medians of {args.repeats} runs "
        f"(alignment, metrics; the other jobs once); whole run "
        f"{time.perf_counter() - wall:.0f} s."
    )
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))
    if args.tiny:  # a check of the code paths: its figures are no benchmark
        return 0
    if args.write or (not args.no_write and set(args.jobs) == set(JOBS)):
        return written(
            lambda: publish("peers", "benchmarks/peers.py", DOC_INTRO, text, gate, args.allow_load)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
