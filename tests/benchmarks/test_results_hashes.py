"""benchmarks/results_hashes.py on a small results folder written by symbnn's own writers: a
store, a fit file, tables, a log and a timing file. A changed value, attribute, tensor or
table row shows as exactly its item; a log, a timing file or the HTML report do not count."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import polars as pl
import torch
import zarr

from symbnn.store import write_store
from symbnn.treefile import save_tree

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import results_hashes  # noqa: E402

STATE = {"fc.weight": np.arange(12, dtype=np.float32).reshape(2, 2, 3)}


def results_folder(root: Path) -> Path:
    results = root / "results" / "exp"
    (results / "logs").mkdir(parents=True)
    (results / "benchmarks").mkdir()
    (results / "report").mkdir()
    write_store(results / "target.zarr", STATE, {"seed": np.array([0, 1])}, {"experiment": "t"})
    fit = {"modes": [0], "fits": [{"mu": torch.ones(3), "mask": torch.tensor([True, False])}]}
    save_tree(fit, results / "fits.safetensors")
    pl.DataFrame({"unit": [0, 1], "nll": [0.5, float("nan")]}).write_parquet(
        results / "metrics.parquet"
    )
    (results / "report" / "table1.md").write_text("| a |\n|---|\n| 1 |\n")
    (results / "report" / "table1.html").write_text("<table><tr><td>1</td></tr></table>")
    (results / "logs" / "fit.log").write_text("took 3.2 s\n")
    (results / "benchmarks" / "fit.tsv").write_text("s\n3.2\n")
    (root / "results" / "report.html").write_text("<p>job time 3 s</p>")
    return root


def hashes(root: Path, out: Path) -> dict:
    assert results_hashes.main([str(root), "-o", str(out)]) == 0
    return json.loads(out.read_text())


def test_every_result_is_hashed_and_logs_timings_and_the_report_are_not(tmp_path):
    data = hashes(results_folder(tmp_path / "run"), tmp_path / "a.json")
    items = data["items"]
    assert data["counts"] == {"store": 1, "fit": 1, "table": 3, "figure": 0}
    assert data["unhashed"] == []
    for key in (
        "exp/target.zarr :array /state/fc.weight",
        "exp/target.zarr :array /info/seed",
        "exp/target.zarr :attrs /",
        "exp/fits.safetensors :tree",
        "exp/fits.safetensors :tensor tree.fits[0].mu",
        "exp/fits.safetensors :tensor tree.fits[0].mask",
        "exp/metrics.parquet :schema",
        "exp/metrics.parquet :column nll",
        "exp/report/table1.md",
        "exp/report/table1.html",  # a table's own HTML file, unlike the report's page
    ):
        assert key in items, (key, sorted(items))
    assert not [k for k in items if "logs" in k or "benchmarks" in k or "report.html" in k]


def test_a_changed_result_is_named_and_a_changed_log_is_not(tmp_path, capsys):
    first = results_folder(tmp_path / "run")
    second = tmp_path / "copy"
    shutil.copytree(first, second)
    before = tmp_path / "a.json"
    hashes(first, before)
    results = second / "results" / "exp"
    (results / "logs" / "fit.log").write_text("took 9.9 s\n")
    (results / "benchmarks" / "fit.tsv").write_text("s\n9.9\n")
    (second / "results" / "report.html").write_text("<p>job time 9 s</p>")
    hashes(second, tmp_path / "b.json")
    assert results_hashes.main(["--compare", str(before), str(tmp_path / "b.json")]) == 0

    # one value of the store (through plain Zarr: the chunk's checksum stays right), an
    # attribute, one tensor, one table cell
    group = zarr.open_group(results / "target.zarr", mode="r+")
    group["state/fc.weight"][1, 0, 0] = -1.0
    group.attrs["experiment"] = "u"
    save_tree(
        {"modes": [0], "fits": [{"mu": torch.ones(3) * 2, "mask": torch.tensor([True, False])}]},
        results / "fits.safetensors",
    )
    pl.DataFrame({"unit": [0, 1], "nll": [0.5, 0.25]}).write_parquet(results / "metrics.parquet")
    hashes(second, tmp_path / "c.json")
    capsys.readouterr()
    assert results_hashes.main(["--compare", str(before), str(tmp_path / "c.json")]) == 1
    differs = [line for line in capsys.readouterr().out.splitlines() if line.startswith("diff")]
    assert differs == [
        "differs: exp/fits.safetensors :tensor tree.fits[0].mu",
        "differs: exp/metrics.parquet :column nll",
        "differs: exp/target.zarr :array /state/fc.weight",
        "differs: exp/target.zarr :attrs /",
    ]


def test_an_unknown_file_is_listed_as_unhashed_and_fails_the_comparison(tmp_path):
    root = results_folder(tmp_path / "run")
    (root / "results" / "exp" / "weights.bin").write_bytes(b"\0")
    data = hashes(root, tmp_path / "a.json")
    assert data["unhashed"] == ["exp/weights.bin"]
    assert results_hashes.main(["--compare", *[str(tmp_path / "a.json")] * 2]) == 1
