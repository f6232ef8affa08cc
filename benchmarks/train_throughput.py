"""Training throughput: the loop over seeds vs the batched trainer, on the packaged digits.

Trainers: `loop` (one nn.Module and torch.optim.SGD per seed, `train_one`), the batched
trainer's hand-written OptuNet and MLP passes, and its generic vmap path (`--generic` form,
any buffer-free model) on the same OptuNet. Models: the default experiment's OptuNet (4/12/10
channels and units, 904 parameters) and two MLPs the analyses train on images (784-16-10 and
barrier statistics' 784-64-10). Each measurement trains with the real trainers for one epoch
on the first `steps * batch` training images, so every model makes exactly `steps` steps;
set-up (seeded models, data tables, threads) is timed too. Best of `--repeats` runs per row.

Figures: model-steps (one SGD step of one model on its own batch) per second of wall-clock
time and per CPU-second of this process (all its threads), and each one's ratio to the loop
on the same model and thread count; and the arithmetic rate, GFLOP/s: a model-step's FLOPs
(torch's FlopCounterMode over one forward and backward of the module on a batch: its
matrix products and convolutions, the elementwise rest left out) times model-steps per second.
A closing table sets the rate a 5x speed-up over the loop would need beside the rate of one
large float32 matrix product on the same threads, the most this machine's arithmetic gives
dense work: where the one approaches the other, no formulation reaches 5x. On a shared
machine wall time depends on the other processes; CPU-seconds are the steadier figure. The
load average (uptime) at start and end and a calibration figure (a pure-Python loop of 10**7
additions, seconds) come with the table, which goes into docs/benchmarks.md as a generated
block (`--no-write`: print only).

    python benchmarks/train_throughput.py                       # CPU, 1 and 2 threads, K = 32 128
    python benchmarks/train_throughput.py --k 32 128 512 --repeats 5
    python benchmarks/train_throughput.py --device cuda --threads 1 --k 128 512 --steps 40
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
from machine import LoadGate, add_gate_arguments, calibration, write_gated, written
from torch.utils.flop_counter import FlopCounterMode

from symbnn.data import load_dataset
from symbnn.settings import Recipe
from symbnn.train.batched import train_batched
from symbnn.train.loop import train_one
from symbnn.train.seeding import build_seeded_model

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"

MODELS = {
    "optunet-904": {"name": "optunet", "conv1_channels": 4, "conv2_channels": 12, "hidden": 10},
    "mlp-784-16-10": {"name": "mlp", "widths": [784, 16, 10]},
    "mlp-784-64-10": {"name": "mlp", "widths": [784, 64, 10]},
}
MATMUL_SIZE = 2048
# (trainer label, model, batched formulation: None for the loop, else generic?)
ROWS = [
    ("loop", "optunet-904", None),
    ("batched OptuNet", "optunet-904", False),
    ("batched vmap", "optunet-904", True),
    ("loop", "mlp-784-16-10", None),
    ("batched MLP", "mlp-784-16-10", False),
    ("loop", "mlp-784-64-10", None),
    ("batched MLP", "mlp-784-64-10", False),
]


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of fn(), device work included."""
    _sync(device)
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    _sync(device)
    return time.perf_counter() - wall, time.process_time() - cpu


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown CPU"
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def step_flops(spec: dict, train, batch: int) -> float:
    """FLOPs of one model-step: forward and backward of the module on `batch` training images
    (matrix products and convolutions, as torch's FlopCounterMode counts them)."""
    model = build_seeded_model(spec, 0)
    x = train.normalize(train.images[:batch])
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.cross_entropy(model(x), train.targets[:batch]).backward()
    return float(counter.get_total_flops())


def matmul_rate(device: str, size: int = MATMUL_SIZE, repeats: int = 3) -> float:
    """GFLOP/s of a size x size float32 matrix product on the current threads (best of
    `repeats`): dense arithmetic at its fastest on this machine."""
    a, b = (torch.randn(size, size, device=device) for _ in range(2))
    out = torch.empty(size, size, device=device)
    torch.mm(a, b, out=out)  # warm-up
    best = min(timed(lambda: torch.mm(a, b, out=out), device)[0] for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def run_once(spec, recipe, train, k: int, device: str, generic) -> tuple[float, float]:
    if generic is None:
        return timed(lambda: [train_one(spec, recipe, train, s, device) for s in range(k)], device)
    return timed(
        lambda: train_batched(spec, recipe, train, list(range(k)), device, generic=generic),
        device,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--k", type=int, nargs="+", default=[32, 128], help="models the batched trainer trains"
    )
    parser.add_argument("--steps", type=int, default=20, help="SGD steps per model")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--loop-models", type=int, default=4, help="models the loop baseline trains"
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--threads", type=int, nargs="+", default=[1, 2], help="torch CPU thread counts"
    )
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs per row")
    parser.add_argument(
        "--no-write", action="store_true", help="print the table, leave docs/benchmarks.md alone"
    )
    add_gate_arguments(parser)
    args = parser.parse_args()
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but CUDA is not available")
    if min(args.threads) < 1 or min(args.k) < 1 or args.steps < 1 or args.repeats < 1:
        parser.error("--threads, --k, --steps and --repeats must be positive")

    full = load_dataset("digits", "train")
    n = args.steps * args.batch
    if n > len(full):
        parser.error(
            f"--steps {args.steps} x --batch {args.batch} exceeds the {len(full)} training images"
        )
    train = full.subset(slice(0, n))
    recipe = Recipe(epochs=1, batch_size=args.batch, lr=0.04, weight_decay=2e-4)
    warm = full.subset(slice(0, 2 * args.batch))  # first calls pay one-off library set-up

    device_name = (
        torch.cuda.get_device_name(args.device)
        if torch.device(args.device).type == "cuda"
        else cpu_model()
    )
    gate = LoadGate(args.settle)
    load_start, calib = load_average(), calibration()
    lines = []

    def emit(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    emit(
        f"Digits, batch {args.batch}, {args.steps} steps per model, device {args.device} "
        f"({device_name}), torch {torch.__version__}; loop: {args.loop_models} models in turn."
    )
    emit("")
    emit(
        "| trainer | model | K | threads | wall s | CPU s | model-steps/s | per CPU-s "
        "| GFLOP/s | vs loop (wall) | vs loop (CPU) |"
    )
    emit("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    flops = {model: step_flops(spec, train, args.batch) for model, spec in MODELS.items()}
    matmul_rates: dict[int, float] = {}
    loop_gflops: dict[tuple[str, int], float] = {}
    default_threads = torch.get_num_threads()
    for threads in args.threads:
        torch.set_num_threads(threads)
        matmul_rates[threads] = matmul_rate(args.device)
        loop_rates: dict[str, tuple[float, float]] = {}
        for label, model, generic in ROWS:
            spec = MODELS[model]
            run_once(spec, recipe, warm, 2 if generic is not None else 1, args.device, generic)
            for k in [args.loop_models] if generic is None else args.k:
                runs = [
                    run_once(spec, recipe, train, k, args.device, generic)
                    for _ in range(args.repeats)
                ]
                wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
                rate, cpu_rate = k * args.steps / wall, k * args.steps / cpu
                gflops = rate * flops[model] / 1e9
                if generic is None:
                    loop_rates[model] = (rate, cpu_rate)
                    loop_gflops[model, threads] = gflops
                base = loop_rates[model]
                emit(
                    f"| {label} | {model} | {1 if generic is None else k} | {threads} "
                    f"| {wall:.2f} | {cpu:.2f} | {rate:.0f} | {cpu_rate:.0f} | {gflops:.1f} "
                    f"| {rate / base[0]:.1f}x | {cpu_rate / base[1]:.1f}x |"
                )
    torch.set_num_threads(default_threads)
    emit("")
    emit(
        "| model | MFLOP per model-step | threads | loop GFLOP/s | 5x the loop, GFLOP/s "
        "| matrix product GFLOP/s | 5x the loop / matrix product |"
    )
    emit("|---|---:|---:|---:|---:|---:|---:|")
    for (model, threads), gflops in loop_gflops.items():
        emit(
            f"| {model} | {flops[model] / 1e6:.1f} | {threads} | {gflops:.1f} | {5 * gflops:.1f} "
            f"| {matmul_rates[threads]:.0f} | {5 * gflops / matmul_rates[threads]:.0%} |"
        )
    emit("")
    emit(
        f"Load average (1, 5, 15 min) {load_start} at start, {load_average()} at end; "
        f"calibration (pure-Python loop of 10**7 additions) {calib:.2f} s. The loop row's K is "
        f"1: its figures are per model, over {args.loop_models} models trained in turn. The "
        f"matrix product: {MATMUL_SIZE} x {MATMUL_SIZE}, float32, on the row's threads."
    )
    if not args.no_write:
        body, script = "\n".join(lines), "benchmarks/train_throughput.py"
        return written(
            lambda: write_gated(DOC, "train-throughput", script, body, gate, args.allow_load)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
