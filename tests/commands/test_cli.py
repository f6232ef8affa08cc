import json
import subprocess
import sys

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
