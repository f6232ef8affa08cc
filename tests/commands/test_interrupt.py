"""A Ctrl-C on a terminal (`--logger symbnn`, set by profiles/default): no tracebacks, one
line saying how far the run got, nothing half-written, exit status 130; the next run resumes.
A toy workflow of Python jobs, each of which prints a KeyboardInterrupt traceback when
interrupted, as the workflow's jobs do."""

import re
import sys
import time

import pytest
from console import ESCAPE, Screen, plugin_environment, run_in_terminal

# job 0 (first, by its priority) ends at once; the others write half their output, then wait
# (the seconds in `pause`)
TOY = """
rule all:
    input: expand("out/{i}.txt", i=range(4))

rule first:
    output: "out/0.txt"
    priority: 10
    shell: "echo half > {output}; echo whole >> {output}"

rule work:
    output: "out/{i}.txt"
    log: "logs/{i}.log"
    shell:
        "echo started > {log}; echo half > {output}; "
        "PYTHON -c 'import time; time.sleep(float(open(\\"pause\\").read()))'; "
        "echo whole >> {output}"
"""


@pytest.mark.slow
def test_ctrl_c_ends_the_run_in_one_line_and_the_next_run_resumes(tmp_path):
    (tmp_path / "Snakefile").write_text(TOY.replace("PYTHON", sys.executable))
    (tmp_path / "pause").write_text("60")
    argv = [sys.executable, "-m", "snakemake", "--cores", "2", "--logger", "symbnn"]
    started = []

    def ready():  # job 0 done, two others in their wait
        if len(list(tmp_path.glob("logs/*.log"))) == 2 and not started:
            started.append(time.monotonic())
        return bool(started) and time.monotonic() - started[0] > 2  # Python is up and waiting

    status, raw = run_in_terminal(argv, tmp_path, plugin_environment(), interrupt_when=ready)
    screen = Screen(120)
    screen.feed(raw)
    lines = screen.shown()
    assert status == 130, raw[-3000:]
    text = ESCAPE.sub("", raw)
    for word in ("Traceback", "KeyboardInterrupt", "Error", "Terminating"):
        assert word not in text, text[-3000:]
    assert re.fullmatch(
        r"Interrupted: 1 of 5 jobs done; nothing half-written is left \(.*\); "
        r"`make run` resumes\..*",
        lines[-1],
    ), lines
    assert len(lines) < 8, "\n".join(lines)
    outputs = sorted((tmp_path / "out").iterdir())
    assert [p.name for p in outputs] == ["0.txt"]  # the stopped jobs' halves are removed
    assert outputs[0].read_text() == "half\nwhole\n"

    (tmp_path / "pause").write_text("0")
    status, raw = run_in_terminal(argv, tmp_path, plugin_environment(), timeout=300)
    screen = Screen(120)
    screen.feed(raw)
    assert status == 0, raw[-3000:]
    assert re.match(r"4 of 4 jobs done in ", screen.shown()[-1]), screen.shown()
    assert all((tmp_path / "out" / f"{i}.txt").read_text() == "half\nwhole\n" for i in range(4))
