"""What the store digest costs when a store is opened: `open_store` with and without the
check of the metadata against the manifest (and of the manifest against the digest).

Two stores, as `symbnn.store` writes them (StoreWriter, batches of 8 samples):

    optunet64   64 OptuNets (the default experiment's network; 9 arrays, whole-sample chunks)
    resnet18    --resnet-samples CIFAR ResNet-18s (122 arrays; the large convolutions split
                their first parameter axis, so the manifest lists many chunks)

Each store is opened --repeats times in pairs, with the digest check and with it replaced by
a no-op, the order alternating; the check alone (`check_digest`: reading manifest.json, its
SHA-256, comparing the group's and every array's metadata with the manifest's copies) is
timed apart, on metadata already read. Everything is in the page cache (an open reads only
metadata: a few small files per array and a directory listing).

    python benchmarks/store_open.py
    python benchmarks/store_open.py --resnet-samples 16 --repeats 51 --dir /scratch/tmp
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from machine import calibration  # noqa: E402

from symbnn import store as store_module  # noqa: E402
from symbnn.store import StoreWriter, open_store, read_group_meta  # noqa: E402
from symbnn.store.digest import MANIFEST  # noqa: E402


def shapes_of(spec: dict) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    import torch

    from symbnn.models import build_model

    with torch.device("meta"):
        state = build_model(spec).state_dict()
    return {
        name: (tuple(t.shape), np.dtype(str(t.dtype).removeprefix("torch.")))
        for name, t in state.items()
    }


def write(path: Path, spec: dict, n: int) -> None:
    """A store of ``n`` networks of ``spec`` (values: the sample index, as float or int)."""
    shapes = shapes_of(spec)
    batch = 8
    with StoreWriter(path, {"architecture": spec}, expected_samples=n) as writer:
        for a in range(0, n, batch):
            rows = np.arange(a, min(n, a + batch))
            state = {
                name: np.broadcast_to(
                    rows.reshape(-1, *[1] * len(shape)).astype(dtype), (len(rows), *shape)
                ).copy()
                for name, (shape, dtype) in shapes.items()
            }
            writer.append(state, {"seed": rows})


def timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def measure(path: Path, repeats: int) -> dict[str, float]:
    """Median seconds: open with the digest check, open without it, the check alone."""
    saved = store_module.check_digest
    skipped = lambda *args: {}  # noqa: E731
    opened = {"with": [], "without": []}
    for turn in range(repeats):
        order = ("with", "without") if turn % 2 == 0 else ("without", "with")
        for label in order:
            store_module.check_digest = saved if label == "with" else skipped
            try:
                opened[label].append(timed(lambda: open_store(path)))
            finally:
                store_module.check_digest = saved
    store = open_store(path)
    layouts = {
        f"{section}/{name}": store.layout(section, name)
        for section, names in (("state", store.state_names), ("info", store.info_names))
        for name in names
    }
    alone = [timed(lambda: saved(path, read_group_meta(path), layouts)) for _ in range(repeats)]
    chunks = sum(int(np.prod(layout.grid)) for layout in layouts.values())
    return {
        "with": statistics.median(opened["with"]),
        "without": statistics.median(opened["without"]),
        "alone": statistics.median(alone),
        "arrays": len(layouts),
        "chunks": chunks,
        "manifest_kb": (path / MANIFEST).stat().st_size / 1e3,
        "store_mb": sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6,
    }


def table(rows: dict[str, dict[str, float]]) -> str:
    lines = [
        "| store | MB | arrays | chunks | manifest | open, digest checked | open, not "
        "checked | check alone | digest's share of an open |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['store_mb']:.0f} | {r['arrays']} | {r['chunks']} | "
            f"{r['manifest_kb']:.0f} kB | {1e3 * r['with']:.2f} ms | {1e3 * r['without']:.2f} ms"
            f" | {1e3 * r['alone']:.2f} ms | {100 * r['alone'] / r['with']:.0f}% |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resnet-samples", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=31, help="opens of each kind")
    parser.add_argument("--dir", default=None, help="folder for the stores (default: a temp one)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="store-open-", dir=args.dir))
    stores = {
        "optunet64": ({"name": "optunet"}, 64),
        f"resnet18 x{args.resnet_samples}": (
            {"name": "resnet18", "num_classes": 10},
            args.resnet_samples,
        ),
    }
    try:
        rows = {}
        for name, (spec, n) in stores.items():
            path = folder / f"{name.split()[0]}.zarr"
            write(path, spec, n)
            rows[name] = measure(path, args.repeats)
            shutil.rmtree(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(table(rows))
    print(f"\nmachine: {os.cpu_count()} cores, {load}")
    print(f"calibration: 10**7 Python additions in {calibration():.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
