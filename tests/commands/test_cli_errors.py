"""Command-line errors name their culprit, without a traceback, and exit with status 1:

- options that mirror a setting take their type, bounds, choices and default from the
  settings layer (`symbnn.commands.setting_option`): `--points 1` is refused by the parser
  as `alignment.points: 1` is in config.yaml;
- a value whose memory exceeds the machine's is refused before anything is allocated,
  naming the option, the estimate and the memory available;
- NaN weights are refused where they enter a computation, naming the store and the array;
- `make verify` fails on a missing output and on a dvc.lock it cannot read.
"""

import argparse
import dataclasses
import importlib
import re
import shutil
import subprocess
import sys
import tracemalloc
import typing

import numpy as np
import pytest
from conftest import cli, fails
from dvc_repos import dvc_repository, make
from optunet_stores import optunet

from symbnn import memory
from symbnn import settings as S
from symbnn.cli import build_parser
from symbnn.commands import SettingType
from symbnn.settings.base import type_hints
from symbnn.settings.checkpoints import Checkpoints
from symbnn.store import open_store, write_store

# (command, option) -> the setting it mirrors
MIRRORED = {
    ("align", "--max-sweeps"): (S.Alignment, "max_sweeps"),
    ("barrier", "--split"): (S.Alignment, "splits"),
    ("barrier", "--points"): (S.Alignment, "points"),
    ("barrier", "--bn-batches"): (S.Alignment, "bn_batches"),
    ("barrier", "--max-sweeps"): (S.Alignment, "max_sweeps"),
    ("barrier", "--data-root"): (S.Config, "data_root"),
    ("canonicalize", "--scale"): (S.SymmetryRemoval, "scale"),
    ("canonicalize", "--key"): (S.SymmetryRemoval, "key"),
    ("minmass", "--solver"): (S.SymmetryRemoval, "solver"),
    ("mmd", "--scale"): (S.SymmetryRemoval, "scale"),
    ("mmd", "--key"): (S.SymmetryRemoval, "key"),
    ("mmd", "--seed"): (S.Mmd, "seed"),
    ("mmd", "--alpha"): (S.MmdTest, "alpha"),
    ("mmd", "--b1"): (S.MmdTest, "b1"),
    ("mmd", "--b2"): (S.MmdTest, "b2"),
    ("mmd", "--b3"): (S.MmdTest, "b3"),
    ("import-checkpoints", "--setting"): (Checkpoints, "setting"),
    ("import-checkpoints", "--first"): (Checkpoints, "first"),
    ("import-checkpoints", "--dtype"): (Checkpoints, "dtype"),
    ("sample", "--n-samples"): (S.Methods, "n_samples"),
    ("sample", "--device"): (S.Config, "device"),
    ("mmd", "--device"): (S.Config, "device"),
    ("minmass", "--device"): (S.Config, "device"),
}
# options whose default is the command's own, with its reason beside the option
OWN_DEFAULT = {("minmass", "--device"): "cpu"}


def actions():
    """(command, option) -> argparse action, for every option of every command."""
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # argparse keeps them here
    return {
        (name, option): action
        for name, command in commands.items()
        for action in command._actions
        for option in action.option_strings
    }


def _setting(section, name):
    field = next(f for f in dataclasses.fields(section) if f.name == name)
    hint = type_hints(section)[name]
    arms = [a for a in (typing.get_args(hint) or (hint,)) if a is not type(None)]
    return field, arms[0] if typing.get_origin(hint) is not typing.Literal else hint


@pytest.mark.parametrize("option", sorted(MIRRORED), ids=lambda o: " ".join(o))
def test_options_take_default_bounds_and_choices_from_the_settings(option):
    section, name = MIRRORED[option]
    action = actions()[option]
    field, hint = _setting(section, name)
    if option in OWN_DEFAULT:
        assert action.default == OWN_DEFAULT[option]
    elif field.default is not dataclasses.MISSING:
        expected = list(field.default) if isinstance(field.default, tuple) else field.default
        assert action.default == expected
    if typing.get_origin(hint) is tuple:  # a list of choices
        hint = typing.get_args(hint)[0]
        assert action.nargs == "+"
    if typing.get_origin(hint) is typing.Literal:
        assert tuple(action.choices) == typing.get_args(hint)
        return
    if hint is str and not field.metadata.get("pattern"):
        assert action.type is None
        return
    assert isinstance(action.type, SettingType)
    assert (action.type.section, action.type.name) == (section, name)
    meta, step = field.metadata, 1 if hint is int else 1e-9
    for key, outside in (("ge", -step), ("gt", 0), ("le", step), ("lt", 0)):
        bound = meta.get(key)
        if bound is None:
            continue
        if key in ("ge", "le"):
            assert action.type(str(bound)) == bound  # the bound itself is accepted
        with pytest.raises(Exception, match="must"):
            action.type(str(bound + outside))
    if field.metadata.get("pattern"):  # a string setting checked by its pattern
        with pytest.raises(argparse.ArgumentTypeError):
            action.type("not a value of " + name)


def test_every_option_built_from_a_setting_is_listed():
    built = {key for key, action in actions().items() if isinstance(action.type, SettingType)}
    assert built <= set(MIRRORED), built - set(MIRRORED)


@pytest.fixture
def stores(tmp_path):
    a = optunet(tmp_path, "a.zarr", 6)
    b = optunet(tmp_path, "b.zarr", 6, seed=10)
    state = {k: open_store(b.path).read(k) for k in b.state_names}
    state["fc1.weight"][2, 0, 1] = np.nan
    info = {"seed": np.arange(6), "converged": np.ones(6, bool)}
    attrs = {**open_store(b.path).attrs}
    nan = write_store(tmp_path / "nan.zarr", state, info, {"architecture": attrs["architecture"]})
    return a.path, b.path, nan.path


@pytest.mark.parametrize(
    "args, option",
    [
        (["barrier", "A", "B", "--points", "1"], "--points: must be >= 2, got 1"),
        (["barrier", "A", "B", "--points", "1000000000"], "--points: must be <= 10001"),
        (["barrier", "A", "B", "--bn-batches", "0"], "--bn-batches: must be >= 1, got 0"),
        (["mmd", "T", "M", "O", "--seed", "-1"], "--seed: must be >= 0, got -1"),
        (["mmd", "T", "M", "O", "--b1", "1000000000000"], "--b1: must be <= 1000000"),
        (["mmd", "T", "M", "O", "--b3", "1000000000000"], "--b3: must be <= 1000"),
        (["mmd", "T", "M", "O", "--alpha", "1"], "--alpha: must lie in (0, 1), got 1.0"),
        (["align", "A", "B", "O", "--max-sweeps", "1e9"], "--max-sweeps: expected an integer"),
    ],
)
def test_option_values_outside_the_settings_bounds_are_usage_errors(args, option):
    code, text = cli(*args)  # asserts no traceback
    assert code == 1 and option in text, text


@pytest.mark.slow
def test_huge_values_fail_fast_on_the_real_command_line():
    """The issue's two cases, as typed: an 87 TiB allocation, and a kill at 23 GB."""
    for args, option in (
        (["mmd", "t", "m", "o", "--pvalue", "--b1", "1000000000000"], "--b1"),
        (["barrier", "a", "b", "--points", "1000000000"], "--points"),
    ):
        run = subprocess.run(
            [sys.executable, "-m", "symbnn.cli", *args], capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 1 and f"argument {option}: must be <=" in run.stderr
        assert "Traceback" not in run.stderr


# Modules the refused commands import: importing them allocates tens of MiB of code objects in
# whichever test imports them first, which says nothing about the data the command allocates.
COMMANDS_IMPORTS = ("polars", "torch", "symbnn.mmd", "symbnn.mmd.layerwise", "symbnn.alignment")


def refused_before_allocating(*args, expect):
    """The command fails naming ``expect`` while Python and numpy allocate under 20 MiB (its
    modules imported beforehand)."""
    for name in COMMANDS_IMPORTS:
        importlib.import_module(name)
    tracemalloc.start()
    try:
        text = fails(*args, expect=expect)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"{peak / 2**20:.0f} MiB allocated before the refusal"
    return text


def test_mmd_permutations_beyond_memory_are_refused_naming_the_options(
    stores, tmp_path, monkeypatch
):
    a, b, _ = stores
    out = tmp_path / "o.parquet"
    monkeypatch.setattr(memory, "available_memory", lambda: 64 * 2**20)
    text = refused_before_allocating(
        "mmd", a, b, out, "--pvalue", "--b1", "1000000", "--device", "cpu",
        expect=("--b1/--b2:", "MMDAgg's permutation test of 12 samples", "GiB",
                "more than the 64.0 MiB (67,108,864 bytes) of memory available"),
    )  # fmt: skip
    # the estimate in bytes too, beside its readable size
    estimate = re.search(r"would need about ([0-9.]+) GiB \(([0-9,]+) bytes\)", text)
    assert estimate, text
    assert abs(int(estimate[2].replace(",", "")) / 2**30 - float(estimate[1])) < 0.05, text
    assert not out.exists(), text
    assert cli("mmd", a, b, out, "--pvalue", "--b1", "99", "--b2", "99", "--device", "cpu")[0] == 0


def test_mmd_samples_beyond_memory_are_refused_naming_the_rows(stores, tmp_path, monkeypatch):
    a, b, _ = stores
    monkeypatch.setattr(memory, "available_memory", lambda: 4096)
    refused_before_allocating(
        "mmd", a, b, tmp_path / "o.parquet", "--device", "cpu",
        expect=("--target-rows/--method-rows:", "matrices of 12 samples"),
    )  # fmt: skip


def test_a_path_beyond_memory_is_refused_before_the_data_are_loaded(stores, monkeypatch):
    a, b, _ = stores
    monkeypatch.setattr(memory, "available_memory", lambda: 2**20)
    refused_before_allocating(
        "barrier", a, b, "--points", "10001", expect=("--points:", "the interpolation path")
    )


def test_the_library_names_parameters_as_the_settings_do(monkeypatch):
    from symbnn.alignment.interpolation import grid

    monkeypatch.setattr(memory, "available_memory", lambda: 2**20)
    with pytest.raises(memory.MemoryLimitError, match=r"^points: the interpolation path"):
        grid(10_001)
    monkeypatch.setattr(memory, "available_memory", lambda: None)  # unknown: no refusal
    assert len(grid(10_001)) == 10_001


def test_available_memory_is_read_from_meminfo_or_the_free_pages(tmp_path, monkeypatch):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  1000 kB\nMemAvailable:  512 kB\n")
    monkeypatch.setattr(memory, "MEMINFO", str(meminfo))
    monkeypatch.setattr(memory, "CGROUP_LIMIT", str(tmp_path / "none"))
    assert memory.available_memory() == 512 * 1024
    meminfo.write_text("MemTotal:  1000 kB\n")  # an old kernel: free physical pages instead
    assert memory.available_memory() > 0


@pytest.mark.parametrize(
    "command",
    [
        ["align", "{a}", "{nan}", "{tmp}/al.zarr"],
        ["align", "{nan}", "{a}", "{tmp}/al.zarr", "--reference", "2"],
        ["barrier", "{a}", "{nan}", "--row-b", "2"],
        ["mmd", "{a}", "{nan}", "{tmp}/o.parquet", "--canonical", "--device", "cpu"],
        ["canonicalize", "{nan}", "{tmp}/c.zarr"],
        ["minmass", "{nan}", "{tmp}/m.parquet"],
    ],
    ids=["align-B", "align-A", "barrier", "mmd-canonical", "canonicalize", "minmass"],
)
def test_nan_weights_are_named_with_their_store(stores, tmp_path, command):
    a, _, nan = stores
    args = [part.format(a=a, nan=nan, tmp=tmp_path) for part in command]
    text = fails(*args, expect=(f"{nan}: state/fc1.weight holds NaN or infinite weights",))
    assert "(sample 2)" in text and "matrix contains invalid" not in text
    assert not any((tmp_path / name).exists() for name in ("al.zarr", "c.zarr", "m.parquet"))


def test_a_changed_setting_of_sample_names_the_option(tmp_path):
    from conftest import REPO

    args = ["sample", "dropout", tmp_path / "s.zarr", "--experiment", "default"]
    fails(*args, "--set", "rate=5", "--config", REPO / "config.yaml",
          expect=("with --set rate=5:", "methods.dropout.rate: must lie in [0, 1), got 5"))  # fmt: skip


def test_library_messages_name_the_options_on_the_command_line(stores, tmp_path):
    a, _, _ = stores
    fails("mmd", a, a, tmp_path / "o.parquet", "--device", "cpu",
          expect=("rows of the same store overlap", "--target-rows/--method-rows"))  # fmt: skip
    fails("sample", "de", tmp_path / "s.zarr", "--experiment", "default", "--variant", "single",
          expect=("--variant single: method 'de' has no variant 'single'",))  # fmt: skip


@pytest.fixture(scope="module")
def two_outputs(tmp_path_factory):
    return dvc_repository(tmp_path_factory.mktemp("dvc") / "repo", ("e", "f"))


@pytest.mark.slow
def test_verify_fails_when_an_output_is_missing(two_outputs, tmp_path):
    assert make(two_outputs, "verify").returncode == 0
    shutil.move(two_outputs / "results" / "f", tmp_path / "f")  # as a failed pull leaves it
    try:
        result = make(two_outputs, "verify")
        text = result.stdout + result.stderr
        assert result.returncode != 0, text
        remedy = "make pull or dvc pull downloads them; make run recomputes them"
        assert f"not on disk ({remedy}):\n  results/f\n" in text
        # its files are not listed again, one by one
        assert "verify: FAILED (1 missing output(s), 0 missing file(s)" in text, text
        assert "Traceback" not in text
        assert make(two_outputs, "verify", "EXP=e").returncode == 0  # the one on disk is fine
    finally:
        shutil.move(tmp_path / "f", two_outputs / "results" / "f")
    # one file of an output that is on disk: a failure too, with or without EXP
    table = two_outputs / "results" / "e" / "table.csv"
    shutil.move(table, tmp_path / "table.csv")
    try:
        for target in ([], ["EXP=e"]):
            result = make(two_outputs, "verify", *target)
            text = result.stdout + result.stderr
            assert result.returncode != 0, text
            assert f"not on disk ({remedy}):\n  results/e/table.csv\n" in text
            assert "verify: FAILED (0 missing output(s), 1 missing file(s)" in text
    finally:
        shutil.move(tmp_path / "table.csv", table)


@pytest.mark.parametrize(
    "broken, message",
    [
        ("stages:\n  e: [unclosed\n", "dvc.lock, line 3: not valid YAML"),
        ("stages:\n- e\n", "dvc.lock: not shaped as DVC writes it"),
        (b"\xff\xfe\x00stages", "dvc.lock: not a text file"),
    ],
    ids=["syntax", "shape", "binary"],
)
@pytest.mark.slow
def test_verify_names_a_dvc_lock_it_cannot_read(two_outputs, broken, message):
    lock = two_outputs / "dvc.lock"
    original = lock.read_bytes()
    try:
        lock.write_bytes(broken if isinstance(broken, bytes) else broken.encode())
        result = make(two_outputs, "verify")
        assert result.returncode != 0
        assert result.stderr.strip().startswith(f"verify: FAILED: {message}"), result.stderr
        ours = [line for line in result.stderr.splitlines() if not line.startswith("make:")]
        assert len(ours) == 1 and "Traceback" not in result.stderr, result.stderr
    finally:
        lock.write_bytes(original)
