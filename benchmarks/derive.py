"""Seconds to derive the symmetry structure of each zoo model on one CPU core.

`symbnn.symmetry.symmetry_of` traces the model with torch.fx, runs the example input through
it once (shapes), and follows the units through the graph. Each model is built in float32
with freshly initialised weights (never downloaded); the derivation is timed ``--repeat``
times after one untimed warm-up call, and the best time is reported, split into the trace
(torch.fx and the shape pass) and the rest. Target (issue "Bring your own network"):
ResNet-50 under 5 s. With ``--engine``, the canonical form and the min-mass solve of one
network are timed too, in nanoseconds per parameter, so that a derived structure (ResNet-50)
can be compared with a hand-written one (resnet18_cifar) at the same cost per parameter.

    python benchmarks/derive.py                       # the zoo at 32 x 32
    python benchmarks/derive.py --size 224 --models resnet50 densenet121
    python benchmarks/derive.py --engine --models resnet18_cifar resnet18 resnet50
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torchvision

from symbnn import api
from symbnn.models import MLP, OptuNet, resnet18_cifar
from symbnn.symmetry import symmetry_of
from symbnn.symmetry.counting import total_symmetries
from symbnn.symmetry.derive import trace

TARGETS = {"resnet50": 5.0}  # seconds


def zoo(size: int) -> dict:
    """name -> (constructor, input shape)."""
    image = (3, size, size)

    def tv(name):
        return lambda: getattr(torchvision.models, name)(weights=None, num_classes=10)

    return {
        "resnet18": (tv("resnet18"), image),
        "resnet50": (tv("resnet50"), image),
        "vgg11_bn": (tv("vgg11_bn"), image),
        "mobilenet_v2": (tv("mobilenet_v2"), image),
        "densenet121": (tv("densenet121"), image),
        "efficientnet_b0": (tv("efficientnet_b0"), image),
        "convnext_tiny": (tv("convnext_tiny"), image),
        "optunet": (OptuNet, (1, 28, 28)),
        "mlp": (lambda: MLP([784, 256, 256, 10]), (784,)),
        "resnet18_cifar": (lambda: resnet18_cifar(num_classes=100), (3, 32, 32)),
    }


def best_of(repeat: int, fn) -> float:
    fn()  # warm-up: first calls pay for lazy initialisation
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", help="default: all of the zoo")
    parser.add_argument("--size", type=int, default=32, help="image side of the example input")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--engine", action="store_true", help="also time canonicalize and min_mass per parameter"
    )
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    models = zoo(args.size)
    rows = []
    header = (
        f"{'model':16s} {'params':>8s} {'nodes':>6s} {'trace s':>8s} {'derive s':>9s} "
        f"{'total s':>8s} {'groups':>6s} {'scales':>6s} {'coupl':>5s} {'log10 perms':>11s} "
        f"{'limits':>6s} {'target':>7s}"
        + (f" {'canon ns/p':>10s} {'minmass ns/p':>12s}" if args.engine else "")
    )
    print(f"one core ({args.threads} thread(s)), batch {args.batch}, float32")
    print(header)
    print("-" * len(header))
    for name in args.models or list(models):
        build, shape = models[name]
        torch.manual_seed(0)
        model = build().eval()
        x = torch.randn(args.batch, *shape)
        t_trace = best_of(args.repeat, lambda model=model, x=x: trace(model, x))
        t_total = best_of(args.repeat, lambda model=model, x=x: symmetry_of(model, x))
        sym = symmetry_of(model, x)
        target = TARGETS.get(name)
        row = {
            "model": name,
            "params": sum(p.numel() for p in model.parameters()),
            "nodes": len(trace(model, x).graph.nodes),
            "trace_s": t_trace,
            "derive_s": max(t_total - t_trace, 0.0),
            "total_s": t_total,
            "groups": len(sym.groups),
            "scale_groups": len(sym.scale_groups),
            "couplings": len(sym.couplings),
            "log10_permutations": total_symmetries(sym)["log10_permutations"],
            "limits": len(sym.limits),
            "target_s": target,
        }
        rows.append(row)
        verdict = "" if target is None else ("ok" if t_total < target else "MISSED")
        engine = ""
        if args.engine:
            state = model.state_dict()
            per_param = 1e9 / row["params"]
            row["canonicalize_ns_per_param"] = per_param * best_of(
                args.repeat, lambda state=state, sym=sym: api.canonicalize(state, sym)
            )
            row["minmass_ns_per_param"] = per_param * best_of(
                args.repeat, lambda state=state, sym=sym: api.min_mass(state, sym)
            )
            engine = (
                f" {row['canonicalize_ns_per_param']:10.1f} {row['minmass_ns_per_param']:12.1f}"
            )
        print(
            f"{name:16s} {row['params'] / 1e6:7.1f}M {row['nodes']:6d} {t_trace:8.3f} "
            f"{row['derive_s']:9.3f} {t_total:8.3f} {row['groups']:6d} {row['scale_groups']:6d} "
            f"{row['couplings']:5d} {row['log10_permutations']:11.0f} {row['limits']:6d} "
            f"{verdict:>7s}{engine}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["target_s"] is None or r["total_s"] < r["target_s"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
