"""Snakemake's console output for symbnn runs: `--logger symbnn`, which profiles/default sets.

On a terminal, a run shows one live view instead of ten lines per job: the bars of
snakemake-logger-plugin-rich (overall and per rule, with each rule's running jobs), above them
jobs done / total, running, elapsed time and an estimate of the time left, and below them each
running job with the last line of its log (the progress line a long job writes there, e.g.
training's "train 3/12 epochs"). Anywhere else (CI, a Slurm job, a pipe, a file) and for dry
runs, which list every job with its resources, it is Snakemake's own plain log, line for line.
SYMBNN_PLAIN_LOG=1 asks for the plain log on a terminal too. With the live view, a Ctrl-C
ends the run in one line (`terminal`), and the job stats table is one line (the view has a
bar per rule).

Snakemake finds this package by its name (a logger plugin is a top-level module named
`snakemake_logger_plugin_<name>` on the path); symbnn's editable install puts `src/` there.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

from snakemake_logger_plugin_symbnn.terminal import (
    TerminalOwner,
    exit_as_interrupted,
    remove_outputs,
    snakemake_log,
)

# running jobs listed under the bars; the others are counted
SHOWN_JOBS = 8
TAIL_BYTES = 4096  # of a job's log, read for its last line
TAIL_EVERY = 1.0  # seconds between reads of one job's log


def live_wanted(stream: Any, dryrun: bool) -> bool:
    """The live view for a run that executes jobs, on a terminal, unless the plain log is
    asked for."""
    terminal = hasattr(stream, "isatty") and stream.isatty()
    return terminal and not dryrun and os.environ.get("SYMBNN_PLAIN_LOG", "0") in ("", "0")


def clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def time_left(elapsed: float, done: int, total: int) -> str:
    """Time left if the remaining jobs take what the finished ones took on average."""
    if done == 0 or total <= done:
        return "estimating" if total > done else "0:00:00"
    return clock(elapsed / done * (total - done))


def last_line(path: str) -> str:
    """The last non-empty line of a log file ("" when there is none yet)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - TAIL_BYTES))
            tail = handle.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.replace("\r", "\n").splitlines() if line.strip()]
    return lines[-1] if lines else ""


class RunningJobs:
    """The jobs that run now (from Snakemake's job events), with their logs' last lines."""

    def __init__(self) -> None:
        self.jobs: dict[int, dict[str, Any]] = {}

    def started(self, record: logging.LogRecord) -> None:
        wildcards = getattr(record, "wildcards", None) or {}
        label = getattr(record, "rule_name", "") + "".join(f" {v}" for v in wildcards.values())
        self.jobs[getattr(record, "jobid", 0)] = {
            "label": label,
            "logs": [str(p) for p in getattr(record, "log", None) or []],
            "outputs": [str(p) for p in getattr(record, "output", None) or []],
            "start": time.monotonic(),
            "line": "",
            "read": 0.0,
        }

    def ended(self, jobid: Any) -> None:
        self.jobs.pop(jobid, None)

    def rows(self, now: float) -> list[tuple[str, str, str]]:
        """(job, running for, its log's last line) of the longest-running jobs first."""
        rows = []
        for job in sorted(self.jobs.values(), key=lambda j: j["start"])[:SHOWN_JOBS]:
            if job["logs"] and now - job["read"] >= TAIL_EVERY:
                job["line"], job["read"] = last_line(job["logs"][0]), now
            rows.append((job["label"], clock(now - job["start"]), job["line"]))
        return rows


class RunView:
    """What the live display draws: the summary line, the rich plugin's bars, the running
    jobs."""

    def __init__(self, handler: Any, running: RunningJobs, started: float) -> None:
        self.handler, self.running, self.started = handler, running, started

    def counts(self) -> tuple[int, int]:
        events = self.handler.event_handler
        return events.completed, events.total_jobs

    def __rich__(self) -> Any:
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        now = time.monotonic()
        done, total = self.counts()
        elapsed = now - self.started
        summary = Text.assemble(
            (f"{done}/{total} jobs done", "bold"),
            f", {len(self.running.jobs)} running, elapsed {clock(elapsed)}, "
            f"time left {time_left(elapsed, done, total)}",
        )
        jobs = Table.grid(padding=(0, 2))
        jobs.add_column(no_wrap=True, style="cyan")
        jobs.add_column(no_wrap=True, justify="right")
        jobs.add_column(no_wrap=True, overflow="ellipsis", style="dim")
        for row in self.running.rows(now):
            jobs.add_row(*row)
        hidden = len(self.running.jobs) - SHOWN_JOBS
        parts = [summary, Panel(self.handler.progress, border_style="dim", padding=(0, 1))]
        if self.running.jobs:
            parts.append(jobs)
        if hidden > 0:
            parts.append(Text(f"... and {hidden} more running", style="dim"))
        return Group(*parts)


class LogHandler(LogHandlerBase):
    """The live view on a terminal (a snakemake-logger-plugin-rich handler, redrawn as
    `RunView`), Snakemake's plain stream handler elsewhere."""

    def __post_init__(self) -> None:
        stream = sys.stdout if self.common_settings.stdout else sys.stderr
        self.live = live_wanted(stream, self.common_settings.dryrun)
        self.running = RunningJobs()
        self.started = time.monotonic()
        if self.live:
            try:
                from snakemake_logger_plugin_rich import LogHandler as RichHandler
            except ImportError:  # an install older than the dependency: the plain log
                print(
                    "symbnn: snakemake-logger-plugin-rich is not installed, so no live view "
                    "(make install adds it)",
                    file=stream,
                )
                self.live = False
        if self.live:
            self.inner = RichHandler(self.common_settings, None)
            self.inner.live_display.update(RunView(self.inner, self.running, self.started))
            self.inner.event_handler._display_job_summary = self._job_count
            # after the console has found the terminal: it keeps writing there
            self.owner = TerminalOwner(stream)
            self.inner.console.file = self.owner.terminal
            self.owner.printer = self.inner.console
            self.owner.on_ctrl_c()
        else:
            from snakemake.logging import ColorizingTextHandler

            self.inner = ColorizingTextHandler(nocolor=self.common_settings.nocolor, stream=stream)

    def _job_count(self, per_rule: dict[str, int], total: int) -> None:
        rules = sum(1 for count in per_rule.values() if count)
        self.inner.console.print(f"{total} jobs of {rules} rules to run (snakemake -n lists them)")

    def emit(self, record: logging.LogRecord) -> None:
        if not self.live:
            # Snakemake gave this handler its default filter and formatter (has_filter and
            # has_formatter are False here): its own stream handler's output, unchanged
            if self.inner.formatter is not self.formatter:
                self.inner.setFormatter(self.formatter)
            self.inner.emit(record)
            return
        if self.owner.interrupted:
            # what follows a Ctrl-C (every running job failed, the workflow's error) is in
            # Snakemake's log; close() says it in one line
            self._leave_the_view()
            if getattr(record, "event", None) == LogEvent.JOB_FINISHED:
                self.running.ended(getattr(record, "job_id", None))
            return
        event = getattr(record, "event", None)
        if event == LogEvent.JOB_INFO:
            self.running.started(record)
        elif event == LogEvent.JOB_FINISHED:
            self.running.ended(getattr(record, "job_id", None))
        elif event == LogEvent.JOB_ERROR:
            self.running.ended(getattr(record, "jobid", None))
        self.inner.emit(record)

    def close(self) -> None:
        # Snakemake closes its handlers more than once
        if getattr(self, "closed", False):
            return
        self.closed = True
        if self.live:
            events = self.inner.event_handler
            self._leave_the_view()
            self.owner.release()
            done = f"{events.completed} of {events.total_jobs} jobs done"
            if self.owner.interrupted:
                remove_outputs(self.running.jobs.values())
                saved = self.owner.save_output(snakemake_log())
                print(
                    f"Interrupted: {done}; nothing half-written is left (the stopped jobs' "
                    "outputs are removed); `make run` resumes."
                    + (f" The jobs' last output: {saved}" if saved else ""),
                    file=self.owner.terminal,
                )
                exit_as_interrupted()
            elif events.total_jobs:
                elapsed = clock(time.monotonic() - self.started)
                self.inner.console.print(f"{done} in {elapsed}")
        else:
            self.inner.close()
        super().close()

    def _leave_the_view(self) -> None:
        """Stop the live view (it erases itself) once; with an interrupt, nothing is printed
        after it but close()'s line."""
        if not getattr(self, "left", False):
            self.left = True
            self.inner.close()
        if self.owner.interrupted:
            self.inner.console.quiet = True

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return self.live

    @property
    def has_formatter(self) -> bool:
        return self.live

    @property
    def needs_rulegraph(self) -> bool:
        return False
