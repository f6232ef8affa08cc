"""The evidence behind the default's network and recipe (docs/deviations.md, D4): seeds of an
OptuNet trained on the packaged digits under several recipes, each at its epochs and at twice
them, with the median and lowest test accuracy, how many seeds reach 50%, and the gain of the
median from doubling the epochs (the plateau check's criterion: under one point).

    python benchmarks/recipes.py                 # 16 seeds per recipe, writes the D4 block
    python benchmarks/recipes.py --seeds 8 --no-write

It trains with the workflow's own trainer (`symbnn.train.train_seeds`) on all 4,000 training
digits and scores on the 1,000 test digits, as the default experiment does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch
from machine import LoadGate, add_gate_arguments, calibration, write_gated, written

from symbnn.data import load_dataset
from symbnn.models import build_model, count_parameters
from symbnn.settings import Recipe
from symbnn.train import train_seeds

BLOCK, DOC, SCRIPT = "recipe-evidence", "docs/deviations.md", "benchmarks/recipes.py"
WIDE = {"name": "optunet", "conv1_channels": 4, "conv2_channels": 12, "hidden": 10}
PAPER = {"name": "optunet"}
# (label, model, recipe): the default, the paper's own recipe shape on the default widths,
# and the paper's network with the paper's recipe (B.1) on these 4,000 images
CASES = (
    (
        "default: momentum 0.9, cosine, lr 0.05",
        WIDE,
        Recipe(
            epochs=32, batch_size=64, lr=0.05, momentum=0.9, weight_decay=2e-4, schedule="cosine"
        ),
    ),
    (
        "plain SGD, lr 0.1 halved at 50% and 75%",
        WIDE,
        Recipe(epochs=36, batch_size=64, lr=0.1, weight_decay=2e-4, milestones=(18, 27), gamma=0.5),
    ),
    (
        "the paper's OptuNet and recipe (plain SGD, lr 0.04 halved at 15, 30)",
        PAPER,
        Recipe(
            epochs=60, batch_size=64, lr=0.04, weight_decay=2e-4, milestones=(15, 30), gamma=0.5
        ),
    ),
)


def accuracies(model, recipe, train, test, seeds) -> list[float]:
    return list(train_seeds(model, recipe, train, test, seeds).test_accuracy)


def row(label, model, recipe, train, test, seeds) -> str:
    once = accuracies(model, recipe, train, test, seeds)
    twice = accuracies(model, recipe.stretched(2), train, test, seeds)
    cells = []
    for acc in (once, twice):
        cells += [
            f"{statistics.median(acc):.3f}",
            f"{min(acc):.3f}",
            f"{sum(a >= 0.5 for a in acc)}",
        ]
    gain = 100 * (statistics.median(twice) - statistics.median(once))
    params = count_parameters(build_model(model))
    return (
        f"| {label} | {params} | {recipe.epochs} / {2 * recipe.epochs} | {' | '.join(cells)} "
        f"| {gain:+.1f} |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=16, help="seeds per recipe")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    add_gate_arguments(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = load_dataset("digits", "train", "data"), load_dataset("digits", "test", "data")
    gate = LoadGate(args.settle)
    load = os.getloadavg()[0]
    started, calib = time.perf_counter(), calibration()
    seeds = list(range(args.seeds))
    lines = [
        f"{args.seeds} seeds per recipe, trained by `symbnn.train.train_seeds` on the 4,000 "
        "packaged training digits, scored on the 1,000 test digits; at the recipe's epochs (1x) "
        "and twice them, milestones doubled (2x).",
        "",
        "| recipe | parameters | epochs 1x / 2x | median 1x | lowest 1x | >= 50% 1x | median 2x "
        "| lowest 2x | >= 50% 2x | median gain (points) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for label, model, recipe in CASES:
        lines.append(row(label, model, recipe, train, test, seeds))
        print(lines[-1], flush=True)
    lines += [
        "",
        f"One torch thread; load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at "
        f"the end; calibration (10^7 Python additions) {calib:.2f} s; "
        f"{time.perf_counter() - started:.0f} s in all.",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        return written(lambda: write_gated(DOC, BLOCK, SCRIPT, text, gate, args.allow_load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
