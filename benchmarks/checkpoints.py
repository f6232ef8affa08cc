"""The paper-scale laptop experiment on released OptuNets: import, then every stage that needs
no training data, timed stage by stage for growing numbers of networks.

The bundles are format-true (`symbnn.checkpoints.bundles`: a tgz of float16 safetensors files,
OptuMNIST-v1 names and shapes, as released on the hub) but hold freshly initialised
networks: the released files cannot be downloaded where this was written, and every stage's
cost depends on the number and shape of the networks, not on their training (min-mass's
iterations aside, which trained networks may change).

Stages, as the workflow runs them (`posterior: {source: checkpoints}`):

    import      the bundle streamed into a float32 store, on ONE torch thread (target:
                >= 1,000 OptuNets/s); also reported as networks per second
    canonical   symmetry removal into the canonical store (scale unitnorm, key first)
    minmass     the min-mass problem of every network (fast solver)
    mmd_de      the Deep Ensembles layer-wise MMD, 100 members against the 1,000 networks
                before them (mmd.de_target, as in the paper), with its permutation test
                (MMDAgg p-values), on stored and canonical weights
    marginals   KS tests between the units' weight marginals, stored and canonical

Everything but the import runs with --threads torch threads (default 2, the laptop target);
the whole experiment must stay under 10 minutes for 8,192 networks.

    python benchmarks/checkpoints.py                      # 1,000 and 8,192 networks
    python benchmarks/checkpoints.py --sizes 1000,2048,4096,8192 --dir /scratch/tmp
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import torch  # noqa: E402

from symbnn.analyses.posterior_marginals import posterior_marginal_tests  # noqa: E402
from symbnn.checkpoints import import_checkpoints  # noqa: E402
from symbnn.checkpoints.bundles import as_released, write_bundle  # noqa: E402
from symbnn.mmd.ensembles import deep_ensembles_check  # noqa: E402
from symbnn.models import OptuNet  # noqa: E402
from symbnn.symmetry.canonical_store import canonicalize_store  # noqa: E402
from symbnn.symmetry.minmass import minmass_table  # noqa: E402

STAGES = ("import", "canonical", "minmass", "mmd_de", "marginals")
TARGET_RATE = 1000  # OptuNets per second, import on one core
TARGET_TOTAL_S = 600  # the whole experiment on 2 cores, 8,192 networks
DE_MEMBERS = 100
DE_TARGET = 1000


def make_bundle(folder: Path, n: int) -> Path:
    torch.manual_seed(0)
    nets = ((f"model_{i}", as_released(OptuNet().state_dict())) for i in range(n))
    return write_bundle(folder / f"mnist-optunet-0-{n - 1}.tgz", nets)


def timed(function):
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def run(n: int, folder: Path, threads: int) -> dict[str, float]:
    work = folder / f"n{n}"
    work.mkdir()
    bundle = make_bundle(work, n)
    target, canonical = work / "target.zarr", work / "canonical.zarr"
    seconds = {}
    torch.set_num_threads(1)
    seconds["import"], _ = timed(lambda: import_checkpoints(bundle, target, "mnist-optunet"))
    torch.set_num_threads(threads)
    seconds["canonical"], _ = timed(
        lambda: canonicalize_store(target, canonical, scale="unitnorm", key="first")
    )
    seconds["minmass"], _ = timed(lambda: minmass_table(target, solver="fast"))
    seconds["mmd_de"], _ = timed(
        lambda: deep_ensembles_check(
            target,
            canonical,
            list(range(n)),
            DE_MEMBERS,
            pvalue=True,
            seed=0,
            device="cpu",
            n_target=DE_TARGET,
        )
    )
    seconds["marginals"], _ = timed(
        lambda: posterior_marginal_tests({"stored": target, "canonical": canonical})
    )
    seconds["total"] = sum(seconds[stage] for stage in STAGES)
    seconds["bundle_mb"] = bundle.stat().st_size / 1e6
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,8192", help="numbers of networks, comma-separated")
    parser.add_argument("--threads", type=int, default=2, help="torch threads after the import")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temporary one)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        rows = {n: run(n, Path(scratch), args.threads) for n in sizes}
    print(f"\nreleased-OptuNet laptop experiment, {args.threads} threads (import: 1), seconds\n")
    columns = ["networks", "bundle MB", *STAGES, "total", "import/s"]
    print("| " + " | ".join(f"{c:>9}" for c in columns) + " |")
    print("|" + "|".join("-" * 11 for _ in columns) + "|")
    for n, row in rows.items():
        cells = [f"{n:9d}", f"{row['bundle_mb']:9.2f}", *(f"{row[s]:9.2f}" for s in STAGES)]
        cells += [f"{row['total']:9.1f}", f"{n / row['import']:9.0f}"]
        print("| " + " | ".join(cells) + " |")
    if len(sizes) > 1:
        small, large = rows[sizes[0]], rows[sizes[-1]]
        growth = [
            f"{sizes[-1] / sizes[0]:8.2f}x",
            "",
            *(f"{large[s] / small[s]:8.2f}x" for s in STAGES),
        ]
        growth += [f"{large['total'] / small['total']:8.2f}x", ""]
        print("| " + " | ".join(f"{c:>9}" for c in growth) + " |")
    largest = rows[sizes[-1]]
    rate = sizes[-1] / largest["import"]
    print(
        f"\nimport rate {rate:.0f} networks/s (target >= {TARGET_RATE}): "
        f"{'met' if rate >= TARGET_RATE else 'NOT met'}; {sizes[-1]} networks in "
        f"{largest['total']:.0f} s (target < {TARGET_TOTAL_S} s for 8,192): "
        f"{'met' if largest['total'] < TARGET_TOTAL_S else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
