"""How benchmarks/peers.py measures a row: wall and process CPU seconds over the timed region,
the rise of resident memory, symbnn and the peer in alternating pairs, both on one thread
count; and how a row reads (its verdict, the table).

Thread counts: `at_threads` sets numba's count and then torch's (starting numba's pool sets
the OpenMP count torch reads, so torch's goes second) and restores both. CPU seconds are the
process's (every thread's) user + system time over the timed region: a run that keeps two
threads busy shows about twice its wall time.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba
import torch

# ---------------------------------------------------------------- threads


@contextlib.contextmanager
def at_threads(threads: int) -> Iterator[None]:
    """numba and torch on ``threads`` threads inside; the counts found restored after."""
    before = torch.get_num_threads(), numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        numba.set_num_threads(before[1])
        torch.set_num_threads(before[0])


@contextlib.contextmanager
def _replaced(module: Any, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    original = getattr(module, name)
    setattr(module, name, make(original))
    try:
        yield
    finally:
        setattr(module, name, original)


@contextlib.contextmanager
def symbnn_threads(seen: list[tuple[int, str]]) -> Iterator[None]:
    """Records, as (threads, why), the counts symbnn's own choices run on inside: numba's in
    the metrics' passes (`numba_threads_for`), the batched trainer's shards (one thread each,
    one torch thread per op), torch's in the weight matching's descent (`torch_threads_for`)."""
    import symbnn.metrics
    import symbnn.train.stepping
    from symbnn.alignment import matching

    def metrics_pass(original):
        @contextlib.contextmanager
        def counted(work: int) -> Iterator[None]:
            with original(work):
                seen.append((numba.get_num_threads(), "numba_threads_for, serial below 4e6 values"))
                yield

        return counted

    def shards(original):
        def counted(fn, jobs):
            seen.append((len(jobs), "its batched trainer, a thread per model"))
            return original(fn, jobs)

        return counted

    def descent(original):
        def counted(*args, **kwargs):
            seen.append(
                (torch.get_num_threads(), "torch_threads_for, serial below 2^26 multiply-adds")
            )
            return original(*args, **kwargs)

        return counted

    with (
        _replaced(symbnn.metrics, "numba_threads_for", metrics_pass),
        _replaced(symbnn.train.stepping, "in_threads", shards),
        _replaced(matching, "_descend", descent),
    ):
        yield


def own_threads(seen: list[tuple[int, str]], threads: int) -> str:
    """What a symbnn row adds to its library name where symbnn ran on fewer threads than
    ``threads``: how many, and its rule."""
    fewer = [(n, why) for n, why in seen if n < threads]
    if not fewer:
        return ""
    n, why = max(fewer)
    return f" (ran on {n} thread{'s' * (n > 1)}: {why})"


# ---------------------------------------------------------------- timing


def _status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current VmRSS
        return True
    except OSError:
        return False


@dataclass
class Measured:
    """A side's result (of its last run), wall and process CPU seconds (medians over its
    runs), and the peak memory rise in MiB of its last run (None where not available)."""

    result: Any
    wall: float
    cpu: float
    peak: float | None


def timed(fn: Callable[[], Any]) -> Measured:
    """One run of ``fn``."""
    gc.collect()
    base = _status_kib("VmRSS") if _reset_peak() else None
    cpu, start = time.process_time(), time.perf_counter()
    result = fn()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    high = _status_kib("VmHWM")
    return Measured(
        result, wall, cpu, None if base is None or high is None else (high - base) / 1024
    )


def _medians(runs: list[Measured]) -> Measured:
    return Measured(
        runs[-1].result,
        statistics.median(r.wall for r in runs),
        statistics.median(r.cpu for r in runs),
        runs[-1].peak,
    )


def measure(
    fn: Callable[[], Any], repeats: int = 1, warmup: Callable[[], Any] | None = None
) -> Measured:
    """``repeats`` runs of ``fn`` after ``warmup`` (untimed: one-off costs such as lazy
    imports and compiles): medians of the times, the last run's result and peak."""
    if warmup is not None:
        warmup()
    return _medians([timed(fn) for _ in range(max(1, repeats))])


@dataclass
class Paired:
    """symbnn's and a peer's runs on one job, alternating: medians, and the medians over the
    pairs of (peer's seconds / symbnn's), wall and CPU."""

    ours: Measured
    theirs: Measured
    ratio: float
    cpu_ratio: float


def paired(ours: Callable[[], Any], theirs: Callable[[], Any], repeats: int) -> Paired:
    """Both sides ``repeats`` times, each pair back to back (who goes first alternates), after
    one untimed run of each: a ratio of two runs seconds apart moves far less with the
    machine's load than either time."""
    ours(), theirs()
    mine: list[Measured] = []
    peer_runs: list[Measured] = []
    for i in range(max(1, repeats)):
        if i % 2 == 0:
            mine.append(timed(ours))
            peer_runs.append(timed(theirs))
        else:
            peer_runs.append(timed(theirs))
            mine.append(timed(ours))
    pairs = list(zip(mine, peer_runs, strict=True))
    return Paired(
        _medians(mine),
        _medians(peer_runs),
        statistics.median(p.wall / m.wall for m, p in pairs),
        statistics.median(p.cpu / max(m.cpu, 1e-9) for m, p in pairs),
    )


# ---------------------------------------------------------------- peers


def peer(module: str, install: str) -> tuple[Any, str | None]:
    """(the imported module, None) or (None, why it cannot be used here)."""
    try:
        with warnings.catch_warnings():  # their imports' notices about their own dependencies
            warnings.simplefilter("ignore", FutureWarning)
            return importlib.import_module(module), None
    except Exception as exc:  # ImportError, or a peer that breaks on this torch at import
        return None, f"not usable here: {type(exc).__name__}: {exc} ({install})"


def version(dist: str) -> str:
    """``dist`` with its installed version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return f"{dist} {installed(dist)}"
    except PackageNotFoundError:
        return dist


# ---------------------------------------------------------------- rows


@dataclass
class Row:
    job: str
    case: str
    library: str
    threads: int
    wall: float | None
    cpu: float | None
    peak_mib: float | None
    quality: str
    ratio: float | None = None  # this row's wall time / symbnn's on the same job and threads
    cpu_ratio: float | None = None  # the same for the CPU time
    same: str = "-"  # whether it computes what symbnn's row computes
    verdict: str = "-"


def missing(job: str, case: str, library: str, threads: int, reason: str) -> Row:
    return Row(job, case, library, threads, None, None, None, reason)


def ours_row(job: str, case: str, threads: int, m: Measured, quality: str, library="symbnn") -> Row:
    return Row(job, case, library, threads, m.wall, m.cpu, m.peak, quality)


def speed_verdict(ratio: float, cpu_ratio: float, goal: float = 1.0) -> str:
    """The verdict on a peer/symbnn wall-time ratio (``goal``: the least it should be), the
    CPU-time ratio beside it."""
    figures = f"peer/symbnn wall {ratio:.2f}x (CPU {cpu_ratio:.2f}x)"
    if ratio >= goal:
        aim = "as fast or faster" if goal == 1 else f"at least {goal:g}x as fast"
        return f"symbnn {aim}: {figures}"
    return f"slower: {figures}; the goal is {goal:g}x"


def peer_row(
    job: str,
    case: str,
    library: str,
    threads: int,
    theirs: Measured,
    ours: Measured,
    quality: str,
    same: str,
    ratios: tuple[float, float] | None = None,
    goal: float = 1.0,
) -> Row:
    """A peer's row against symbnn's ``ours``: the ratios (``ratios``, from `paired`, else of
    the two times) and the speed verdict."""
    ratio, cpu_ratio = ratios or (theirs.wall / ours.wall, theirs.cpu / max(ours.cpu, 1e-9))
    return Row(
        job,
        case,
        library,
        threads,
        theirs.wall,
        theirs.cpu,
        theirs.peak,
        quality,
        ratio,
        cpu_ratio,
        same,
        speed_verdict(ratio, cpu_ratio, goal),
    )


HEAD = (
    "job",
    "case",
    "library",
    "threads",
    "wall s",
    "CPU s",
    "wall / symbnn's",
    "CPU / symbnn's",
    "peak MiB",
    "same computation as symbnn's",
    "quality",
    "verdict",
)


def _figure(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + " --- |" * len(HEAD)]
    for r in rows:
        cells = (
            r.job,
            r.case,
            r.library,
            str(r.threads),
            _figure(r.wall, ".3g"),
            _figure(r.cpu, ".3g"),
            _figure(r.ratio, ".2f"),
            _figure(r.cpu_ratio, ".2f"),
            _figure(r.peak_mib, ".0f"),
            r.same,
            r.quality,
            r.verdict,
        )
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
