"""Hashes of a workflow run's results, to show that a change of code changed no result.

Walks a run's `results/` folder (or the run's working folder holding it) and writes one
SHA-256 per item, as JSON:

    store  <store>.zarr :array <node>    an array's data type, shape and decoded values (C order)
           <store>.zarr :attrs <node>    a group's or array's attributes, as canonical JSON
    fit    <file>.safetensors :tensor <tree path>   a fit's tensor: data type, shape, bytes
           <file>.safetensors :tree      the fit's structure, each tensor as its type and shape
    table  <file>.parquet :schema / :column <name>   column names and types, each column's values
           <file>.csv, .md, .html, .tex, .json, .yaml, .tsv, .txt   the file's bytes
    figure <file>.png                    the file's bytes

Stores are read with plain Zarr (read only; every chunk's CRC-32C is checked on decoding), fit
files as safetensors with the JSON structure `symbnn.treefile` writes in their metadata: no
pickle, no symbnn import, so the script reads results of any revision of the code.

Not hashed, because they are no results: each job's log and Snakemake timing file (`logs/`,
`benchmarks/`), Snakemake's `.snakemake_timestamp` files, `report.log`, and `report.html`,
the report `snakemake --report` writes (its front page sums the jobs' run times; each table's
own HTML file is hashed). Store attributes hold no timing, path or host name (the writers
record settings, seeds, names and the manifest's digest), so none is dropped. Any other file
is listed under "unhashed", never skipped silently.

    python benchmarks/results_hashes.py RUN_FOLDER -o hashes.json
    python benchmarks/results_hashes.py --compare before.json after.json   # exit 1 if any differ
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import struct
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SKIPPED_FOLDERS = {"logs", "benchmarks"}  # each job's log and timing file
# Snakemake's empty marks; the report's log; `snakemake --report`'s page (its front page sums
# the jobs' run times; each table's own HTML file is hashed)
SKIPPED_NAMES = {".snakemake_timestamp", "report.log", "report.html"}
TEXT_TABLES = {".csv", ".md", ".html", ".tex", ".json", ".yaml", ".tsv", ".txt"}
FIGURES = {".png"}
BLOCK_BYTES = 64 * 2**20  # rows of a Zarr array hashed at once, about this many bytes


def canonical(value: Any) -> bytes:
    """One spelling of a JSON value: equal values, equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def sha256(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.hexdigest()


def array_header(dtype: str, shape: tuple[int, ...]) -> bytes:
    return canonical({"dtype": dtype, "shape": list(shape)})


def zarr_items(store: Path, key: str) -> Iterator[tuple[str, str]]:
    """An item per array (values) and per node (attributes) of the Zarr group at ``store``."""
    import numpy as np
    import zarr

    root = zarr.open_group(zarr.storage.LocalStore(store, read_only=True), mode="r")
    with warnings.catch_warnings():  # symbnn's manifest.json is no Zarr node, as it should be
        warnings.simplefilter("ignore", zarr.errors.ZarrUserWarning)
        members = sorted(root.members(max_depth=None))
    for name, node in [("", root), *members]:
        name = f"/{name}"
        yield f"{key} :attrs {name}", sha256(canonical(dict(node.attrs)))
        if not isinstance(node, zarr.Array):
            continue
        digest = hashlib.sha256(array_header(node.dtype.str, node.shape))
        if node.ndim == 0:
            blocks: Iterator[np.ndarray] = iter([np.asarray(node[()])])
        else:
            row_bytes = max(1, math.prod(node.shape[1:]) * node.dtype.itemsize)
            step = max(1, BLOCK_BYTES // row_bytes)
            blocks = (node[i : i + step] for i in range(0, node.shape[0], step))
        for block in blocks:
            if block.dtype.hasobject or block.dtype.kind in "UT":
                digest.update(canonical(block.tolist()))
            else:
                digest.update(np.ascontiguousarray(block).tobytes())
        yield f"{key} :array {name}", digest.hexdigest()


def safetensors_header(path: Path) -> dict[str, Any]:
    with open(path, "rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        return json.loads(handle.read(size))


def fit_items(path: Path, key: str) -> Iterator[tuple[str, str]]:
    """An item per tensor, named by its place in the fit's tree, and one for the tree."""
    import torch
    from safetensors import safe_open

    header = safetensors_header(path)
    metadata = header.pop("__metadata__", None) or {}
    text = metadata.get("symbnn-tree") or (
        metadata.get("tree") if metadata.get("format") == "symbnn-tree" else None
    )
    # a plain safetensors file: its tensors by name, its metadata as the structure
    tree = json.loads(text) if text is not None else {n: {"$tensor": n} for n in header}
    places: dict[str, str] = {}

    def shape_only(value: Any, where: str) -> Any:
        if isinstance(value, dict) and set(value) == {"$tensor"}:
            places[value["$tensor"]] = where
            info = header[value["$tensor"]]
            return {"$tensor": [info["dtype"], info["shape"]]}
        if isinstance(value, dict):
            return {k: shape_only(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [shape_only(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    structure = shape_only(tree, "tree")
    extra = {k: v for k, v in metadata.items() if text is None}
    yield f"{key} :tree", sha256(canonical([structure, extra]))
    with safe_open(str(path), framework="pt", device="cpu") as file:
        for name in sorted(places, key=places.get):
            tensor = file.get_tensor(name)
            data = tensor.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()
            head = array_header(str(tensor.dtype), tuple(tensor.shape))
            yield f"{key} :tensor {places[name]}", sha256(head, data)


def parquet_items(path: Path, key: str) -> Iterator[tuple[str, str]]:
    """The table's column names and types, then each column's values."""
    import polars as pl

    table = pl.read_parquet(path)
    yield f"{key} :schema", sha256(canonical([[n, str(t)] for n, t in table.schema.items()]))
    for name in table.columns:
        yield f"{key} :column {name}", sha256(canonical(table[name].to_list()))


def kind_of(path: Path, relative: Path) -> str | None:
    """The item kind of a file, or None when it is no result (see the module docstring)."""
    if SKIPPED_FOLDERS & set(relative.parts[:-1]) or path.name in SKIPPED_NAMES:
        return None
    return {
        ".parquet": "table",
        ".safetensors": "fit",
        **dict.fromkeys(TEXT_TABLES, "table"),
        **dict.fromkeys(FIGURES, "figure"),
    }.get(path.suffix, "unhashed")


def walk(results: Path) -> tuple[dict[str, str], dict[str, int], list[str]]:
    """(item -> sha256, items per kind, files left unhashed) of a results folder."""
    items: dict[str, str] = {}
    counts = {"store": 0, "fit": 0, "table": 0, "figure": 0}
    unhashed: list[str] = []
    stores = sorted(p.parent for p in results.rglob("zarr.json") if p.parent.suffix == ".zarr")
    stores = [s for s in stores if not any(o in s.parents for o in stores)]  # outermost only
    for store in stores:
        key = store.relative_to(results).as_posix()
        if SKIPPED_FOLDERS & set(Path(key).parts):
            continue
        items.update(zarr_items(store, key))
        counts["store"] += 1
    for path in sorted(results.rglob("*")):
        relative = path.relative_to(results)
        if not path.is_file() or any(s in path.parents for s in stores):
            continue
        kind = kind_of(path, relative)
        key = relative.as_posix()
        if kind is None:
            continue
        if kind == "unhashed":
            unhashed.append(key)
            continue
        counts[kind] += 1
        if kind == "fit":
            items.update(fit_items(path, key))
        elif path.suffix == ".parquet":
            items.update(parquet_items(path, key))
        else:
            items[key] = sha256(path.read_bytes())
    return dict(sorted(items.items())), counts, unhashed


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Lines naming each item that differs, or is in one file only."""
    left, right = a["items"], b["items"]
    lines = [f"differs: {k}" for k in sorted(left.keys() & right.keys()) if left[k] != right[k]]
    lines += [f"only in the first: {k}" for k in sorted(left.keys() - right.keys())]
    lines += [f"only in the second: {k}" for k in sorted(right.keys() - left.keys())]
    for name, data in (("first", a), ("second", b)):
        lines += [f"unhashed in the {name}: {k}" for k in data.get("unhashed", [])]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, help="a run's folder or its results/")
    parser.add_argument("-o", "--output", type=Path, help="write the JSON here (default: stdout)")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A.json", "B.json"))
    args = parser.parse_args(argv)
    if args.compare:
        a, b = (json.loads(p.read_text()) for p in args.compare)
        lines = compare(a, b)
        print("\n".join(lines))
        same = len(a["items"].keys() & b["items"].keys()) - sum(
            x.startswith("differs") for x in lines
        )
        print(
            f"{same} items equal, {len(lines)} differences ({args.compare[0]} vs {args.compare[1]})"
        )
        return 1 if lines else 0
    if args.folder is None:
        parser.error("give a run's folder, or --compare A.json B.json")
    results = args.folder / "results" if (args.folder / "results").is_dir() else args.folder
    if not results.is_dir():
        parser.error(f"{results}: no such folder")
    items, counts, unhashed = walk(results)
    report = {"folder": str(results.resolve()), "counts": counts, "items": items}
    report["unhashed"] = unhashed
    text = json.dumps(report, indent=1) + "\n"
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    shown = ", ".join(f"{n} {k} files" for k, n in counts.items())
    print(f"{len(items)} items hashed from {shown}; {len(unhashed)} unhashed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
