"""`symbnn mmd TARGET METHOD_SAMPLES OUT [--canonical] [--pvalue]`.

OUT is a parquet file with one row per layer (columns: `symbnn.mmd.per_layer_schema`); the
network summary is printed and written beside it as OUT with suffix ``.summary.json``
(e.g. ``mmd.parquet`` -> ``mmd.summary.json``). Both files are written atomically.

With --canonical the figure is the NS MMD: stores whose attrs say kind == "canonical" are used
as they are; other stores are canonicalised first (--scale, --key, as `symbnn canonicalize`)
into hidden folders beside OUT, removed afterwards. For repeated comparisons against one target,
canonicalise it once with `symbnn canonicalize` instead.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

# symbnn.mmd (torch, numba) is imported in the handlers: every `symbnn` call imports this module.
from symbnn.atomic import atomic_write
from symbnn.commands import available_device, positive_float, setting_option
from symbnn.commands.canonicalize import explained_failures
from symbnn.settings import Config, Mmd, MmdTest, SymmetryRemoval
from symbnn.store import open_store

DEFAULT_MAX_MIB = 64  # symbnn.mmd.DEFAULT_MAX_BYTES


def summary_path(out: str | os.PathLike) -> Path:
    return Path(out).with_suffix(".summary.json")


def _rows(spec: str | None, option: str = "rows"):
    """'START:STOP' -> slice; None -> all samples. Whether the range fits the store is checked
    by `symbnn.mmd.layerwise_mmd` (a range beyond the store is an error, not cut short)."""
    if spec is None:
        return None
    start, sep, stop = spec.partition(":")
    try:
        if not sep:
            raise ValueError
        bounds = [int(text) if text.strip() else None for text in (start, stop)]
    except ValueError:
        raise ValueError(
            f"{option} {spec!r} is not a row range START:STOP (integers, e.g. 0:32)"
        ) from None
    if any(bound is not None and bound < 0 for bound in bounds):
        raise ValueError(
            f"{option} {spec!r}: rows are counted from 0; negative bounds are not allowed"
        )
    if None not in bounds and bounds[0] >= bounds[1]:
        raise ValueError(f"{option} {spec!r} selects no rows (START must be below STOP)")
    return slice(*bounds)


def _canonicalizer():
    """`canonicalize_store`, or None where the symmetry package is not available."""
    try:
        # local: keeps numba, torch out of the command line's start
        from symbnn.symmetry.canonical_store import canonicalize_store
    except ImportError:
        return None
    return canonicalize_store


def _canonical_inputs(args, scratch: list[Path]) -> tuple[str, str]:
    """Paths of canonical versions of both stores, canonicalising where needed."""
    # local: keeps numba, polars, scipy, torch out of the command line's start
    from symbnn.mmd.layerwise import CANONICAL_KIND, store_kind

    paths = []
    for path in (args.target, args.method):
        kind = store_kind(open_store(path))
        if kind == CANONICAL_KIND:
            paths.append(path)
            continue
        canonicalize_store = _canonicalizer()
        if canonicalize_store is None:
            raise ValueError(
                f"--canonical: {path} is not a canonical store (attrs kind == {kind!r}, expected "
                f"{CANONICAL_KIND!r}) and symbnn.symmetry is not available to canonicalise it"
            )
        out = Path(args.out)
        tmp = out.parent / f".{out.name}.canonical-{len(paths)}-{uuid.uuid4().hex[:8]}.zarr"
        scratch.append(tmp)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        with explained_failures(path):
            canonicalize_store(path, tmp, scale=args.scale, key=args.key)
        paths.append(str(tmp))
    return paths[0], paths[1]


def _run(args) -> int:
    # local: keeps numba, polars, scipy, torch out of the command line's start
    from symbnn.mmd import AggTestConfig, default_layers, layerwise_mmd

    # local: keeps numba, polars, scipy, torch out of the command line's start
    from symbnn.mmd.layerwise import check_distinct

    config = AggTestConfig(alpha=args.alpha, b1=args.b1, b2=args.b2, b3=args.b3)
    device = available_device(args.device)
    target_rows = _rows(args.target_rows, "--target-rows")
    method_rows = _rows(args.method_rows, "--method-rows")
    scratch: list[Path] = []
    try:
        target, method = (args.target, args.method)
        # one store, a copy of it, or the same networks under other attributes: refused
        # before any canonicalisation
        check_distinct(target, method, target_rows, method_rows)
        if args.canonical:
            target, method = _canonical_inputs(args, scratch)
        layers = args.layers or (
            default_layers(open_store(target), by_module=True) if args.by_module else None
        )
        per_layer, summary = layerwise_mmd(
            target,
            method,
            layers=layers,
            target_rows=target_rows,
            method_rows=method_rows,
            pvalue=args.pvalue,
            seed=args.seed,
            device=device,
            max_bytes=int(args.max_mib * 2**20),
            config=config,
            expect_canonical=args.canonical,
        )
    finally:
        for path in scratch:
            shutil.rmtree(path, ignore_errors=True)
    # Name the inputs as given, not the scratch copies canonicalised on the way.
    summary.update({"target": str(args.target), "method": str(args.method)})
    if scratch:
        summary["canonicalised_here"] = {"scale": args.scale, "key": args.key}
    out = Path(args.out)
    atomic_write(out, lambda tmp: per_layer.write_parquet(tmp))
    text = json.dumps(summary, indent=2)
    atomic_write(summary_path(out), lambda tmp: tmp.write_text(text + "\n"))
    print(text)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "mmd",
        help="layer-wise MMD between a target store and a method's sample store",
        description="Layer-wise MMD between a target store and a method's sample store (docs/maths.md, section 5).",
    )
    parser.add_argument("target", help="target posterior store")
    parser.add_argument("method", metavar="method_samples", help="the method's sample store")
    parser.add_argument("out", help="per-layer parquet file; the summary goes to OUT.summary.json")
    parser.add_argument(
        "--canonical",
        action="store_true",
        help="NS MMD: compare canonical weights (canonicalising if needed)",
    )
    parser.add_argument(
        "--scale",
        **setting_option(SymmetryRemoval, "scale"),
        help="scale mode when canonicalising (default: %(default)s)",
    )
    parser.add_argument(
        "--key",
        **setting_option(SymmetryRemoval, "key"),
        help="sorting key when canonicalising (default: %(default)s)",
    )
    parser.add_argument(
        "--pvalue", action="store_true", help="also run MMDAgg's aggregated permutation test"
    )
    parser.add_argument("--seed", **setting_option(Mmd, "seed"), help="seed of the permutations")
    for name in ("alpha", "b1", "b2", "b3"):
        parser.add_argument(
            f"--{name}",
            **setting_option(MmdTest, name),
            help=MmdTest.doc(name) + " (default: %(default)s)",
        )
    parser.add_argument(
        "--layers",
        nargs="+",
        default=None,
        help="state entries to compare (default: float entries but BatchNorm buffers)",
    )
    parser.add_argument(
        "--by-module", action="store_true", help="pool each module's weight and bias into one layer"
    )
    parser.add_argument(
        "--target-rows", default=None, metavar="START:STOP", help="subset of target samples"
    )
    parser.add_argument(
        "--method-rows", default=None, metavar="START:STOP", help="subset of method samples"
    )
    parser.add_argument(
        "--device",
        **setting_option(Config, "device"),
        help="where to compute: auto (GPU if present), cpu, cuda or cuda:N (default: %(default)s)",
    )
    parser.add_argument(
        "--max-mib",
        type=positive_float,
        default=DEFAULT_MAX_MIB,
        help="read blocks of about this many MiB per store",
    )
    parser.set_defaults(handler=_run)
