"""Streaming ResNet-18 bundles: import speed against a plain `tar -xzf` of the same bundle, and
peak memory against the bundle's size.

Format-true bundles (`symbnn.checkpoints.bundles`: float16 safetensors files under
TorchUncertainty's names, CIFAR-100 ResNet-18s, 22 MB each) of --sizes networks are written
once; then, for each:

    tar -xzf     seconds to unpack it with the system's tar (gzip included): the disk-speed
                 reference
    import f16   `symbnn import-checkpoints --dtype float16` (weights kept as released)
    import f32   the default, float32 weights (twice the bytes written)

MB/s are megabytes of the uncompressed bundle (the safetensors files) per second. Each import
runs in a fresh process whose peak resident memory (ru_maxrss) is reported: it must not grow
with the bundle; the clock starts once the libraries the import uses are loaded. Wall
seconds are the minimum of --repeats runs (the machine is shared).

    python benchmarks/checkpoints_resnet.py                   # 4 and 16 networks
    python benchmarks/checkpoints_resnet.py --sizes 8,32 --dir /scratch/tmp
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SETTING = "cifar100-resnet18"

# Run in a child process: import one bundle, print its wall seconds and peak memory.
CHILD = """
import json, resource, sys, time
sys.path.insert(0, {src!r})
import torch
torch.set_num_threads(1)
from symbnn.checkpoints import import_checkpoints
from symbnn.checkpoints.releases import release
from symbnn.models import build_model
import symbnn.store
# the libraries the first import loads (torchvision's model zoo: about 2.5 s), before the clock
with torch.device("meta"):
    build_model(release({setting!r}).architecture)
start = time.perf_counter()
import_checkpoints({bundle!r}, {out!r}, {setting!r}, dtype={dtype!r})
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def make_bundle(folder: Path, n: int) -> tuple[Path, int]:
    """(bundle, uncompressed bytes of its networks)."""
    import torch

    from symbnn.checkpoints.bundles import as_released, write_bundle
    from symbnn.checkpoints.releases import release
    from symbnn.models import build_model

    mapping = release(SETTING)
    torch.manual_seed(0)
    model = build_model(mapping.architecture)

    def networks():
        for i in range(n):
            with torch.no_grad():
                for p in model.parameters():
                    p.normal_(0, 0.05)
            state = {mapping.source_name(k): v for k, v in model.state_dict().items()}
            yield f"net_{i}", as_released(state)

    bundle = write_bundle(folder / f"{SETTING}-0-{n - 1}.tgz", networks(), compresslevel=1)
    with tarfile.open(bundle) as tar:
        size = sum(member.size for member in tar)
    return bundle, size


def untar_seconds(bundle: Path, folder: Path) -> float:
    target = folder / "untarred"
    target.mkdir()
    start = time.perf_counter()
    subprocess.run(["tar", "-xzf", str(bundle), "-C", str(target)], check=True)
    seconds = time.perf_counter() - start
    shutil.rmtree(target)
    return seconds


def import_run(bundle: Path, folder: Path, dtype: str) -> dict:
    out = folder / f"import-{dtype}.zarr"
    code = CHILD.format(
        src=str(ROOT / "src"), bundle=str(bundle), out=str(out), setting=SETTING, dtype=dtype
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    shutil.rmtree(out)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,16", help="networks per bundle, comma-separated")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        for n in (int(s) for s in args.sizes.split(",")):
            folder = Path(scratch) / f"n{n}"
            folder.mkdir()
            bundle, size = make_bundle(folder, n)
            untar = min(untar_seconds(bundle, folder) for _ in range(args.repeats))
            runs = {
                dtype: [import_run(bundle, folder, dtype) for _ in range(args.repeats)]
                for dtype in ("float16", "float32")
            }
            row = {"n": n, "mb": size / 1e6, "gz_mb": bundle.stat().st_size / 1e6, "untar": untar}
            for dtype, results in runs.items():
                row[dtype] = min(r["seconds"] for r in results)
                row[f"{dtype}_peak"] = max(r["peak_mb"] for r in results)
            rows.append(row)
            shutil.rmtree(folder)
    print(f"\n{SETTING} bundles (1 torch thread), wall seconds and MB/s of uncompressed networks\n")
    print(
        "| networks | MB | tgz MB | tar -xzf s (MB/s) | import f16 s (MB/s) | import f32 s (MB/s) "
        "| peak MB f16 / f32 |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cells = [f"{r['n']}", f"{r['mb']:.0f}", f"{r['gz_mb']:.0f}"]
        for key in ("untar", "float16", "float32"):
            cells.append(f"{r[key]:.2f} ({r['mb'] / r[key]:.0f})")
        cells.append(f"{r['float16_peak']:.0f} / {r['float32_peak']:.0f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
