"""A killed run resumed on a terminal, as `snakemake` subprocesses, and the checks that stop
a run before any job (bad config, lint), planned in the test's process. (A user's
architecture runs end to end in tests/workflow/test_workflow_extensions.py, with the user's
method and dataset.)"""

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import SNAKEMAKE, plan_in_process
from conftest import run_snakemake as snakemake
from conftest import tiny_workflow_config as tiny_config
from console import ESCAPE, Screen, plugin_environment, run_in_terminal

from symbnn.store import open_store

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_bad_config_stops_before_any_job(tmp_path):
    config = tiny_config()
    config["experiments"]["tiny"]["recipe"]["learning_rate"] = 0.1
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    result = plan_in_process(tmp_path, check=False)  # stops while planning: no job to run
    assert result.returncode != 0
    assert "learning_rate" in result.stdout + result.stderr
    assert not (tmp_path / "results").exists()


def test_lint_is_clean(tmp_path):
    # in a folder of its own: the checkout's results (of any age) are not what is linted
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    result = plan_in_process(tmp_path, "--lint")
    assert "Lints for" not in result.stdout + result.stderr


def test_killed_run_leaves_no_half_written_store_and_resumes_on_a_terminal(tmp_path):
    """A SIGKILL in the middle of training leaves no half-written store; the rerun resumes,
    started on a terminal as `make run` starts it: the repository's profile shows its live
    view (jobs done / total, running, elapsed) and ends in few lines."""
    config = tiny_config(methods=False)
    config["experiments"]["tiny"]["recipe"]["epochs"] = 2
    config["experiments"]["tiny"]["data"]["train_limit"] = 1000
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    process = subprocess.Popen(
        [*SNAKEMAKE, "--directory", str(tmp_path), "--cores", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    logs = tmp_path / "results" / "tiny" / "logs" / "train_shard"
    deadline = time.time() + 120
    while not (logs.exists() and any(logs.iterdir())) and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # let the job get into training
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    shards = tmp_path / "results" / "tiny" / "posterior" / "shards"
    for shard in ("000", "001"):
        path = shards / f"{shard}.zarr"
        if path.exists():  # a shard that finished before the kill must be complete
            open_store(path).validate()
    assert not (tmp_path / "results" / "tiny" / "posterior" / "target.zarr").exists()
    snakemake(tmp_path, "--unlock")  # a SIGKILL leaves Snakemake's lock behind
    # the default profile sets rerun-incomplete; the stages after the store are not the point
    target = "results/tiny/posterior/target.zarr"
    argv = [*SNAKEMAKE, "--directory", str(tmp_path), "--cores", "2", target]
    status, raw = run_in_terminal(argv, REPO, plugin_environment())
    assert status == 0, raw[-5000:]
    text = ESCAPE.sub("", raw)
    assert re.search(r"\d+/\d+ jobs done, \d+ running, elapsed", text), text[-3000:]
    screen = Screen(120)
    screen.feed(raw)
    lines = screen.shown()
    assert re.match(r"\d+ of \d+ jobs done in ", lines[-1]), lines[-10:]
    assert len(lines) < 100, "\n".join(lines)
    store = open_store(tmp_path / target)
    store.validate()
    assert store.n_samples == 4
