"""What every benchmark table states about the machine it ran on, and how a table goes into
docs/benchmarks.md.

On a shared machine absolute times move with the load, so each table gives the CPU, torch's
and numba's thread counts, the 1-minute load average at its start and end, and a calibration
figure: the seconds of a pure-Python loop of 10**7 additions, taken at both ends too (it
grows with the load as the timings do).
"""

from __future__ import annotations

import math
import os
import subprocess
import textwrap
import time
from pathlib import Path

from symbnn.atomic import atomic_write
from symbnn.docblocks import parse_blocks, write_block

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
DOC_HEADING = "# Benchmarks"


def calibration() -> float:
    """Seconds of a pure-Python loop of 10**7 additions (the machine's speed right now)."""
    start = time.perf_counter()
    total = 0
    for i in range(10**7):
        total += i
    return time.perf_counter() - start


def load_average() -> float:
    """The 1-minute load average, NaN where the system has none."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan


def cpu_model() -> str:
    """lscpu's model name and the core count."""
    model = "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next(
            (x.split(":", 1)[1].strip() for x in out.splitlines() if x.startswith("Model name")),
            model,
        )
    except (OSError, subprocess.CalledProcessError):
        pass
    return f"{model}, {os.cpu_count()} cores"


class Conditions:
    """The load and calibration at a table's start; `line` adds those at its end."""

    def __init__(self) -> None:
        self.load = load_average()
        self.calibration = calibration()

    def line(self) -> str:
        import numba
        import torch

        return (
            f"{cpu_model()}; torch {torch.__version__} with {torch.get_num_threads()} threads, "
            f"numba {numba.get_num_threads()} threads; load average {self.load:.2f} at the "
            f"start, {load_average():.2f} at the end; calibration (pure-Python loop of 10**7 "
            f"additions) {self.calibration:.2f} s at the start, {calibration():.2f} s at the end"
        )


def run_make(cwd: Path, target: str) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, the finished process) of `make <target>` in `cwd`, output captured."""
    start = time.perf_counter()
    done = subprocess.run(["make", target], cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - start, done


def publish(name: str, script: str, intro: str, body: str, doc: Path = DOC) -> Path:
    """Put ``body`` into the generated block ``name`` of docs/benchmarks.md (created with its
    heading if missing), with the paragraph ``intro`` (what the block measures, how to rerun
    it: no figures; it starts "The `name` block") right above it, replacing the paragraph
    there that starts so."""
    text = doc.read_text() if doc.exists() else DOC_HEADING + "\n"
    intro = textwrap.fill(intro, width=96, break_on_hyphens=False)
    lines = text.splitlines()
    blocks = {b.name: b for b in parse_blocks(text, doc)}
    if name in blocks:
        end = blocks[name].begin - 1  # the blank line above the block
        start = end
        while start > 0 and lines[start - 1].strip():
            start -= 1
        if lines[start:end] and lines[start].startswith(f"The `{name}` block"):
            lines[start:end] = intro.splitlines()
        else:
            lines[end + 1 : end + 1] = [*intro.splitlines(), ""]
    else:
        lines += ["", *intro.splitlines()]
    new = "\n".join(lines).rstrip("\n") + "\n"
    if new != text:
        atomic_write(doc, lambda tmp: tmp.write_text(new))
    return write_block(doc, name, script, body)
