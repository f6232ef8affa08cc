"""Method fits of a block of modes: one after another in the loop trainer vs one batched run.

The default experiment's fit jobs (MC Dropout, BNN, SGHMC, SWAG) fit every mode of a method
in one batched run (`Method.fit_modes`, docs/methods.md) where the main branch ran one job
per mode with the loop trainer. This script times, per method, on the default experiment's
problem as its fit job builds it (`symbnn.methods.sampling.problem_for`: the packaged
digits, its OptuNet, recipe and method settings from config.yaml, CPU):

- loop: each mode's fit by the loop trainer, one after another (`train_with_dropout`,
  `train_bnn`, `chain`, `fit_swag`: what a job per mode ran);
- batched: one `fit_modes` call on all the modes;

and the largest difference of any tensor between the two fits of a mode. Both run the same
algorithm with the same random streams; over the default's thousands of steps the training
amplifies their float32 roundings into different networks, as it does a 1e-7 nudge of the
loop's own start (docs/deviations.md, D40), so the column is large on this problem; the tests
(`tests/methods/test_batched_fits.py`) hold the two to 1e-5 over a few steps.
The modes are the pool's first seeds' initial weights, not trained networks: MC Dropout and
the BNN train from their seed anyway, and the SGD/SGHMC steps of SWAG and SGHMC cost the same
from any start. The convergence threshold is 0, so no seed is retried on either side.

    .venv/bin/python benchmarks/fits.py                       # 8 modes, every method, 1 thread
    .venv/bin/python benchmarks/fits.py --modes 4 --methods bnn swag --write

It prints a markdown table with the machine's load and calibration (`benchmarks/machine.py`);
--write puts it into docs/benchmarks.md as the generated block "fits".
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from machine import Conditions, LoadGate, add_gate_arguments, publish, written

from symbnn.methods import registry
from symbnn.methods.base import Mode, Problem
from symbnn.methods.bnn import fit as bnn
from symbnn.methods.dropout import fit as dropout
from symbnn.methods.sampling import problem_for
from symbnn.methods.sghmc import fit as sghmc
from symbnn.methods.swag import fit as swag
from symbnn.settings import load_config
from symbnn.train.seeding import build_seeded_model

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("dropout", "bnn", "sghmc", "swag")
DOC_INTRO = (
    "The `fits` block times the fits of a block of modes of the default experiment (its "
    "data, OptuNet, recipe and method settings), per method: one mode after another in the "
    "loop trainer (one fit job per mode, as before) vs one batched `fit_modes` run (one fit "
    "job per method), and the largest difference between the two fits of a mode. Rerun: "
    "`.venv/bin/python benchmarks/fits.py --write` (see its docstring)."
)


def default_problem(experiment_name: str) -> tuple[Problem, object]:
    """The experiment's problem as its fit jobs build it (on the CPU), and its methods."""
    config = load_config(ROOT / "config.yaml")
    experiment = config.experiments[experiment_name]
    problem = problem_for(
        experiment.data,
        experiment.model.to_dict(),
        experiment.recipe,
        ROOT / "data",
        False,
        "cpu",
        min_accuracy=0.0,
        retries=0,
    )
    return problem, experiment.methods


def initial_modes(problem: Problem, seeds: list[int]) -> list[Mode]:
    return [Mode(s, build_seeded_model(problem.model_spec, s).state_dict()) for s in seeds]


def loop_fit(method: str, problem: Problem, mode: Mode, settings, seed: int, count):
    """The loop trainer's fit of one mode (the tensors compared)."""
    if method == "dropout":
        return dropout.train_with_dropout(
            problem, mode.seed, settings.rate, settings.layers
        ).state_dict()
    if method == "bnn":
        q = bnn.train_bnn(problem, mode.seed, settings)
        return {"mu": list(q.mu), "rho": list(q.rho)}
    if method == "sghmc":
        return sghmc.chain(problem, mode, count, settings, seed)
    model, moments = swag.fit_swag(problem, mode, settings, seed)
    return {"state": model.state_dict(), "moments": moments.to_dict()}


def compared(method: str, fitted: dict) -> object:
    """The part of `fit_modes`' result that `loop_fit` returns."""
    if method == "dropout":
        return fitted["state"]
    if method == "bnn":
        return {"mu": fitted["mu"], "rho": fitted["rho"]}
    if method == "sghmc":
        return fitted["samples"]
    return {"state": fitted["state"], "moments": fitted["moments"]}


def largest_difference(a, b) -> float:
    if isinstance(a, dict):
        return max(largest_difference(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return max(largest_difference(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor):
        return (a.detach().double() - b.detach().double()).abs().max().item()
    return 0.0


def run_method(method: str, problem: Problem, methods, n_modes: int) -> dict:
    described = registry.descriptor(method, methods)
    settings = getattr(methods, method)
    impl = registry.implementation(described)
    counts = registry.fit_counts(method, methods)[:n_modes]
    asked = counts if described.samples_at_fit else [None] * n_modes
    modes = initial_modes(problem, [methods.first_seed + k for k in range(n_modes)])
    seeds = [methods.seed + k for k in range(n_modes)]
    start = time.perf_counter()
    loop = [loop_fit(method, problem, m, settings, s, c) for m, s, c in zip(modes, seeds, asked)]
    loop_s = time.perf_counter() - start
    start = time.perf_counter()
    batched = impl.fit_modes(problem, modes, settings, seeds, asked)
    batched_s = time.perf_counter() - start
    diff = max(largest_difference(a, compared(method, b)) for a, b in zip(loop, batched))
    return {"method": method, "modes": n_modes, "loop": loop_s, "batched": batched_s, "diff": diff}


def table(rows: list[dict], conditions: str) -> str:
    lines = [
        "| method | modes | loop, one mode after another (s) | batched fit_modes (s) | "
        "speed-up | largest difference |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['method']} | {r['modes']} | {r['loop']:.1f} | {r['batched']:.1f} | "
            f"{r['loop'] / r['batched']:.1f}x | {r['diff']:.1e} |"
        )
    loop, batched = sum(r["loop"] for r in rows), sum(r["batched"] for r in rows)
    lines.append(f"| all | | {loop:.1f} | {batched:.1f} | {loop / batched:.1f}x | |")
    note = (
        "Largest difference: of any weight (or sample, moment) between a mode's two fits; the "
        "same algorithm and random streams, float32 roundings amplified over the run (D40)."
    )
    return "\n".join(lines) + f"\n\n{note}\n\n{conditions}\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="default")
    parser.add_argument("--modes", type=int, default=8, help="modes per method (default 8)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--write", action="store_true", help="write the docs/benchmarks.md block")
    add_gate_arguments(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    gate = LoadGate(args.settle)
    conditions = Conditions()
    problem, methods = default_problem(args.experiment)
    rows = []
    for method in args.methods:
        print(f"{method}: {args.modes} modes ...", file=sys.stderr, flush=True)
        rows.append(run_method(method, problem, methods, args.modes))
    text = table(rows, conditions.line())
    print(text)
    if args.write:
        return written(
            lambda: publish("fits", "benchmarks/fits.py", DOC_INTRO, text, gate, args.allow_load)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
