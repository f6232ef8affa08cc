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


def test_log_file_gets_one_state_per_line(monkeypatch):
    """tqdm redraws with carriage returns: in a log each state is a line of its own, so `cat`
    and `grep` see every one (a manual bar, two intervals apart, and the final state)."""
    import symbnn.progress

    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    monkeypatch.setattr(symbnn.progress, "LOG_INTERVAL", 0.0)
    bar = progress(total=3, desc="sample", unit="net")
    for _ in range(3):
        bar.update(1)
    bar.close()
    text = log.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert [line.split(":")[0] for line in lines] == ["sample"] * len(lines)
    assert lines[0].startswith("sample:   0%") and "3/3" in lines[-1]
    assert len(lines) >= 3 and all(line == line.rstrip() for line in lines)
