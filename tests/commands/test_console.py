"""What a run prints (`--logger symbnn`, set by profiles/default): on a terminal one live view
(jobs done / total, running jobs, elapsed, time left) and few lines; elsewhere Snakemake's own
plain log, unchanged. (The real workflow on a terminal: the resumed run of
tests/workflow/test_workflow.py.)"""

import re
import sys

import pytest
from console import ESCAPE, Screen, plugin_environment, run_in_terminal

# six jobs that write three progress lines to their logs, PAUSE seconds apart
TOY = """
rule all:
    input: expand("out/{i}.txt", i=range(6))

rule work:
    output: "out/{i}.txt"
    log: "logs/{i}.log"
    shell: "for k in 1 2 3; do echo step $k of 3 >> {log}; sleep PAUSE; done; echo {wildcards.i} > {output}"
"""


def toy(tmp_path, pause=1):
    """The toy workflow in `tmp_path`; `pause`: seconds between a job's log lines (the live
    view needs running jobs to show; a plain log does not)."""
    (tmp_path / "Snakefile").write_text(TOY.replace("PAUSE", str(pause)))
    return [sys.executable, "-m", "snakemake", "--cores", "2"]


def test_screen_follows_a_redraw_in_place():
    screen = Screen(40)
    screen.feed("kept\nold 1\nold 2\r\x1b[2K\x1b[1A\x1b[2Knew\n\x1b[32mdone\x1b[0m\n")
    assert screen.shown() == ["kept", "new", "done"]


@pytest.mark.slow
def test_a_terminal_gets_a_live_view_and_few_lines(tmp_path):
    status, raw = run_in_terminal(
        [*toy(tmp_path), "--logger", "symbnn"], tmp_path, plugin_environment(), timeout=300
    )
    assert status == 0, raw[-3000:]
    text = ESCAPE.sub("", raw)
    assert re.search(r"\d/7 jobs done, \d running, elapsed 0:00:\d\d, time left", text), text[
        -3000:
    ]
    assert "step 2 of 3" in raw  # a running job's log line, shown while it runs
    screen = Screen(120)
    screen.feed(raw)
    lines = screen.shown()
    assert "7 of 7 jobs done in" in lines[-1], lines
    assert len(lines) < 30, "\n".join(lines)
    assert not any("jobs done, " in line for line in lines)  # the live view went away


def normalized(text):
    """The distinct lines of a plain log, without what differs from run to run (times, ids,
    order and interleaving of jobs)."""
    text = re.sub(
        r"[0-9a-f-]{36}|\d{4}-\d\d-\d\dT\d+\.\d+|\[.*\d\d:\d\d:\d\d.*\]|\d+\.\d+", "", text
    )
    text = re.sub(r"jobid: \d+|Job \d+|out/\d|logs/\d|\(Rule: \w+\)", "", text)
    lines = {line.strip() for line in text.splitlines()}
    return sorted(line for line in lines if not re.match(r"(Command|Date):", line))


@pytest.mark.slow
def test_a_pipe_gets_snakemakes_plain_log(tmp_path):
    import subprocess

    argv = toy(tmp_path, pause=0)
    runs = []
    for extra in (["--logger", "symbnn"], []):
        for folder in ("out", "logs", ".snakemake"):
            subprocess.run(["rm", "-rf", str(tmp_path / folder)], check=True)
        run = subprocess.run(
            [*argv, *extra], cwd=tmp_path, env=plugin_environment(), capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
        runs.append(run.stdout + run.stderr)
    assert "\x1b[" not in runs[0] and "jobs done" not in runs[0]
    import difflib

    plugin, default = normalized(runs[0]), normalized(runs[1])
    assert plugin == default, "\n".join(difflib.unified_diff(plugin, default, lineterm=""))


@pytest.mark.slow
def test_a_dry_run_on_a_terminal_lists_every_job(tmp_path):
    """A dry run stays Snakemake's list of jobs with their resources, on a terminal too."""
    status, raw = run_in_terminal(
        [*toy(tmp_path, pause=0), "--logger", "symbnn", "-n"],
        tmp_path,
        plugin_environment(),
        timeout=300,
    )
    assert status == 0, raw
    assert raw.count("rule work:") == 6 and "jobs done" not in raw
