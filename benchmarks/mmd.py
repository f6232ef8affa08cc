"""Seconds per layer of the layer-wise MMD engine, against the targets of its issue.

For each dimension d: a target store (n x d) and a method store (m x d) of float32 weights are
written to a temporary folder; a fresh worker process then streams them through the engine,
timing each part (Zarr reads, the L1 kernel, the L2 Gram part, the twenty kernels, the
MMDAgg test when asked), the whole `layerwise_mmd` call, and torch.cdist(p=1) on the same
blocks for comparison. The worker's peak resident memory is reported too. The float32 matmul
throughput of the machine is measured in the same run, and the table names the CPU (lscpu's
model name, cores) and the load average at the start and the end.

The machine may be shared: every part keeps, block by block, its best of several passes
(--repeats, more for small layers, up to MIN_TIMED_SECONDS of passes), and the GEMM reference
of the L2 target runs after the L2 part in one pass and before the L1 part in the next, so
that neither side always inherits the other's thread hand-offs.

    python benchmarks/mmd.py                              # quick: d = 392, 10^4
    python benchmarks/mmd.py --dims 392 1e4 1e5 1e6 --skip-cdist-above 1e5
    python benchmarks/mmd.py --device cuda --dims 1e5 1e6

Results print as a table, go to --json (default benchmarks/results/mmd-<time>.json) and into
docs/benchmarks.md as the generated block "mmd" (--no-write: not there), with the CPU, the
threads, the load and a calibration figure (`benchmarks/machine.py`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import Conditions, LoadGate, add_gate_arguments, publish, write_results, written

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {
    "kernels_over_distances": 1.2,  # 20 kernels (bandwidths included) / the two distance matrices
    # L2 flop rate / float32 GEMM rate on the same block. The L2 part is one OpenBLAS syrk
    # (N(N+1)d flops) plus fixed costs (centring, first touch of the N x N float64
    # accumulator); the reference is torch's (MKL) GEMM z z^T (2 N^2 d flops). On a shared CPU
    # the two libraries' threads are slowed unequally by other processes, hence best-of passes.
    "l2_fraction_of_matmul": 0.5,
    "l1_speedup_over_cdist": 5.0,  # cdist(p=1) seconds / L1 seconds (CPU)
    "l1_over_l2": 10.0,  # L1 seconds / L2 seconds
    "peak_memory_gib": 2.0,  # at d = 10^6
}
DOC_INTRO = (
    "The `mmd` block times the layer-wise MMD engine per layer on two synthetic stores "
    "(n = 1000 target and m = 100 method samples of d float32 weights): Zarr reads, the L1 "
    "and squared-L2 distance matrices, the twenty kernels and their MMD estimates, the whole "
    "layer, and `torch.cdist(p=1)` for comparison, each part the best of several passes; "
    "the verdict columns hold each ratio against its target (kernels at most 1.2 times the "
    "two distance matrices). Rerun it with "
    "`python benchmarks/mmd.py --dims 392 1e4 1e5 1e6 --skip-cdist-above 1e4` (about half "
    "an hour on two cores; `--help` for the options)."
)
MIN_TIMED_SECONDS = 3.0  # small layers get more passes, until this long ...
MAX_PASSES = 15  # ... or this many


def peak_rss_gib() -> float:
    """This process's peak resident memory. VmHWM, not ru_maxrss: on Linux the latter keeps
    the peak of the parent that forked this worker (here: the one that wrote the stores)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def matmul_gflops(device: str, size: int = 2048, repeats: int = 5) -> float:
    """float32 GEMM throughput (TF32 off) of this machine, best of ``repeats``."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    a @ b
    sync(device)
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def write_pair(folder: Path, n: int, m: int, d: int, seed: int = 0) -> tuple[Path, Path]:
    """Two one-layer stores of float32 weights, written in batches of rows."""
    from symbnn.store import StoreWriter

    rng = np.random.default_rng(seed)
    paths = []
    for name, rows, shift in (("target", n, 0.0), ("method", m, 0.05)):
        path = folder / f"{name}.zarr"
        batch = max(1, min(rows, (128 * 2**20) // (4 * d)))
        with StoreWriter(path, {"experiment": "bench"}, expected_samples=rows) as writer:
            for start in range(0, rows, batch):
                k = min(batch, rows - start)
                weights = rng.standard_normal((k, d), dtype=np.float32)
                weights *= 0.05
                weights += shift
                writer.append({"layer.weight": weights}, {"seed": np.arange(start, start + k)})
        paths.append(path)
    return paths[0], paths[1]


def _gemm(z, device) -> float:
    """Seconds of the plain float32 GEMM z z^T on the block: the reference of the L2 target."""
    s = time.perf_counter()
    z @ z.T
    sync(device)
    return time.perf_counter() - s


def _one_pass(target, method, n, m, device, args, with_cdist, gemm_first):
    """Stream the layer once through a fresh accumulator, timing each block's read, L1, L2,
    the GEMM reference (before L1 with ``gemm_first``, after L2 otherwise: passes alternate,
    so that neither side always follows the other's thread hand-offs) and cdist."""
    import torch

    from symbnn.mmd.distances import PooledDistances
    from symbnn.mmd.layerwise import pooled_blocks

    acc = PooledDistances(n + m, device)
    # seconds per block, so that the caller keeps each block's best pass
    t = {"read": [], "l1": [], "l2": [], "gemm": [], "cdist": [] if with_cdist else None}
    start = time.perf_counter()
    for block in pooled_blocks(
        target, method, "layer.weight", slice(None), slice(None), args.max_bytes
    ):
        block = acc.prepare(block)
        sync(device)
        t["read"].append(time.perf_counter() - start)
        z = torch.as_tensor(block, device=device)
        if gemm_first:
            t["gemm"].append(_gemm(z, device))
        s = time.perf_counter()
        acc.add_l1(block)
        sync(device)
        t["l1"].append(time.perf_counter() - s)
        s = time.perf_counter()
        acc.add_l2(block)
        sync(device)
        t["l2"].append(time.perf_counter() - s)
        acc.n_columns += block.shape[1]
        if not gemm_first:
            t["gemm"].append(_gemm(z, device))
        if with_cdist:
            s = time.perf_counter()
            torch.cdist(z, z, p=1)
            sync(device)
            t["cdist"].append(time.perf_counter() - s)
        start = time.perf_counter()
    return acc, t


def worker(args) -> dict:
    """Time one dimension in this (fresh) process; print a JSON line."""
    import torch

    from symbnn.mmd import AggTestConfig, layerwise_mmd
    from symbnn.mmd.distances import PooledDistances
    from symbnn.mmd.engine import mmd_from_distances
    from symbnn.store import open_store

    device = args.device
    target, method = open_store(args.target), open_store(args.method)
    n, m, d = target.n_samples, method.n_samples, target.shape("layer.weight")[0]
    rss_base = peak_rss_gib()
    # Warm-up: numba compilation (cached on disk after the first run) and BLAS threads.
    warm = PooledDistances(n + m, device)
    warm.add(np.random.default_rng(0).standard_normal((n + m, 64), dtype=np.float32))

    # The CPU is shared and noisy: the matmul rate is measured here, next to the timings, and
    # each block keeps its best of the passes for every part (cdist runs in the first pass
    # only). At least --repeats passes, more while they are short (up to MIN_TIMED_SECONDS).
    gflops = matmul_gflops(device)
    best: dict[str, list[float]] = {}
    kernels, cdist, passes, started = math.inf, None, 0, time.perf_counter()
    while passes < args.repeats or (
        passes < MAX_PASSES and time.perf_counter() - started < MIN_TIMED_SECONDS
    ):
        acc, run = _one_pass(
            target,
            method,
            n,
            m,
            device,
            args,
            with_cdist=passes == 0 and d <= args.skip_cdist_above,
            gemm_first=passes % 2 == 1,
        )
        for key in ("read", "l1", "l2", "gemm"):
            best[key] = [min(a, b) for a, b in zip(best.get(key, run[key]), run[key])]
        if run["cdist"] is not None:
            cdist = sum(run["cdist"])
        l1, l2 = acc.result()
        s = time.perf_counter()
        result = mmd_from_distances(l1, l2, n, n_params=d)
        sync(device)
        kernels = min(kernels, time.perf_counter() - s)
        passes += 1
    t = {key: sum(values) for key, values in best.items()}
    t.update({"kernels": kernels, "cdist": cdist, "passes": passes})
    if args.pvalue:
        s = time.perf_counter()
        mmd_from_distances(l1, l2, n, pvalue=True, config=AggTestConfig())
        sync(device)
        t["pvalue_total"] = time.perf_counter() - s
    del l1, l2, acc
    s = time.perf_counter()
    layerwise_mmd(args.target, args.method, device=device, max_bytes=args.max_bytes)
    t["end_to_end"] = time.perf_counter() - s
    t.update(
        {
            "matmul_gflops": gflops,
            "repeats": args.repeats,
            "blocks": len(best["l2"]),
            "device": device,
            "d": d,
            "n": n,
            "m": m,
            "median_mmd": result.median,
            "rss_after_import_gib": rss_base,
            "peak_rss_gib": peak_rss_gib(),
            "cuda_peak_gib": torch.cuda.max_memory_allocated() / 2**30
            if device.startswith("cuda")
            else None,
        }
    )
    return t


def run_dimension(d: int, device: str, args, folder: Path) -> dict:
    start = time.perf_counter()
    target, method = write_pair(folder, args.n, args.m, d)
    written = time.perf_counter() - start
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        "--device",
        device,
        "--target",
        str(target),
        "--method",
        str(method),
        "--skip-cdist-above",
        str(args.skip_cdist_above),
        "--max-mib",
        str(args.max_mib),
        "--repeats",
        str(args.repeats),
    ] + (["--pvalue"] if args.pvalue else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    shutil.rmtree(target)
    shutil.rmtree(method)
    if out.returncode != 0:
        raise RuntimeError(f"worker failed for d={d} on {device}:\n{out.stderr}")
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["store_write_s"] = written
    return row


def resnet18_sizes() -> list[int]:
    """Parameter counts of ResNet-18 (CIFAR-100) layers as the engine sees them by default."""
    from symbnn.mmd import BUFFER_SUFFIXES
    from symbnn.models import build_model

    state = build_model({"name": "resnet18", "num_classes": 100}).state_dict()
    return [
        v.numel()
        for k, v in state.items()
        if v.is_floating_point() and not k.endswith(BUFFER_SUFFIXES)
    ]


def resnet18_estimate(rows: list[dict]) -> dict:
    """Seconds for all ResNet-18 layers: the fixed per-layer cost (twenty kernels) plus the
    per-parameter cost (reads, L1, L2) of the largest d measured, per device."""
    sizes = resnet18_sizes()
    estimates = {}
    for device in sorted({r["device"] for r in rows}):
        mine = [r for r in rows if r["device"] == device]
        big = max(mine, key=lambda r: r["d"])
        per_param = (big["read"] + big["l1"] + big["l2"]) / big["d"]
        fixed = float(np.median([r["kernels"] for r in mine]))
        est = {
            "n_layers": len(sizes),
            "n_params": sum(sizes),
            "from_d": big["d"],
            "seconds": len(sizes) * fixed + per_param * sum(sizes),
        }
        with_cdist = [r for r in mine if r["cdist"] is not None]
        if with_cdist:
            c = max(with_cdist, key=lambda r: r["d"])
            est["seconds_with_cdist_l1"] = len(sizes) * fixed + (
                c["read"] + c["cdist"] + c["l2"]
            ) / c["d"] * sum(sizes)
        estimates[device] = est
    return estimates


def verdicts(row: dict) -> dict:
    """Ratios against the targets. The L2 rate counts the flops actually done (syrk on the CPU
    computes one triangle: N(N+1)d; the GPU's matmul 2N^2 d) and is compared with the float32
    GEMM z z^T timed on the same blocks in the same pass (``gemm``, 2N^2 d flops)."""
    dist = row["l1"] + row["l2"]
    n_rows = row["n"] + row["m"]
    flops = n_rows * (n_rows + 1) * row["d"] if row["device"] == "cpu" else 2 * n_rows**2 * row["d"]
    l2_rate = flops / row["l2"] / 1e9
    gemm_rate = 2 * n_rows**2 * row["d"] / row["gemm"] / 1e9
    return {
        "kernels_over_distances": row["kernels"] / dist,
        "l2_gflops": l2_rate,
        "gemm_gflops": gemm_rate,
        "l2_fraction_of_matmul": l2_rate / gemm_rate,
        "l2_fraction_of_square_matmul": l2_rate / row["matmul_gflops"],
        "l1_over_l2": row["l1"] / row["l2"],
        "l1_speedup_over_cdist": row["cdist"] / row["l1"] if row["cdist"] else None,
        "l1_gpairs_per_s": n_rows * (n_rows - 1) / 2 * row["d"] / row["l1"] / 1e9,
    }


def check(name: str, value, ok_if_below: bool) -> str:
    if value is None:
        return "-"
    limit = TARGETS[name]
    good = value <= limit if ok_if_below else value >= limit
    return f"{value:.2f} {'ok' if good else 'MISS'}"


def report(rows: list[dict], gflops: dict, estimate: dict, cpu: str) -> str:
    """The table, then (a paragraph each, Markdown) the machine, the matmul rates and the
    ResNet-18 estimate."""
    lines = []
    head = (
        "device",
        "d",
        "read s",
        "L1 s",
        "L2 s",
        "kernels s",
        "layer s",
        "cdist(p=1) s",
        "kern/dist<=1.2",
        "L2/matmul>=0.5",
        "cdist/L1>=5",
        "L1/L2<=10",
        "peak RSS GiB",
    )
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for r in rows:
        v = verdicts(r)
        cdist_ok = (
            check("l1_speedup_over_cdist", v["l1_speedup_over_cdist"], False)
            if r["device"] == "cpu"
            else "-"
        )
        mem = f"{r['peak_rss_gib']:.2f}"
        if r["d"] >= 10**6:
            mem += " ok" if r["peak_rss_gib"] < TARGETS["peak_memory_gib"] else " MISS"
        cells = (
            r["device"],
            f"{r['d']:.0e}" if r["d"] >= 10**4 else str(r["d"]),
            f"{r['read']:.3f}",
            f"{r['l1']:.3f}",
            f"{r['l2']:.3f}",
            f"{r['kernels']:.3f}",
            f"{r['end_to_end']:.3f}",
            "skipped" if r["cdist"] is None else f"{r['cdist']:.2f}",
            check("kernels_over_distances", v["kernels_over_distances"], True),
            f"{v['l2_gflops']:.0f}/{v['gemm_gflops']:.0f} GF/s = "
            + check("l2_fraction_of_matmul", v["l2_fraction_of_matmul"], False),
            cdist_ok,
            check("l1_over_l2", v["l1_over_l2"], True),
            mem,
        )
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Machine: {cpu}."]
    for device, rate in gflops.items():
        lines += [
            "",
            f"float32 matmul throughput on {device}: {rate:.0f} GFLOP/s (2048^3, best of 5, at the "
            "start); the L2 column compares with the GEMM z z^T timed on the same blocks.",
        ]
    for device, est in estimate.items():
        lines.append("")
        text = (
            f"ResNet-18 ({est['n_params'] / 1e6:.1f}M params, {est['n_layers']} layers) on {device}: "
            f"~{est['seconds'] / 60:.1f} min per pair of stores (n={rows[0]['n']}, m={rows[0]['m']}, "
            f"extrapolated from d={est['from_d']:.0e})"
        )
        if "seconds_with_cdist_l1" in est:
            text += f"; with cdist(p=1) for L1: ~{est['seconds_with_cdist_l1'] / 3600:.1f} h"
        lines.append(text)
    return "\n".join(lines)


def parse_args(argv=None):
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dims",
        nargs="+",
        type=float,
        default=[392, 1e4],
        help="parameter counts per layer (default: 392 1e4; full: 392 1e4 1e5 1e6)",
    )
    parser.add_argument("--n", type=int, default=1000, help="target samples")
    parser.add_argument("--m", type=int, default=100, help="method samples")
    parser.add_argument(
        "--device",
        nargs="+",
        default=None,
        help="cpu and/or cuda (default: cpu, plus cuda when present)",
    )
    parser.add_argument(
        "--skip-cdist-above",
        type=float,
        default=1e5,
        help="no torch.cdist(p=1) comparison above this d (it takes ~15 min at 1e6)",
    )
    parser.add_argument(
        "--pvalue", action="store_true", help="also time the MMDAgg test (B1 = B2 = 2000)"
    )
    parser.add_argument("--max-mib", type=float, default=64.0, help="block size per store read")
    parser.add_argument(
        "--repeats", type=int, default=3, help="passes per d; each part keeps its best"
    )
    parser.add_argument("--tmp", default=None, help="folder for the temporary stores")
    parser.add_argument("--json", default=None, help="where to write the results")
    parser.add_argument(
        "--no-write", action="store_true", help="print only, leave docs/benchmarks.md alone"
    )
    add_gate_arguments(parser)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.max_bytes = int(args.max_mib * 2**20)
    if args.device is None:
        args.device = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if args.worker:
        args.device = args.device[0]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    gate = LoadGate(args.settle)
    conditions = Conditions()
    gflops = {device: matmul_gflops(device) for device in args.device}
    rows = []
    with tempfile.TemporaryDirectory(dir=args.tmp, prefix="mmd-bench-") as tmp:
        for device in args.device:
            for d in (int(x) for x in args.dims):
                print(f"d={d} on {device} ...", file=sys.stderr, flush=True)
                rows.append(run_dimension(d, device, args, Path(tmp)))
    estimate = resnet18_estimate(rows)
    cpu = conditions.line()
    text = report(rows, gflops, estimate, cpu)
    print(text)
    status = 0
    if not args.no_write:
        status = written(
            lambda: publish("mmd", "benchmarks/mmd.py", DOC_INTRO, text, gate, args.allow_load)
        )
    out = write_results(
        "mmd",
        args.json,
        {
            "args": {k: v for k, v in vars(args).items() if k not in ("target", "method")},
            "cpu_count": os.cpu_count(),
            "cpu": cpu,
            "matmul_gflops": gflops,
            "rows": rows,
            "verdicts": [verdicts(r) for r in rows],
            "resnet18": estimate,
            "table": text,
        },
    )
    print(f"results: {out}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
