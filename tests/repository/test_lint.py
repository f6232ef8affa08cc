"""The code base stays lint-clean and formatted: ruff (lint and format) for Python, snakefmt
for the workflow, with the settings in pyproject.toml."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

CHECKS = {
    "ruff check": [str(BIN / "ruff"), "check", "--no-cache", "."],
    "ruff format": [str(BIN / "ruff"), "format", "--no-cache", "--check", "."],
    "snakefmt": [str(BIN / "snakefmt"), "--check", "Snakefile", "rules"],
}


@pytest.mark.parametrize("name", CHECKS)
def test_clean(name):
    result = subprocess.run(CHECKS[name], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, f"{name} found problems:\n{result.stdout}\n{result.stderr}"
