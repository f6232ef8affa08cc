"""The checks that stop a run before any job (bad config, lint), planned in the test's
process. (A killed run resumed on a terminal is in tests/workflow/test_workflow.py, beside the
uninterrupted run whose bytes it must reproduce; a user's architecture runs end to end in
tests/workflow/test_workflow_extensions.py, with the user's method and dataset.)"""

import shutil
from pathlib import Path

import pytest
import yaml
from conftest import plan_in_process
from conftest import tiny_workflow_config as tiny_config

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
