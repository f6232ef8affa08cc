import json
import subprocess
import sys

import numpy as np
import pytest

from symbnn.cli import main


def test_store_info_prints_the_summary(optunet_store, capsys):
    store, _ = optunet_store(n=4)
    assert main(["store", "info", str(store.path)]) == 0
    out = capsys.readouterr().out
    assert "samples      4   converged 4" in out
    assert "conv2.weight  (10, 1, 5, 5)" in out
    assert "355 per sample" in out
    assert main(["store", "info", "--json", str(store.path)]) == 0
    assert json.loads(capsys.readouterr().out)["n_parameters"] == 355


def test_store_validate_and_missing_store(optunet_store, tmp_path, capsys):
    store, _ = optunet_store()
    assert main(["store", "validate", str(store.path)]) == 0
    assert main(["store", "validate", str(tmp_path / "nope.zarr")]) == 1
    assert "nope.zarr: not a symbnn store" in capsys.readouterr().out


@pytest.mark.slow
def test_installed_entry_point_runs(optunet_store):
    store, _ = optunet_store()
    exe = [sys.executable, "-m", "symbnn.cli", "store", "info", str(store.path)]
    result = subprocess.run(exe, capture_output=True, text=True, check=True)
    assert "architecture name=optunet" in result.stdout


@pytest.mark.slow
def test_every_failure_is_one_line_and_exit_status_1(optunet_store, tmp_path, capsys):
    """Usage errors (argparse) and failures in a command exit 1 with `symbnn ...: error:`."""
    store, _ = optunet_store()
    exe = [sys.executable, "-m", "symbnn.cli", "minmass", str(store.path), str(tmp_path / "m.pq")]
    result = subprocess.run([*exe, "--tol", "-1"], capture_output=True, text=True)
    assert result.returncode == 1 and "argument --tol: '-1'" in result.stderr
    assert "Traceback" not in result.stderr
    assert main(["store", "info", str(tmp_path / "missing.zarr")]) == 1
    assert "symbnn store: error: " in capsys.readouterr().err


def test_store_info_leaves_out_a_converged_count_the_store_does_not_record(tmp_path, capsys):
    """The target's acceptance is in posterior/converged.parquet, not in its store."""
    from conftest import stacked_state

    from symbnn.store import write_store

    state = stacked_state({"name": "optunet"}, 3)
    info = {"seed": np.arange(3)}
    path = tmp_path / "target.zarr"
    write_store(path, state, info, {"experiment": "t", "architecture": {"name": "optunet"}})
    assert main(["store", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "samples      3\n" in out and "converged" not in out


def test_store_upgrade_counts_the_stores_already_current(optunet_store, tmp_path, capsys):
    optunet_store("a/one.zarr")
    optunet_store("a/two.zarr")
    assert main(["store", "upgrade", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "0 store(s) to upgrade, 2 current" in out
    assert out.splitlines()[-1] == "upgrade: 2 store(s) already current, 0 upgraded, 0 failed"
    assert main(["store", "upgrade", str(tmp_path / "a" / "one.zarr")]) == 0
    assert "upgrade: 1 store(s) already current, 0 upgraded" in capsys.readouterr().out
