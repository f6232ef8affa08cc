"""The terminal as the live view owns it, and a Ctrl-C that ends the run in one line.

While the live view runs, only it writes to the terminal: Snakemake's standard output and
error (file descriptors 1 and 2, which every job inherits) become a pipe, and what arrives on
it is printed above the view, line by line. On Ctrl-C the terminal sends SIGINT to Snakemake
and to every running job at once; each job's Python prints a KeyboardInterrupt traceback on
its way out and Snakemake logs every job as failed. From the interrupt on, that output is
kept out of the terminal (it is saved beside Snakemake's log instead), what the stopped jobs wrote of
their outputs is removed, and the run ends with one line and exit status 130, the shell's
status for a Ctrl-C."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

INTERRUPTED = 130  # the exit status of a command a Ctrl-C ended (128 + SIGINT)
KEPT_BYTES = 1 << 22  # of the output that arrives after an interrupt, kept for its file
HOLD = 0.1  # seconds output waits before it is shown: long enough to see a Ctrl-C first


class TerminalOwner:
    """Fds 1 and 2 of this process led through a pipe while the live view runs; the
    terminal itself is `terminal`, a stream of its own for the view."""

    def __init__(self, stream: Any) -> None:
        self.interrupted = False
        self.saved = {fd: os.dup(fd) for fd in (1, 2)}
        self.terminal = os.fdopen(os.dup(stream.fileno()), "w", buffering=1, errors="replace")
        self.printer: Any = None  # where forwarded lines go (the view's console)
        self.after_interrupt: list[bytes] = []
        read, write = os.pipe()
        for fd in (1, 2):
            os.dup2(write, fd)
        os.close(write)
        self.reader = threading.Thread(target=self._forward, args=(read,), daemon=True)
        self.reader.start()

    def _forward(self, read: int) -> None:
        pending = b""
        with os.fdopen(read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                time.sleep(HOLD)  # a Ctrl-C's tracebacks arrive together with its signal
                if self.interrupted:
                    if sum(map(len, self.after_interrupt)) < KEPT_BYTES:
                        self.after_interrupt.append(chunk)
                    continue
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._show(line.decode(errors="replace"))
        if pending and not self.interrupted:
            self._show(pending.decode(errors="replace"))

    def _show(self, line: str) -> None:
        if self.printer is None:
            self.terminal.write(line + "\n")
        else:
            self.printer.print(line, markup=False, highlight=False, soft_wrap=True)

    def on_ctrl_c(self) -> None:
        """Take note of a Ctrl-C at once, then raise KeyboardInterrupt as Python would
        (Snakemake stops its jobs on it). Python runs a signal's handler only when the main
        thread next gets to run, which may be after the jobs have printed their tracebacks:
        the signal's wakeup byte, written the moment it arrives, is watched instead."""

        def interrupted(signum: int, frame: Any) -> None:
            self.interrupted = True
            raise KeyboardInterrupt

        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            signal.signal(signal.SIGINT, interrupted)
            signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: no handler of ours
            os.close(read)
            os.close(write)
            return
        threading.Thread(target=self._watch, args=(read,), daemon=True).start()

    def _watch(self, read: int) -> None:
        while signals := os.read(read, 64):
            if signal.SIGINT in signals:
                self.interrupted = True

    def release(self) -> None:
        """Give fds 1 and 2 back to the terminal; the pipe ends when the jobs have exited."""
        for fd, saved in self.saved.items():
            os.dup2(saved, fd)
            os.close(saved)
        self.saved = {}
        self.reader.join(timeout=2.0)

    def save_output(self, snakemake_log: str | None) -> str | None:
        """Write what arrived after the interrupt (the jobs' tracebacks) beside Snakemake's
        log; returns its path, or None when there was nothing (or nowhere) to write."""
        if not self.after_interrupt or not snakemake_log:
            return None
        path = Path(snakemake_log).with_suffix(".interrupted.log")
        with contextlib.suppress(OSError):
            path.write_bytes(b"".join(self.after_interrupt))
            return str(path)
        return None


def remove_outputs(jobs: Iterable[dict[str, Any]]) -> None:
    """Remove what the jobs a Ctrl-C stopped have written of their outputs, as Snakemake
    does for a failed job (it does not after an interrupt): the next run makes them anew.
    (symbnn's jobs write each output whole or not at all; a job of your own may not.)"""
    for job in jobs:
        for output in map(Path, job["outputs"]):
            with contextlib.suppress(OSError):
                if output.is_dir() and not output.is_symlink():
                    shutil.rmtree(output)
                elif output.exists() or output.is_symlink():
                    output.unlink()


def exit_as_interrupted() -> None:
    """End the process with status 130 once Snakemake has finished (it exits with 1 after
    an interrupt, like after a failed job): the shell and make then see a Ctrl-C."""

    def leave() -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(INTERRUPTED)

    atexit.register(leave)


def snakemake_log() -> str | None:
    """The path of this run's Snakemake log, if it has one."""
    try:
        from snakemake.logging import logger_manager

        logs = logger_manager.get_logfile()
    except Exception:  # an older or newer Snakemake without it: the line omits the path
        return None
    return str(logs[0]) if logs else None
