"""What a run leaves on a terminal, counted by a terminal emulator (benchmarks/terminal.py:
pyte, a screen of 50 x 120 with its scrollback; the live view redraws in place): `make smoke`
(the Makefile's recipe: the workflow with its live view, the quiet report, the summary) on a
pseudo-terminal, on the smallest whole run (the smoke experiment cut to 2 target networks and
what the workflow computes from them), leaves fewer than 60 lines and ends with its summary.
The whole `make run` of a fresh clone is measured by benchmarks/terminal_lines.py
(docs/benchmarks.md, block terminal-lines). `check_lines_left` also takes a finished run's
folder (`make smoke` with nothing left to do), such as test_workflow.py's."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import tiny_experiment, user_shell_env, workflow_config
from console import COLUMNS, lines_left, plugin_environment, run_in_terminal, wrapped

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
GOAL = 60  # issue 44: a whole `make run` leaves fewer lines than this
BIN = Path(sys.executable).parent
# what `make smoke` needs of a checkout besides config.yaml (linked into the test's folder)
CHECKOUT = (
    *("Snakefile", "rules", "workflow_scripts", "report", "profiles", "envs"),
    *("Makefile", "dvc.mk"),  # the Makefile includes dvc.mk
)


# `make smoke` with this session's Python (no virtualenv of its own to install)
MAKE_SMOKE = ["make", "--no-print-directory", "smoke", f"BIN={BIN}", "STAMP=", "CORES=2"]


def check_lines_left(workdir: Path) -> list[str]:
    """Run `make smoke` in `workdir` (a checkout's files and a config.yaml with a `smoke`
    experiment; a fresh run, or a finished one: nothing left to do) on a terminal; check that
    it leaves fewer than GOAL lines, ending with the summary (its `symbnn summary` command run
    again afterwards, as the terminal wraps it). Returns the lines left."""
    env = {**user_shell_env(), **plugin_environment()}
    status, raw = run_in_terminal(MAKE_SMOKE, workdir, env, timeout=900)
    left = lines_left(raw)
    text = "\n".join(left)
    assert status == 0, text
    assert any(re.match(r"\d+ of \d+ jobs done in ", line) for line in left), text
    assert not any("jobs done, " in line for line in left), text  # the live view went away
    summary = subprocess.run(
        [
            BIN / "symbnn",
            "summary",
            "--experiment",
            "smoke",
            "--report",
            "results/smoke/report.html",
        ],
        cwd=workdir,
        env={**env, "COLUMNS": str(COLUMNS)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert "smoke:" in summary, summary
    expected = wrapped(summary)
    assert left[-len(expected) :] == expected, text
    print(f"{len(left)} lines left, {len(expected)} of them the summary:\n{text}")
    assert len(left) < GOAL, text
    assert "Adding" not in raw and "Loading script code" not in raw  # the report is quiet
    assert (workdir / "results" / "smoke" / "report.log").stat().st_size > 0
    return left


def test_a_run_on_a_terminal_leaves_few_lines_ending_with_its_summary(tmp_path):
    """The smallest whole run: the smoke experiment's first 2 target networks and what the
    workflow computes from them (no plateau check, MMD check or methods), its report, its
    summary."""
    for name in CHECKOUT:
        (tmp_path / name).symlink_to(REPO / name)
    config = workflow_config({"smoke": tiny_experiment(n_samples=2)})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    left = check_lines_left(tmp_path)
    assert left[-1].startswith("Snakemake's log of the last run: "), left
