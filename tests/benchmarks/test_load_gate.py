"""The load gate of benchmarks/machine.py: its arithmetic on fake /proc/stat readings, its
verdicts, and that every benchmark script that writes a docs block goes through it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import machine  # noqa: E402
from machine import CpuTimes, GateReading, LoadGate, LoadRefused  # noqa: E402


def stat(user, nice, system, idle, iowait=0, irq=0, softirq=0, steal=0, guest=7) -> str:
    """A /proc/stat text whose aggregate line has these ticks (guest is inside user already,
    so it must not count twice); a per-core line and others after it."""
    line = f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} {guest} 0"
    return f"{line}\ncpu0 1 1 1 1 1 1 1 1 0 0\nintr 12345 0 0\nctxt 999\n"


def test_proc_stat_busy_is_everything_but_idle_and_iowait_in_seconds():
    busy, total = machine.parse_proc_stat(stat(300, 20, 100, 500, 80, 10, 5, 5), 100)
    assert busy == pytest.approx((300 + 20 + 100 + 10 + 5 + 5) / 100)
    assert total == pytest.approx((300 + 20 + 100 + 500 + 80 + 10 + 5 + 5) / 100)


def test_an_old_kernels_short_cpu_line_is_read_too():
    assert machine.parse_proc_stat("cpu 10 0 10 80\n", 10) == (2.0, 10.0)


def test_a_stat_without_the_cpu_line_is_an_error():
    with pytest.raises(ValueError, match="no aggregate 'cpu' line"):
        machine.parse_proc_stat("cpu0 1 2 3 4\n", 100)


def test_the_other_processes_share_is_busy_time_less_our_own_over_all_cores_time():
    # 10 s of wall time on 2 cores: 20 core-seconds; 12 busy, 9 of them ours: 3 others, 15%
    start = CpuTimes(busy=100.0, total=400.0, own=1.0)
    end = CpuTimes(busy=112.0, total=420.0, own=10.0)
    assert machine.others_share(start, end) == pytest.approx(0.15)


def test_the_share_is_clamped_where_our_children_ended_after_the_machine_was_read():
    # getrusage counts a finished child's whole life, some of it before the start reading
    start, end = CpuTimes(100.0, 400.0, 0.0), CpuTimes(105.0, 420.0, 8.0)
    assert machine.others_share(start, end) == 0.0
    assert machine.others_share(end, end) == 0.0  # no time elapsed


def test_the_share_comes_from_two_readings_of_proc_stat(tmp_path, monkeypatch):
    path = tmp_path / "stat"
    path.write_text(stat(1000, 0, 0, 1000))
    own = iter([2.0, 4.0])
    monkeypatch.setattr(machine, "own_cpu_seconds", lambda: next(own))
    start = machine.cpu_times(path)
    path.write_text(stat(1000 + 600, 0, 0, 1000 + 1400))  # 6 of 20 s busy, 2 of them ours
    end = machine.cpu_times(path)
    assert machine.others_share(start, end) == pytest.approx(0.2)
    assert machine.cpu_times(tmp_path / "missing") is None


@pytest.mark.parametrize(
    "load, cores, share, quiet",
    [
        (1.0, 2, 0.05, True),  # at the limit: 1.0 on 2 cores
        (1.01, 2, 0.05, False),
        (1.9, 4, 0.0, True),  # scaled by the cores
        (2.1, 4, 0.0, False),
        (0.2, 2, 0.10, False),  # the share must stay below 10%
        (0.2, 2, 0.099, True),
        (0.2, 2, None, False),  # not measured: not known to be quiet
    ],
)
def test_quiet_means_low_load_at_the_start_and_few_others_during_the_run(load, cores, share, quiet):
    assert GateReading(load, cores, share).quiet is quiet


def _gate(load: float, cores: int = 2) -> LoadGate:
    gate = LoadGate(settle=0, cores=cores)
    gate.load = load
    return gate


def test_a_quiet_run_writes_its_block_as_it_is():
    reading = GateReading(0.4, 2, 0.02)
    assert _gate(0.4).check("| a |", allow_load=False, reading=reading) == "| a |"


def test_a_loaded_run_is_refused_with_its_figures():
    reading = GateReading(1.26, 2, 0.35)
    with pytest.raises(LoadRefused, match=r"load average 1\.26 .*allows 1\.00 on 2 cores.*35%"):
        _gate(1.26).check("| a |", allow_load=False, reading=reading)


def test_allow_load_writes_it_with_a_first_line_saying_so():
    body = _gate(3.0).check("| a |", allow_load=True, reading=GateReading(3.0, 2, 0.5))
    first, rest = body.split("\n", 1)
    assert first.startswith("Measured under load: load average 3.00 at the start")
    assert "50%" in first and rest == "\n| a |"


def test_the_gate_reads_this_machine():
    gate = LoadGate(settle=0)
    reading = gate.reading()
    assert reading.cores >= 1 and reading.load >= 0
    if Path("/proc/stat").exists():
        assert 0.0 <= reading.share <= 1.0


WRITERS = re.compile(r"\b(write_block|write_gated|publish)\(")


def test_every_benchmark_script_that_writes_a_block_goes_through_the_gate():
    """A block is written only by machine.publish or machine.write_gated, which take the
    gate; a script that writes one starts the gate and takes --allow-load."""
    writers = [
        p
        for p in sorted((REPO / "benchmarks").glob("*.py"))
        if p.name != "machine.py" and WRITERS.search(p.read_text())
    ]
    assert len(writers) >= 8, [p.name for p in writers]
    for path in writers:
        text = path.read_text()
        assert "write_block(" not in text, f"{path.name} writes a block past the gate"
        assert "LoadGate(" in text and "add_gate_arguments(" in text, path.name


def test_publish_refuses_before_touching_the_page(tmp_path):
    doc = tmp_path / "bench.md"
    doc.write_text("# Benchmarks\n")
    gate = _gate(5.0)
    with pytest.raises(LoadRefused):
        machine.publish("x", "benchmarks/x.py", "The `x` block.", "| a |", gate, False, doc)
    assert doc.read_text() == "# Benchmarks\n"
    machine.publish("x", "benchmarks/x.py", "The `x` block.", "| a |", gate, True, doc)
    assert "Measured under load: load average 5.00" in doc.read_text()


def test_a_block_older_than_the_gate_is_marked_from_its_own_machine_line(tmp_path):
    """mark_under_load: the gate's first line from the block's highest load at the start; a
    block within the gate, and the rest of a marked one, stay as written."""
    from symbnn.docblocks import write_block

    doc = tmp_path / "b.md"
    line = "AMD, 2 cores; load average {} at the start, 0.50 at the end"
    write_block(
        doc,
        "old",
        "s.py",
        f"| a |\n\n{line.format('0.60')}; n = 2: load average 2.38 at the start",
        commit="abc1234",
        date="2026-11-26",
    )
    write_block(doc, "quiet", "s.py", line.format("0.40"), commit="abc1234", date="2026-11-26")
    before = doc.read_text()
    assert machine.mark_under_load("old", doc) is True
    assert machine.mark_under_load("quiet", doc) is False
    text = doc.read_text()
    first = text.splitlines()[1]
    assert first.startswith("Measured under load: load average 2.38 at the start")
    assert "allows 1.00 on 2 cores" in first and "not recorded" in first
    assert "(commit abc1234, 2026-11-26)" in text.splitlines()[0]
    assert text.replace(first + "\n\n", "") == before  # the rest as written
    assert machine.mark_under_load("old", doc) is True  # marked again: one first line
    assert doc.read_text() == text
