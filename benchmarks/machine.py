"""What every benchmark table states about the machine it ran on, the load gate a table
passes before it goes into the docs, and how it goes into docs/benchmarks.md.

On a shared machine absolute times move with the load, so each table gives the CPU, torch's
and numba's thread counts, the 1-minute load average at its start and end, and a calibration
figure: the seconds of a pure-Python loop of 10**7 additions, taken at both ends too (it
grows with the load as the timings do).

The gate (`LoadGate`): a script that writes a docs block starts it before measuring and
reads it before writing. The machine counts as quiet when the 1-minute load average, after a
short settle, is at most LOAD_PER_CORE per core (1.0 on 2 cores), and the other processes
took under OTHERS_SHARE of the CPU during the run: the busy time of /proc/stat less this
process's own CPU time (getrusage of itself and its finished children). Otherwise the block
is refused (`LoadRefused`) unless the script was given --allow-load, and then its first line
says it was measured under load, with the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
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


# ---------------------------------------------------------------- the load gate

LOAD_PER_CORE = 0.5  # 1-minute load average allowed at the start, per core
OTHERS_SHARE = 0.10  # the CPU share other processes may take during the run (below it)
SETTLE_S = 10.0  # idle seconds before the load is read: the script's own start settles
# /proc/stat's cpu line: user nice system idle iowait irq softirq steal (guest is in user)
_BUSY_FIELDS, _IDLE_FIELDS = (0, 1, 2, 5, 6, 7), (3, 4)


@dataclass(frozen=True)
class CpuTimes:
    """Seconds since boot summed over the cores: busy and in all (busy + idle), from
    /proc/stat; and this process's own CPU seconds (itself and its finished children)."""

    busy: float
    total: float
    own: float


def parse_proc_stat(text: str, ticks_per_second: float) -> tuple[float, float]:
    """(busy, total) seconds of the aggregate "cpu" line of /proc/stat's ``text``."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(x) for x in fields[1:9]] + [0] * (9 - len(fields))
            busy = sum(ticks[i] for i in _BUSY_FIELDS)
            idle = sum(ticks[i] for i in _IDLE_FIELDS)
            return busy / ticks_per_second, (busy + idle) / ticks_per_second
    raise ValueError("/proc/stat has no aggregate 'cpu' line")


def own_cpu_seconds() -> float:
    """User + system seconds of this process and of its children that have finished."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def cpu_times(stat: Path = Path("/proc/stat")) -> CpuTimes | None:
    """The machine's and this process's CPU times now; None without /proc/stat."""
    try:
        busy, total = parse_proc_stat(stat.read_text(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None
    return CpuTimes(busy, total, own_cpu_seconds())


def others_share(start: CpuTimes, end: CpuTimes) -> float:
    """The share of the machine's CPU time between two readings that went to other
    processes: busy time less this process's own, over all the cores' time (0 to 1)."""
    elapsed = end.total - start.total
    if elapsed <= 0:
        return 0.0
    others = (end.busy - start.busy) - (end.own - start.own)
    return min(1.0, max(0.0, others / elapsed))


@dataclass(frozen=True)
class GateReading:
    """The gate's figures for one run: load at the start, cores, other processes' share."""

    load: float
    cores: int
    share: float | None  # None where /proc/stat could not be read
    no_share: str = "not measured (no /proc/stat)"  # what the figures say where share is None

    @property
    def load_limit(self) -> float:
        return LOAD_PER_CORE * self.cores

    @property
    def quiet(self) -> bool:
        return self.load <= self.load_limit and self.share is not None and self.share < OTHERS_SHARE

    def figures(self) -> str:
        share = self.no_share if self.share is None else f"{self.share:.0%}"
        return (
            f"load average {self.load:.2f} at the start (the gate allows {self.load_limit:.2f} "
            f"on {self.cores} cores); other processes' share of the CPU during the run {share} "
            f"(the gate allows under {OTHERS_SHARE:.0%})"
        )


class LoadRefused(RuntimeError):
    """The machine was not quiet and --allow-load was not given: no block is written."""


class LoadGate:
    """Started before a benchmark measures (after `settle` idle seconds, the load average is
    read), read by `check` before its block is written."""

    def __init__(self, settle: float = SETTLE_S, cores: int | None = None) -> None:
        if settle > 0:
            time.sleep(settle)
        self.cores = cores or os.cpu_count() or 1
        self.load = load_average()
        self.start = cpu_times()

    def reading(self) -> GateReading:
        end = cpu_times()
        share = None if self.start is None or end is None else others_share(self.start, end)
        return GateReading(self.load, self.cores, share)

    def check(self, body: str, allow_load: bool, reading: GateReading | None = None) -> str:
        """``body`` as the block to write: as it is on a quiet machine; under load, with a
        first line saying so (--allow-load) or refused (`LoadRefused`)."""
        reading = reading or self.reading()
        if reading.quiet:
            return body
        if not allow_load:
            raise LoadRefused(
                f"not written: the machine was not quiet ({reading.figures()}); rerun on a "
                "quiet machine, or with --allow-load to write it marked as measured under load"
            )
        return f"Measured under load: {reading.figures()}.\n\n{body}"


def add_gate_arguments(parser: argparse.ArgumentParser) -> None:
    """--allow-load and --settle, for a script that writes a docs block."""
    parser.add_argument(
        "--allow-load",
        action="store_true",
        help="write the block even when the machine was not quiet (its first line says so)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=SETTLE_S,
        help=f"idle seconds before the load average is read (default {SETTLE_S:g})",
    )


def written(write: Callable[[], Path]) -> int:
    """A script's exit status after ``write()`` (a `publish` or `write_gated` call): 0 when it
    wrote its block, 1 when the gate refused it (the reason printed)."""
    try:
        path = write()
    except LoadRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {path}", file=sys.stderr)
    return 0


def write_results(name: str, given: str | None, results: dict) -> Path:
    """``results`` as JSON into ``given``, or by default benchmarks/results/<name>-<time>.json
    (folders made as needed); the path written."""
    out = (
        Path(given)
        if given
        else ROOT / "benchmarks" / "results" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    return out


def run_make(cwd: Path, target: str) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, the finished process) of `make <target>` in `cwd`, output captured."""
    start = time.perf_counter()
    done = subprocess.run(["make", target], cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - start, done


def write_gated(
    doc: Path, name: str, script: str, body: str, gate: LoadGate, allow_load: bool
) -> Path:
    """``body`` into the generated block ``name`` of ``doc`` through the gate (raises
    `LoadRefused` on a machine that was not quiet, unless ``allow_load``)."""
    return write_block(doc, name, script, gate.check(body, allow_load))


def publish(
    name: str,
    script: str,
    intro: str,
    body: str,
    gate: LoadGate,
    allow_load: bool,
    doc: Path = DOC,
) -> Path:
    """Put ``body`` into the generated block ``name`` of docs/benchmarks.md (created with its
    heading if missing) through the gate (`write_gated`), with the paragraph ``intro`` (what
    the block measures, how to rerun it: no figures; it starts "The `name` block") right
    above it, replacing the paragraph there that starts so."""
    body = gate.check(body, allow_load)  # refused before the page is touched
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


UNDER_LOAD = "Measured under load: "
MACHINE_LOAD = re.compile(r"load average (\d+(?:\.\d+)?) at the start")
MACHINE_CORES = re.compile(r"(\d+) cores")


def mark_under_load(name: str, doc: Path = DOC) -> bool:
    """Give block ``name``, written before the gate existed, the gate's under-load first line
    where the highest load at the start its own machine lines record is above the gate's
    limit (the other processes' share was not recorded then); the rest of the block, its
    commit and its date stay as written. Whether the block is (now) marked."""
    text = doc.read_text()
    block = {b.name: b for b in parse_blocks(text, doc)}[name]
    body = text.splitlines()[block.begin + 1 : block.end]
    if body and body[0].startswith(UNDER_LOAD):  # an earlier mark, replaced
        body = body[1:]
    rest = "\n".join(body).strip("\n")
    loads = [float(load) for load in MACHINE_LOAD.findall(rest)]
    cores = MACHINE_CORES.search(rest)
    if not loads or cores is None:
        raise ValueError(f"{doc}: block {name!r} has no machine line with its load and cores")
    reading = GateReading(
        max(loads),
        int(cores[1]),
        None,
        no_share="not recorded, the block being older than the gate",
    )
    if reading.load <= reading.load_limit:
        return False
    marked = f"{UNDER_LOAD}{reading.figures()}.\n\n{rest}"
    write_block(doc, name, block.script, marked, commit=block.commit, date=block.date)
    return True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="Mark blocks of docs/benchmarks.md written "
        "before the load gate as measured under load."
    )
    parser.add_argument("--mark-under-load", nargs="+", metavar="BLOCK", required=True)
    for block_name in parser.parse_args().mark_under_load:
        print(block_name, "marked" if mark_under_load(block_name) else "within the gate")
