"""Progress bars: quiet in log files (one line per interval plus the last), off on request."""

import io
import sys

from symbnn.progress import progress


def test_log_file_gets_few_lines_not_one_per_step(monkeypatch):
    log = io.StringIO()  # not a terminal, like a Snakemake log
    monkeypatch.setattr(sys, "stderr", log)
    assert sum(progress(range(5000), desc="train", unit="step")) == sum(range(5000))
    text = log.getvalue()
    assert "train" in text and "5000/5000" in text
    assert text.count("\r") + text.count("\n") <= 4  # the first and the final update only


def test_environment_switch_turns_it_off(monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    monkeypatch.setenv("SYMBNN_PROGRESS", "0")
    bar = progress(total=10, desc="mmd")
    bar.update(10)
    bar.close()
    assert log.getvalue() == ""
