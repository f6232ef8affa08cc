"""Reliability: every corruption detected, every bad input named, no silent wrong number.

Each case of the reliability probe that once gave a traceback or a silent result: the command
must now fail with one clear line (naming the store, array and chunk, or the option and value)
and exit status 1, without a traceback and without writing its output. Stores are written here
(tiny, seconds); `make verify` / `make push` run against a throwaway DVC repository.
"""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
import yaml
from conftest import REPO, cli, fails, legacy_store, random_images, stacked_state
from dvc_repos import DVC_ENV, dvc_repository, make
from optunet_stores import ARCH, optunet

from symbnn.mmd import MMDInputError, PooledDistances, layerwise_mmd
from symbnn.predictions import open_predictions, write_predictions
from symbnn.runlog import expected_error
from symbnn.store import Store, StoreError, open_store, write_store


@pytest.fixture
def pair(tmp_path):
    return optunet(tmp_path, "target.zarr", 12), optunet(tmp_path, "method.zarr", 8, seed=50)


def chunk(store_path, array, index=None):
    """A chunk file of ``array`` (the first one, or the one at ``index``)."""
    folder = Path(store_path) / array / "c"
    if index is not None:
        return folder.joinpath(*map(str, index))
    return min(p for p in folder.rglob("*") if p.is_file())


def flip_bit(path, byte=3, mask=0x40):
    data = bytearray(path.read_bytes())
    data[byte] ^= mask
    path.write_bytes(bytes(data))


# --- 1. missing chunks and bit rot --------------------------------------------------------


def test_every_chunk_is_written_and_checksummed(tmp_path):
    store = write_store(
        tmp_path / "z.zarr", {"w": np.zeros((4, 3), np.float32)}, {"seed": np.zeros(4, np.int64)}
    )
    assert store.checksummed and store.attrs["checksum"] == "crc32c"
    assert chunk(store.path, "state/w", (0, 0)).is_file()  # all zeros, written all the same
    assert chunk(store.path, "info/seed", (0,)).is_file()
    meta = json.loads((store.path / "state" / "w" / "zarr.json").read_text())
    assert [c["name"] for c in meta["codecs"]] == ["bytes", "crc32c"]


def test_missing_weight_chunk_fails_validate_mmd_and_every_reader(pair, tmp_path):
    target, method = pair
    chunk(target.path, "state/fc1.weight").unlink()
    where = ("target.zarr", "state/fc1.weight", "chunk (0, 0, 0)", "is missing")
    fails("store", "validate", target.path, expect=("INVALID", *where))
    out = tmp_path / "mmd.parquet"
    fails("mmd", target.path, method.path, out, "--device", "cpu", expect=where)
    assert not out.exists() and not out.with_suffix(".summary.json").exists()
    with pytest.raises(StoreError, match="state/fc1.weight.*is missing"):
        open_store(target.path)
    with pytest.raises(StoreError, match="is missing"):
        layerwise_mmd(target.path, method.path, device="cpu")


def test_missing_chunk_is_named_not_dead_units_or_degenerate(pair, tmp_path):
    target, _ = pair
    chunk(target.path, "state/conv2.weight").unlink()
    for command in (
        ["canonicalize", target.path, tmp_path / "c.zarr"],
        ["minmass", target.path, tmp_path / "m.parquet"],
    ):
        text = fails(*command, expect=("state/conv2.weight", "is missing"))
        assert "dead" not in text and "degenerate" not in text
    assert not (tmp_path / "c.zarr").exists() and not (tmp_path / "m.parquet").exists()


def test_missing_info_chunk_fails_instead_of_changing_counts(pair):
    target, _ = pair
    chunk(target.path, "info/converged").unlink()
    fails("store", "info", target.path, expect=("info/converged", "is missing"))
    fails("store", "validate", target.path, expect=("info/converged", "is missing"))


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: flip_bit(p, byte=3, mask=0x40), id="exponent-bit"),
        pytest.param(
            lambda p: p.write_bytes(
                p.read_bytes()[:8]
                + bytes(b ^ 0xFF for b in p.read_bytes()[8:40])
                + p.read_bytes()[40:]
            ),
            id="32-xored-bytes",
        ),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-10]), id="truncated"),
    ],
)
def test_bit_rot_fails_validate_and_every_command(pair, tmp_path, damage):
    target, method = pair
    path = chunk(target.path, "state/fc1.weight")
    damage(path)
    where = ("target.zarr", "cannot read state/fc1.weight", "chunk (0, 0, 0)")
    fails("store", "validate", target.path, expect=("INVALID", *where))
    fails("minmass", target.path, tmp_path / "m.parquet", expect=where)
    fails("mmd", target.path, method.path, tmp_path / "o.parquet", "--device", "cpu", expect=where)
    assert not (tmp_path / "m.parquet").exists() and not (tmp_path / "o.parquet").exists()
    with pytest.raises(StoreError, match=r"state/fc1.weight: chunk \(0, 0, 0\)"):
        open_store(target.path).read("fc1.weight")


def test_bit_rot_in_a_column_block_read_is_named(tmp_path):
    values = np.random.default_rng(0).normal(size=(70, 300, 40)).astype(np.float32)
    store = write_store(tmp_path / "s.zarr", {"w": values}, {"seed": np.arange(70)})
    flip_bit(chunk(store.path, "state/w"), byte=1000)
    with pytest.raises(StoreError, match="state/w: chunk .* fails its crc32c checksum"):
        list(open_store(store.path).iter_param_blocks("w", max_bytes=70 * 40 * 4 * 16))


def test_predictions_store_with_a_missing_or_damaged_chunk(tmp_path):
    samples = optunet(tmp_path, "samples.zarr", 3)
    path = write_predictions(
        samples.path, tmp_path / "pred.zarr", random_images(20, 0), random_images(8, 1)
    )
    assert open_predictions(path).checksummed
    assert cli("store", "validate", path)[0] == 0
    saved = tmp_path / "labels-chunk"
    shutil.copy(chunk(path, "labels"), saved)
    chunk(path, "labels").unlink()  # used to read back as zeros: accuracy dropped silently
    fails("store", "validate", path, expect=("pred.zarr", "labels", "is missing"))
    with pytest.raises(StoreError, match="labels.*is missing"):
        open_predictions(path)
    shutil.copy(saved, chunk(path, "labels", (0,)))
    flip_bit(chunk(path, "test"), byte=10)
    fails("store", "validate", path, expect=("cannot read test", "crc32c"))
    with pytest.raises(StoreError, match="cannot read test: chunk"):
        open_predictions(path).group["test"][:, :5]  # the path the metrics read through


def test_stores_without_checksums_open_and_validate_says_what_it_cannot_verify(tmp_path):
    """Read unverified on request (--allow-unverified; else refused: test_store_integrity)."""
    state = {k: v.numpy() for k, v in stacked_state(ARCH, 4).items()}
    info = {"seed": np.arange(4), "mode_index": np.zeros(4, np.int64)}  # all zero: omitted
    path = legacy_store(tmp_path / "old.zarr", state, info, {"architecture": ARCH})
    store = open_store(path, allow_unverified=True)
    assert not store.checksummed and np.array_equal(store.info("mode_index"), np.zeros(4))
    code, text = cli("--allow-unverified", "store", "validate", path)
    assert code == 0 and "not fully verified" in text
    assert "without chunk checksums" in text and "info/mode_index" in text


# --- 2. huge but finite weights -----------------------------------------------------------


def test_distances_do_not_overflow_for_any_float32_weight():
    rng = np.random.default_rng(0)
    block = rng.normal(size=(12, 500)).astype(np.float32)
    for scale in (1.0, 1e20, 1e30, 3e37):
        acc = PooledDistances(12, "cpu")
        acc.add(block * np.float32(scale))
        l1, l2 = acc.result()
        assert torch.isfinite(l1).all() and torch.isfinite(l2).all()
        exact = np.abs(block[:, None].astype(np.float64) - block[None].astype(np.float64))
        assert np.allclose(l1.numpy() / scale, exact.sum(-1), rtol=1e-5)
        assert np.allclose(l2.numpy() / scale**2, (exact**2).sum(-1), rtol=1e-4)


def test_mmd_of_huge_finite_weights_is_finite(tmp_path):
    target = optunet(tmp_path, "t.zarr", 10)
    method = optunet(tmp_path, "m.zarr", 10, seed=20, scale=1e30)
    out = tmp_path / "o.parquet"
    code, text = cli("mmd", target.path, method.path, out, "--device", "cpu")
    assert code == 0, text
    table = pl.read_parquet(out)
    assert all(math.isfinite(v) for values in table["mmd_values"] for v in values)
    assert math.isfinite(json.loads(out.with_suffix(".summary.json").read_text())["mmd"])


def test_a_non_finite_mmd_is_an_error_naming_the_layer_and_stores(tmp_path):
    target = optunet(tmp_path, "t.zarr", 6, dtype=np.float64)
    method = optunet(tmp_path, "m.zarr", 6, seed=9, dtype=np.float64)
    state = {k: open_store(method.path).read(k) for k in method.state_names}
    state["fc1.weight"] = state["fc1.weight"] * 1e200  # squares overflow even float64
    method = write_store(tmp_path / "big.zarr", state, attrs={"architecture": ARCH})
    with pytest.raises(MMDInputError, match="layer 'fc1.weight' of .*t.zarr vs .*big.zarr"):
        layerwise_mmd(target.path, method.path, device="cpu")
    fails("mmd", target.path, method.path, tmp_path / "o.parquet", expect=("fc1.weight", "finite"))
    assert not (tmp_path / "o.parquet").exists()


def test_huge_weights_are_named_not_reported_as_non_positive_scales(tmp_path):
    store = optunet(tmp_path, "h.zarr", 4, scale=1e30)
    text = fails("canonicalize", store.path, tmp_path / "c.zarr", expect=("h.zarr", "state/"))
    assert "holds weights up to" in text
    assert not (tmp_path / "c.zarr").exists()


def test_minmass_results_are_checked_finite(tmp_path, monkeypatch):
    from symbnn.symmetry import minmass
    from symbnn.symmetry.minmass import check_finite_table

    store = optunet(tmp_path, "s.zarr", 3)
    table = minmass.minmass_table(store.path)
    check_finite_table(table, store.path)  # a good table passes
    bad = table.with_columns(pl.Series("mass_after", [1.0, math.inf, 2.0]))
    with pytest.raises(ValueError, match=r"s.zarr: min-mass of sample 1: mass_after is inf"):
        check_finite_table(bad, store.path)
    solve = minmass.min_mass

    def overflowing(*args, **kwargs):
        result = solve(*args, **kwargs)
        result.mass_after[1] = math.inf
        return result

    monkeypatch.setattr(minmass, "min_mass", overflowing)
    out = tmp_path / "m.parquet"
    fails("minmass", store.path, out, expect=("s.zarr", "sample 1", "mass_after"))
    assert not out.exists()


# --- 3. make verify and make push ---------------------------------------------------------


@pytest.fixture(scope="module")
def dvc_repo(tmp_path_factory):
    """A git + DVC repository with one recorded experiment (a store and a table) and a
    Snakefile with nothing to do; its default remote is a folder beside it."""
    return dvc_repository(tmp_path_factory.mktemp("dvc") / "repo", ("e",))


@pytest.mark.slow
def test_verify_fails_when_its_target_is_absent(dvc_repo, tmp_path):
    result = make(dvc_repo, "verify", "EXP=e")
    assert result.returncode == 0 and "verify: 1 store(s) OK" in result.stdout, result.stderr
    moved = tmp_path / "e"
    shutil.move(dvc_repo / "results" / "e", moved)
    try:
        result = make(dvc_repo, "verify", "EXP=e")
        assert result.returncode != 0 and "results/e is not on disk" in result.stderr
        assert "0 store(s) OK" not in result.stdout
        assert make(dvc_repo, "verify", "EXP=nope").returncode != 0
    finally:
        shutil.move(moved, dvc_repo / "results" / "e")


@pytest.mark.slow
def test_verify_checks_the_cache_and_suggests_nothing_that_deletes(dvc_repo):
    table = dvc_repo / "results" / "e" / "table.csv"
    md5 = __import__("hashlib").md5(table.read_bytes()).hexdigest()
    obj = dvc_repo / ".dvc" / "cache" / "files" / "md5" / md5[:2] / md5[2:]
    original = obj.read_bytes()
    obj.chmod(0o644)
    try:
        flip_bit(obj, byte=0, mask=0x01)
        result = make(dvc_repo, "verify")
        text = result.stdout + result.stderr
        assert result.returncode != 0 and "damaged cache object" in text, text
        assert f"mv {obj.relative_to(dvc_repo)} {obj.relative_to(dvc_repo)}.damaged" in text
        assert f"cp results/e/table.csv {obj.relative_to(dvc_repo)}" in text  # intact copy
        # nothing printed deletes data: no rm, no checkout of a whole output
        assert "rm " not in text and "checkout --force results/e\n" not in text
        assert "dvc checkout --force results\n" not in text
        table.write_text("a\n2\n")  # a changed file whose cache copy is damaged: no checkout
        text = make(dvc_repo, "verify").stdout
        assert "modified: results/e/table.csv" in text
        assert "checkout --force results/e/table.csv" not in text
        assert "dvc fetch results/e/table.csv" in text
    finally:
        obj.write_bytes(original)
        table.write_text("a\n1\n")


@pytest.mark.slow
def test_push_writes_nothing_until_the_upload_succeeds(dvc_repo):
    lock = (dvc_repo / "dvc.lock").read_bytes()
    table = dvc_repo / "results" / "e" / "table.csv"
    table.write_text("a\n3\n")
    try:
        # a remote that cannot work: an unknown scheme
        result = make(dvc_repo, "push", "DVC_REMOTE=nowhere://x/y")
        assert result.returncode != 0 and "dvc.lock is left as it was" in result.stderr
        assert (dvc_repo / "dvc.lock").read_bytes() == lock
        assert not (dvc_repo / ".dvc" / "config.local").exists()
        # a per-call remote that works: used, and not saved for later calls
        other = dvc_repo.parent / "other-remote"
        env = {**DVC_ENV, "DVC_REMOTE": str(other)}
        assert make(dvc_repo, "push", env=env).returncode == 0
        assert (other / "files" / "md5").is_dir()
        assert not (dvc_repo / ".dvc" / "config.local").exists()
        assert (dvc_repo / "dvc.lock").read_bytes() != lock
    finally:
        table.write_text("a\n1\n")
        (dvc_repo / "dvc.lock").write_bytes(lock)


# --- 4. a pool of another architecture ----------------------------------------------------


def test_sample_refuses_a_pool_of_another_architecture(tmp_path):
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    name = next(iter(config["experiments"]))
    config["experiments"][name]["model"] = {"name": "mlp", "widths": [784, 16, 16, 10]}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    pool = optunet(tmp_path, "pool.zarr", 4)
    out = tmp_path / "s.zarr"
    args = ["sample", "de", out, "--experiment", name, "--config", tmp_path / "config.yaml"]
    fails(*args, "--pool", pool.path, expect=("pool.zarr", "optunet", "mlp", "--pool"))
    assert not out.exists()


# --- 5. tracebacks that became errors -----------------------------------------------------


def test_bad_yaml_in_set_is_a_clear_error(tmp_path):
    args = ["sample", "dropout", tmp_path / "s.zarr", "--experiment", "default"]
    fails(*args, "--set", "rate=[1,2", "--config", REPO / "config.yaml", expect=("--set", "[1,2"))


@pytest.mark.parametrize("command", ["mmd", "minmass"])
def test_unknown_device_is_a_usage_error(pair, tmp_path, command):
    target, method = pair
    inputs = [target.path, method.path] if command == "mmd" else [target.path]
    fails(command, *inputs, tmp_path / "o.parquet", "--device", "foo", expect=("--device", "foo"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_cuda_without_a_gpu_is_an_error(pair, tmp_path):
    target, method = pair
    fails("minmass", target.path, tmp_path / "m.parquet", "--device", "cuda", expect=("cuda",))
    fails("mmd", target.path, method.path, tmp_path / "o.parquet", "--device", "cuda:1")


def edit_attrs(path, edit):
    meta_path = Path(path) / "zarr.json"
    meta = json.loads(meta_path.read_text())
    edit(meta["attributes"])
    meta_path.write_text(json.dumps(meta))


def test_store_without_state_names_is_a_clear_error(pair):
    target, _ = pair
    edit_attrs(target.path, lambda a: a.pop("state_names"))
    with pytest.raises(StoreError, match="attribute 'state_names' is missing"):
        Store(target.path)
    fails("store", "validate", target.path, expect=("state_names", "missing"))
    fails("store", "info", target.path, expect=("state_names", "missing"))


def test_shapes_disagreeing_with_n_samples_fail_when_opened(pair, tmp_path):
    target, method = pair
    edit_attrs(target.path, lambda a: a.update(n_samples=13))  # the arrays hold 12
    expect = ("target.zarr", "has 12 samples, the store says 13")
    with pytest.raises(StoreError, match="has 12 samples, the store says 13"):
        open_store(target.path)
    text = fails("mmd", target.path, method.path, tmp_path / "o.parquet", "--device", "cpu",
                 expect=expect)  # fmt: skip
    assert "does not have" not in text  # the old misleading message


def test_arrays_not_matching_the_architecture_are_refused(tmp_path):
    state = {k: v.numpy() for k, v in stacked_state(ARCH, 3).items()}
    state["fc1.weight"] = np.zeros((3, 4, 10), np.float32)  # optunet's fc1 is (3, 10)
    store = write_store(tmp_path / "a.zarr", state, attrs={"architecture": ARCH})
    fails("store", "validate", store.path, expect=("state/fc1.weight", "(4, 10)", "(3, 10)"))
    with pytest.raises(StoreError, match="fc1.weight"):
        store.state_dict(0)


def raise_on_write(exc):
    def write(self, *args, **kwargs):
        raise exc

    return write


@pytest.mark.parametrize(
    "error, reason",
    [
        (
            pl.exceptions.ComputeError(
                "parquet: File out of specification: underlying IO error: No space left on "
                "device (os error 28)"
            ),
            "No space left on device",
        ),
        (PermissionError(13, "Permission denied"), "Permission denied"),
    ],
)
def test_a_failed_table_write_names_the_output(pair, tmp_path, monkeypatch, error, reason):
    target, _ = pair
    monkeypatch.setattr(pl.DataFrame, "write_parquet", raise_on_write(error))
    out = tmp_path / "tables" / "masses.parquet"
    text = fails("minmass", target.path, out, expect=(f"cannot write {out}: {reason}",))
    assert ".tmp-" not in text and not out.exists()
    assert [p.name for p in out.parent.iterdir()] == []  # no hidden leftovers


def test_a_failed_store_write_names_the_store(pair, tmp_path, monkeypatch):
    from zarr.storage import LocalStore

    target, _ = pair

    async def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(LocalStore, "set", full)
    out = tmp_path / "c.zarr"
    text = fails("canonicalize", target.path, out, expect=(f"{out}: cannot write the store",))
    assert "No space left on device" in text and ".tmp-" not in text
    assert not out.exists() and not list(tmp_path.glob(".c.zarr.tmp-*"))


def test_expected_errors_and_bugs_are_told_apart():
    assert expected_error(OSError(28, "No space left on device")) == "No space left on device"
    assert expected_error(FileNotFoundError(2, "No such file", "x.zarr")) == "x.zarr: No such file"
    assert expected_error(yaml.YAMLError("bad yaml")) == "bad yaml (YAMLError)"
    assert expected_error(pl.exceptions.ComputeError("io")) is not None
    assert expected_error(pl.exceptions.ColumnNotFoundError("x")) is None  # a bug: traceback
    assert expected_error(KeyError("x")) is None and expected_error(RuntimeError()) is None


SCRIPT = """
import sys
import polars as pl
from symbnn.report.tables import write_table
from symbnn.runlog import log_to

def full(self, *args, **kwargs):
    raise OSError(28, "No space left on device")

pl.DataFrame.write_parquet = full
with log_to(sys.argv[1]):
    print("working")
    if sys.argv[3] == "bug":
        {}["a key"]
    write_table(pl.DataFrame({"a": [1]}), sys.argv[2])
"""


def run_script(tmp_path, mode):
    script, log, out = tmp_path / "s.py", tmp_path / "logs" / f"{mode}.log", tmp_path / "t.parquet"
    script.write_text(SCRIPT)
    result = subprocess.run(
        [sys.executable, script, log, out, mode], capture_output=True, text=True, timeout=120
    )
    return result, log, out


def test_workflow_script_error_is_one_line_without_traceback(tmp_path):
    """What a workflow script does under Snakemake (`log_to` around its work): an expected
    failure is one line in the log and on stderr, exit status 1; a bug keeps its traceback."""
    result, log, out = run_script(tmp_path, "full")
    assert result.returncode == 1
    line = f"error: cannot write {out}: No space left on device"
    assert result.stderr.strip() == f"{line} (log: {log})"
    assert "Traceback" not in log.read_text() and line in log.read_text()
    assert "working" in log.read_text() and not out.exists()
    result, log, _ = run_script(tmp_path, "bug")
    assert result.returncode == 1 and "KeyError: 'a key'" in log.read_text()
    assert "Traceback" in log.read_text() + result.stderr


# --- 6. values accepted silently ----------------------------------------------------------


@pytest.mark.parametrize("tol", ["-1", "nan", "0", "inf", "x"])
def test_minmass_tolerance_must_be_a_positive_number(pair, tmp_path, tol):
    target, _ = pair
    fails("minmass", target.path, tmp_path / "m.parquet", "--tol", tol, expect=("--tol", tol))
    assert not (tmp_path / "m.parquet").exists()


@pytest.mark.parametrize(
    "rows, expect",
    [
        ("8:14", "method rows 8:14 are not a range within its 8 samples"),
        ("0:9", "within its 8 samples"),
        ("60:70", "within its 8 samples"),
        ("5:3", "selects no rows"),
        ("a:b", "is not a row range"),
        ("-2:4", "negative"),
    ],
)
def test_mmd_row_ranges_beyond_the_store_are_errors(pair, tmp_path, rows, expect):
    target, method = pair
    fails(
        "mmd", target.path, method.path, tmp_path / "o.parquet", "--device", "cpu",
        f"--method-rows={rows}", expect=(expect,),
    )  # fmt: skip


@pytest.mark.parametrize(
    "option", [["--alpha", "1.5"], ["--b1", "0"], ["--max-mib", "-1"], ["--alpha", "nan"]]
)
def test_mmd_options_out_of_bounds(pair, tmp_path, option):
    target, method = pair
    fails("mmd", target.path, method.path, tmp_path / "o.parquet", *option, expect=option)
