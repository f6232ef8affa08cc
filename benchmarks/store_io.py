"""What chunk checksums cost: writing and reading weight stores with and without crc32c.

Two layouts of a few hundred MB of float32 each, as `symbnn.store` chunks them:

    posterior  1000 samples of a 132k-parameter network (3 arrays), chunks of whole samples
    resnet18   8 samples of CIFAR ResNet-18 (102 float arrays, 11.2M parameters each): the
               large convolutions split their first parameter axis (8 samples x a slice)

For each, a store is written with `StoreWriter` (in batches, as the workflow does) and read
back whole (`Store.read` per array, chunk-aligned blocks) in the current format (crc32c on every
chunk, every chunk written, chunk files listed when opened) and in the format before checksums
(`bytes` codec only). The two formats are measured in pairs, one right after the other with
the order alternating: --repeats writes of each, every store read back --reads times from the
page cache ("read": the fastest I/O there is, so the largest relative overhead) and as many
times after both stores' files were written out and dropped from the page cache ("cold read":
posix_fadvise DONTNEED on the stores' files only). Writes are not synced (as in the
workflow). A shared VM's speed drifts by tens of percent over minutes; a pair's two runs are
seconds apart, so the table reports the overhead of each pair (crc32c / plain - 1): its median and quartiles, and
the median of the CPU-time overheads (all threads of this process). Opening (metadata checks
and the chunk listing) is timed apart.

    python benchmarks/store_io.py                 # both layouts
    python benchmarks/store_io.py --repeats 9 --dir /scratch/tmp
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
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

from symbnn.store import StoreWriter, open_store  # noqa: E402
from symbnn.store import writer as store_module  # noqa: E402

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
    """Write as symbnn did before checksums: `bytes` codec only, all-zero chunks skipped, no
    manifest (it records checksums); such a store is read with ``allow_unverified``."""
    saved = store_module.CHECKSUM_CODECS, store_module.ARRAY_CONFIG, store_module.seal
    store_module.CHECKSUM_CODECS, store_module.ARRAY_CONFIG = None, {}
    store_module.seal = lambda *args: None
    try:
        yield
    finally:
        store_module.CHECKSUM_CODECS, store_module.ARRAY_CONFIG, store_module.seal = saved


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
    store = open_store(path, allow_unverified=True)  # the plain store has no digest
    opened = time.perf_counter() - start
    wall, cpu = time.perf_counter(), time.process_time()
    total = 0.0
    for name in store.state_names:
        for _, block in store.iter_sample_blocks(name):
            total += float(block[:, :1].sum())
    return opened, time.perf_counter() - wall, time.process_time() - cpu


LABELS = ("plain", "crc32c")


def order(turn: int) -> tuple[str, str]:
    return LABELS if turn % 2 == 0 else LABELS[::-1]


@dataclasses.dataclass
class Pairs:
    """One layout's measurements: ``seconds[step_label]`` lists, index-aligned between the
    two labels of a step, so that equal indices form a pair."""

    mb: float
    chunks: int
    seconds: dict[str, list[float]]


def paired(name: str, repeats: int, reads: int, folder: Path) -> Pairs:
    """Seconds of each timed step, in pairs: the two formats are written one after the other
    (the order alternating between repeats), then read in turn from the page cache (the order
    alternating between reads), then as often from disk (both evicted before each pair).
    Each pair ran within a second or two of itself, so the VM's slow drifts cancel in its
    ratio."""
    n, shapes = LAYOUTS[name]()
    state = make_state(n, shapes)
    batch = max(1, n // 8)
    times: dict[str, list[float]] = {}

    def add(key, value):
        times.setdefault(key, []).append(value)

    paths = {label: folder / f"{name}-{label}.zarr" for label in LABELS}
    chunks = 0
    for repeat in range(repeats):
        for label in order(repeat):
            wall, cpu = write(paths[label], state, label == "crc32c", batch)
            add(f"write_{label}", wall)
            add(f"write_cpu_{label}", cpu)
        store = open_store(paths["crc32c"])
        assert not open_store(paths["plain"], allow_unverified=True).checksummed
        assert store.checksummed and store.sealed
        chunks = sum(math.prod(store.layout("state", a).grid) for a in store.state_names)
        for attempt in range(reads):
            for label in order(repeat + attempt):
                opened, wall, cpu = read(paths[label])
                add(f"open_{label}", opened)
                add(f"read_{label}", wall)
                add(f"read_cpu_{label}", cpu)
        for attempt in range(reads):
            for label in LABELS:
                evict(paths[label])
            for label in order(repeat + attempt + 1):
                _, wall, cpu = read(paths[label])
                add(f"cold_{label}", wall)
                add(f"cold_cpu_{label}", cpu)
        for path in paths.values():
            shutil.rmtree(path)
    return Pairs(sum(v.nbytes for v in state.values()) / 1e6, chunks, times)


def overheads(pairs: Pairs, what: str) -> list[float]:
    """crc32c / plain - 1 of every pair of ``what`` (write, read, cold, or their _cpu)."""
    times = pairs.seconds
    return [c / p - 1 for p, c in zip(times[f"{what}_plain"], times[f"{what}_crc32c"])]


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    low, median, high = statistics.quantiles(values, n=4, method="inclusive")
    return low, median, high


def table(rows: dict[str, Pairs]) -> str:
    head = (
        "| layout | MB | chunks | step | pairs | plain (median) | crc32c (median) "
        "| overhead: median [quartiles] | CPU overhead (median) |"
    )
    lines = [head, "|" + "---|" * 9]
    for name, pairs in rows.items():
        times = pairs.seconds
        for what, step in (("write", "write"), ("read", "page-cache read"), ("cold", "disk read")):
            cells = [name, f"{pairs.mb:.0f}", str(pairs.chunks), step]
            cells.append(str(len(times[f"{what}_plain"])))
            for label in LABELS:
                seconds = statistics.median(times[f"{what}_{label}"])
                cells.append(f"{seconds:.3f} s ({pairs.mb / seconds:.0f} MB/s)")
            low, median, high = quartiles(overheads(pairs, what))
            cells.append(f"{100 * median:+.1f}% [{100 * low:+.1f}%, {100 * high:+.1f}%]")
            cells.append(f"{100 * statistics.median(overheads(pairs, what + '_cpu')):+.1f}%")
            lines.append("| " + " | ".join(cells) + " |")
        opened = [1e3 * statistics.median(times[f"open_{label}"]) for label in LABELS]
        lines.append(f"| {name} | | | open | | {opened[0]:.1f} ms | {opened[1]:.1f} ms | | |")
    return "\n".join(lines)


def crc_rates() -> str:
    """CRC-32C's own speed here, on a buffer that fits in the CPU's caches and on one that does
    not: the second bounds how fast any check of freshly read chunks can go."""
    from symbnn.store.chunk_checksums import checksum

    rates = []
    for megabytes, passes in ((2, 200), (512, 3)):
        buffer = np.ones(megabytes * 2**20, dtype=np.uint8)
        checksum(buffer)
        start = time.perf_counter()
        for _ in range(passes):
            checksum(buffer)
        rates.append(buffer.nbytes * passes / (time.perf_counter() - start) / 1e9)
    return (
        f"CRC-32C on one core: {rates[0]:.1f} GB/s from cache (2 MB), "
        f"{rates[1]:.1f} GB/s from memory (512 MB)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layouts", nargs="+", choices=list(LAYOUTS), default=list(LAYOUTS))
    parser.add_argument("--repeats", type=int, default=5, help="writes per format")
    parser.add_argument("--reads", type=int, default=3, help="reads of each written store")
    parser.add_argument("--dir", default=None, help="folder for the stores (default: a temp one)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="store-io-", dir=args.dir))
    try:
        rows = {name: paired(name, args.repeats, args.reads, folder) for name in args.layouts}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(table(rows))
    print(f"\n{crc_rates()}")
    worst = max(
        statistics.median(overheads(pairs, what))
        for pairs in rows.values()
        for what in ("write", "read", "cold")
    )
    verdict = "within" if worst < TARGET_OVERHEAD else "OVER"
    print(f"\nlargest median overhead of the checksums {100 * worst:+.1f}% ({verdict} the "
          f"{TARGET_OVERHEAD:.0%} bound)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
