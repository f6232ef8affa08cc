"""What chunk checksums cost: writing and reading weight stores with and without crc32c.

Two layouts of a few hundred MB of float32 each, as `symbnn.store` chunks them:

    posterior  1000 samples of a 132k-parameter network (3 arrays), chunks of whole samples
    resnet18   8 samples of CIFAR ResNet-18 (102 float arrays, 11.2M parameters each): the
               large convolutions split their first parameter axis (8 samples x a slice)

For each, a store is written with `StoreWriter` (in batches, as the workflow does) and read
back whole (`Store.read` per array, chunk-aligned blocks) in the current format (crc32c on every
chunk, every chunk written, chunk files listed when opened) and in the format before checksums
(`bytes` codec only), alternating the two: --repeats writes, each read back --reads times
from the page cache ("read": the fastest I/O there is, so the largest relative overhead) and
once more after its files were written out and dropped from the page cache ("cold read":
posix_fadvise DONTNEED on the store's files only). Writes are not synced (as in the
workflow). Wall-clock seconds are the minimum over the
runs (the least disturbed by other processes on a shared machine); CPU seconds (all threads of
this process) are the median. Opening (metadata checks and the chunk listing) is timed apart.

    python benchmarks/store_io.py                 # both layouts
    python benchmarks/store_io.py --repeats 9 --dir /scratch/tmp
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from symbnn import store as store_module  # noqa: E402
from symbnn.store import StoreWriter, open_store  # noqa: E402

TARGET_OVERHEAD = 0.10  # the issue's bound on the checksums' cost


def posterior_layout() -> tuple[int, dict[str, tuple[int, ...]]]:
    return 1000, {"fc1.weight": (256, 384), "fc2.weight": (128, 16, 3, 3), "fc3.weight": (15_072,)}


def resnet18_layout() -> tuple[int, dict[str, tuple[int, ...]]]:
    import torch

    from symbnn.models import build_model

    with torch.device("meta"):
        model = build_model({"name": "resnet18", "num_classes": 10})
    shapes = {
        name: tuple(t.shape) for name, t in model.state_dict().items() if t.is_floating_point()
    }
    return 8, shapes


LAYOUTS = {"posterior": posterior_layout, "resnet18": resnet18_layout}


@contextlib.contextmanager
def without_checksums():
    """Write as symbnn did before checksums: `bytes` codec only, all-zero chunks skipped."""
    saved = store_module.CHECKSUM_CODECS, store_module.ARRAY_CONFIG
    store_module.CHECKSUM_CODECS, store_module.ARRAY_CONFIG = None, {}
    try:
        yield
    finally:
        store_module.CHECKSUM_CODECS, store_module.ARRAY_CONFIG = saved


def drop_checksum_attribute(path: Path) -> None:
    meta_path = path / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["attributes"].pop("checksum", None)
    meta_path.write_text(json.dumps(meta))


def make_state(n: int, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        name: rng.standard_normal((n, *shape), dtype=np.float32) for name, shape in shapes.items()
    }


def write(path: Path, state: dict[str, np.ndarray], checksums: bool, batch: int):
    """(wall seconds, CPU seconds) to write ``state`` as a store at ``path``."""
    n = len(next(iter(state.values())))
    context = contextlib.nullcontext() if checksums else without_checksums()
    wall, cpu = time.perf_counter(), time.process_time()
    with context, StoreWriter(path, {"experiment": "bench"}, expected_samples=n) as writer:
        for a in range(0, n, batch):
            writer.append(
                {name: values[a : a + batch] for name, values in state.items()},
                {"seed": np.arange(a, min(n, a + batch))},
            )
    result = time.perf_counter() - wall, time.process_time() - cpu
    if not checksums:
        drop_checksum_attribute(path)
    return result


def evict(path: Path) -> None:
    """Write the store's files to disk and drop them (only them) from the page cache."""
    for file in path.rglob("*"):
        if file.is_file():
            fd = os.open(file, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def read(path: Path):
    """(seconds to open, wall seconds, CPU seconds to read every array whole, in chunk-aligned
    blocks)."""
    start = time.perf_counter()
    store = open_store(path)
    opened = time.perf_counter() - start
    wall, cpu = time.perf_counter(), time.process_time()
    total = 0.0
    for name in store.state_names:
        for _, block in store.iter_sample_blocks(name):
            total += float(block[:, :1].sum())
    return opened, time.perf_counter() - wall, time.process_time() - cpu


def run(name: str, repeats: int, reads: int, folder: Path) -> dict:
    n, shapes = LAYOUTS[name]()
    state = make_state(n, shapes)
    nbytes = sum(v.nbytes for v in state.values())
    batch = max(1, n // 8)
    times: dict[str, list[float]] = {}

    def add(key, value):
        times.setdefault(key, []).append(value)

    chunks = 0
    for repeat in range(repeats):
        # alternate which format goes first: the second one's reads follow the first one's
        # writes, deletions and write-back, which must not bias the comparison either way
        for checksums in (False, True) if repeat % 2 == 0 else (True, False):
            label = "crc32c" if checksums else "plain"
            path = folder / f"{name}-{label}.zarr"
            wall, cpu = write(path, state, checksums, batch)
            add(f"write_{label}", wall)
            add(f"write_cpu_{label}", cpu)
            store = open_store(path)
            assert store.checksummed == checksums
            chunks = sum(math.prod(store.layout("state", a).grid) for a in store.state_names)
            for _ in range(reads):
                opened, wall, cpu = read(path)
                add(f"open_{label}", opened)
                add(f"read_{label}", wall)
                add(f"read_cpu_{label}", cpu)
            evict(path)
            _, wall, cpu = read(path)
            add(f"cold_{label}", wall)
            add(f"cold_cpu_{label}", cpu)
            shutil.rmtree(path)
    summary = {
        key: (statistics.median(values) if "cpu" in key else min(values))
        for key, values in times.items()
    }
    return {"layout": name, "samples": n, "arrays": len(state), "mb": nbytes / 1e6,
            "chunks": chunks, **summary}  # fmt: skip


def overhead(row: dict, what: str) -> float:
    return row[f"{what}_crc32c"] / row[f"{what}_plain"] - 1


def table(rows: list[dict]) -> str:
    head = (
        "| layout | MB | chunks | write plain | write crc32c | overhead (CPU) "
        "| read plain | read crc32c | overhead (CPU) "
        "| cold read plain | cold read crc32c | overhead (CPU) | open plain | open crc32c |"
    )
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        cells = [r["layout"], f"{r['mb']:.0f}", str(r["chunks"])]
        for what in ("write", "read", "cold"):
            for label in ("plain", "crc32c"):
                seconds = r[f"{what}_{label}"]
                cells.append(f"{seconds:.3f} s ({r['mb'] / seconds:.0f} MB/s)")
            cells.append(
                f"{100 * overhead(r, what):+.1f}% ({100 * overhead(r, what + '_cpu'):+.1f}%)"
            )
        cells += [f"{1e3 * r['open_plain']:.1f} ms", f"{1e3 * r['open_crc32c']:.1f} ms"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", nargs="+", choices=list(LAYOUTS), default=list(LAYOUTS))
    parser.add_argument("--repeats", type=int, default=5, help="writes per format")
    parser.add_argument("--reads", type=int, default=3, help="reads of each written store")
    parser.add_argument("--dir", default=None, help="folder for the stores (default: a temp one)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="store-io-", dir=args.dir))
    try:
        rows = [run(name, args.repeats, args.reads, folder) for name in args.layouts]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(table(rows))
    worst = max(overhead(r, what) for r in rows for what in ("write", "read", "cold"))
    verdict = "within" if worst < TARGET_OVERHEAD else "OVER"
    print(f"\nlargest wall-clock overhead of the checksums {100 * worst:+.1f}% ({verdict} the "
          f"{TARGET_OVERHEAD:.0%} bound)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
