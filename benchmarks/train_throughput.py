"""Training throughput: the loop over seeds vs the batched trainer (OptuNet, digits data).

Reports model-steps per second (one SGD step of one model on a batch) of wall-clock time and
the speed-up over the loop; every model draws its own batches. On a shared machine, wall time
depends on the other processes: the last column, model-steps per CPU-second of this process,
is the steadier figure for comparing trainers there. Each measurement trains with the real trainers
(`train_one`, `train_batched`) for one epoch on the first `steps * batch` training images, so
every model makes exactly `steps` steps; set-up (seeded models, data tables) is timed too.

    python benchmarks/train_throughput.py                      # CPU, K = 32 128 512
    python benchmarks/train_throughput.py --device cuda --steps 100
    python benchmarks/train_throughput.py --k 8 32 --steps 10 --threads 1 --generic
"""

from __future__ import annotations

import argparse
import time

import torch

from symbnn.data import load_dataset
from symbnn.settings import Recipe
from symbnn.train.batched import train_batched
from symbnn.train.loop import train_one


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


def time_loop(spec, recipe, train, models: int, device: str) -> tuple[float, float]:
    return timed(
        lambda: [train_one(spec, recipe, train, seed, device) for seed in range(models)], device
    )


def time_batched(spec, recipe, train, k: int, device: str, generic: bool) -> tuple[float, float]:
    return timed(
        lambda: train_batched(spec, recipe, train, list(range(k)), device, generic=generic), device
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--k", type=int, nargs="+", default=[32, 128, 512], help="models trained at once"
    )
    parser.add_argument("--steps", type=int, default=10, help="SGD steps per model")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument(
        "--loop-models", type=int, default=4, help="models the loop baseline trains"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads (default: torch's)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="best of this many runs per row")
    parser.add_argument(
        "--generic", action="store_true", help="also time the generic vmap formulation"
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but CUDA is not available")

    spec = {"name": "optunet"}
    full = load_dataset("digits", "train")
    n = args.steps * args.batch
    if n > len(full):
        parser.error(
            f"--steps {args.steps} x --batch {args.batch} exceeds the {len(full)} training images"
        )
    train = full.subset(slice(0, n))
    recipe = Recipe(epochs=1, batch_size=args.batch, lr=0.04, weight_decay=2e-4)

    device_name = (
        torch.cuda.get_device_name(args.device)
        if torch.device(args.device).type == "cuda"
        else "cpu"
    )
    print(
        f"# OptuNet on digits, batch {args.batch}, {args.steps} steps per model, device {args.device} "
        f"({device_name}), torch {torch.__version__}, {torch.get_num_threads()} CPU threads"
    )
    warm = full.subset(slice(0, 2 * args.batch))  # first calls pay one-off library set-up
    time_batched(spec, recipe, warm, 2, args.device, False)
    time_loop(spec, recipe, warm, 1, args.device)

    print(
        f"{'trainer':<14}{'K':>5}{'wall s':>9}{'CPU s':>9}{'model-steps/s':>15}{'vs loop':>9}{'per CPU-s':>11}"
    )
    loop_rate = None

    def report(label: str, k: int, run) -> float:
        runs = [run() for _ in range(args.repeats)]  # best of the repeats
        wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
        rate = k * args.steps / wall
        ratio = rate / loop_rate if loop_rate else 1.0
        print(
            f"{label:<14}{k:>5}{wall:>9.2f}{cpu:>9.2f}{rate:>15.0f}{ratio:>8.1f}x{k * args.steps / cpu:>11.0f}",
            flush=True,
        )
        return rate

    loop_rate = report(
        "loop",
        args.loop_models,
        lambda: time_loop(spec, recipe, train, args.loop_models, args.device),
    )
    kinds = [("batched", False)] + ([("batched-vmap", True)] if args.generic else [])
    for k in args.k:
        for label, generic in kinds:
            report(
                label,
                k,
                lambda k=k, generic=generic: time_batched(
                    spec, recipe, train, k, args.device, generic
                ),
            )


if __name__ == "__main__":
    main()
